"""Plot functions for people: Figures back, drawn on the caller's axes when given, no files, no backend;
`daca-bench plot` into a folder of one's choosing, the same bytes on a rerun, one colour per variant; and
figures a reader can read: bounded in size, facets wrapping after four columns, the legend outside
the data, no text over another, no variant drawn for a base that does not admit it, the paper's gain
only beside a shipped task, seeds as bands, evaluations during training, the training panel."""

import json
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from daca_bench.cli import main
from daca_bench.experiments.analysis.cellstore import cells
from daca_bench.experiments.analysis.results import build_table, load_results, load_table
from daca_bench.experiments.figures.gold import wrong_tokens_of
from daca_bench.experiments.figures.plots import (
    PALETTE,
    colour,
    load_curves,
    plot_curves,
    plot_dps,
    plot_gains,
    plot_training,
    seed_deltas,
)

from repo_paths import ROOT

CELLS = ROOT / "results" / "tiny-ablation" / "cells"  # every variant of the default's regime
BASES = ROOT / "results" / "tiny-bases"  # 8 base methods, some admitting +DPS only
FULL = ROOT / "results" / "tiny-full"  # 4 families: four paper notes side by side


def test_plots_return_figures_and_draw_on_given_axes():
    before = sorted(CELLS.parent.rglob("*"))  # the run's folder: its cells, packed or not, and its figures
    table, curves = build_table(load_results(CELLS)), load_curves(CELLS)
    for fig in (plot_gains(table), plot_curves(curves), plot_training(curves), plot_dps(CELLS)):
        assert isinstance(fig, Figure) and fig.axes
    mine = Figure()
    ax = mine.subplots()
    assert plot_gains(table, ax=ax) is mine and ax.patches  # the bars went onto my axes
    with pytest.raises(ValueError, match=r"draws on 2 x \d+ axes; ax= gave 1"):
        plot_curves(curves, ax=ax)
    assert sorted(CELLS.parent.rglob("*")) == before  # nothing written


def test_library_leaves_the_matplotlib_backend_alone():
    code = (
        "import matplotlib, daca_bench.experiments.figures.plots, daca_bench.experiments.studies.bias, sys;"
        "print(matplotlib.rcParams._get_backend_or_none(), 'matplotlib.pyplot' in sys.modules)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "MPLBACKEND": "svg"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["svg", "False"]


def _gains_table(rows):
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "base": "grpo",
                "family": fam,
                "task": task,
                "variant": v,
                "delta_pp": d,
                "lo": d - h,
                "hi": d + h,
                "MDE": m,
            }
            for fam, task, v, d, h, m in rows
        ]
    )


def test_gains_fit_the_measured_values_and_a_zero_bar_stays_visible():
    """The +36.3 pp paper line of the constraint family would flatten bars of a few pp: the axis fits
    the data, the paper figure is written under the facet's title, and a 0.0 estimate still shows as a dot."""
    fig = plot_gains(
        _gains_table(
            [
                ("constraint", "sudoku_tiny", "+DPS", 0.0, 3.0, 4.0),
                ("constraint", "sudoku_tiny", "+SML", -2.6, 4.1, 5.7),
            ]
        )
    )
    ax = fig.axes[0]
    lo, hi = ax.get_xlim()
    assert hi < 10 and lo < -6.7  # the SML interval's low end fits; nothing near 36
    assert "36.3" in ax.get_title() and "off this axis" in ax.get_title()
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    assert any(0.0 in list(line.get_xdata()) for line in dots)
    inside = plot_gains(_gains_table([("math", "arithmetic", "+DPS", 6.0, 3.0, 4.0)])).axes[0]
    assert any(list(line.get_xdata()) == [5.6, 5.6] for line in inside.lines) and "paper" not in inside.get_title()


def test_only_a_shipped_task_of_a_paper_area_gets_the_paper_note():
    """even_length (tests/task_doubles, family math) and a task this install does not know: no paper
    mark, neither drawn nor written, though their family is one the paper measured."""
    for task in ("even_length", "no_such_task"):
        fig = plot_gains(
            _gains_table([("math", task, "+DPS", 4.0, 3.0, 4.0), ("constraint", task, "+DACA", 1.0, 2.0, 3.0)])
        )
        _draw(fig)
        assert not [t for t in _texts(fig) if "paper" in t.get_text()]
        assert not [line for ax in fig.axes for line in ax.lines if line.get_linestyle() == "--"]
    shipped = plot_gains(_gains_table([("math", "arithmetic_tiny", "+DPS", 4.0, 3.0, 4.0)]))
    assert [line for line in shipped.axes[0].lines if line.get_linestyle() == "--"]


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_plot_command_writes_into_the_given_folder_the_same_bytes_twice(tmp_path):
    preset = ROOT / "results" / "tiny"
    before = _tree(preset)
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["plot", str(preset), "--output-dir", str(first)]) == 0
    assert main(["plot", str(preset), "--output-dir", str(second)]) == 0
    assert _tree(preset) == before  # the committed figures untouched
    names = {f"{stem}.{ext}" for stem in ("gains", "curves", "training", "dps") for ext in ("png", "pdf")}
    assert {p.name for p in first.iterdir()} == names
    assert _tree(first) == _tree(second)  # no timestamps: a rerun writes the same bytes


def test_plot_output_dir_whose_parent_is_missing_is_one_line(tmp_path, capsys):
    assert main(["plot", str(CELLS), "--output-dir", str(tmp_path / "no" / "such")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]


def _colours_by_label(ax) -> dict:
    handles, labels = ax.get_legend_handles_labels()
    out = {}
    for h, label in zip(handles, labels):
        if hasattr(h, "patches"):  # a bar container
            out[label] = to_hex(h.patches[0].get_facecolor())
        elif hasattr(h, "get_xdata"):  # a line
            out[label] = to_hex(h.get_color())
    return out


def test_a_variant_has_one_colour_in_every_figure():
    gains = _colours_by_label(plot_gains(load_table(CELLS)).axes[0])
    curves = _colours_by_label(plot_curves(load_curves(CELLS)).axes[0])
    shared = set(gains) & set(curves)
    assert {"+DPS", "+SML", "+DACA", "+DPS-random"} <= shared
    assert all(gains[v] == curves[v] == to_hex(PALETTE[v]) for v in shared)
    assert colour("+NEW") == colour("+NEW") and colour("+NEW") not in PALETTE.values()


def test_dps_figure_names_the_run_marks_wrong_tokens_and_rounds_rewards():
    fig = plot_dps(CELLS)
    title = fig._suptitle.get_text()
    cell = next(c for c in cells(CELLS) if c.has("dps_examples.json"))  # the first, packed or not
    assert "constraint/sudoku_tiny" in title and cell.name not in title
    assert cell.json("axes.json")["variant"] in title
    assert any("w > 1" in t.get_text() for legend in fig.legends for t in legend.get_texts())
    examples = cell.json("dps_examples.json")
    for ax, ex in zip(fig.axes, examples):
        assert str(ex["reward"]) not in ax.get_title() or len(str(ex["reward"])) <= 4
        assert f"reward {ex['reward']:.2f}" in ax.get_title()
        red = [t.get_text() for t in ax.get_xticklabels() if to_hex(t.get_color()) == to_hex("tab:red")]
        assert f"{len(red)} of {len(ex['tokens'])} tokens wrong" in ax.get_title()
        assert (len(red) == 0) == (ex["reward"] == 1.0)  # a solved grid has no wrong token, an unsolved one has


def test_wrong_tokens_against_the_gold_completion():
    assert wrong_tokens_of(["2", "3", "[EOS]"], "23", "24") == [False, True, False]
    assert wrong_tokens_of(["2", "[EOS]", "[EOS]"], "2", "24") == [False, True, True]  # stopped early
    assert wrong_tokens_of(["12", "3"], "123", "123") == [False, False]


def test_curves_give_the_final_stars_a_small_panel():
    fig = plot_curves(load_curves(CELLS))  # no evaluation during training: only the final stars below
    top, bottom = fig.axes[0].get_position(), fig.axes[1].get_position()
    assert bottom.height < 0.5 * top.height
    assert fig.legends and not [ax for ax in fig.axes if ax.get_legend()]  # one legend, the figure's


# ---- readable figures -------------------------------------------------------------------------
def _draw(fig):
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _texts(fig) -> list:
    """Every visible, non-empty text of a drawn figure: titles, axis labels, annotations, the tick
    labels inside each axis' view, legend entries and the suptitle."""
    out = [fig._suptitle] if fig._suptitle is not None else []
    for ax in fig.axes:
        out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        for labels, ticks, (lo, hi) in (
            (ax.get_xticklabels(), ax.get_xticks(), ax.get_xlim()),
            (ax.get_yticklabels(), ax.get_yticks(), ax.get_ylim()),
        ):
            out += [t for t, v in zip(labels, ticks) if min(lo, hi) - 1e-9 <= v <= max(lo, hi) + 1e-9]
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        out += list(legend.get_texts())
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def _assert_readable(fig, name):
    r = _draw(fig)
    w, h = fig.get_size_inches()
    assert max(w, h) <= 32 and 0.25 <= w / h <= 5, f"{name}: {w:.1f} x {h:.1f} in"  # no 38 x 4 in strip
    boxes = [(t.get_text(), t.get_window_extent(r)) for t in _texts(fig)]
    clash = [(a, b) for (a, ba), (b, bb) in combinations(boxes, 2) if ba.overlaps(bb)]
    assert not clash, f"{name}: texts overlap: {clash[:3]}"
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends, name
    for legend in legends:
        over = [ax.get_title() for ax in fig.axes if legend.get_window_extent(r).overlaps(ax.get_window_extent(r))]
        assert not over, f"{name}: the legend covers {over}"


def test_figures_are_bounded_keep_the_legend_outside_and_no_text_over_another():
    bases, one = load_curves(BASES / "cells"), load_curves(CELLS)
    figures = {
        "gains, 8 bases": plot_gains(pd.read_csv(BASES / "table.csv")),
        "gains, 4 families with paper notes": plot_gains(pd.read_csv(FULL / "table.csv")),
        "gains, one facet with seeds": plot_gains(load_table(CELLS), seeds=seed_deltas(CELLS)),
        "curves, 8 bases": plot_curves(bases),
        "curves, one facet": plot_curves(one),
        "training, 8 bases": plot_training(bases),
        "training, one facet": plot_training(one),
        "dps": plot_dps(CELLS),
    }
    for name, fig in figures.items():
        _assert_readable(fig, name)


def _columns_rows(fig) -> tuple[int, int]:
    return (
        len({round(ax.get_position().x0, 3) for ax in fig.axes}),
        len({round(ax.get_position().y0, 3) for ax in fig.axes}),
    )


def test_facets_wrap_after_four_columns():
    assert _columns_rows(plot_gains(pd.read_csv(BASES / "table.csv"))) == (4, 2)  # 8 bases
    fig = plot_curves(load_curves(BASES / "cells"))
    assert _columns_rows(fig) == (4, 4) and len(fig.axes) == 16  # 8 facets of reward and accuracy


def test_a_base_shows_only_the_variants_it_admits():
    """espo, map, spg and coupled_grpo admit +DPS only: no +SML or +DACA bar at 0 (nor a line) for them."""
    table = pd.read_csv(BASES / "table.csv")
    fig = plot_gains(table)
    for ax in fig.axes:
        base = ax.get_title().split(":")[0]
        ran = table[(table["base"] == base) & (table["vs"] == "baseline")]["variant"]
        assert [t.get_text() for t in ax.get_yticklabels()] == list(ran) and len(ax.patches) == len(ran)
    espo = next(ax for ax in fig.axes if ax.get_title().startswith("espo:"))
    assert [t.get_text() for t in espo.get_yticklabels()] == ["+DPS"]
    curves = plot_curves(load_curves(BASES / "cells"))
    top = next(ax for ax in curves.axes if ax.get_title().startswith("espo:"))
    assert {line.get_label() for line in top.lines} == {"baseline", "+DPS"}


def _cell(folder: Path, variant: str, seed: int, metrics: list[dict], acc: float, task="sudoku_tiny"):
    cell = folder / f"variant={variant}_seed={seed}"
    cell.mkdir(parents=True)
    (cell / "config.json").write_text(json.dumps({"train": {"task": task, "seed": seed}, "loss": {"base": "grpo"}}))
    (cell / "axes.json").write_text(json.dumps({"variant": variant}))
    (cell / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (cell / "summary.json").write_text(json.dumps({"test_accuracy": acc}))


def test_curves_draw_seeds_as_bands_and_the_evaluations_during_training(tmp_path):
    """train.eval_every=2: metrics.jsonl rows with test_accuracy at steps 2 and 4 become a curve with
    its seed band; the reward is a mean over 3 seeds with a ± 1 s.d. band; no clip_frac logged: said."""
    for v, lift in (("baseline", 0.0), ("+DACA", 0.1)):
        for seed in range(3):
            rows = [
                {
                    "step": k,
                    "reward_mean": 0.3 + lift + 0.01 * seed * k,
                    "kl": 0.01 * k,
                    "completion_length": 8,
                    "zero_std_groups": 0.1,
                    **({"test_accuracy": 0.2 + lift + 0.02 * seed} if k % 2 == 0 else {}),
                }
                for k in range(1, 6)
            ]  # the trainer does not evaluate at its last step
            _cell(tmp_path, v, seed, rows, 0.3 + lift + 0.01 * seed)
    curves = load_curves(tmp_path)
    assert curves[~curves["final"] & curves["test_accuracy"].notna()]["step"].unique().tolist() == [2, 4]
    fig = plot_curves(curves)
    top, bottom = fig.axes
    assert "during training" in bottom.get_title()
    during = [line for line in bottom.lines if line.get_marker() == "o"]
    assert sorted(line.get_label() for line in during) == ["+DACA", "baseline"]
    assert all(list(line.get_xdata()) == [2, 4] for line in during)
    bands = [[c for c in ax.collections if isinstance(c, PolyCollection)] for ax in (top, bottom)]
    assert [len(b) for b in bands] == [2, 2]  # a seed band per variant in each panel
    assert any("eval_every" in t.get_text() for t in fig.legends[0].get_texts())
    training = plot_training(curves)
    labels = [ax.get_ylabel().replace("\n", " ") for ax in training.axes]
    assert [
        "KL" in labels[0],
        "clip ratio" in labels[1],
        "completion length" in labels[2],
        "zero-std" in labels[3],
    ] == [True] * 4
    assert [t.get_text() for t in training.axes[1].texts] == ["clip_frac not logged"]
    assert all(len(ax.lines) == 2 for ax in (training.axes[0], training.axes[2], training.axes[3]))


def test_dps_marks_wrong_tokens_only_where_the_task_has_one_answer(tmp_path):
    """arithmetic_tiny has one right answer (the number): tokens marked, no "no single right answer";
    the same examples under json_tiny (many valid objects) say that no single answer is known."""
    fig = plot_dps(FULL / "cells")
    assert "arithmetic_tiny" in fig._suptitle.get_text() and "no single right answer" not in fig._suptitle.get_text()
    assert all("tokens wrong" in ax.get_title() for ax in fig.axes)
    source = next(c for c in cells(FULL / "cells") if c.has("dps_examples.json"))  # packed or not
    cell = tmp_path / source.name
    cell.mkdir()
    for name in ("config.json", "dps_examples.json"):
        (cell / name).write_text(source.text(name))
    cfg = json.loads((cell / "config.json").read_text())
    cfg["train"]["task"] = "json_tiny"
    (cell / "config.json").write_text(json.dumps(cfg))
    other = plot_dps(tmp_path)
    assert "no single right answer known" in other._suptitle.get_text()
    assert not [ax for ax in other.axes if "tokens wrong" in ax.get_title()]

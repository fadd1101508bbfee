"""Plot functions for people: Figures back, drawn on the caller's axes when given, no files, no backend;
`daca-bench plot` into a folder of one's choosing, the same bytes on a rerun, one colour per variant."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure

from daca_bench.cli import main
from daca_bench.experiments.analysis.gold import wrong_tokens_of
from daca_bench.experiments.analysis.plots import PALETTE, colour, load_curves, plot_curves, plot_dps, plot_gains
from daca_bench.experiments.analysis.results import build_table, load_results, load_table

ROOT = Path(__file__).resolve().parent.parent
CELLS = ROOT / "results" / "tiny" / "cells"


def test_plots_return_figures_and_draw_on_given_axes():
    before = sorted(CELLS.rglob("*"))
    table, curves = build_table(load_results(CELLS)), load_curves(CELLS)
    for fig in (plot_gains(table), plot_curves(curves), plot_dps(CELLS)):
        assert isinstance(fig, Figure) and fig.axes
    mine = Figure()
    ax = mine.subplots()
    assert plot_gains(table, ax=ax) is mine and ax.patches  # the bars went onto my axes
    with pytest.raises(ValueError, match=r"draws on 2 x \d+ axes; ax= gave 1"):
        plot_curves(curves, ax=ax)
    assert sorted(CELLS.rglob("*")) == before  # nothing written


def test_library_leaves_the_matplotlib_backend_alone():
    code = ("import matplotlib, daca_bench.experiments.analysis.plots, daca_bench.experiments.studies.bias, sys;"
            "print(matplotlib.rcParams._get_backend_or_none(), 'matplotlib.pyplot' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "MPLBACKEND": "svg"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["svg", "False"]


def _gains_table(rows):
    import pandas as pd

    return pd.DataFrame([{"base": "grpo", "family": fam, "task": task, "variant": v, "delta_pp": d, "lo": d - h,
                          "hi": d + h, "MDE": m} for fam, task, v, d, h, m in rows])


def test_gains_fit_the_measured_values_and_a_zero_bar_stays_visible():
    """The +36.3 pp paper line of the constraint family would flatten bars of a few pp: the axis fits
    the data, the paper figure is written at the edge, and a 0.0 estimate still shows as a dot."""
    fig = plot_gains(_gains_table([("constraint", "sudoku_tiny", "+DPS", 0.0, 3.0, 4.0),
                                   ("constraint", "sudoku_tiny", "+SML", -2.6, 4.1, 5.7)]))
    ax = fig.axes[0]
    lo, hi = ax.get_ylim()
    assert hi < 10 and lo < -6.7  # the SML interval's low end fits; nothing near 36
    assert any("36.3" in t.get_text() and "off this scale" in t.get_text() for t in ax.texts)
    dots = [line for line in ax.lines if line.get_marker() == "o"]
    assert any(0.0 in list(line.get_ydata()) for line in dots)
    inside = plot_gains(_gains_table([("math", "arithmetic", "+DPS", 6.0, 3.0, 4.0)])).axes[0]
    assert any(list(line.get_ydata()) == [5.6, 5.6] for line in inside.lines) and not inside.texts


def test_curves_show_the_final_accuracy_and_say_what_they_show():
    curves = load_curves(CELLS)  # train.eval_every=0: no test accuracy during training
    bottom = plot_curves(curves).axes[1]
    assert bottom.lines and "final test accuracy" in bottom.get_title()
    short = curves[(curves["step"] <= 3) & ~curves["final"]]  # a 3-step run that is still going
    fig = plot_curves(short)
    assert "3 steps" in fig.axes[0].get_title() and "no test evaluation" in fig.axes[1].get_title()
    assert all(line.get_marker() == "o" for line in fig.axes[0].lines)  # a point per step, not a bare line


def _tree(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_plot_command_writes_into_the_given_folder_the_same_bytes_twice(tmp_path):
    preset = ROOT / "results" / "tiny"
    before = _tree(preset)
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(["plot", str(preset), "--output-dir", str(first)]) == 0
    assert main(["plot", str(preset), "--output-dir", str(second)]) == 0
    assert _tree(preset) == before  # the committed figures untouched
    names = {f"{stem}.{ext}" for stem in ("gains", "curves", "dps") for ext in ("png", "pdf")}
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
    examples_file = sorted(CELLS.glob("*/dps_examples.json"))[0]
    cell = examples_file.parent
    assert "constraint/sudoku_tiny" in title and cell.name not in title
    variant = json.loads((cell / "axes.json").read_text())["variant"]
    assert variant in title
    assert any("w > 1" in t.get_text() for legend in fig.legends for t in legend.get_texts())
    examples = json.loads(examples_file.read_text())
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
    assert fig.axes[1].get_legend() is None and fig.axes[0].get_legend() is not None


def test_notebook_shows_the_table_with_the_start_row():
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / "ablations.ipynb", as_version=4)
    NotebookClient(nb, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "\n".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    head = rows[0]
    by_variant = {r[head.index("variant")]: r for r in rows[1:]}
    assert "start" in by_variant  # the RL start's row
    baseline = by_variant["baseline"]
    assert baseline[head.index("vs")] == "start" and baseline[head.index("Δpp")] not in ("", "-")  # its gain

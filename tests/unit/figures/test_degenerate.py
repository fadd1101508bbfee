"""Advice only from data (issue 55 item 3): `table --plan` on a comparison with no spread advises nothing,
and the figures say so where their data leave nothing to draw, checked on the drawn matplotlib artists:
gains.png on two arms at 0 % (a note on the axes, a legend of what is drawn only), curves.png with two
identical lines (the second dashed, and said), dps.png's title for a task of one's own."""

import json
from pathlib import Path

from matplotlib.collections import PolyCollection

from daca_bench.cli import main
from daca_bench.experiments.analysis.plan import NO_SPREAD, plan_markdown, plan_table
from daca_bench.experiments.analysis.results import load_table
from daca_bench.experiments.figures.curves import load_curves, plot_curves
from daca_bench.experiments.figures.plots import plot_dps, plot_gains, seed_deltas

from repo_paths import ROOT


def _cells(folder: Path, acc: dict, seeds=2, prompts=6, task="mine4"):
    """Cells of two arms whose every prompt scores ACC[variant] (1 or 0), with a metrics.jsonl each."""
    record = {"name": task, "family": "constraint", "version": 1, "cluster": None, "clusters": {}}
    for variant, value in acc.items():
        for seed in range(seeds):
            cell = folder / f"variant={variant}_seed={seed}"
            cell.mkdir(parents=True)
            cfg = {
                "train": {"task": task, "seed": seed},
                "loss": {"base": "grpo"},
                "dps": {"enabled": variant != "baseline"},
                "sml": {"k": 1 if variant == "baseline" else 4},
            }
            (cell / "config.json").write_text(json.dumps(cfg))
            (cell / "axes.json").write_text(json.dumps({"variant": variant}))
            (cell / "summary.json").write_text(
                json.dumps({"task": task, "test_accuracy": float(value), "task_record": record})
            )
            status = "correct" if value else "wrong"
            (cell / "eval.jsonl").write_text(
                "".join(
                    json.dumps({"id": f"{task}/{i}", "reward": float(value), "status": status}) + "\n"
                    for i in range(prompts)
                )
            )
            (cell / "metrics.jsonl").write_text(
                "".join(json.dumps({"step": k, "reward_mean": 0.0, "kl": 0.0}) + "\n" for k in range(1, 5))
            )


def test_plan_on_a_comparison_with_no_spread_advises_nothing(tmp_path, capsys):
    _cells(tmp_path / "grid", {"baseline": 0, "+DACA": 0})
    plan = plan_table(tmp_path / "grid", 5.0)
    assert len(plan) == 1 and not plan["spread"].any()
    assert plan["seeds_needed"].isna().all() and plan["clusters_needed"].isna().all() and plan["floor"].isna().all()
    text = plan_markdown(plan)
    row = next(line for line in text.splitlines() if line.startswith("| constraint |"))
    assert row.count(NO_SPREAD) == 5 and "nan" not in text and "MDE floor 0.0" not in text
    assert main(["table", str(tmp_path / "grid"), "--plan", "5"]) == 0
    out = capsys.readouterr().out
    assert "no spread: nothing to plan from" in out and "seeds for MDE ≤ 5" in out


def _legend_texts(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_gains_with_both_arms_at_zero_say_so_and_promise_nothing_undrawn(tmp_path):
    _cells(tmp_path / "grid", {"baseline": 0, "+DACA": 0})
    fig = plot_gains(load_table(tmp_path / "grid"), seeds=seed_deltas(tmp_path / "grid"))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["both arms 0 %: nothing to compare"]
    legend = _legend_texts(fig)
    assert not [t for t in legend if "interval" in t or "MDE" in t]  # neither is drawn
    assert not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no MDE band
    assert not [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]  # no interval
    # what the legend names is on the axes: the estimate's dot and each seed's tick
    assert "Δ" in legend and [line for line in ax.lines if line.get_marker() == "o"]
    assert "one seed's paired Δ" in legend and [line for line in ax.lines if line.get_marker() == "|"]


def test_identical_curves_draw_the_second_dashed_and_say_so(tmp_path):
    _cells(tmp_path / "grid", {"baseline": 0, "+DACA": 0})
    fig = plot_curves(load_curves(tmp_path / "grid"))
    top = fig.axes[0]
    lines = {line.get_label(): line for line in top.lines}
    assert lines["baseline"].get_linestyle() == "-" and lines["+DACA"].get_linestyle() == "--"
    assert "+DACA = baseline (dashed)" in [t.get_text() for t in top.texts]


def test_dps_title_of_a_task_of_one_s_own_claims_nothing_about_its_answers(tmp_path):
    from daca_bench.experiments.analysis.cellstore import cells

    source = next(c for c in cells(ROOT / "results" / "tiny-full" / "cells") if c.has("dps_examples.json"))  # packed
    cell = tmp_path / source.name
    cell.mkdir()
    for name in ("config.json", "dps_examples.json"):
        (cell / name).write_text(source.text(name))
    cfg = json.loads((cell / "config.json").read_text())
    cfg["train"]["task"] = "mine4"
    (cell / "config.json").write_text(json.dumps(cfg))
    title = plot_dps(tmp_path)._suptitle.get_text()
    assert "no single right answer" not in title and "a task of one's own" in title and "mine4" in title

"""Plot functions for people: Figures back, drawn on the caller's axes when given, no files, no backend."""
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from daca_bench.experiments.plots import load_curves, plot_curves, plot_dps, plot_gains
from daca_bench.experiments.results import build_table, load_results

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
    code = ("import matplotlib, daca_bench.experiments.plots, daca_bench.experiments.bias, sys;"
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

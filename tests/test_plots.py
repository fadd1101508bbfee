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

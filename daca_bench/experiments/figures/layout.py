"""What every ablation figure shares (plots.py, curves.py): one colour per variant, facets that wrap
into a grid of at most MAX_COLS columns, a legend outside the data, and the paper's headline gain
only beside a task the paper's areas cover (a shipped task of a family the abstract names:
variants.paper_area, which the table uses too):

    fig, grid = facets(n=8, rows_per_facet=2, ...)   # 2 x 4 facets of 2 stacked panels each
    paper_area("sudoku_tiny", "constraint")          # 36.3; a custom task of that family: nan

Nothing here chooses a matplotlib backend (Figure, never pyplot).
"""

from __future__ import annotations

import math
import re
import zlib

import numpy as np
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine

from ..analysis.variants import VARIANT_ORDER

PALETTE = {
    "start": "#7f7f7f",
    "baseline": "#3b3b3b",
    "+DPS": "#1f77b4",
    "+SML": "#ff7f0e",
    "+DACA": "#2ca02c",
    "+DPS-random": "#9467bd",
}  # one colour per variant in every figure
OTHER_COLOURS = ("#8c564b", "#e377c2", "#bcbd22", "#17becf", "#d62728")  # variants PALETTE does not name
MAX_COLS = 4  # facets per row before they wrap
SAVE = {"png": {"dpi": 130, "metadata": {"Software": None}}, "pdf": {"metadata": {"CreationDate": None}}}


def colour(variant: str) -> str:
    """The variant's colour: PALETTE's; for a reading of a method ("+DPS:surprise@0.0001") its
    method's; else one of OTHER_COLOURS chosen by a stable hash of its name."""
    root = re.split("[:@]", variant)[0]
    method = PALETTE.get(root) if root not in ("start", "baseline") else None
    return PALETTE.get(variant) or method or OTHER_COLOURS[zlib.crc32(variant.encode()) % len(OTHER_COLOURS)]


def variant_rank(variant: str) -> tuple:
    """Sort key: VARIANT_ORDER first (start before it), then the other variants by name."""
    order = ["start", *VARIANT_ORDER]
    return (order.index(variant), "") if variant in order else (len(order), variant)


def grid_of(n: int) -> tuple[int, int]:
    """(rows, columns) of facets: at most MAX_COLS columns, wrapping into rows."""
    cols = max(1, min(MAX_COLS, n))
    return max(1, math.ceil(n / cols)), cols


def facets(n: int, rows_per_facet: int, panel: tuple[float, float], height_ratios=None, ax=None, share=True):
    """(figure, list of n facets, each a list of ROWS_PER_FACET axes stacked top to bottom, sharing x
    unless not SHARE).
    New axes in a constrained-layout figure (PANEL: one axes' width and height in inches), or the
    caller's AX: rows_per_facet x n axes (an array of that size, in that order)."""
    if ax is not None:
        axes = np.asarray(ax, dtype=object).reshape(-1)
        if axes.size != rows_per_facet * n:
            raise ValueError(f"this plot draws on {rows_per_facet} x {n} axes; ax= gave {axes.size}")
        axes = axes.reshape(rows_per_facet, n)
        return axes[0, 0].figure, [list(axes[:, j]) for j in range(n)]
    rows, cols = grid_of(n)
    ratios = list(height_ratios or [1] * rows_per_facet)
    fig = Figure(figsize=(panel[0] * cols, panel[1] * sum(ratios) / max(ratios) * rows + 0.9), layout="constrained")
    grid = fig.add_gridspec(rows * rows_per_facet, cols, height_ratios=ratios * rows)
    out = []
    for i in range(n):
        r, c = divmod(i, cols)
        stack = [fig.add_subplot(grid[r * rows_per_facet + k, c]) for k in range(rows_per_facet)]
        for a in stack[1:] if share else ():
            a.sharex(stack[0])
        for a in stack[:-1] if share else ():
            a.tick_params(labelbottom=False)
        out.append(stack)
    return fig, out


def _legend_width(labels: list[str], ncol: int, fontsize: float = 8) -> float:
    """A generous estimate of a legend's width in inches (columns filled top to bottom, as matplotlib does)."""
    rows = math.ceil(len(labels) / ncol)
    widest = [
        max(len(line) for label in labels[j * rows : (j + 1) * rows] for line in label.split("\n"))
        for j in range(ncol)
        if labels[j * rows : (j + 1) * rows]
    ]
    return sum(0.5 + 0.62 * fontsize / 72 * n for n in widest) + 0.2


def legend_outside(fig: Figure, handles: list, facets_: list, ncol: int | None = None) -> None:
    """One legend for the whole figure, outside every axes: in a figure of our own (constrained
    layout makes room) right of a single column of facets, else below the grid in as many columns
    as the grid has and fit its width (NCOL: below, in that many), the figure widened where a legend
    would not fit; on the caller's axes right of the last facet's top panel."""
    if not handles:
        return
    if not isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine):
        facets_[-1][0].legend(
            handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=8, frameon=False
        )
        return
    labels = [h.get_label() for h in handles]
    if ncol is None and grid_of(len(facets_))[1] == 1:
        fig.set_figwidth(fig.get_figwidth() + _legend_width(labels, 1))
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, frameon=False)
        return
    n = ncol or min(len(handles), grid_of(len(facets_))[1])
    while ncol is None and n > 1 and _legend_width(labels, n) > fig.get_figwidth():
        n -= 1
    fig.set_figwidth(max(fig.get_figwidth(), _legend_width(labels, n)))
    fig.legend(handles=handles, loc="outside lower center", ncol=n, fontsize=8, frameon=False)

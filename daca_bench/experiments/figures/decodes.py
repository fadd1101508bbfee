"""The checkpoint x decoding x template grid as a figure (`daca-bench plot` on folders `eval --decode/--templates`
wrote; eval/compare.py reads them):

    daca-bench plot runs/axes/baseline runs/axes/daca     # decodes.png / .pdf in their common parent
    fig = plot_decodes(*compare(["runs/axes/baseline", "runs/axes/daca"]))

One panel per template; along x the decodings (with the canvas where a grid has several); one colour per
checkpoint (layout.colour: `baseline` and `+DACA` as in every figure), each accuracy with its 95 % bootstrap
interval as an error bar. With several checkpoints a second row draws each later one minus the first, paired
on prompts, with its interval and a line at zero: where the bars of a decoding sit on both sides of it, the
difference between the checkpoints is one of decoding.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ...eval.compare import compare, out_folder
from .layout import SAVE, colour, facets, legend_outside


def _x_of(row: dict, several: bool) -> str:
    """A cell's place along x: its decoding, and its protocol and canvas where the grid has several."""
    return row["decode"] + (f"\n{row['protocol']} L={row['gen_length']}" if several else "")


def _bar(a, x: float, value, c: str) -> None:
    y, lo, hi = value[:3]
    if math.isnan(lo) or math.isnan(hi):
        a.plot([x], [y], "o", color=c, mfc="white", ms=5)  # a difference without its prompts: no interval
        return
    a.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt="o", color=c, ms=5, capsize=3, lw=1.2)


def plot_decodes(rows: list[dict], labels: list[str], ax=None) -> Figure:
    """Accuracy per template (panel), decoding (x) and checkpoint (colour) with its interval; under it, with
    several checkpoints, their paired differences against the first."""
    templates = list(dict.fromkeys(r["template"] for r in rows))
    several = len({(r["protocol"], r["gen_length"]) for r in rows}) > 1
    xs = list(dict.fromkeys(_x_of(r, several) for r in rows))
    depth = 2 if len(labels) > 1 else 1
    fig, panels = facets(len(templates), depth, (max(3.0, 1.1 * len(xs) + 1), 2.6), ax=ax)
    width = 0.6 / max(1, len(labels))
    for template, stack in zip(templates, panels):
        mine = [r for r in rows if r["template"] == template]
        for r in mine:
            i = xs.index(_x_of(r, several))
            for j, label in enumerate(labels):
                if r[label] is not None:
                    _bar(stack[0], i + (j - (len(labels) - 1) / 2) * width, r[label], colour(label))
                if j and r.get(f"{label} - {labels[0]}") is not None:
                    _bar(stack[1], i + (j - len(labels) / 2) * width, r[f"{label} - {labels[0]}"], colour(label))
        stack[0].set_title(f"template: {template}", fontsize=9)
        stack[0].set_ylabel("accuracy")
        stack[0].set_ylim(-0.03, 1.03)
        if depth == 2:
            stack[1].axhline(0, color="gray", lw=0.6)
            stack[1].set_ylabel(f"minus {labels[0]}")
        for a in stack:
            a.set_xticks(range(len(xs)))
            a.set_xlim(-0.6, len(xs) - 0.4)
            a.grid(axis="y", lw=0.3, alpha=0.5)
        stack[-1].set_xticklabels(xs, fontsize=8)
    handles = [Line2D([], [], color=colour(x), marker="o", lw=1.2, label=x) for x in labels]
    legend_outside(fig, handles, panels)
    fig.suptitle("accuracy by decoding and template, 95 % bootstrap intervals over prompts", fontsize=9)
    return fig


def plot_axes(folders, output_dir=None, labels=None) -> list[Path]:
    """What `daca-bench plot` writes for axes folders: decodes.png and decodes.pdf (compare.out_folder)."""
    rows, labels = compare(folders, labels)
    out = out_folder(folders, output_dir)
    fig = plot_decodes(rows, labels)
    paths = []
    for fmt, kw in SAVE.items():
        path = out / f"decodes.{fmt}"
        fig.savefig(path, format=fmt, bbox_inches="tight", **kw)
        paths.append(path)
    return paths

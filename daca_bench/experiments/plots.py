"""Ablation plots, read through `results.py`. Each plot function returns a matplotlib `Figure`
(built without pyplot, so no backend is chosen here) and draws on the caller's axes when given
`ax=`; only `plot_all`, behind the CLI, writes files:

    daca-bench plot results/grid      # gains.png/pdf, curves.png/pdf, dps.png/pdf beside the cells
    daca-bench plot results/tiny      # a preset's output folder: reads cells/, writes beside it
    fig = plot_gains(build_table(load_results("results/grid")))    # in a notebook: shown inline

- gains: pp change against the baseline per family and variant, with paired 95 % intervals,
  the MDE as a band and the paper's headline gain marked;
- curves: training reward per step and test accuracy (during training where evaluated, and the
  final one), one line per variant (mean over seeds);
- dps: the DPS weights over the tokens of a few real completions.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .results import PAPER_GAIN_PP, VARIANT_ORDER, build_table, load_results, load_start, locate


def _axes(ax, rows: int, cols: int, figsize) -> tuple[Figure, np.ndarray]:
    """(figure, rows x cols array of axes): new ones, or the caller's `ax` (an Axes or an array of them)."""
    if ax is None:
        fig = Figure(figsize=figsize)
        return fig, fig.subplots(rows, cols, squeeze=False)
    axes = np.asarray(ax, dtype=object).reshape(-1)
    if axes.size != rows * cols:
        raise ValueError(f"this plot draws on {rows} x {cols} axes; ax= gave {axes.size}")
    return axes[0].figure, axes.reshape(rows, cols)


def plot_gains(table: pd.DataFrame, ax=None) -> Figure:
    """Δpp against the baseline per task and variant with the 95 % interval, one panel per base
    method; each estimate also as a dot (a 0.0 bar stays visible), the MDE as a grey band (a gain
    inside it could not have been told from noise) and the paper's gain dashed. The y-axis fits
    the measured values; a paper gain beyond it is written at the panel's edge instead of drawn."""
    table = table[table["variant"].isin(VARIANT_ORDER[1:]) & table.get("delta_pp", pd.Series(dtype=float)).notna()]
    bases = sorted(table["base"].unique())
    fig, axes = _axes(ax, 1, max(1, len(bases)), (6 * max(1, len(bases)), 4))
    variants = [v for v in VARIANT_ORDER[1:] if v in set(table["variant"])]
    for ax, base in zip(axes[0], bases):
        tb = table[table["base"] == base]
        tasks = tb[["family", "task"]].drop_duplicates().sort_values(["family", "task"])
        t = tasks.reset_index(drop=True)
        labels = [f"{r.family}\n{r.task}" for r in t.itertuples()]
        width = 0.8 / max(1, len(variants))
        for j, v in enumerate(variants):
            rows = t.merge(tb[tb["variant"] == v], on=["family", "task"], how="left")
            ys = rows["delta_pp"].fillna(0).tolist()
            errs = [[max(0, y - lo) for y, lo in zip(ys, rows["lo"].fillna(0))],
                    [max(0, hi - y) for y, hi in zip(ys, rows["hi"].fillna(0))]]
            xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(t))]
            bars = ax.bar(xs, ys, width, yerr=errs, capsize=3, label=v)
            ax.plot(xs, ys, "o", ms=4, color=bars.patches[0].get_facecolor() if bars.patches else None,
                    markeredgecolor="black", markeredgewidth=0.5)
            for x, m in zip(xs, rows["MDE"]):
                if not math.isnan(m):
                    ax.fill_between([x - width / 2, x + width / 2], -m, m, color="grey", alpha=0.15, lw=0,
                                    label="± MDE" if (j, x) == (0, xs[0]) else None)
        measured = pd.concat([tb["lo"], tb["hi"], tb["MDE"], -tb["MDE"], tb["delta_pp"]]).dropna()
        lo, hi = min(0.0, float(measured.min())) if len(measured) else -1.0, max(0.0, float(measured.max())) if len(measured) else 1.0
        pad = 0.12 * max(hi - lo, 1.0)
        lo, hi = lo - pad, hi + pad
        for i, fam in enumerate(t["family"]):
            if fam not in PAPER_GAIN_PP:
                continue
            gain = PAPER_GAIN_PP[fam]
            if lo <= gain <= hi:
                ax.plot([i - 0.4, i + 0.4], [gain] * 2, "k--", lw=1, label="paper, up to (LLaDA-8B)" if i == 0 else None)
            else:
                ax.annotate(f"paper (LLaDA-8B): up to +{gain:.1f} pp, off this scale ↑", (i, hi), xytext=(0, -4),
                            textcoords="offset points", ha="center", va="top", fontsize=8)
        ax.set_ylim(lo, hi)
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xticks(range(len(t)), labels)
        ax.set_ylabel("test accuracy change vs baseline (pp)")
        ax.set_title(f"base method: {base}")
        ax.legend(fontsize=8)
    return fig


def load_curves(folder: str | Path) -> pd.DataFrame:
    """One row per logged step of every cell (test_accuracy where a step evaluated), plus one row
    per finished cell at its last step with the final test accuracy (`final`: True) from summary.json."""
    rows = []
    for metrics in sorted(Path(folder).glob("*/metrics.jsonl")):
        axes_file = metrics.parent / "axes.json"
        axes = json.loads(axes_file.read_text()) if axes_file.exists() else {}
        cfg = json.loads((metrics.parent / "config.json").read_text())
        common = {"cell": metrics.parent.name, "task": cfg["train"]["task"], "base": cfg["loss"]["base"],
                  "variant": axes.get("variant", "run"), "seed": cfg["train"]["seed"]}
        last = 0
        for line in metrics.read_text().splitlines():
            if not line.strip():
                continue
            m = json.loads(line)
            last = m["step"]
            rows.append({**common, "step": m["step"], "reward_mean": m["reward_mean"],
                         "test_accuracy": m.get("test_accuracy", math.nan), "final": False})
        summary = metrics.parent / "summary.json"
        acc = json.loads(summary.read_text()).get("test_accuracy") if summary.exists() else None
        if acc is not None and last:
            rows.append({**common, "step": last, "reward_mean": math.nan, "test_accuracy": acc, "final": True})
    return pd.DataFrame(rows)


def plot_curves(curves: pd.DataFrame, ax=None) -> Figure:
    """Training reward (top) and test accuracy (bottom) per step, one column per task. Test
    accuracy during training is drawn where the runs evaluated (train.eval_every); the final
    one (summary.json) is always marked at the last step, and the panel says which it shows."""
    tasks = sorted(curves["task"].unique())
    fig, axes = _axes(ax, 2, len(tasks), (4.5 * len(tasks), 6))
    final = curves["final"] if "final" in curves else pd.Series(False, index=curves.index)
    for j, task in enumerate(tasks):
        c = curves[(curves["task"] == task) & ~final]
        ends = curves[(curves["task"] == task) & final]
        during = False
        for (base, variant), g in c.groupby(["base", "variant"]):
            mean = g.groupby("step")[["reward_mean", "test_accuracy"]].mean()
            smooth = mean["reward_mean"].rolling(5, min_periods=1).mean()
            line, = axes[0][j].plot(mean.index, smooth, marker="o" if len(mean) < 5 else None, label=f"{base} {variant}")
            acc = mean["test_accuracy"].dropna()
            end = ends[(ends["base"] == base) & (ends["variant"] == variant)]
            if len(acc):
                during = True
                axes[1][j].plot(acc.index, acc, marker="o", color=line.get_color(), label=f"{base} {variant}")
            if len(end):
                axes[1][j].plot([end["step"].max()], [end["test_accuracy"].mean()], marker="*", ms=10, ls="",
                                color=line.get_color(), label=None if len(acc) else f"{base} {variant}")
        note = ("final test accuracy (stars; mean over seeds)" if not during else
                "test accuracy during training (dots) and at the end (stars)")
        if c.empty and ends.empty:
            note = "no steps logged"
        elif not during and ends.empty:
            note = "no test evaluation (train.eval_every=0 and no summary.json yet)"
        axes[1][j].set_title(note, fontsize=8)
        if len(c) and c["step"].max() < 5:
            axes[0][j].set_title(f"{task} ({int(c['step'].max())} steps: too few for the 5-step mean)")
        else:
            axes[0][j].set_title(task)
        axes[0][j].set_ylabel("train reward (5-step mean)")
        axes[1][j].set_ylabel("test accuracy")
        axes[1][j].set_xlabel("step")
        axes[0][j].legend(fontsize=7)
        if axes[1][j].lines:
            axes[1][j].legend(fontsize=7)
    return fig


def plot_dps(folder: str | Path, max_examples: int = 4, ax=None) -> Figure | None:
    """The DPS weights over the tokens of a few real completions (None when the run saved none)."""
    files = sorted(Path(folder).glob("*/dps_examples.json")) or sorted(Path(folder).glob("dps_examples.json"))
    if not files:
        return None
    examples = json.loads(files[0].read_text())[:max_examples]
    fig, axes = _axes(ax, len(examples), 1, (8, 1.2 * len(examples) + 0.6))
    for ax, ex in zip(axes[:, 0], examples):
        w = ex["weights"]
        ax.bar(range(len(w)), w, color=["tab:orange" if x > 1 else "tab:blue" for x in w])
        ax.set_xticks(range(len(w)), [t if t.strip() else repr(t) for t in ex["tokens"]], fontsize=8)
        ax.axhline(1, color="gray", lw=0.6)
        ax.set_ylabel("w")
        ax.set_title(f"{ex['prompt']!r} -> {ex['completion']!r} (reward {ex['reward']})", fontsize=8)
    fig.suptitle(f"DPS weights ({examples[0]['score']}) over the tokens of real completions; "
                 f"from {files[0].parent.name}", fontsize=9)
    fig.tight_layout()
    return fig


def plot_all(folder: str | Path) -> list[Path]:
    """What `daca-bench plot` writes: gains, curves and dps as PNG and PDF beside the tables (a grid's
    output folder, or beside a preset's cells/: results.locate)."""
    folder, out = locate(folder)
    df = load_results(folder)
    curves = load_curves(folder)
    figures = {"gains": plot_gains(build_table(df, load_start(folder))) if not df.empty else None,
               "curves": plot_curves(curves) if not curves.empty else None,
               "dps": plot_dps(folder)}
    paths = []
    for stem, fig in figures.items():
        if fig is not None:
            for path in (out / f"{stem}.png", out / f"{stem}.pdf"):
                fig.savefig(path, dpi=130, bbox_inches="tight")
                paths.append(path)
    if not paths:
        raise FileNotFoundError(f"nothing to plot under {folder}: no finished cells or metrics")
    return paths


# ---- CLI: `daca-bench plot` ---------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("results", help="a grid's output folder, or a preset's (it holds cells/; the plots go beside it)")


def run(args) -> int:
    print("wrote " + ", ".join(map(str, plot_all(args.results))))
    return 0

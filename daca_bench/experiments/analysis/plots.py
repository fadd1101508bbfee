"""Ablation plots, read through `results.py`. Each plot function returns a matplotlib `Figure`
(built without pyplot, so no backend is chosen here) and draws on the caller's axes when given
`ax=`; only `plot_all`, behind the CLI, writes files (PNG and PDF, byte-identical on a rerun):

    daca-bench plot results/grid                      # gains, curves, dps (.png/.pdf) beside the cells
    daca-bench plot results/tiny --output-dir figs    # a preset's folder, the figures into figs/
    fig = plot_gains(load_table("results/grid"))      # in a notebook: shown inline

Every figure colours a variant the same way (PALETTE; the base method is the line style).

- gains: pp change against the baseline per family and variant, with paired 95 % intervals,
  the MDE as a band and the paper's headline gain marked;
- curves: training reward per step and test accuracy (during training where evaluated, and the
  final one), one line per variant (mean over seeds);
- dps: the DPS weights over the tokens of a few real completions.
"""
from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...errors import ConfigError
from .gold import ONE_ANSWER_TASKS, wrong_tokens_of
from .design import across
from .results import PAPER_GAIN_PP, VARIANT_ORDER, load_results, load_table, locate

PALETTE = {"start": "#7f7f7f", "baseline": "#3b3b3b", "+DPS": "#1f77b4", "+SML": "#ff7f0e", "+DACA": "#2ca02c",
           "+DPS-random": "#9467bd"}  # one colour per variant in every figure
OTHER_COLOURS = ("#8c564b", "#e377c2", "#bcbd22", "#17becf", "#d62728")  # variants PALETTE does not name
BASE_STYLES = ("-", "--", ":", "-.")  # the curves' line style per base method (sorted)
SAVE = {"png": {"dpi": 130, "metadata": {"Software": None}}, "pdf": {"metadata": {"CreationDate": None}}}


def colour(variant: str) -> str:
    """The variant's colour: PALETTE's, else one of OTHER_COLOURS chosen by a stable hash of its name."""
    return PALETTE.get(variant) or OTHER_COLOURS[zlib.crc32(variant.encode()) % len(OTHER_COLOURS)]


def _axes(ax, rows: int, cols: int, figsize, height_ratios=None) -> tuple[Figure, np.ndarray]:
    """(figure, rows x cols array of axes): new ones, or the caller's `ax` (an Axes or an array of them)."""
    if ax is None:
        fig = Figure(figsize=figsize)
        grid = {"height_ratios": height_ratios} if height_ratios else None
        return fig, fig.subplots(rows, cols, squeeze=False, gridspec_kw=grid)
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
    table = table[~table["vs"].map(across)] if "vs" in table else table  # against its own baseline only
    bases = sorted(table["base"].unique())
    fig, axes = _axes(ax, 1, max(1, len(bases)), (6 * max(1, len(bases)), 4))
    variants = [v for v in VARIANT_ORDER[1:] if v in set(table["variant"])]
    for ax, base in zip(axes[0], bases):
        tb = table[table["base"] == base]
        tasks = tb[["family", "task"]].drop_duplicates().sort_values(["family", "task"])
        t = tasks.reset_index(drop=True)
        labels = [f"{r.family}\n{r.task}".replace(" [", "\n[") for r in t.itertuples()]  # a setting on its own line
        width = 0.8 / max(1, len(variants))
        for j, v in enumerate(variants):
            rows = t.merge(tb[tb["variant"] == v], on=["family", "task"], how="left")
            ys = rows["delta_pp"].fillna(0).tolist()
            errs = [[max(0, y - lo) for y, lo in zip(ys, rows["lo"].fillna(0))],
                    [max(0, hi - y) for y, hi in zip(ys, rows["hi"].fillna(0))]]
            xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(t))]
            ax.bar(xs, ys, width, yerr=errs, capsize=3, label=v, color=colour(v))
            ax.plot(xs, ys, "o", ms=4, color=colour(v), markeredgecolor="black", markeredgewidth=0.5)
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


def _in_variant_order(groups):
    """(base, variant) groups ordered as VARIANT_ORDER (the gains plot's order), other variants after."""
    rank = {v: i for i, v in enumerate(VARIANT_ORDER)}
    return sorted(groups, key=lambda kv: (rank.get(kv[0][1], len(rank)), kv[0][1], kv[0][0]))


def plot_curves(curves: pd.DataFrame, ax=None) -> Figure:
    """Training reward (top) and test accuracy (bottom) per step, one column per task; a variant
    has its PALETTE colour, a base method its line style. Test accuracy during training is drawn
    where the runs evaluated (train.eval_every); the final one (summary.json) is always marked at
    the last step, and the panel says which it shows. When no run evaluated during training the
    bottom panel holds only those end points and takes a quarter of the height."""
    tasks = sorted(curves["task"].unique())
    final = curves["final"] if "final" in curves else pd.Series(False, index=curves.index)
    during_any = bool(curves.loc[~final, "test_accuracy"].notna().any()) if "test_accuracy" in curves else False
    fig, axes = _axes(ax, 2, len(tasks), (4.5 * len(tasks), 6), None if during_any else (3, 1))
    bases = sorted(curves["base"].unique())
    style = {b: BASE_STYLES[i % len(BASE_STYLES)] for i, b in enumerate(bases)}
    for j, task in enumerate(tasks):
        c = curves[(curves["task"] == task) & ~final]
        ends = curves[(curves["task"] == task) & final]
        during = False
        for (base, variant), g in _in_variant_order(c.groupby(["base", "variant"])):
            label = variant if len(bases) == 1 else f"{base} {variant}"
            look = {"color": colour(variant), "ls": style[base]}
            mean = g.groupby("step")[["reward_mean", "test_accuracy"]].mean()
            smooth = mean["reward_mean"].rolling(5, min_periods=1).mean()
            axes[0][j].plot(mean.index, smooth, marker="o" if len(mean) < 5 else None, label=label, **look)
            acc = mean["test_accuracy"].dropna()
            end = ends[(ends["base"] == base) & (ends["variant"] == variant)]
            if len(acc):
                during = True
                axes[1][j].plot(acc.index, acc, marker="o", label=label, **look)
            if len(end):
                axes[1][j].plot([end["step"].max()], [end["test_accuracy"].mean()], marker="*", ms=10, ls="",
                                color=look["color"], label=None if len(acc) else label)
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
        if axes[0][j].lines:
            axes[0][j].legend(fontsize=7)  # (the bottom panel's colours are the same: no second legend)
        elif axes[1][j].lines:
            axes[1][j].legend(fontsize=7)
        if len(c):
            axes[1][j].set_xlim(axes[0][j].get_xlim())  # the stars sit under the last step of the curves
    fig.tight_layout()
    return fig


def _cell_label(cell: Path) -> tuple[str, str | None]:
    """("family/task, base variant, seed N", task) from a cell's config.json and axes.json."""
    try:
        cfg = json.loads((cell / "config.json").read_text())
    except (OSError, ValueError):
        return cell.name, None
    axes_file = cell / "axes.json"
    variant = json.loads(axes_file.read_text()).get("variant") if axes_file.exists() else None
    task = cfg.get("train", {}).get("task")
    try:
        from ...registry import task_spec

        family = task_spec(task).family
    except Exception:  # noqa: BLE001 - a task this install does not know: the name alone
        family = None
    base = cfg.get("loss", {}).get("base", "")
    variant = variant or ("+DPS" if cfg.get("dps", {}).get("enabled") else "run")
    where = f"{family}/{task}" if family else str(task)
    return f"{where}, {base} {variant}, seed {cfg.get('train', {}).get('seed')}", task


def _golds(cell: Path, task: str | None, examples: list[dict]) -> list[str | None]:
    """The gold completion of each example (the trainer drew them from the first train prompts),
    for tasks with one right answer; None where it is not known."""
    if task not in ONE_ANSWER_TASKS:
        return [None] * len(examples)
    from ...registry import get_task

    def same(samples):
        return [s.target if s.prompt.strip() and s.prompt.strip() in ex["prompt"] else None
                for s, ex in zip(samples, examples)]

    try:
        t = json.loads((cell / "config.json").read_text())["train"]
        first = same(get_task(task, split="train", n=len(examples), seed=t.get("seed", 0)).samples)
        if None not in first:  # a generated task's first prompts do not depend on n: no need for all of them
            return first
        return same(get_task(task, split="train", n=t.get("n_train"), seed=t.get("seed", 0)).samples)
    except Exception:  # noqa: BLE001 - no gold, no marks (the title says so)
        return [None] * len(examples)


def _reward(r) -> str:
    return f"{r:.2f}" if isinstance(r, (int, float)) and not isinstance(r, bool) else str(r)


def plot_dps(folder: str | Path, max_examples: int = 4, ax=None) -> Figure | None:
    """The DPS weights over the tokens of a few real completions (None when the run saved none):
    orange bars got more than a uniform weight (w > 1), blue ones less; for a task with one right
    answer, the tokens that differ from it are hatched, with their labels in red."""
    from matplotlib.patches import Patch

    files = sorted(Path(folder).glob("*/dps_examples.json")) or sorted(Path(folder).glob("dps_examples.json"))
    if not files:
        return None
    cell = files[0].parent
    examples = json.loads(files[0].read_text())[:max_examples]
    label, task = _cell_label(cell)
    golds = _golds(cell, task, examples)
    fig, axes = _axes(ax, len(examples), 1, (8, 1.3 * len(examples) + 1.2))
    for ax, ex, gold in zip(axes[:, 0], examples, golds):
        w = ex["weights"]
        wrong = wrong_tokens_of(ex["tokens"], ex["completion"], gold) if gold is not None else [False] * len(w)
        ax.bar(range(len(w)), w, color=["tab:orange" if x > 1 else "tab:blue" for x in w],
               edgecolor="none")
        for i in (i for i, bad in enumerate(wrong) if bad):
            ax.bar([i], [w[i]], color="none", edgecolor="tab:red", hatch="///", lw=1.0)
        ax.set_xticks(range(len(w)), [t if t.strip() else repr(t) for t in ex["tokens"]], fontsize=8)
        for tick, bad in zip(ax.get_xticklabels(), wrong):
            if bad:
                tick.set_color("tab:red")
        ax.axhline(1, color="gray", lw=0.6)
        ax.set_ylabel("w")
        right = "" if gold is None else f", {sum(wrong)} of {len(w)} tokens wrong"
        ax.set_title(f"{ex['prompt'].strip()!r} -> {ex['completion']!r} (reward {_reward(ex['reward'])}{right})",
                     fontsize=8)
    known = any(g is not None for g in golds)
    handles = [Patch(color="tab:orange", label="w > 1: more credit than a uniform weight"),
               Patch(color="tab:blue", label="w <= 1: less")]
    if known:
        handles.append(Patch(facecolor="none", edgecolor="tab:red", hatch="///", label="wrong token (differs from the solution)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    note = "" if known else " (no single right answer known: wrong tokens not marked)"
    fig.suptitle(f"DPS weights ({examples[0]['score']}) over the tokens of real completions: {label}{note}", fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def plot_all(folder: str | Path, output_dir: str | Path | None = None) -> list[Path]:
    """What `daca-bench plot` writes: gains, curves and dps as PNG and PDF (no timestamps in them, so a
    rerun on the same cells writes the same bytes), into `output_dir`, by default beside the tables (a
    grid's output folder, or beside a preset's cells/: results.locate)."""
    folder, out = locate(folder)
    if output_dir is not None:
        out = Path(output_dir)
        if not out.parent.is_dir():
            raise ConfigError(f"--output-dir {out}: folder {out.parent} does not exist")
        out.mkdir(exist_ok=True)
    df = load_results(folder)
    curves = load_curves(folder)
    figures = {"gains": plot_gains(load_table(folder)) if not df.empty else None,
               "curves": plot_curves(curves) if not curves.empty else None,
               "dps": plot_dps(folder)}
    paths = []
    for stem, fig in figures.items():
        if fig is not None:
            for fmt, kw in SAVE.items():
                path = out / f"{stem}.{fmt}"
                fig.savefig(path, format=fmt, bbox_inches="tight", **kw)
                paths.append(path)
    if not paths:
        raise FileNotFoundError(f"nothing to plot under {folder}: no finished cells or metrics")
    return paths


# ---- CLI: `daca-bench plot` ---------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("results", help="a grid's output folder, or a preset's (it holds cells/; the plots go beside it)")
    parser.add_argument("--output-dir", default=None,
                        help="write the figures here instead (created if missing; its parent must exist)")


def run(args) -> int:
    print("wrote " + ", ".join(map(str, plot_all(args.results, args.output_dir))))
    return 0

"""Ablation plots, read through `results.py` (tables) and `curves.py` (per-step metrics). Each plot
function returns a matplotlib `Figure` (built without pyplot, so no backend is chosen here) and
draws on the caller's axes when given `ax=`; only `plot_all`, behind the CLI, writes files (PNG and
PDF, byte-identical on a rerun):

    daca-bench plot results/grid                      # gains, curves, training, dps beside the cells
    daca-bench plot results/tiny --output-dir figs    # a preset's folder, the figures into figs/
    daca-bench plot runs/axes/baseline runs/axes/daca # eval --decode folders: decodes.png (decodes.py)
    figs = figures("results/tiny-full")               # in a notebook: name -> Figure, shown inline

Every figure colours a variant the same way (layout.PALETTE), wraps its facets (one per base
method, task and rollout setting) after four columns and keeps its legend outside the data.

- gains: pp change against the own baseline per facet and variant (variants a base does not admit
  are absent), the 95 % interval, each seed's paired change, the MDE as a band, and the paper's
  headline gain only beside a shipped task of an area the paper measured;
- curves: training reward per step and test accuracy (during training where train.eval_every
  was set, and the final one), a line per variant: the mean over seeds with a ± 1 s.d. band;
- training: KL, clip ratio, completion length and zero-std share per step, the same way;
- dps: the DPS weights over the tokens of a few real completions.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ...errors import ConfigError
from ..analysis.cellstore import Cell, cells, folder_cell
from ..analysis.design import across
from ..analysis.results import START, comparisons, load_results, load_start, load_table, locate
from ..analysis.variants import builtin_task, paper_area
from .curves import load_curves, plot_curves, plot_training
from .gold import ONE_ANSWER_TASKS, wrong_tokens_of
from .layout import PALETTE, SAVE, colour, facets, grid_of, legend_outside, variant_rank

__all__ = [
    "PALETTE",
    "colour",
    "figures",
    "load_curves",
    "notebook_folder",
    "plot_all",
    "plot_curves",
    "plot_dps",
    "plot_gains",
    "plot_training",
    "seed_deltas",
]
# tasks whose every prompt has one right completion, its target (gold.py's, and the tiny-full math row's
# arithmetic_tiny and the full sudoku): only there does dps.png mark wrong tokens
UNIQUE_TARGET = frozenset(ONE_ANSWER_TASKS) | {"arithmetic_tiny", "sudoku"}
GAIN_KEYS = ["base", "family", "task"]


def seed_deltas(folder: str | Path) -> pd.DataFrame:
    """One row per (base, family, task, variant, seed) of a folder's variants against their own
    baseline: `delta_pp`, that seed's paired change (mean over the prompts both scored)."""
    cells, _ = locate(folder)
    df = load_results(cells)
    rows = []
    if not df.empty:
        for common, variant, got, vs, d, _, _ in comparisons(df, load_start(cells), clusters={}, planned={}):
            if got is not None and vs == "baseline" and d.size:
                rows += [
                    {**{k: common[k] for k in GAIN_KEYS}, "variant": variant, "delta_pp": float(x)}
                    for x in d.mean(axis=1)
                ]
    return pd.DataFrame(rows, columns=[*GAIN_KEYS, "variant", "delta_pp"])


def _gain_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows the gains plot draws: each variant against its own base's baseline (not the baseline
    against the RL start, not a row against another base's)."""
    if "delta_pp" not in table or table.empty:
        return table.iloc[:0]
    t = table[~table["variant"].isin([START, "baseline"]) & table["delta_pp"].notna()]
    return t[~t["vs"].map(across)] if "vs" in t else t


def _of(frame: pd.DataFrame, key: tuple) -> pd.Series:
    """The rows of FRAME in the facet KEY (its base, family, task)."""
    return np.logical_and.reduce([frame[c] == v for c, v in zip(GAIN_KEYS, key)])


def _x_range(t: pd.DataFrame, seeds: pd.DataFrame | None) -> tuple[float, float]:
    """The x-axis every facet shares: the measured values (intervals, ± MDE, seeds) and ± 1 pp, padded."""
    measured = pd.concat(
        [
            t["lo"],
            t["hi"],
            t["MDE"],
            -t["MDE"],
            t["delta_pp"],
            *([seeds["delta_pp"]] if seeds is not None and len(seeds) else []),
        ]
    ).dropna()
    lo = min(-1.0, float(measured.min())) if len(measured) else -1.0  # at least ± 1 pp
    hi = max(1.0, float(measured.max())) if len(measured) else 1.0
    pad = 0.08 * (hi - lo)
    return lo - pad, hi + pad


def plot_gains(table: pd.DataFrame, ax=None, seeds: pd.DataFrame | None = None) -> Figure:
    """Δpp against the baseline, one facet per (base, family, task) and in it a row per variant the
    base ran (none drawn for a variant it does not admit): a bar to the estimate with a dot on it
    (a 0.0 bar stays visible), its 95 % interval, each seed's paired change as a tick (SEEDS:
    `seed_deltas`), the MDE as a grey band (a gain inside it could not have been told from noise) and
    the paper's headline gain dashed. A row with nothing to draw but its dot says why on the figure
    (both arms 0 %, no spread), and the legend names only what is drawn. All facets share the x-axis, fitted to the measured values; a
    paper gain beyond it is written under the facet's title instead of drawn. Only a shipped task
    of one of the paper's areas gets a paper mark (variants.paper_area)."""
    t = _gain_rows(table)
    keys = sorted(
        t[GAIN_KEYS].drop_duplicates().itertuples(index=False, name=None),
        key=lambda k: (k[0], k[1].replace("]", ""), k[2]),
    )  # "json [dual]" before "json [dual th=0.9]"
    if not keys:
        fig, stacks = facets(1, 1, (4.0, 1.5), ax=ax)
        stacks[0][0].text(
            0.5,
            0.5,
            "no variant against a baseline in this table",
            ha="center",
            va="center",
            transform=stacks[0][0].transAxes,
        )
        return fig
    most = max(int(_of(t, k).sum()) for k in keys)
    fig, stacks = facets(len(keys), 1, (3.9, 0.42 * most + 1.1), ax=ax)
    lo, hi = _x_range(t, seeds)
    cols, paper_drawn, drawn = grid_of(len(keys))[1], False, set()
    base_acc = (
        {tuple(k): a for *k, a in table[table["variant"] == "baseline"][[*GAIN_KEYS, "acc"]].itertuples(index=False)}
        if "acc" in table
        else {}
    )
    for i, (key, (a,)) in enumerate(zip(keys, stacks)):
        base, family, task = key
        rows = t[_of(t, key)]
        rows = rows.iloc[sorted(range(len(rows)), key=lambda r: variant_rank(rows["variant"].iloc[r]))]
        for y, r in enumerate(rows.itertuples()):
            if not math.isnan(r.MDE):
                a.fill_betweenx([y - 0.42, y + 0.42], -r.MDE, r.MDE, color="grey", alpha=0.15, lw=0)
                drawn.add("mde")
            a.barh(y, r.delta_pp, 0.55, color=colour(r.variant), label=r.variant)
            if math.isfinite(r.lo) and math.isfinite(r.hi) and r.hi > r.lo:
                a.errorbar(
                    [r.delta_pp],
                    [y],
                    xerr=[[max(0, r.delta_pp - r.lo)], [max(0, r.hi - r.delta_pp)]],
                    fmt="none",
                    ecolor="black",
                    elinewidth=1,
                    capsize=3,
                )
                drawn.add("interval")
            a.plot([r.delta_pp], [y], "o", ms=5, color=colour(r.variant), markeredgecolor="black", markeredgewidth=0.6)
            drawn.add("estimate")
            if seeds is not None and len(seeds):
                s = seeds[_of(seeds, key) & (seeds["variant"] == r.variant)]["delta_pp"]
                a.plot(s, [y + 0.33] * len(s), "|", ms=6, color="black", alpha=0.6)
                if len(s):
                    drawn.add("seeds")
            note = _degenerate(r, base_acc.get(key))
            if note:
                a.text(
                    0.98,
                    y,
                    note,
                    transform=a.get_yaxis_transform(),
                    ha="right",
                    va="center",
                    fontsize=6.5,
                    color="dimgrey",
                )
        a.set_yticks(range(len(rows)), list(rows["variant"]), fontsize=8)
        a.set_ylim(len(rows) - 0.5, -0.5)  # the first variant on top
        a.set_xlim(lo, hi)
        a.axvline(0, color="black", lw=0.6)
        title = f"{base}: {family} / {task}" if " [" not in family else f"{base}: {task} {family[family.index('[') :]}"
        gain = paper_area(task, family)
        if lo <= gain <= hi:
            a.axvline(gain, color="black", ls="--", lw=1)
            paper_drawn = True
        elif not math.isnan(gain):
            title += f"\npaper (LLaDA-8B): up to +{gain:.1f} pp, off this axis →"
        a.set_title(title, fontsize=8)
        a.tick_params(axis="x", labelsize=8)
        if i >= len(keys) - cols:
            a.set_xlabel("test accuracy change vs baseline (pp)", fontsize=8)
    handles = [
        Line2D([], [], marker="o", color="black", mfc="white", ls="-", lw=1, label="Δ and its 95 % interval")
        if "interval" in drawn
        else Line2D([], [], marker="o", color="black", mfc="white", ls="", label="Δ")
    ]
    if "mde" in drawn:
        handles.append(Patch(color="grey", alpha=0.25, label="± MDE (80 % power)"))
    if "seeds" in drawn:
        handles.append(Line2D([], [], marker="|", ms=8, ls="", color="black", label="one seed's paired Δ"))
    if paper_drawn:
        handles.append(Line2D([], [], color="black", ls="--", lw=1, label="paper's gain, up to (LLaDA-8B)"))
    legend_outside(fig, handles, stacks)
    return fig


def _degenerate(r, baseline_acc) -> str:
    """What the gains figure writes beside a row whose data leave nothing to draw but a dot: both arms at
    0 % (or at 100 %), or no spread (every paired difference the same: no interval, no MDE)."""
    acc = getattr(r, "acc", math.nan)
    if baseline_acc is not None and acc == baseline_acc and acc in (0, 100):
        return f"both arms {acc:.0f} %: nothing to compare"
    if not (math.isfinite(r.lo) and math.isfinite(r.hi) and r.hi > r.lo) and math.isnan(r.MDE):
        return "no spread: no interval, no MDE"
    return ""


def _cell_label(cell: Cell) -> tuple[str, str | None]:
    """("family/task, base variant, seed N", task) from a cell's config.json, axes.json and summary.json."""
    try:
        cfg = cell.json("config.json")
    except (OSError, ValueError):
        return cell.name, None
    variant = cell.json("axes.json").get("variant") if cell.has("axes.json") else None
    task = cfg.get("train", {}).get("task")
    try:  # what the cell recorded of its task (summary.json's task_record), else the registry's
        family = (cell.json("summary.json").get("task_record") or {}).get("family")
    except (OSError, ValueError):
        family = None
    try:
        from ...registry import task_spec

        family = family or task_spec(task).family
    except Exception:  # noqa: BLE001 - a task this install does not know and no record: the name alone
        pass
    base = cfg.get("loss", {}).get("base", "")
    variant = variant or ("+DPS" if cfg.get("dps", {}).get("enabled") else "run")
    where = f"{family}/{task}" if family else str(task)
    return f"{where}, {base} {variant}, seed {cfg.get('train', {}).get('seed')}", task


def _golds(cell: Cell, task: str | None, examples: list[dict]) -> list[str | None]:
    """The gold completion of each example, for a task with one right answer (UNIQUE_TARGET): the
    target of the train prompt it was drawn from (the trainer draws them from the first ones);
    None where the task has none or the prompt is not found."""
    if task not in UNIQUE_TARGET:
        return [None] * len(examples)
    from ...registry import get_task

    def find(n):
        targets = {
            s.prompt.strip(): s.target for s in get_task(task, split="train", n=n, seed=t.get("seed", 0)).samples
        }
        return [targets.get(ex["prompt"].strip()) for ex in examples]

    try:
        t = cell.json("config.json")["train"]
        first = find(len(examples))
        # a generated task's first prompts do not depend on n: the whole train set only where they were not all found
        return first if None not in first else find(t.get("n_train"))
    except Exception:  # noqa: BLE001 - no gold, no marks (the title says so)
        return [None] * len(examples)


def _reward(r) -> str:
    return f"{r:.2f}" if isinstance(r, (int, float)) and not isinstance(r, bool) else str(r)


def plot_dps(folder: str | Path, max_examples: int = 4, ax=None) -> Figure | None:
    """The DPS weights over the tokens of a few real completions (None when the run saved none):
    orange bars got more than a uniform weight (w > 1), blue ones less; for a task with one right
    answer (UNIQUE_TARGET), the tokens that differ from it are hatched, with their labels in red."""
    found = [c for c in cells(folder) if c.has("dps_examples.json")] or [
        c for c in [folder_cell(folder)] if c.has("dps_examples.json")
    ]  # FOLDER: one run's own folder
    if not found:
        return None
    cell = found[0]
    examples = cell.json("dps_examples.json")[:max_examples]
    label, task = _cell_label(cell)
    golds = _golds(cell, task, examples)
    fig, stacks = facets(1, len(examples), (8, 1.3), ax=ax, share=False)
    for a, ex, gold in zip(stacks[0], examples, golds):
        w = ex["weights"]
        wrong = wrong_tokens_of(ex["tokens"], ex["completion"], gold) if gold is not None else [False] * len(w)
        a.bar(range(len(w)), w, color=["tab:orange" if x > 1 else "tab:blue" for x in w], edgecolor="none")
        for i in (i for i, bad in enumerate(wrong) if bad):
            a.bar([i], [w[i]], color="none", edgecolor="tab:red", hatch="///", lw=1.0)
        a.set_xticks(range(len(w)), [t if t.strip() else repr(t) for t in ex["tokens"]], fontsize=8)
        for tick, bad in zip(a.get_xticklabels(), wrong):
            if bad:
                tick.set_color("tab:red")
        a.axhline(1, color="gray", lw=0.6)
        a.set_ylabel("w")
        right = "" if gold is None else f", {sum(wrong)} of {len(w)} tokens wrong"
        a.set_title(
            f"{ex['prompt'].strip()!r} -> {ex['completion']!r} (reward {_reward(ex['reward'])}{right})", fontsize=8
        )
    known = any(g is not None for g in golds)
    handles = [
        Patch(color="tab:orange", label="w > 1: more credit than a uniform weight"),
        Patch(color="tab:blue", label="w <= 1: less"),
    ]
    if known:
        handles.append(
            Patch(facecolor="none", edgecolor="tab:red", hatch="///", label="wrong token (differs from the solution)")
        )
    legend_outside(fig, handles, stacks, ncol=len(handles))
    note = (
        ""
        if known
        else " (the solution of these prompts was not found: wrong tokens not marked)"
        if task in UNIQUE_TARGET
        else " (no single right answer known: wrong tokens not marked)"
        if builtin_task(task)
        else f" (a task of one's own: whether {task} has one right answer is not known "
        "here, so wrong tokens are not marked)"
    )
    fig.suptitle(
        f"DPS weights ({examples[0]['score']}) over the tokens of real completions:\n{label}{note}", fontsize=9
    )
    return fig


def figures(folder: str | Path) -> dict[str, Figure | None]:
    """name -> Figure (None where there is nothing to draw) of a grid's or a preset's output folder
    (results.locate): gains (with each seed's paired change), curves, training and dps."""
    cells, _ = locate(folder)
    has_cells = not load_results(cells).empty
    curves = load_curves(cells)
    table = load_table(cells) if has_cells else None
    against = table is not None and (table["vs"] == "baseline").any()  # a budget design's rows name their arm
    return {
        "gains": plot_gains(table, seeds=seed_deltas(cells)) if against else None,
        "curves": plot_curves(curves) if not curves.empty else None,
        "training": plot_training(curves) if not curves.empty else None,
        "dps": plot_dps(cells),
        "compute": _compute(cells),
    }


def _compute(cells):
    """Accuracy against training FLOPs and completions (budgets.py), where cells evaluated during
    training and kept a ledger: a compute-matched design's curves."""
    from .curves import compute_points, plot_compute

    points = compute_points(cells)
    return plot_compute(points) if not points.empty and points.groupby("variant")["step"].nunique().min() > 1 else None


def notebook_folder(results: str | Path, tasks_dir: str | Path = "") -> Path:
    """A notebook's parameters made usable (notebooks/ablations.ipynb): RESULTS as a folder, a relative
    one against the working directory where it is there, else against the checkout this daca_bench
    belongs to (Jupyter starts its kernel in notebooks/, papermill where it is run); TASKS_DIR, a
    folder of one's own task files, added to DACA_BENCH_TASKS (before any task is looked up) so that
    a grid of those tasks is read with their families."""
    import os

    def where(path) -> Path:
        path = Path(path)
        return path if path.is_absolute() or path.exists() else Path(__file__).resolve().parents[3] / path

    folder, tasks = where(results), where(tasks_dir) if str(tasks_dir) else None
    if not folder.is_dir():
        raise ConfigError(f"results={str(results)!r}: no such folder; give a grid's output folder or a preset's")
    if tasks is not None:
        if not tasks.is_dir():
            raise ConfigError(f"tasks_dir={str(tasks_dir)!r}: no such folder of task files")
        known = [p for p in os.environ.get("DACA_BENCH_TASKS", "").split(os.pathsep) if p]
        os.environ["DACA_BENCH_TASKS"] = os.pathsep.join([*known, str(tasks.resolve())])
    return folder


def plot_all(folder: str | Path, output_dir: str | Path | None = None) -> list[Path]:
    """What `daca-bench plot` writes: `figures` as PNG and PDF (no timestamps in them, so a rerun on
    the same cells writes the same bytes), into `output_dir`, by default beside the tables (a grid's
    output folder, or beside a preset's cells/: results.locate)."""
    cells, out = locate(folder)
    if output_dir is not None:
        out = Path(output_dir)
        if not out.parent.is_dir():
            raise ConfigError(f"--output-dir {out}: folder {out.parent} does not exist")
        out.mkdir(exist_ok=True)
    paths = []
    for stem, fig in figures(cells).items():
        if fig is not None:
            for fmt, kw in SAVE.items():
                path = out / f"{stem}.{fmt}"
                fig.savefig(path, format=fmt, bbox_inches="tight", **kw)
                paths.append(path)
    if not paths:
        raise FileNotFoundError(f"nothing to plot under {cells}: no finished cells or metrics")
    return paths


# ---- CLI: `daca-bench plot` ---------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument(
        "results",
        nargs="+",
        help="a grid's output folder, or a preset's (it holds cells/; the plots go beside it); or folders "
        "`eval --decode ... --templates ...` wrote, one per checkpoint: decodes.png (figures/decodes.py)",
    )
    parser.add_argument(
        "--output-dir", default=None, help="write the figures here instead (created if missing; its parent must exist)"
    )


def run(args) -> int:
    from ...eval.compare import is_axes
    from .decodes import plot_axes

    if all(is_axes(f) for f in args.results):
        print("wrote " + ", ".join(map(str, plot_axes(args.results, args.output_dir))))
        return 0
    if len(args.results) > 1:
        raise ConfigError("daca-bench plot: several folders are eval --decode folders (grid.csv) only")
    print("wrote " + ", ".join(map(str, plot_all(args.results[0], args.output_dir))))
    return 0

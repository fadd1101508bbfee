"""Ablation results: load finished cells and build the table researchers read (the library; its
Markdown, CSV and LaTeX are render.py's; the `daca-bench table` command is experiments/commands/table.py).

Every cell of a grid is scored on its family's one fixed test set (`train.test_seed`) and keeps
its per-prompt results (`eval.jsonl`), so each comparison is paired by seed AND by prompt, and
resampled by the task's cluster of prompts (experiments/analysis/clusters.py: sudoku puzzles by solution
grid, python_tiny's instances by target function). The table has one row per (base, task, variant):

- `acc`: test accuracy (%, the share of answers whose status is correct; never a mean reward: accuracy.py),
  mean over seeds;
- `delta_pp` with `lo`/`hi`: the paired difference against the row's reference (`vs`: the
  baseline for a variant; the RL start, i.e. the SFT model on the same prompts, for the
  baseline), with its 95 % mixed-model interval over seeds x clusters (experiments/analysis/stats.py);
- `p`, `p_adj`: the raw and family-wise adjusted p (Holm within the primary and within the
  secondary family; `plan` says which, experiments/analysis/design.py); `sig` marks an adjusted p below
  alpha, never an exploratory row, and never a row whose seed term dropped out (df ~ clusters - 1)
  while its seeds-only interval (`seeds_lo`/`seeds_hi`) includes 0;
- `MDE`: the smallest true difference this comparison would detect with 80 % power at a
  two-sided 5 % level, from the measured spread: noncentral t on the comparison's df, with the SE
  corrected for its bias (experiments/analysis/stats.py, `mde`; none where no paired difference varies);
- `t_half`, `boot_lo`/`boot_hi` (the crossed bootstrap), `zero_std` in the CSV.
Under each base's rows a line says what each variant ran, from its cells' configs (DPS score,
SML partition and K, the regime keys where its variants differ: variants.py); the paper's gain
stands beside a shipped task of an area the paper measured only (variants.paper_area, as the plots).
Cells without eval.jsonl (older runs) are paired by seed only. A cell's family and its prompts'
clusters are what it recorded (summary.json's `task_record`), so the table, the plots and the
notebook compute the same statistics wherever they run; only for older cells does the registry
supply them, and an unregistered task then stops the table with one line naming the fix.
Every further comparison the plan declares (design.json or the preset's) is computed too, such as a
row against another base's row (`vs` "grpo +DACA" for wd1's baseline): paired the same way, adjusted
in its family, and printed in the last section, "across bases and arms" (`extra_rows`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ...jsonl import column_means, parse_jsonl
from . import cellstore
from .accuracy import checked_accuracy
from .budgets import LEDGER, budget_rows, by_start, ledger_columns, starts_line
from .cellstore import START, eval_records, locate
from .clusters import cluster_keys, recorded, registered
from .design import ASIDE, PRIMARY, SECONDARY, block_family, declared, design_line, family_of, read_design, reference
from .stats import adjust
from .variants import PAPER_GAIN_PP, REGIME_KEYS, VARIANT_ORDER, paper_area, regime, variants_lines  # noqa: F401


def paper_gain(family: str) -> float:
    """The paper's "up to" gain for a family (a setting's block, "json [prefix]": its family's)."""
    return PAPER_GAIN_PP.get(block_family(family), math.nan)


def load_results(folder: str | Path) -> pd.DataFrame:
    """One row per finished cell: its task, family, variant, base, seed, test accuracy, mean
    zero-variance group fraction and per-prompt rewards (id -> 0/1, None = unscorable). FOLDER: the
    cells, packed or not (cellstore.cells)."""
    rows = []
    for cell in cellstore.cells(folder):
        if not cell.has("summary.json"):
            continue
        s = cell.json("summary.json")
        if "test_accuracy" not in s:
            continue
        axes = cell.json("axes.json") if cell.has("axes.json") else {}
        cfg = cell.json("config.json")
        record = s.get("task_record") or {}  # what the cell knows of its task (registry.task_record)
        family = record.get("family") or registered(cfg["train"]["task"], "its family", cell.where).family
        if "setting" in axes:  # a grid over one more axis (tiny-cache's rollout settings): a block per setting
            family = f"{family} [{axes['setting']}]"
        prompts = eval_records(cell) if cell.has("eval.jsonl") else None  # id -> 1/0/None
        metrics = parse_jsonl(cell.text("metrics.jsonl").encode("utf-8")) if cell.has("metrics.jsonl") else []
        m = column_means(metrics, ("zero_std_groups", "clip_frac", "clip_frac_any", "kl"))  # one read
        # the table's clip column is the share of ratios outside [1-eps, 1+eps] whatever the advantage's
        # sign: `clip_frac_any` since clip_frac became TRL's region mean; older cells logged it as clip_frac
        m["clip_frac"] = m["clip_frac_any"] if math.isfinite(m["clip_frac_any"]) else m["clip_frac"]
        row = {
            "cell": cell.name,
            "task": cfg["train"]["task"],
            "family": family,
            "base": cfg["loss"]["base"],
            "variant": axes.get("variant", _variant_of(cfg)),
            "seed": cfg["train"]["seed"],
            "start": axes.get("sft_start", 0),
            "test_accuracy": checked_accuracy(s["test_accuracy"], prompts, s.get("statuses"), str(cell)),
            "zero_std": m["zero_std_groups"],
            "clip_frac": m["clip_frac"],
            "kl": m["kl"],
            **{key: cfg[sec].get(name, default) for key, (sec, name, default) in REGIME_KEYS.items()},
            "prompts": prompts,
            "recorded": {
                **record.get("clusters", {}),
                **(recorded(cell.rows("eval.jsonl")) if cell.has("eval.jsonl") else {}),
            },
            "task_record": record or None,
            "config": cfg,
        }
        rows += budget_rows(row, cell, axes, s)  # one row per budget where the cell declares budgets
    return pd.DataFrame(rows)


def load_start(folder: str | Path) -> dict[str, dict]:
    """task -> per-prompt rewards of the RL start (the SFT model) on the grid's test set."""
    return {task: eval_records(c) for task, c in cellstore.starts(folder).items() if c.has("eval.jsonl")}


def _variant_of(cfg: dict) -> str:
    dps, k = cfg["dps"]["enabled"], cfg["sml"]["k"]
    return {(False, True): "baseline", (True, True): "+DPS", (False, False): "+SML", (True, False): "+DACA"}[
        (dps, k == 1)
    ]


def _units(frame: pd.DataFrame) -> dict[tuple, dict]:
    """(SFT start, seed) -> the cell's row: the unit a comparison pairs by (one start: the seed)."""
    return {(r.get("start", 0), r["seed"]): r for r in frame.to_dict("records")}


def _pair(a: pd.DataFrame, b: pd.DataFrame | dict) -> tuple[np.ndarray, list, list]:
    """(d, ids, starts): the (units, prompts) matrix of `paired`, the prompt ids of its columns ([]
    when it pairs accuracies only) and the SFT start of each row (budgets.by_start)."""
    a = _units(a)
    b_units = None if isinstance(b, dict) else _units(b)
    units = sorted(a if b_units is None else set(a) & set(b_units))
    rhs = {u: b if b_units is None else b_units[u]["prompts"] for u in units}
    starts = [u[0] for u in units]
    if all(a[u]["prompts"] is not None and rhs[u] is not None for u in units):
        ids = (
            set.intersection(
                *[
                    {i for i, r in a[u]["prompts"].items() if r is not None}
                    & {i for i, r in rhs[u].items() if r is not None}
                    for u in units
                ]
            )
            if units
            else set()
        )
        ids = sorted(ids)
        d = np.array([[100 * (a[u]["prompts"][i] - rhs[u][i]) for i in ids] for u in units])
        return d.reshape(len(units), len(ids)), ids, starts
    if b_units is None:
        return np.empty((0, 0)), [], []
    d = [[100 * (a[u]["test_accuracy"] - b_units[u]["test_accuracy"])] for u in units]
    return np.array(d).reshape(len(units), 1), [], starts


def paired(a: pd.DataFrame, b: pd.DataFrame | dict) -> np.ndarray:
    """(seeds, prompts) matrix of a - b in pp: a's cells by seed against b's cells of the same
    seed (or against one per-prompt dict, the RL start), over the prompts both scored. Without
    per-prompt results, a (seeds, 1) matrix of accuracy differences."""
    return _pair(a, b)[0]


def cluster_maps(df: pd.DataFrame, start: dict[str, dict] | None = None) -> dict[str, dict | None]:
    """task -> {prompt id: cluster key} (None where every prompt is its own cluster), from what
    eval.jsonl recorded and else from the task's samples (experiments/analysis/clusters.py)."""
    out = {}
    for task, g in df.groupby("task", sort=True):
        ids = set().union(*[set(p) for p in g["prompts"] if p is not None], set((start or {}).get(task, {})))
        known = {} if "recorded" not in g else {k: v for r in g["recorded"] for k, v in r.items()}
        configs = list(g["config"]) if "config" in g else []
        records = list(g["task_record"]) if "task_record" in g else []
        alone = records and all(r and r.get("cluster") is None for r in records) and not known  # recorded: none
        out[task] = cluster_keys(task, configs, ids, known) if configs and not alone else None
    return out


def comparisons(
    df: pd.DataFrame, start: dict[str, dict] | None = None, clusters: dict | None = None, planned: dict | None = None
):
    """Each row of the table in order: (common, variant, cells, vs, d, keys, starts), with `common` the row's
    base, family, task and paper gain, `cells` the variant's cells (None for the RL start's row),
    d its paired (seeds, prompts) matrix against `vs` (empty where there is no reference) and
    `keys` the cluster of each of d's prompts (None: each prompt its own), `starts` the SFT start of
    each of d's rows. Per base: each variant
    against its baseline, the baseline against the RL start; then every comparison PLANNED declares
    beyond those (another base's row, another reference: `extra_rows`), its vs "<base> <variant>"."""
    start = start or {}
    clusters = cluster_maps(df, start) if clusters is None else clusters
    for (base, family, task), g in df.groupby(["base", "family", "task"], sort=True):
        by_variant = {v: gv for v, gv in g.groupby("variant")}
        baseline = by_variant.get("baseline")
        common = {"base": base, "family": family, "task": task, "paper_gain_pp": paper_area(task, family)}
        if task in start:
            yield common, START, None, None, np.empty((0, 0)), None, []
        for variant in [v for v in VARIANT_ORDER if v in by_variant] + sorted(set(by_variant) - set(VARIANT_ORDER)):
            cells = by_variant[variant]
            ref, vs = (start.get(task), START) if variant == "baseline" else (baseline, "baseline")
            d, ids, starts = _pair(cells, ref) if ref is not None else (np.empty((0, 0)), [], [])
            keys = [clusters[task][i] for i in ids] if ids and clusters.get(task) else None
            yield common, variant, cells, vs, d, keys, starts
    yield from extra_rows(df, planned or {}, start, clusters)


def extra_rows(df: pd.DataFrame, planned: dict, start: dict[str, dict], clusters: dict):
    """The declared comparisons the per-base loop does not pair, as `comparisons` yields them: a
    variant against another base's row (a field baseline vs "grpo +DACA") or against a row of its
    own base other than its default reference. Paired by seed and prompt like every other row (the
    cells of different bases share seeds and test prompts); one without common seeds is left out."""
    seen = set()
    for c in planned.get(PRIMARY, []) + planned.get(SECONDARY, []):
        for (base, family, task), g in df.groupby(["base", "family", "task"], sort=True):
            if c.get("base", base) != base or c.get("task", task) != task:
                continue
            ref_base, ref_variant = reference(c["vs"], base)
            default = START if c["variant"] == "baseline" else "baseline"
            key = (base, task, c["variant"], ref_base, ref_variant)
            if (ref_base, ref_variant) in ((base, default), (base, c["variant"])) or key in seen:
                continue
            cells = g[g["variant"] == c["variant"]]
            ref = (
                start.get(task)
                if ref_variant == START
                else df[(df["base"] == ref_base) & (df["task"] == task) & (df["variant"] == ref_variant)]
            )
            if cells.empty or ref is None or len(ref) == 0:
                continue
            d, ids, starts = _pair(cells, ref)
            if not d.size:
                continue
            seen.add(key)
            keys = [clusters[task][i] for i in ids] if ids and clusters.get(task) else None
            common = {"base": base, "family": family, "task": task, "paper_gain_pp": paper_area(task, family)}
            yield common, c["variant"], cells, f"{ref_base} {ref_variant}", d, keys, starts


def build_table(
    df: pd.DataFrame,
    start: dict[str, dict] | None = None,
    planned: dict | None = None,
    alpha: float = 0.05,
    multiplicity: str = "holm",
    clusters: dict | None = None,
) -> pd.DataFrame:
    """The ablation table, one row per (base, family, task, variant); see the module docstring.
    `planned`: the declared families (design.declared; default DEFAULT_COMPARISONS)."""
    planned = declared(None) if planned is None else planned
    out = []
    for common, variant, cells, vs, d, keys, starts in comparisons(df, start, clusters, planned):
        if cells is None:
            scored = [r for r in start[common["task"]].values() if r is not None]
            out.append(
                {
                    **common,
                    "variant": START,
                    "acc": 100 * float(np.mean(scored)) if scored else math.nan,
                    "seeds": 0,
                    "prompts": len(scored),
                }
            )
            continue
        row = {
            **common,
            "variant": variant,
            "acc": 100 * cells["test_accuracy"].mean(),
            "zero_std": cells["zero_std"].mean(),
            "seeds": len(cells),
            **(
                {"lr": cells["lr"].iloc[0], "clip_frac": 100 * cells["clip_frac"].mean(), "kl": cells["kl"].mean()}
                if "lr" in cells
                else {}
            ),
            **ledger_columns(cells),
        }
        if d.size:
            c = by_start(d, starts, clusters=keys)
            row.update(
                vs=vs,
                prompts=c.prompts,
                clusters=c.clusters,
                delta_pp=c.mean,
                lo=c.lo,
                hi=c.hi,
                MDE=c.mde,
                p=c.p,
                seed_dropped=c.seed_dropped,
                seeds_ok=c.seeds_exclude_zero,
                seeds_lo=c.mean - c.t_half,
                seeds_hi=c.mean + c.t_half,
                t_half=c.t_half,
                boot_lo=c.boot_lo,
                boot_hi=c.boot_hi,
                se=c.se,
                df=c.df,
            )
            row["plan"] = family_of(row, planned)
        out.append(row)
    table = pd.DataFrame(out)
    if "plan" in table:
        table["p_adj"] = math.nan
        for fam in (PRIMARY, SECONDARY):
            rows = table.index[table["plan"] == fam]
            table.loc[rows, "p_adj"] = adjust(table.loc[rows, "p"], multiplicity)
        # significance by the adjusted p only; never a post-hoc row, never a df the seeds cannot support
        table["sig"] = [
            bool(r["plan"] in (PRIMARY, SECONDARY) and r["p_adj"] < alpha and (not r["seed_dropped"] or r["seeds_ok"]))
            if isinstance(r["plan"], str)
            else math.nan
            for _, r in table.iterrows()
        ]
    table.attrs.update(
        regime=regime(df),
        variants=variants_lines(df),
        alpha=alpha,
        multiplicity=multiplicity,
        starts=starts_line(df),
        n_starts=int(df["start"].nunique()) if "start" in df else 1,
    )
    return table


CSV_COLUMNS = [
    "base",
    "family",
    "task",
    "variant",
    "acc",
    "vs",
    "delta_pp",
    "lo",
    "hi",
    "MDE",
    "p",
    "p_adj",
    "plan",
    "sig",
    "seeds",
    "prompts",
    "clusters",
    "se",
    "df",
    "seed_dropped",
    "seeds_lo",
    "seeds_hi",
    "t_half",
    "boot_lo",
    "boot_hi",
    "zero_std",
    "lr",
    "clip_frac",
    "kl",
    "paper_gain_pp",
]


def union(folders: list) -> tuple[pd.DataFrame, dict[str, dict]]:
    """(cells, RL starts) of FOLDERS read as one run: each task's cells and its start from the last
    folder that has the task (a supplement that reran a family, with more seeds or steps, replaces
    it), e.g. an exploratory run and its two supplements."""
    frames, start = {}, {}
    for folder in folders:
        cells, _ = locate(folder)
        df = load_results(cells)
        if df.empty:
            raise ConfigError(
                f"{folder}: no finished cells (*/summary.json) in it or in its cells/ folder; "
                "give a grid's output folder or a preset's (the one reproduce printed)"
            )
        here = load_start(cells)
        if len(folders) == 1:
            return df, here
        for task, g in df.groupby("task", sort=False):
            frames[task] = g
            if task in here:
                start[task] = here[task]
    return pd.concat(list(frames.values()), ignore_index=True), start


def load_table(folder: str | Path | list, seeds: dict | None = None) -> pd.DataFrame:
    """The table of a grid's or a preset's output folder (see `locate`), in CSV_COLUMNS, with its
    design line in attrs['design']. SEEDS: task -> the seeds to keep (others' cells are left out).
    A list of folders is one run assembled from parts (`union`)."""
    folders = folder if isinstance(folder, list) else [folder]
    df, start = union(folders)
    if seeds is not None:
        df = df[[s in seeds.get(t, ()) for t, s in zip(df["task"], df["seed"])]].reset_index(drop=True)
    _, out = locate(folders[0])
    design = read_design(out)
    meta = json.loads((out / "config.json").read_text()) if (out / "config.json").is_file() else {}
    spec = meta.get("preset_spec") if isinstance(meta.get("preset_spec"), dict) else None
    kw = {"alpha": design["alpha"], "multiplicity": design["multiplicity"]} if design else {}
    built = build_table(df, start, declared(design, spec), **kw)
    table = built.reindex(columns=CSV_COLUMNS + [c for c in LEDGER if c in built])  # the ledger where cells have one
    table.attrs.update(built.attrs)
    aside = json.loads((out / ASIDE).read_text()) if design is None and (out / ASIDE).is_file() else None
    table.attrs.update(design=design_line(design, list(df["config"]), out.name, aside, meta.get("preset")))
    return table

"""Ablation results: load finished cells and build the table researchers read.

    daca-bench table results/grid            # writes table.md, table.csv, table.tex beside the cells
    daca-bench table results/tiny-quick      # a preset's output folder: reads cells/, writes beside it
    daca-bench table RUN --against results/tiny   # and the replication report (experiments/replicate.py)
    daca-bench table RUN --plan 6     # and plan.md: the seeds / prompts for an MDE of 6 pp (experiments/plan.py)

Every cell of a grid is scored on its family's one fixed test set (`train.test_seed`) and keeps
its per-prompt results (`eval.jsonl`), so each comparison is paired by seed AND by prompt. The
table has one row per (base, task, variant):

- `acc`: test accuracy (%, exact match), mean over seeds;
- `delta_pp` with `lo`/`hi`: the paired difference against the row's reference (`vs`: the
  baseline for a variant; the RL start, i.e. the SFT model on the same prompts, for the
  baseline), with its 95 % mixed-model interval over seeds x prompts (experiments/stats.py);
- `MDE`: the smallest true difference this comparison would detect with 80 % power at a
  two-sided 5 % level, from the measured spread; `sig` marks an interval that excludes 0;
- `t_half` (the plain t-interval over per-seed differences), `boot_lo`/`boot_hi` (the crossed
  bootstrap), `zero_std` (the mean fraction of groups whose rewards had no spread) in the CSV.
Cells without eval.jsonl (older runs) are paired by seed only.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..jsonl import column_means
from .stats import compare

PAPER_GAIN_PP = {"math": 5.6, "code": 7.4, "constraint": 36.3, "json": 5.9}  # the abstract's "up to" figures
VARIANT_ORDER = ["baseline", "+DPS", "+SML", "+DACA", "+DPS-random"]
START = "start"  # results/<grid>/start/<task>/eval.jsonl: the RL start on the same test set


def locate(folder: str | Path) -> tuple[Path, Path]:
    """(where the cells are, where their tables go) for what a user names: a grid's output folder
    (the cells inside it; tables there too), a preset's output folder (it holds cells/; tables
    beside cells/) or that cells/ folder itself (tables beside it, in its parent)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder; give a grid's output folder or a preset's (it holds cells/)")
    if (folder / "cells").is_dir() and not any(folder.glob("*/summary.json")):
        return folder / "cells", folder
    if folder.name == "cells":
        return folder, folder.parent
    return folder, folder


def load_results(folder: str | Path) -> pd.DataFrame:
    """One row per finished cell: its task, family, variant, base, seed, test accuracy, mean
    zero-variance group fraction and per-prompt rewards (id -> 0/1, None = unscorable)."""
    from ..registry import task_spec
    from ..rl.evaluate import read_eval_records

    rows = []
    for summary in sorted(Path(folder).glob("*/summary.json")):
        s = json.loads(summary.read_text())
        if "test_accuracy" not in s:
            continue
        cell = summary.parent
        axes = json.loads((cell / "axes.json").read_text()) if (cell / "axes.json").exists() else {}
        cfg = json.loads((cell / "config.json").read_text())
        try:
            family = task_spec(cfg["train"]["task"]).family
        except KeyError:
            family = axes.get("family", "?")
        m = column_means(cell / "metrics.jsonl", ("zero_std_groups", "clip_frac", "kl"))  # one read
        rows.append({"cell": cell.name, "task": cfg["train"]["task"], "family": family,
                     "base": cfg["loss"]["base"], "variant": axes.get("variant", _variant_of(cfg)),
                     "seed": cfg["train"]["seed"], "test_accuracy": s["test_accuracy"],
                     "zero_std": m["zero_std_groups"], "clip_frac": m["clip_frac"], "kl": m["kl"],
                     **{key: cfg[sec].get(name, default) for key, (sec, name, default) in REGIME_KEYS.items()},
                     "prompts": read_eval_records(cell / "eval.jsonl") if (cell / "eval.jsonl").exists() else None})
    return pd.DataFrame(rows)


# the knobs that say which regime a cell trained in: table column -> (config section, key, default)
REGIME_KEYS = {"lr": ("train", "lr", None), "mu": ("train", "mu", 1), "beta": ("loss", "beta", 0.0),
               "epsilon": ("loss", "epsilon", None), "p_mask_prompt": ("sml", "p_mask_prompt", 0.0),
               "split": ("train", "eval_split", "test")}


def regime(df: pd.DataFrame) -> str:
    """One line: the values of REGIME_KEYS over the grid's cells (a list where cells differ)."""
    parts = []
    for key in REGIME_KEYS:
        if key in df:
            vals = sorted({v for v in df[key] if v is not None}, key=str)
            parts.append(f"{key} {'/'.join(f'{v:g}' if isinstance(v, float) else str(v) for v in vals)}")
    return "Regime: " + ", ".join(parts) + " (clip_frac % and kl: per-cell means over steps, in the CSV)." if parts else ""


def load_start(folder: str | Path) -> dict[str, dict]:
    """task -> per-prompt rewards of the RL start (the SFT model) on the grid's test set."""
    from ..rl.evaluate import read_eval_records

    return {p.parent.name: read_eval_records(p) for p in sorted((Path(folder) / START).glob("*/eval.jsonl"))}


def _variant_of(cfg: dict) -> str:
    dps, k = cfg["dps"]["enabled"], cfg["sml"]["k"]
    return {(False, True): "baseline", (True, True): "+DPS", (False, False): "+SML", (True, False): "+DACA"}[(dps, k == 1)]


def paired(a: pd.DataFrame, b: pd.DataFrame | dict) -> np.ndarray:
    """(seeds, prompts) matrix of a - b in pp: a's cells by seed against b's cells of the same
    seed (or against one per-prompt dict, the RL start), over the prompts both scored. Without
    per-prompt results, a (seeds, 1) matrix of accuracy differences."""
    a = a.set_index("seed")
    seeds = sorted(a.index if isinstance(b, dict) else set(a.index) & set(b["seed"]))
    if isinstance(b, dict):
        rhs = {s: b for s in seeds}
    else:
        rhs = b.set_index("seed")["prompts"].to_dict()
    if all(a.loc[s, "prompts"] is not None and rhs[s] is not None for s in seeds):
        ids = set.intersection(*[{i for i, r in a.loc[s, "prompts"].items() if r is not None} &
                                 {i for i, r in rhs[s].items() if r is not None} for s in seeds]) if seeds else set()
        ids = sorted(ids)
        return np.array([[100 * (a.loc[s, "prompts"][i] - rhs[s][i]) for i in ids] for s in seeds]).reshape(len(seeds), len(ids))
    if isinstance(b, dict):
        return np.empty((0, 0))
    acc = b.set_index("seed")["test_accuracy"]
    return np.array([[100 * (a.loc[s, "test_accuracy"] - acc[s])] for s in seeds]).reshape(len(seeds), 1)


def comparisons(df: pd.DataFrame, start: dict[str, dict] | None = None):
    """Each row of the table in order: (common, variant, cells, vs, d), with `common` the row's
    base, family, task and paper gain, `cells` the variant's cells (None for the RL start's row)
    and d its paired (seeds, prompts) matrix against `vs` (empty where there is no reference)."""
    start = start or {}
    for (base, family, task), g in df.groupby(["base", "family", "task"], sort=True):
        by_variant = {v: gv for v, gv in g.groupby("variant")}
        baseline = by_variant.get("baseline")
        common = {"base": base, "family": family, "task": task, "paper_gain_pp": PAPER_GAIN_PP.get(family, math.nan)}
        if task in start:
            yield common, START, None, None, np.empty((0, 0))
        for variant in [v for v in VARIANT_ORDER if v in by_variant] + sorted(set(by_variant) - set(VARIANT_ORDER)):
            cells = by_variant[variant]
            ref, vs = (start.get(task), START) if variant == "baseline" else (baseline, "baseline")
            yield common, variant, cells, vs, (paired(cells, ref) if ref is not None else np.empty((0, 0)))


def build_table(df: pd.DataFrame, start: dict[str, dict] | None = None) -> pd.DataFrame:
    """The ablation table, one row per (base, family, task, variant); see the module docstring."""
    out = []
    for common, variant, cells, vs, d in comparisons(df, start):
        if cells is None:
            scored = [r for r in start[common["task"]].values() if r is not None]
            out.append({**common, "variant": START, "acc": 100 * float(np.mean(scored)) if scored else math.nan,
                        "seeds": 0, "prompts": len(scored)})
            continue
        row = {**common, "variant": variant, "acc": 100 * cells["test_accuracy"].mean(),
               "zero_std": cells["zero_std"].mean(), "seeds": len(cells),
               **({"lr": cells["lr"].iloc[0], "clip_frac": 100 * cells["clip_frac"].mean(),
                   "kl": cells["kl"].mean()} if "lr" in cells else {})}
        if d.size:
            c = compare(d)
            row.update(vs=vs, prompts=c.prompts, delta_pp=c.mean, lo=c.lo, hi=c.hi, MDE=c.mde,
                       sig=c.excludes_zero, t_half=c.t_half, boot_lo=c.boot_lo, boot_hi=c.boot_hi, se=c.se, df=c.df)
        out.append(row)
    table = pd.DataFrame(out)
    table.attrs["regime"] = regime(df)
    return table


def _num(x, fmt: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


FOOTER = ("Accuracy: exact match on the family's one fixed test set, mean over seeds. Δpp: paired by seed and by "
          "prompt against `vs` (a variant against the baseline; the baseline against its RL start, the SFT model "
          "on the same prompts). 95 % CI: mixed-model interval, mean ± t(df) x SE with SE from the seed x prompt "
          "variance components (Satterthwaite df); * = the interval excludes 0. MDE: the smallest true difference "
          "this comparison detects with 80 % power at two-sided 5 %, (t(0.975, df) + t(0.80, df)) x SE; a Δ "
          "smaller than its MDE is not evidence of no effect. CSV: the plain t-interval over per-seed differences "
          "(t_half), the crossed bootstrap interval (boot_lo, boot_hi) and the zero-variance group fraction "
          "(zero_std). Paper: the abstract's headline gain for the family (LLaDA-8B scale, not this model).")


def to_markdown(table: pd.DataFrame) -> str:
    lines = []
    for base, t in table.groupby("base", sort=True):
        head = ["family", "task", "variant", "acc %", "Δpp", "vs", "95 % CI", "MDE", "zero-std %", "paper (up to)"]
        lines += [f"### base method: {base}", "", "| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * 7]
        for _, r in t.iterrows():
            has = "delta_pp" in r and not (isinstance(r.get("delta_pp"), float) and math.isnan(r["delta_pp"]))
            sig = r.get("sig")
            marked = isinstance(sig, (bool, np.bool_)) and bool(sig)  # NaN (no comparison) is no mark
            delta = (_num(r["delta_pp"], "+.1f") + (" *" if marked else "")) if has else "-"
            ci = f"[{_num(r['lo'], '+.1f')}, {_num(r['hi'], '+.1f')}]" if has else "-"
            paper = f"+{r['paper_gain_pp']:.1f}" if r["variant"] == "baseline" and not math.isnan(r["paper_gain_pp"]) else ""
            cells = [r["family"], r["task"], r["variant"], _num(r["acc"], ".1f"), delta, r.get("vs") if has else "",
                     ci, _num(r.get("MDE"), ".1f") if has else "-", _num(100 * r.get("zero_std", math.nan), ".0f"), paper]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        lines.append("")
    seeds = table.loc[table["variant"] != START, "seeds"]
    prompts = table.loc[table["variant"] != START, "prompts"].dropna() if "prompts" in table else pd.Series(dtype=float)
    lines.append(f"{_count(seeds, 'seed', 'per cell')}, {_count(prompts, 'paired test prompt', 'per comparison')}. "
                 + FOOTER + (" " + table.attrs["regime"] if table.attrs.get("regime") else ""))
    return "\n".join(lines) + "\n"


def _count(values: pd.Series, noun: str, per: str) -> str:
    """'8 seeds per cell', '1 seed per cell', '2 to 8 seeds per cell' (a range only where they differ)."""
    lo, hi = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    plural = "" if hi == 1 else "s"
    return f"{lo}{'' if lo == hi else f' to {hi}'} {noun}{plural} {per}"


CSV_COLUMNS = ["base", "family", "task", "variant", "acc", "vs", "delta_pp", "lo", "hi", "MDE", "sig", "seeds",
               "prompts", "se", "df", "t_half", "boot_lo", "boot_hi", "zero_std", "lr", "clip_frac", "kl", "paper_gain_pp"]


def to_csv(table: pd.DataFrame) -> str:
    return table.to_csv(index=False, float_format="%.4g")


def load_table(folder: str | Path) -> pd.DataFrame:
    """The table of a grid's or a preset's output folder (see `locate`), in CSV_COLUMNS."""
    cells, _ = locate(folder)
    df = load_results(cells)
    if df.empty:
        raise ConfigError(f"{folder}: no finished cells (*/summary.json) in it or in its cells/ folder; "
                          "give a grid's output folder or a preset's (the one reproduce printed)")
    return build_table(df, load_start(cells)).reindex(columns=CSV_COLUMNS)


def write_tables(folder: str | Path) -> tuple[pd.DataFrame, list[Path]]:
    """Build the table of FOLDER's cells and write table.md/.csv/.tex where `locate` says."""
    table = load_table(folder)
    _, out = locate(folder)
    paths = [out / "table.md", out / "table.csv", out / "table.tex"]
    paths[0].write_text(to_markdown(table))
    paths[1].write_text(to_csv(table))
    tex = table[["family", "task", "variant", "acc", "vs", "delta_pp", "lo", "hi", "MDE"]]
    paths[2].write_text(tex.to_latex(index=False, float_format="%.1f", na_rep="-"))
    return table, paths


# ---- CLI: `daca-bench table` --------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("results", help="a grid's output folder (one sub-folder per cell), or a preset's (it holds "
                                        "cells/; the tables go beside cells/)")
    parser.add_argument("--against", metavar="REFERENCE", default=None,
                        help="also compare with another run's cells (e.g. results/tiny): both tables side by side, "
                             "per comparison the difference, mutual interval coverage, sign and significance, a verdict")
    parser.add_argument("--plan", metavar="PP", type=float, default=None,
                        help="also write plan.md: for each comparison, the seeds or test prompts that would bring its "
                             "MDE to PP percentage points, from the spread this run measured (experiments/plan.py)")


def run(args) -> int:
    table, paths = write_tables(args.results)
    print(paths[0].read_text())
    if args.against:
        from .replicate import write_report

        text, more = write_report(table, args.results, args.against)
        print(text)
        paths += more
    if args.plan is not None:
        from .plan import write_plan

        text, path = write_plan(args.results, args.plan)
        print(text)
        paths.append(path)
    print("wrote " + ", ".join(map(str, paths)))
    return 0

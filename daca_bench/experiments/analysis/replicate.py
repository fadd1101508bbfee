"""Two runs compared, the replication report's numbers: did a re-run reproduce a committed table?
(The report's verdict, Markdown and files: replication.py.)

    daca-bench table RUN --against results/tiny     # RUN/replication.md and .csv beside RUN's tables
    daca-bench table RUN --against A --against B    # several independent runs: pooled, with heterogeneity

Both tables are built the same way (results.py) from their cells. For every row present in
both (base, task, variant) the report puts the two side by side and tests the one thing a
replication is about, whether the two runs' estimates differ:

- `diff_pp` with `diff_lo`/`diff_hi` and `diff_p`: this run's Δpp minus the reference's, its 95 %
  interval and p, SE = sqrt(se_here^2 + se_ref^2) (each table's own SE) on a Welch-Satterthwaite t;
- `diff_p_adj`: that p adjusted (Holm) within each family of the table, for `differs` only;
  `diff_mde`: the difference's MDE; `tost_p`: two one-sided tests against the equivalence margin
  (design.json `equivalence_margin_pp` or `--margin`; agreement.py);
- `pooled_pp` with `pooled_lo`/`pooled_hi`: the random-effects estimate of independent runs (no
  shared seed) with its Hartung-Knapp t interval on runs - 1 df; with more than one reference also
  Cochran's `Q` (`Q_p`), the DerSimonian-Laird `tau2` and `I2`;
- `status`: `identical`, `differs` (adjusted p below alpha against any reference), `equivalent
  within ±m` (TOST p below alpha against every reference), else `no difference detected (difference
  MDE x pp)`, which is no evidence of agreement; the RL start's row is judged on the prompt ids both
  runs scored (`different test set` where none); `only here` / `only in reference`.

The two tables' stars stay each run's own reading and are never compared.

`verdict` (replication.py) sums these up in one line. Runs with different seeds are judged on the
seeds both share (`shared_seeds`: each table rebuilt from those cells alone, and the report says so;
such runs are not independent, so no pooled estimate), or whole when they share none; a reference
that is missing or holds no finished cell is refused before any table is written (`check_reference`).
"""

from __future__ import annotations

import math
from functools import reduce
from pathlib import Path

import pandas as pd

from ...errors import ConfigError
from . import cellstore
from .agreement import difference, hartung_knapp, pool, tost_p
from .cellstore import START, locate
from .design import across
from .stats import adjust, mde
from .variants import VARIANT_ORDER

KEYS = ["base", "family", "task", "variant"]
SIDE = ["acc", "vs", "delta_pp", "lo", "hi", "se", "df", "MDE", "sig", "plan", "seeds", "prompts"]
DIFF = ["diff_pp", "diff_lo", "diff_hi", "diff_se", "diff_df", "diff_p", "diff_p_adj", "diff_mde", "tost_p"]
POOLED = ["pooled_pp", "pooled_lo", "pooled_hi", "pooled_se", "pooled_df"]
HETEROGENEITY = ["Q", "Q_p", "tau2", "I2", "re_pp", "re_lo", "re_hi"]


def _finite(x) -> bool:
    return x is not None and not isinstance(x, str) and not (isinstance(x, float) and math.isnan(x))


def _sides(n_refs: int) -> list[str]:
    """Column suffixes: 'ours', then 'ref' for the (first) reference and 'ref2', 'ref3', ... for more."""
    return ["ours", "ref", *(f"ref{j}" for j in range(2, n_refs + 1))]


def _dcol(col: str, j: int) -> str:
    """The difference column against reference j (1-based): diff_pp, diff_pp_2, ..."""
    return col if j == 1 else f"{col}_{j}"


def csv_columns(n_refs: int = 1) -> list[str]:
    sides = _sides(n_refs)
    return [
        *KEYS,
        *(f"{c}_{s}" for c in SIDE for s in sides),
        "acc_diff",
        *(_dcol(c, j) for j in range(1, n_refs + 1) for c in DIFF),
        *POOLED,
        *(HETEROGENEITY if n_refs > 1 else []),
        "start_shared",
        "start_agree",
        "status",
    ]


CSV_COLUMNS = csv_columns(1)


def compare_tables(
    ours: pd.DataFrame,
    ref: pd.DataFrame,
    *more: pd.DataFrame,
    alpha: float | None = None,
    multiplicity: str | None = None,
    independent: bool = True,
    margin: float | None = None,
    starts: dict | None = None,
) -> pd.DataFrame:
    """One row per (base, family, task, variant[, cross-base vs]) of any table: each side (`*_ours`,
    `*_ref`, `*_ref2`, ...), the difference against each reference with its interval and (adjusted)
    p, the pooled estimate where the runs are INDEPENDENT (no shared seed), heterogeneity with more
    than one reference, and a status. ALPHA and MULTIPLICITY: OURS's table's (attrs), else 0.05 and
    Holm. MARGIN (pp): the equivalence margin of the TOST; STARTS: task -> start_agreement of the two
    runs' RL starts (the start row is then judged on the prompts both scored)."""
    alpha = float(ours.attrs.get("alpha", 0.05) if alpha is None else alpha)
    method = str(ours.attrs.get("multiplicity", "holm") if multiplicity is None else multiplicity)
    tables = [ours, ref, *more]
    sides = _sides(len(tables) - 1)

    def keyed(t: pd.DataFrame, side: str) -> pd.DataFrame:
        # a row against another base's row ("wd1 baseline" vs "grpo +DACA") is matched by its vs too
        t = t.reindex(columns=KEYS + SIDE)
        t = t.assign(_ref=t["vs"].map(lambda v: v if across(v) else ""))
        return t.rename(columns={c: f"{c}_{side}" for c in SIDE})

    merged = reduce(
        lambda a, b: a.merge(b, on=[*KEYS, "_ref"], how="outer"), [keyed(t, s) for t, s in zip(tables, sides)]
    ).drop(columns="_ref")
    rows, tests = [], []  # tests: (row index, reference j, family, p)
    for i, (_, r) in enumerate(merged.iterrows()):
        row = r.to_dict()
        row["acc_diff"] = r["acc_ours"] - r["acc_ref"] if _finite(r["acc_ours"]) and _finite(r["acc_ref"]) else math.nan
        here = _finite(r["delta_pp_ours"])
        there = [j for j, s in enumerate(sides[1:], 1) if _finite(r[f"delta_pp_{s}"])]
        if not (here and there):
            both = _finite(r["acc_ours"]) and _finite(r["acc_ref"])
            anywhere = any(_finite(r[f"acc_{s}"]) for s in sides[1:])
            shared = (starts or {}).get(r["task"]) if r["variant"] == START else None
            if both and shared is not None:
                n, agree = shared[0], shared[1]
                row.update(start_shared=n, start_agree=agree)
                row["status"] = (
                    "different test set"
                    if n == 0
                    else f"identical on {n} shared prompts"
                    if agree == n
                    else f"differs on {n - agree} of {n} shared prompts"
                )
                rows.append(row)
                continue
            row["status"] = (
                ("identical" if r["acc_ours"] == r["acc_ref"] else "accuracy differs")
                if both
                else "only here"
                if here or (_finite(r["acc_ours"]) and not anywhere)
                else "only in reference"
                if anywhere
                else ""
            )
            rows.append(row)
            continue
        same = []
        fam = next((r[f"plan_{s}"] for s in sides if isinstance(r[f"plan_{s}"], str)), "other")
        for j in there:
            s = sides[j]
            d = difference(
                r["delta_pp_ours"], r["se_ours"], r["df_ours"], r[f"delta_pp_{s}"], r[f"se_{s}"], r[f"df_{s}"]
            )
            row.update(
                {
                    _dcol("diff_pp", j): d.diff,
                    _dcol("diff_lo", j): d.lo,
                    _dcol("diff_hi", j): d.hi,
                    _dcol("diff_se", j): d.se,
                    _dcol("diff_df", j): d.df,
                    _dcol("diff_p", j): d.p,
                    _dcol("diff_mde", j): float(mde(d.se, d.df)) if math.isfinite(d.df) and d.se > 0 else math.nan,
                    _dcol("tost_p", j): tost_p(d.diff, d.se, d.df, margin or 0.0),
                }
            )
            identical = all(r[f"{c}_ours"] == r[f"{c}_{s}"] for c in ("delta_pp", "lo", "hi"))
            same.append(identical)
            if identical:  # the same cells: nothing to test (an interval from two runs' noise would mislead)
                row.update({_dcol(c, j): math.nan for c in ("diff_lo", "diff_hi", "diff_p", "diff_mde", "tost_p")})
            elif math.isfinite(d.p):
                tests.append((i, j, fam, d.p))
        if independent:
            runs = ["ours", *(sides[j] for j in there)]
            x, se = [r[f"delta_pp_{s}"] for s in runs], [r[f"se_{s}"] for s in runs]
            hk = hartung_knapp(x, se)  # random effects, a t on runs - 1 df (agreement.py)
            row.update(
                pooled_pp=hk["mean"], pooled_lo=hk["lo"], pooled_hi=hk["hi"], pooled_se=hk["se"], pooled_df=hk["df"]
            )
            if len(sides) > 2:
                pl = pool(x, se, [r[f"df_{s}"] for s in runs])
                row.update(Q=pl.q, Q_p=pl.q_p, tau2=pl.tau2, I2=pl.i2, re_pp=hk["mean"], re_lo=hk["lo"], re_hi=hk["hi"])
        row["status"] = "identical" if all(same) else ""
        rows.append(row)
    for fam in dict.fromkeys(t[2] for t in tests):  # the table's families, each adjusted on its own
        group = [t for t in tests if t[2] == fam]
        for (i, j, _, _), p in zip(group, adjust([t[3] for t in group], method)):
            rows[i][_dcol("diff_p_adj", j)] = p
    for row in rows:
        if row["status"] == "":
            adj = [row.get(_dcol("diff_p_adj", j), math.nan) for j in range(1, len(sides))]
            js = range(1, len(sides))
            if any(_finite(p) for p in adj) or any(_finite(row.get(_dcol("diff_pp", j))) for j in js):
                tost = [row.get(_dcol("tost_p", j), math.nan) for j in js if _finite(row.get(_dcol("diff_pp", j)))]
                mdes = [row.get(_dcol("diff_mde", j)) for j in js if _finite(row.get(_dcol("diff_mde", j)))]
                row["status"] = (
                    "differs"
                    if any(_finite(p) and p < alpha for p in adj)
                    else f"equivalent within ±{margin:g}"
                    if tost and all(_finite(p) and p < alpha for p in tost)
                    else f"no difference detected (difference MDE {max(mdes):.1f} pp)"
                    if mdes
                    else "no spread"
                )
    out = pd.DataFrame(rows)
    if not out.empty:
        order = {v: i for i, v in enumerate([START, *VARIANT_ORDER])}
        rank = out["variant"].map(lambda v: order.get(v, len(order)))
        out = (
            out.assign(_rank=rank)
            .sort_values(["base", "family", "task", "_rank", "variant"])
            .drop(columns="_rank")
            .reset_index(drop=True)
        )
    out = out.reindex(columns=csv_columns(len(sides) - 1))
    out.attrs.update(
        alpha=alpha, multiplicity=method, references=len(sides) - 1, independent=independent, margin=margin
    )
    return out


def _runs(ref) -> list:
    """A flat list of the folders REF names (a folder, a run in parts, or several runs)."""
    if isinstance(ref, (list, tuple)):
        return [f for one in ref for f in _runs(one)]
    return [ref]


def seeds_of(folder: str | Path | list) -> dict[str, set]:
    """task -> the seeds of FOLDER's finished cells (from their config.json; no eval read); for a list
    of folders, each task's from the last folder that has it (results.union)."""
    out: dict[str, set] = {}
    for one in folder if isinstance(folder, list) else [folder]:
        cells, _ = locate(one)
        here: dict[str, set] = {}
        for cell in (c for c in cellstore.cells(cells) if c.has("summary.json")):
            cfg = cell.json("config.json")
            here.setdefault(cfg["train"]["task"], set()).add(cfg["train"]["seed"])
        out.update(here)
    return out


def check_reference(ref: str | Path | list) -> None:
    """Refuse (one line) a reference that is missing or holds no finished cell (each, for a list, or
    a list of runs in parts)."""
    for one in _runs(ref):
        if not seeds_of(one):
            raise ConfigError(
                f"--against {one}: no finished cells (*/summary.json) in it or in its cells/ folder; "
                "give the folder of a finished run (e.g. results/tiny)"
            )


def shared_seeds(ours: str | Path, ref: str | Path | list) -> tuple[dict | None, str]:
    """(task -> seeds to judge on, a sentence saying so): None where both runs have the same seeds, or
    none in common (an independent replication: each table whole, on its own seeds)."""
    a, b = seeds_of(ours), seeds_of(ref)
    if a == b:
        return None, ""
    shared = {t: a[t] & b[t] for t in sorted(a.keys() & b.keys()) if a[t] & b[t]}
    show = lambda s: ",".join(map(str, sorted(s)))  # noqa: E731
    if not shared:
        return None, (
            "Independent replication: the two runs share no seed (here "
            + "; ".join(f"{t} {show(s)}" for t, s in sorted(a.items()))
            + "; reference "
            + "; ".join(f"{t} {show(s)}" for t, s in sorted(b.items()))
            + "), so each table is built from all its own cells "
            "and each interval is its own run's: the question is whether a fresh run's estimates differ from the "
            "reference's by more than both runs' noise, not whether it repeats the numbers."
        )
    return shared, (
        "Judged on the seeds both runs share ("
        + "; ".join(f"{t} {show(s)}" for t, s in shared.items())
        + "): both tables rebuilt from those cells alone, so their intervals are those of that many seeds."
    )

"""The replication report: did a re-run reproduce a committed table?

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

`verdict` sums these up in one line. Runs with different seeds are judged on the seeds both
share (each table rebuilt from those cells alone, and the report says so; such runs are not
independent, so no pooled estimate), or whole when they share none; a reference that is
missing or holds no finished cell is refused before any table is written (`check_reference`).
"""
from __future__ import annotations

import math
from functools import reduce
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ConfigError
from . import cellstore
from .design import across
from .results import START, VARIANT_ORDER, load_table, locate, num as _num
from .agreement import hartung_knapp, run_starts, shared_note, start_agreement, tost_p
from .stats import adjust, difference, mde, pool

KEYS = ["base", "family", "task", "variant"]
SIDE = ["acc", "vs", "delta_pp", "lo", "hi", "se", "df", "MDE", "sig", "plan", "seeds", "prompts"]
DIFF = ["diff_pp", "diff_lo", "diff_hi", "diff_se", "diff_df", "diff_p", "diff_p_adj", "diff_mde", "tost_p"]
POOLED = ["pooled_pp", "pooled_lo", "pooled_hi", "pooled_se", "pooled_df"]
HETEROGENEITY = ["Q", "Q_p", "tau2", "I2", "re_pp", "re_lo", "re_hi"]


def _finite(x) -> bool:
    return x is not None and not isinstance(x, str) and not (isinstance(x, float) and math.isnan(x))


def _flag(x) -> bool:
    return isinstance(x, (bool, np.bool_)) and bool(x)


def _sides(n_refs: int) -> list[str]:
    """Column suffixes: 'ours', then 'ref' for the (first) reference and 'ref2', 'ref3', ... for more."""
    return ["ours", "ref", *(f"ref{j}" for j in range(2, n_refs + 1))]


def _dcol(col: str, j: int) -> str:
    """The difference column against reference j (1-based): diff_pp, diff_pp_2, ..."""
    return col if j == 1 else f"{col}_{j}"


def csv_columns(n_refs: int = 1) -> list[str]:
    sides = _sides(n_refs)
    return [*KEYS, *(f"{c}_{s}" for c in SIDE for s in sides), "acc_diff",
            *(_dcol(c, j) for j in range(1, n_refs + 1) for c in DIFF), *POOLED,
            *(HETEROGENEITY if n_refs > 1 else []), "start_shared", "start_agree", "status"]


CSV_COLUMNS = csv_columns(1)


def compare_tables(ours: pd.DataFrame, ref: pd.DataFrame, *more: pd.DataFrame, alpha: float | None = None,
                   multiplicity: str | None = None, independent: bool = True, margin: float | None = None,
                   starts: dict | None = None) -> pd.DataFrame:
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

    merged = reduce(lambda a, b: a.merge(b, on=[*KEYS, "_ref"], how="outer"),
                    [keyed(t, s) for t, s in zip(tables, sides)]).drop(columns="_ref")
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
                row["status"] = "different test set" if n == 0 else f"identical on {n} shared prompts" if agree == n \
                    else f"differs on {n - agree} of {n} shared prompts"
                rows.append(row)
                continue
            row["status"] = ("identical" if r["acc_ours"] == r["acc_ref"] else "accuracy differs") if both else \
                "only here" if here or (_finite(r["acc_ours"]) and not anywhere) else \
                "only in reference" if anywhere else ""
            rows.append(row)
            continue
        same = []
        fam = next((r[f"plan_{s}"] for s in sides if isinstance(r[f"plan_{s}"], str)), "other")
        for j in there:
            s = sides[j]
            d = difference(r["delta_pp_ours"], r["se_ours"], r["df_ours"], r[f"delta_pp_{s}"], r[f"se_{s}"], r[f"df_{s}"])
            row.update({_dcol("diff_pp", j): d.diff, _dcol("diff_lo", j): d.lo, _dcol("diff_hi", j): d.hi,
                        _dcol("diff_se", j): d.se, _dcol("diff_df", j): d.df, _dcol("diff_p", j): d.p,
                        _dcol("diff_mde", j): float(mde(d.se, d.df)) if math.isfinite(d.df) and d.se > 0 else math.nan,
                        _dcol("tost_p", j): tost_p(d.diff, d.se, d.df, margin or 0.0)})
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
            row.update(pooled_pp=hk["mean"], pooled_lo=hk["lo"], pooled_hi=hk["hi"], pooled_se=hk["se"], pooled_df=hk["df"])
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
                row["status"] = "differs" if any(_finite(p) and p < alpha for p in adj) else \
                    f"equivalent within ±{margin:g}" if tost and all(_finite(p) and p < alpha for p in tost) else \
                    f"no difference detected (difference MDE {max(mdes):.1f} pp)" if mdes else "no spread"
    out = pd.DataFrame(rows)
    if not out.empty:
        order = {v: i for i, v in enumerate([START, *VARIANT_ORDER])}
        rank = out["variant"].map(lambda v: order.get(v, len(order)))
        out = out.assign(_rank=rank).sort_values(["base", "family", "task", "_rank", "variant"]) \
            .drop(columns="_rank").reset_index(drop=True)
    out = out.reindex(columns=csv_columns(len(sides) - 1))
    out.attrs.update(alpha=alpha, multiplicity=method, references=len(sides) - 1, independent=independent,
                     margin=margin)
    return out


def _name_row(r) -> str:
    return f"{r['task']} {r['variant']}"


def _p(x) -> str:
    return "-" if not _finite(x) else "<0.001" if x < 0.001 else f"{x:.3f}"


def _refs(report: pd.DataFrame) -> int:
    return int(report.attrs.get("references", sum(1 for c in report.columns if c.startswith("delta_pp_ref"))))


def _largest(done: pd.DataFrame, n_refs: int) -> tuple[pd.Series, int]:
    """The row and reference of the largest |difference|."""
    cols = [_dcol("diff_pp", j) for j in range(1, n_refs + 1)]
    sizes = done[cols].abs()
    flat = sizes.stack()
    (idx, col) = flat.idxmax()
    return done.loc[idx], cols.index(col) + 1


def verdict(report: pd.DataFrame) -> str:
    """One line: identical, replicated (no difference between the runs is significant), or which
    comparisons differ."""
    if report.empty or "diff_pp" not in report:
        return "Nothing to compare: the two tables share no comparison (check the task, base and variants)."
    n_refs = _refs(report)
    diffs = [_dcol("diff_pp", j) for j in range(1, n_refs + 1)]
    done = report[report[diffs].notna().any(axis=1)]
    if done.empty:
        return "Nothing to compare: the two tables share no comparison (check the task, base and variants)."
    n = len(done)
    alpha, method = report.attrs.get("alpha", 0.05), str(report.attrs.get("multiplicity", "holm"))
    rule = f"{method.capitalize()} within each family at alpha {alpha:g}" if method != "none" else f"alpha {alpha:g}"
    largest, j = _largest(done, n_refs)
    against = "" if n_refs == 1 else f" against reference {j}"
    size = (f"largest difference {largest[_dcol('diff_pp', j)]:+.1f} pp{against} ({_name_row(largest)}, "
            f"adj. p {_p(largest[_dcol('diff_p_adj', j)])})")
    missing = report[report["status"].isin(["only here", "only in reference"])]
    extra = f"; {len(missing)} row(s) in one table only" if len(missing) else ""
    for _, r in report[report["variant"] == START].iterrows():
        status = str(r["status"])
        if status == "different test set" or status.startswith(("differs on", "identical on", "accuracy differs")):
            extra += f"; the RL start of {r['task']}: {status}" if status != "accuracy differs" else \
                f"; the RL start of {r['task']} differs ({r['acc_ours']:.1f} % here, {r['acc_ref']:.1f} % in the reference)"
    if (done["status"] == "identical").all():
        return f"Identical: all {n} comparisons have the same estimate and interval as the reference{extra}."
    differs = done[done["status"] == "differs"]
    if differs.empty:
        margin = report.attrs.get("margin")
        equal = done["status"].astype(str).str.startswith(("equivalent", "identical")).sum()
        mdes = done[done["status"].astype(str).str.startswith("no difference")]
        if equal == n:
            return (f"Replicated: all {n} comparisons are equivalent within ±{margin:g} pp between the runs (two "
                    f"one-sided tests at alpha {alpha:g}); none differs ({rule}); {size}{extra}.")
        cols = [c for c in report.columns if c.startswith("diff_mde")]
        span = mdes[cols].max(axis=1) if len(mdes) else pd.Series(dtype=float)
        tost = (f"{equal} equivalent within ±{margin:g} pp (TOST), " if margin else
                "no equivalence margin declared (design.json equivalence_margin_pp or --margin), so none is shown "
                "equivalent; ")
        mde_span = f" (difference MDE {span.min():.1f}-{span.max():.1f} pp)" if len(span) else ""
        return (f"No difference detected: none of the {n} comparisons differs between the runs ({rule}); {tost}"
                f"{len(mdes)} with no difference detected, which is not evidence of equivalence{mde_span}; {size}{extra}.")

    def one(r) -> str:
        parts = []
        for k in range(1, n_refs + 1):
            p = r.get(_dcol("diff_p_adj", k))
            if _finite(p) and p < alpha:
                vs = "" if n_refs == 1 else f" vs reference {k}"
                parts.append(f"{r[_dcol('diff_pp', k)]:+.1f} [{r[_dcol('diff_lo', k)]:+.1f}, "
                             f"{r[_dcol('diff_hi', k)]:+.1f}]{vs}, adj. p {_p(p)}")
        return f"{_name_row(r)} {'; '.join(parts)}"

    return (f"Not replicated: {len(differs)} of {n} comparisons differ between the runs "
            f"({', '.join(one(r) for _, r in differs.iterrows())}; {rule}); {size}{extra}.")


def _delta(r, side: str) -> str:
    d = r[f"delta_pp_{side}"]
    if not _finite(d):
        return "-"
    mark = " *" if _flag(r[f"sig_{side}"]) else ""
    return f"{_num(d, '+.1f')}{mark} [{_num(r[f'lo_{side}'], '+.1f')}, {_num(r[f'hi_{side}'], '+.1f')}]"


def _interval(r, mean: str, lo: str, hi: str) -> str:
    if not _finite(r.get(mean)):
        return "-"
    if not _finite(r.get(lo)):
        return _num(r[mean], "+.1f")
    return f"{_num(r[mean], '+.1f')} [{_num(r[lo], '+.1f')}, {_num(r[hi], '+.1f')}]"


def _diff(r, j: int, side: str) -> str:
    if _finite(r.get(_dcol("diff_pp", j))):
        return _interval(r, _dcol("diff_pp", j), _dcol("diff_lo", j), _dcol("diff_hi", j))
    acc = r.get(f"acc_{side}")
    return f"acc {_num(r['acc_ours'] - acc, '+.1f')}" if _finite(r.get("acc_ours")) and _finite(acc) else "-"


def to_markdown(report: pd.DataFrame, ours: str, ref: str | list[str], note: str = "", shared: str = "") -> str:
    refs = ref if isinstance(ref, list) else [ref]
    n_refs = len(refs)
    sides = _sides(n_refs)
    if n_refs == 1:
        head = ["task", "variant", "vs", "acc % here", "acc % ref", "Δpp here [95 % CI]", "Δpp ref [95 % CI]",
                "difference [95 % CI]", "p", "adj. p", "TOST p", "pooled [95 % CI]", "status"]
        align = "|---|---|---|" + "---:|" * 9 + "---|"
        title = f"### replication: {ours} against {refs[0]}"
    else:
        head = ["task", "variant", "vs", "Δpp here [95 % CI]"]
        for j in range(1, n_refs + 1):
            head += [f"Δpp ref {j} [95 % CI]", f"here - ref {j} [95 % CI]", "adj. p"]
        head += ["pooled [95 % CI]", "Q (p)", "I²", "τ²", "status"]
        align = "|---|---|---|" + "---:|" * (len(head) - 4) + "---|"
        title = f"### replication: {ours} against {n_refs} runs (" + "; ".join(
            f"ref {j}: {r}" for j, r in enumerate(refs, 1)) + ")"
    lines = [title, "", "| " + " | ".join(head) + " |", align]
    for base, g in report.groupby("base", sort=True):
        if report["base"].nunique() > 1:
            lines.append(f"| **{base}** |" + " |" * (len(head) - 1))
        for _, r in g.iterrows():
            vs = next((r[f"vs_{s}"] for s in sides if isinstance(r[f"vs_{s}"], str)), "")
            status = r.get("status") if isinstance(r.get("status"), str) else ""
            status = f"**{status}**" if status == "differs" else status
            pooled = _interval(r, "pooled_pp", "pooled_lo", "pooled_hi")
            if n_refs == 1:
                cells = [r["task"], r["variant"], vs, _num(r["acc_ours"], ".1f"), _num(r["acc_ref"], ".1f"),
                         _delta(r, "ours"), _delta(r, "ref"), _diff(r, 1, "ref"), _p(r.get("diff_p")),
                         _p(r.get("diff_p_adj")), _p(r.get("tost_p")), pooled, status]
            else:
                cells = [r["task"], r["variant"], vs, _delta(r, "ours")]
                for j in range(1, n_refs + 1):
                    cells += [_delta(r, sides[j]), _diff(r, j, sides[j]), _p(r.get(_dcol("diff_p_adj", j)))]
                q = f"{r['Q']:.2f} ({_p(r['Q_p'])})" if _finite(r.get("Q")) else "-"
                cells += [pooled, q, _num(100 * r["I2"], ".0f") + " %" if _finite(r.get("I2")) else "-",
                          _num(r.get("tau2"), ".2f") if _finite(r.get("tau2")) else "-", status]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    sizes = []
    for side, label in zip(sides, ["here", *(["reference"] if n_refs == 1 else
                                            [f"ref {j}" for j in range(1, n_refs + 1)])]):
        seeds = report.loc[report["variant"] != START, f"seeds_{side}"].dropna()
        if len(seeds):
            sizes.append(f"{label}: {int(seeds.min())}{'' if seeds.min() == seeds.max() else f'-{int(seeds.max())}'} "
                         "seeds per cell")
    alpha, method = report.attrs.get("alpha", 0.05), str(report.attrs.get("multiplicity", "holm"))
    adj = f"{method.capitalize()} within each family of the table (primary, secondary; any other rows as one more)" \
        if method != "none" else "unadjusted"
    pooled_note = ("Pooled: the random-effects mean of the runs' estimates (DerSimonian-Laird τ²) with its "
                   "Hartung-Knapp 95 % interval, a t on runs - 1 df (agreement.py)" if report.attrs.get("independent", True)
                   else "No pooled estimate: the runs share seeds, so they are not independent")
    margin = report.attrs.get("margin")
    equiv = (f"TOST p: two one-sided t tests of |true difference| >= {margin:g} pp (the margin declared in the design "
             f"or with --margin); status `equivalent within ±{margin:g}` where it is below {alpha:g}" if margin else
             "TOST p: none, no equivalence margin was declared (design.json equivalence_margin_pp or --margin), so "
             "no row is called equivalent")
    hetero = (" Q: Cochran's Q over the runs (chi² p, runs - 1 df); I²: the share of their spread beyond "
              "sampling error; τ²: the DerSimonian-Laird between-run variance (pp²)." if n_refs > 1 else "")
    lines += ["", f"**{verdict(report)}**", "", *([note, ""] if note else []),
              f"({'; '.join(sizes)}. Δpp: each run's own estimate and 95 % interval; * = significant in that run's "
              "own table. difference: here minus the reference, its 95 % interval and p from both runs' "
              "uncertainty (SE = √(SE here² + SE ref²), t on the Welch-Satterthwaite df of the two tables' df); "
              f"adj. p: {adj}, for `differs` only (status `differs` where it is below {alpha:g}); {equiv}; "
              "otherwise `no difference detected`, with the difference's MDE (80 % power, two-sided 5 %): not "
              "evidence that the runs agree. The RL start's row compares the two starts on the prompt ids both runs "
              "scored (`different test set` where none). A comparison significant in one run only is no verdict: the "
              f"difference between significant and not significant is not itself significant. {pooled_note}.{hetero} "
              "Where both runs scored the same test prompts, the prompt term is shared: the difference's interval is "
              f"then conservative and the pooled one somewhat narrow.{shared})"]
    return "\n".join(lines) + "\n"


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


def _name(ref) -> str:
    return " + ".join(map(str, ref)) if isinstance(ref, list) else str(ref)


def check_reference(ref: str | Path | list) -> None:
    """Refuse (one line) a reference that is missing or holds no finished cell (each, for a list, or
    a list of runs in parts)."""
    for one in _runs(ref):
        if not seeds_of(one):
            raise ConfigError(f"--against {one}: no finished cells (*/summary.json) in it or in its cells/ folder; "
                              "give the folder of a finished run (e.g. results/tiny)")


def shared_seeds(ours: str | Path, ref: str | Path | list) -> tuple[dict | None, str]:
    """(task -> seeds to judge on, a sentence saying so): None where both runs have the same seeds, or
    none in common (an independent replication: each table whole, on its own seeds)."""
    a, b = seeds_of(ours), seeds_of(ref)
    if a == b:
        return None, ""
    shared = {t: a[t] & b[t] for t in sorted(a.keys() & b.keys()) if a[t] & b[t]}
    show = lambda s: ",".join(map(str, sorted(s)))  # noqa: E731
    if not shared:
        return None, ("Independent replication: the two runs share no seed (here " + "; ".join(
            f"{t} {show(s)}" for t, s in sorted(a.items())) + "; reference " + "; ".join(
            f"{t} {show(s)}" for t, s in sorted(b.items())) + "), so each table is built from all its own cells "
            "and each interval is its own run's: the question is whether a fresh run's estimates differ from the "
            "reference's by more than both runs' noise, not whether it repeats the numbers.")
    return shared, ("Judged on the seeds both runs share (" + "; ".join(f"{t} {show(s)}" for t, s in shared.items())
                    + "): both tables rebuilt from those cells alone, so their intervals are those of that many seeds.")


def _overlap(a: dict, b: dict) -> bool:
    return any(a[t] & b[t] for t in a.keys() & b.keys())


def write_report(ours_table: pd.DataFrame, ours: str | Path, ref: str | Path | list,
                 more: list | tuple = (), margin: float | None = None) -> tuple[str, list[Path]]:
    """Compare OURS (its table already built) with REF's cells (a list: one run assembled from parts,
    results.union) on the seeds both share, or whole when they share none; MORE: further independent
    runs (each a folder or a list of parts), pooled with the two, with heterogeneity. MARGIN: the TOST's
    equivalence margin in pp (else OURS's design.json `equivalence_margin_pp`, else none). Write
    replication.md/.csv beside OURS's tables and return the Markdown."""
    _, out = locate(ours)
    paths = [out / "replication.md", out / "replication.csv"]
    runs = [ref, *more]
    if more:  # several runs are pooled: each must be independent of every other (no seed in common)
        seeds = [seeds_of(ours), *(seeds_of(r) for r in runs)]
        names = [str(ours), *map(_name, runs)]
        for i in range(len(seeds)):
            for j in range(i + 1, len(seeds)):
                if _overlap(seeds[i], seeds[j]):
                    raise ConfigError(f"--against: {names[j]} shares seeds with {names[i]}; several references are "
                                      "pooled as independent runs, so compare a run that shares seeds on its own")
        tables = [load_table(r) for r in runs]
        note = ("Independent replications: no two of the runs share a seed, so each table is built from all its "
                "own cells and the estimates are pooled.")
        independent = True
    else:
        seeds, note = shared_seeds(ours, ref)
        if seeds is not None:
            ours_table = load_table(ours, seeds)
        tables = [load_table(ref, seeds)]
        independent = seeds is None and note != ""  # no seed in common (the same seeds: the same cells)
    for j, r in enumerate(runs, 1):
        if isinstance(r, list) and len(r) > 1:
            who = f"Reference {j} ({_name(r)})" if more else "The reference"
            what = "" if more else f" from {_name(r)}"
            note = (note + " " if note else "") + (f"{who} is one run assembled{what}: each task's cells and RL "
                                                   "start from the last folder that has the task.")
    if margin is None:
        from .design import read_design

        margin = (read_design(out) or {}).get("equivalence_margin_pp")
    here = run_starts(ours)
    starts = {t: start_agreement(here[t], there) for t, there in run_starts(ref).items() if t in here} if not more else {}
    report = compare_tables(ours_table, *tables, independent=independent, margin=margin, starts=starts)
    text = to_markdown(report, str(ours), [_name(r) for r in runs] if more else _name(ref), note,
                       shared_note(ours, runs, starts))
    paths[0].write_text(text)
    report.to_csv(paths[1], index=False, float_format="%.4g")
    return text, paths

"""The replication report written (replicate.py compares the tables): its verdict, Markdown and files.

`verdict` is the one line; the Markdown puts one run against one reference, or against several
pooled, with the footnote that says how each number was made; `write_report` judges the runs on the
seeds both share (`replicate.shared_seeds`), compares them and writes RUN/replication.md and .csv.

    text, paths = write_report(table, "runs/reproduce/tiny", "results/tiny")  # `daca-bench table RUN --against`
    print(verdict(compare_tables(load_table(run), load_table("results/tiny"))))
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ConfigError
from .agreement import run_starts, shared_note, start_agreement
from .cellstore import START, locate
from .render import num as _num
from .replicate import _dcol, _finite, _sides, compare_tables, seeds_of, shared_seeds
from .results import load_table


def _flag(x) -> bool:
    return isinstance(x, (bool, np.bool_)) and bool(x)


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
    size = (
        f"largest difference {largest[_dcol('diff_pp', j)]:+.1f} pp{against} ({_name_row(largest)}, "
        f"adj. p {_p(largest[_dcol('diff_p_adj', j)])})"
    )
    missing = report[report["status"].isin(["only here", "only in reference"])]
    extra = f"; {len(missing)} row(s) in one table only" if len(missing) else ""
    for _, r in report[report["variant"] == START].iterrows():
        status = str(r["status"])
        if status == "different test set" or status.startswith(("differs on", "identical on", "accuracy differs")):
            extra += (
                f"; the RL start of {r['task']}: {status}"
                if status != "accuracy differs"
                else f"; the RL start of {r['task']} differs ({r['acc_ours']:.1f} % here, {r['acc_ref']:.1f} % in the reference)"
            )
    if (done["status"] == "identical").all():
        return f"Identical: all {n} comparisons have the same estimate and interval as the reference{extra}."
    differs = done[done["status"] == "differs"]
    if differs.empty:
        margin = report.attrs.get("margin")
        equal = done["status"].astype(str).str.startswith(("equivalent", "identical")).sum()
        mdes = done[done["status"].astype(str).str.startswith("no difference")]
        if equal == n:
            return (
                f"Replicated: all {n} comparisons are equivalent within ±{margin:g} pp between the runs (two "
                f"one-sided tests at alpha {alpha:g}); none differs ({rule}); {size}{extra}."
            )
        cols = [c for c in report.columns if c.startswith("diff_mde")]
        span = mdes[cols].max(axis=1) if len(mdes) else pd.Series(dtype=float)
        tost = (
            f"{equal} equivalent within ±{margin:g} pp (TOST), "
            if margin
            else "no equivalence margin declared (design.json equivalence_margin_pp or --margin), so none is shown "
            "equivalent; "
        )
        mde_span = f" (difference MDE {span.min():.1f}-{span.max():.1f} pp)" if len(span) else ""
        return (
            f"No difference detected: none of the {n} comparisons differs between the runs ({rule}); {tost}"
            f"{len(mdes)} with no difference detected, which is not evidence of equivalence{mde_span}; {size}{extra}."
        )

    def one(r) -> str:
        parts = []
        for k in range(1, n_refs + 1):
            p = r.get(_dcol("diff_p_adj", k))
            if _finite(p) and p < alpha:
                vs = "" if n_refs == 1 else f" vs reference {k}"
                parts.append(
                    f"{r[_dcol('diff_pp', k)]:+.1f} [{r[_dcol('diff_lo', k)]:+.1f}, "
                    f"{r[_dcol('diff_hi', k)]:+.1f}]{vs}, adj. p {_p(p)}"
                )
        return f"{_name_row(r)} {'; '.join(parts)}"

    return (
        f"Not replicated: {len(differs)} of {n} comparisons differ between the runs "
        f"({', '.join(one(r) for _, r in differs.iterrows())}; {rule}); {size}{extra}."
    )


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
        head = [
            "task",
            "variant",
            "vs",
            "acc % here",
            "acc % ref",
            "Δpp here [95 % CI]",
            "Δpp ref [95 % CI]",
            "difference [95 % CI]",
            "p",
            "adj. p",
            "TOST p",
            "pooled [95 % CI]",
            "status",
        ]
        align = "|---|---|---|" + "---:|" * 9 + "---|"
        title = f"### replication: {ours} against {refs[0]}"
    else:
        head = ["task", "variant", "vs", "Δpp here [95 % CI]"]
        for j in range(1, n_refs + 1):
            head += [f"Δpp ref {j} [95 % CI]", f"here - ref {j} [95 % CI]", "adj. p"]
        head += ["pooled [95 % CI]", "Q (p)", "I²", "τ²", "status"]
        align = "|---|---|---|" + "---:|" * (len(head) - 4) + "---|"
        title = (
            f"### replication: {ours} against {n_refs} runs ("
            + "; ".join(f"ref {j}: {r}" for j, r in enumerate(refs, 1))
            + ")"
        )
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
                cells = [
                    r["task"],
                    r["variant"],
                    vs,
                    _num(r["acc_ours"], ".1f"),
                    _num(r["acc_ref"], ".1f"),
                    _delta(r, "ours"),
                    _delta(r, "ref"),
                    _diff(r, 1, "ref"),
                    _p(r.get("diff_p")),
                    _p(r.get("diff_p_adj")),
                    _p(r.get("tost_p")),
                    pooled,
                    status,
                ]
            else:
                cells = [r["task"], r["variant"], vs, _delta(r, "ours")]
                for j in range(1, n_refs + 1):
                    cells += [_delta(r, sides[j]), _diff(r, j, sides[j]), _p(r.get(_dcol("diff_p_adj", j)))]
                q = f"{r['Q']:.2f} ({_p(r['Q_p'])})" if _finite(r.get("Q")) else "-"
                cells += [
                    pooled,
                    q,
                    _num(100 * r["I2"], ".0f") + " %" if _finite(r.get("I2")) else "-",
                    _num(r.get("tau2"), ".2f") if _finite(r.get("tau2")) else "-",
                    status,
                ]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    sizes = []
    for side, label in zip(
        sides, ["here", *(["reference"] if n_refs == 1 else [f"ref {j}" for j in range(1, n_refs + 1)])]
    ):
        seeds = report.loc[report["variant"] != START, f"seeds_{side}"].dropna()
        if len(seeds):
            sizes.append(
                f"{label}: {int(seeds.min())}{'' if seeds.min() == seeds.max() else f'-{int(seeds.max())}'} "
                "seeds per cell"
            )
    alpha, method = report.attrs.get("alpha", 0.05), str(report.attrs.get("multiplicity", "holm"))
    adj = (
        f"{method.capitalize()} within each family of the table (primary, secondary; any other rows as one more)"
        if method != "none"
        else "unadjusted"
    )
    pooled_note = (
        "Pooled: the random-effects mean of the runs' estimates (DerSimonian-Laird τ²) with its "
        "Hartung-Knapp 95 % interval, a t on runs - 1 df (agreement.py)"
        if report.attrs.get("independent", True)
        else "No pooled estimate: the runs share seeds, so they are not independent"
    )
    margin = report.attrs.get("margin")
    equiv = (
        f"TOST p: two one-sided t tests of |true difference| >= {margin:g} pp (the margin declared in the design "
        f"or with --margin); status `equivalent within ±{margin:g}` where it is below {alpha:g}"
        if margin
        else "TOST p: none, no equivalence margin was declared (design.json equivalence_margin_pp or --margin), so "
        "no row is called equivalent"
    )
    hetero = (
        " Q: Cochran's Q over the runs (chi² p, runs - 1 df); I²: the share of their spread beyond "
        "sampling error; τ²: the DerSimonian-Laird between-run variance (pp²)."
        if n_refs > 1
        else ""
    )
    lines += [
        "",
        f"**{verdict(report)}**",
        "",
        *([note, ""] if note else []),
        f"({'; '.join(sizes)}. Δpp: each run's own estimate and 95 % interval; * = significant in that run's "
        "own table. difference: here minus the reference, its 95 % interval and p from both runs' "
        "uncertainty (SE = √(SE here² + SE ref²), t on the Welch-Satterthwaite df of the two tables' df); "
        f"adj. p: {adj}, for `differs` only (status `differs` where it is below {alpha:g}); {equiv}; "
        "otherwise `no difference detected`, with the difference's MDE (80 % power, two-sided 5 %): not "
        "evidence that the runs agree. The RL start's row compares the two starts on the prompt ids both runs "
        "scored (`different test set` where none). A comparison significant in one run only is no verdict: the "
        f"difference between significant and not significant is not itself significant. {pooled_note}.{hetero} "
        "Where both runs scored the same test prompts, the prompt term is shared: the difference's interval is "
        f"then conservative and the pooled one somewhat narrow.{shared})",
    ]
    return "\n".join(lines) + "\n"


def _name(ref) -> str:
    return " + ".join(map(str, ref)) if isinstance(ref, list) else str(ref)


def _overlap(a: dict, b: dict) -> bool:
    return any(a[t] & b[t] for t in a.keys() & b.keys())


def write_report(
    ours_table: pd.DataFrame,
    ours: str | Path,
    ref: str | Path | list,
    more: list | tuple = (),
    margin: float | None = None,
) -> tuple[str, list[Path]]:
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
                    raise ConfigError(
                        f"--against: {names[j]} shares seeds with {names[i]}; several references are "
                        "pooled as independent runs, so compare a run that shares seeds on its own"
                    )
        tables = [load_table(r) for r in runs]
        note = (
            "Independent replications: no two of the runs share a seed, so each table is built from all its "
            "own cells and the estimates are pooled."
        )
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
            note = (note + " " if note else "") + (
                f"{who} is one run assembled{what}: each task's cells and RL "
                "start from the last folder that has the task."
            )
    if margin is None:
        from .design import read_design

        margin = (read_design(out) or {}).get("equivalence_margin_pp")
    here = run_starts(ours)
    starts = (
        {t: start_agreement(here[t], there) for t, there in run_starts(ref).items() if t in here} if not more else {}
    )
    report = compare_tables(ours_table, *tables, independent=independent, margin=margin, starts=starts)
    text = to_markdown(
        report, str(ours), [_name(r) for r in runs] if more else _name(ref), note, shared_note(ours, runs, starts)
    )
    paths[0].write_text(text)
    report.to_csv(paths[1], index=False, float_format="%.4g")
    return text, paths

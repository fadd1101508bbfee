"""The replication report: did a re-run reproduce a committed table?

    daca-bench table RUN --against results/tiny     # RUN/replication.md and .csv beside RUN's tables

Both tables are built the same way (results.py) from their cells. For every row present in
both (base, task, variant) the report puts the two side by side and says, for a comparison
(a variant against the baseline, the baseline against its RL start):

- `diff_pp`: this run's Δpp minus the reference's;
- `ours_covers_ref` / `ref_covers_ours`: whether this run's 95 % interval holds the reference's
  estimate, and the other way round;
- `sign_agrees`: both estimates on the same side of 0 (both 0 counts as agreeing);
- `sig_agrees`: both intervals exclude 0, or neither does;
- `status`: `identical` (same estimate and interval; for the RL start, the same accuracy, else
  `accuracy differs`), `agrees` (each estimate inside the other's
  interval, same significance, and the same sign where significant), `conclusion differs` (the
  significance, or the sign of a significant effect, differs) or `estimate outside` (the
  conclusion holds but an estimate lies outside the other's interval).

`verdict` sums these up in one line. Runs with different seeds are judged on the seeds both
share (each table rebuilt from those cells alone, and the report says so), or not at all when
they share none; a reference that is missing or holds no finished cell is refused before any
table is written (`check_reference`).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ConfigError
from .design import across
from .results import START, VARIANT_ORDER, load_table, locate, num as _num

KEYS = ["base", "family", "task", "variant"]
SIDE = ["acc", "vs", "delta_pp", "lo", "hi", "MDE", "sig", "seeds", "prompts"]


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _flag(x) -> bool:
    return isinstance(x, (bool, np.bool_)) and bool(x)


def compare_tables(ours: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """One row per (base, family, task, variant[, cross-base vs]) of either table: both sides (`*_ours`,
    `*_ref`), the difference, coverage, sign and significance agreement, and a status."""
    # a row against another base's row ("wd1 baseline" vs "grpo +DACA") is matched by its vs too
    keyed = lambda t: t[KEYS + SIDE].assign(_ref=t["vs"].map(lambda v: v if across(v) else ""))  # noqa: E731
    merged = keyed(ours).merge(keyed(ref), on=[*KEYS, "_ref"], how="outer", suffixes=("_ours", "_ref")) \
        .drop(columns="_ref")
    rows = []
    for _, r in merged.iterrows():
        row = r.to_dict()
        row["acc_diff"] = r["acc_ours"] - r["acc_ref"] if _finite(r["acc_ours"]) and _finite(r["acc_ref"]) else math.nan
        a, b = r["delta_pp_ours"], r["delta_pp_ref"]
        if not (_finite(a) and _finite(b)):
            both = _finite(r["acc_ours"]) and _finite(r["acc_ref"])
            row["status"] = ("identical" if r["acc_ours"] == r["acc_ref"] else "accuracy differs") if both else \
                "only here" if _finite(r["acc_ours"]) else "only in reference" if _finite(r["acc_ref"]) else ""
            rows.append(row)
            continue
        sig_a, sig_b = _flag(r["sig_ours"]), _flag(r["sig_ref"])
        row.update(diff_pp=a - b,
                   ours_covers_ref=bool(r["lo_ours"] <= b <= r["hi_ours"]),
                   ref_covers_ours=bool(r["lo_ref"] <= a <= r["hi_ref"]),
                   sign_agrees=bool(np.sign(a) == np.sign(b)),
                   sig_agrees=sig_a == sig_b)
        same_sign_where_sig = row["sign_agrees"] or not (sig_a or sig_b)
        if (a, r["lo_ours"], r["hi_ours"]) == (b, r["lo_ref"], r["hi_ref"]):
            row["status"] = "identical"
        elif not (row["sig_agrees"] and same_sign_where_sig):
            row["status"] = "conclusion differs"
        elif row["ours_covers_ref"] and row["ref_covers_ours"]:
            row["status"] = "agrees"
        else:
            row["status"] = "estimate outside"
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    order = {v: i for i, v in enumerate([START, *VARIANT_ORDER])}
    rank = out["variant"].map(lambda v: order.get(v, len(order)))
    return out.assign(_rank=rank).sort_values(["base", "family", "task", "_rank", "variant"]).drop(columns="_rank") \
        .reset_index(drop=True)


def verdict(report: pd.DataFrame) -> str:
    """One line: replicated, replicated to the byte, or which comparisons did not."""
    if report.empty or "diff_pp" not in report:
        return "Nothing to compare: the two tables share no comparison (check the task, base and variants)."
    done = report[report["diff_pp"].notna()]
    if done.empty:
        return "Nothing to compare: the two tables share no comparison (check the task, base and variants)."
    n = len(done)
    name = lambda r: f"{r['task']} {r['variant']}"  # noqa: E731
    largest = done.loc[done["diff_pp"].abs().idxmax()]
    size = f"largest difference {largest['diff_pp']:+.1f} pp ({name(largest)})"
    missing = report[report["status"].isin(["only here", "only in reference"])]
    extra = f"; {len(missing)} row(s) in one table only" if len(missing) else ""
    for _, r in report[(report["variant"] == START) & (report["status"] == "accuracy differs")].iterrows():
        extra += f"; the RL start of {r['task']} differs ({r['acc_ours']:.1f} % here, {r['acc_ref']:.1f} % in the reference)"
    if (done["status"] == "identical").all():
        return f"Identical: all {n} comparisons have the same estimate and interval as the reference{extra}."
    differs = done[done["status"] == "conclusion differs"]
    outside = done[done["status"] == "estimate outside"]
    if differs.empty and outside.empty:
        return (f"Replicated: all {n} comparisons agree (each estimate inside the other's 95 % interval, the same "
                f"significance, the same sign wherever an effect is significant); {size}{extra}.")
    if differs.empty:
        return (f"Replicated in conclusion: all {n} comparisons keep their sign and significance, but "
                f"{', '.join(map(name, [r for _, r in outside.iterrows()]))} lie outside the other's interval; "
                f"{size}{extra}.")
    return (f"Not replicated: {len(differs)} of {n} comparisons reach another conclusion "
            f"({', '.join(name(r) + ' ' + _why(r) for _, r in differs.iterrows())}); {size}{extra}.")


def _why(r) -> str:
    if not r["sig_agrees"]:
        return "significant here only" if _flag(r["sig_ours"]) else "significant in the reference only"
    return "opposite sign"


def _delta(r, side: str) -> str:
    d = r[f"delta_pp_{side}"]
    if not _finite(d):
        return "-"
    mark = " *" if _flag(r[f"sig_{side}"]) else ""
    return f"{_num(d, '+.1f')}{mark} [{_num(r[f'lo_{side}'], '+.1f')}, {_num(r[f'hi_{side}'], '+.1f')}]"


def _yes(x) -> str:
    return "" if not isinstance(x, (bool, np.bool_)) else ("yes" if x else "**no**")


def to_markdown(report: pd.DataFrame, ours: str, ref: str, note: str = "") -> str:
    head = ["task", "variant", "vs", "acc % here", "acc % ref", "Δpp here [95 % CI]", "Δpp ref [95 % CI]",
            "difference", "here covers ref", "ref covers here", "sign", "significance", "status"]
    lines = [f"### replication: {ours} against {ref}", "", "| " + " | ".join(head) + " |",
             "|---|---|---|" + "---:|" * 5 + "---|" * 5]
    for base, g in report.groupby("base", sort=True):
        if report["base"].nunique() > 1:
            lines.append(f"| **{base}** |" + " |" * (len(head) - 1))
        for _, r in g.iterrows():
            vs = r["vs_ours"] if isinstance(r["vs_ours"], str) else r["vs_ref"] if isinstance(r["vs_ref"], str) else ""
            diff = _num(r.get("diff_pp"), "+.1f") if _finite(r.get("diff_pp")) else \
                f"acc {_num(r['acc_diff'], '+.1f')}" if _finite(r.get("acc_diff")) else "-"
            cells = [r["task"], r["variant"], vs, _num(r["acc_ours"], ".1f"), _num(r["acc_ref"], ".1f"),
                     _delta(r, "ours"), _delta(r, "ref"), diff,
                     _yes(r.get("ours_covers_ref")), _yes(r.get("ref_covers_ours")),
                     _yes(r.get("sign_agrees")), _yes(r.get("sig_agrees")), r.get("status") or ""]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    sizes = []
    for side, label in (("ours", "here"), ("ref", "reference")):
        seeds = report.loc[report["variant"] != START, f"seeds_{side}"].dropna()
        if len(seeds):
            sizes.append(f"{label}: {int(seeds.min())}{'' if seeds.min() == seeds.max() else f'-{int(seeds.max())}'} "
                         "seeds per cell")
    lines += ["", f"**{verdict(report)}**", "", *([note, ""] if note else []),
              f"({'; '.join(sizes)}. * = significant after the table's family-wise adjustment. An estimate's interval covering the other's "
              "estimate is what a replication at this size can promise; fewer seeds mean wider intervals.)"]
    return "\n".join(lines) + "\n"


CSV_COLUMNS = [*KEYS, *(f"{c}_{s}" for c in SIDE for s in ("ours", "ref")), "acc_diff", "diff_pp",
               "ours_covers_ref", "ref_covers_ours", "sign_agrees", "sig_agrees", "status"]


def seeds_of(folder: str | Path | list) -> dict[str, set]:
    """task -> the seeds of FOLDER's finished cells (from their config.json; no eval read); for a list
    of folders, each task's from the last folder that has it (results.union)."""
    out: dict[str, set] = {}
    for one in folder if isinstance(folder, list) else [folder]:
        cells, _ = locate(one)
        here: dict[str, set] = {}
        for summary in cells.glob("*/summary.json"):
            cfg = json.loads((summary.parent / "config.json").read_text())
            here.setdefault(cfg["train"]["task"], set()).add(cfg["train"]["seed"])
        out.update(here)
    return out


def _name(ref) -> str:
    return " + ".join(map(str, ref)) if isinstance(ref, list) else str(ref)


def check_reference(ref: str | Path | list) -> None:
    """Refuse (one line) a reference that is missing or holds no finished cell (each, for a list)."""
    for one in ref if isinstance(ref, list) else [ref]:
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
            "and each interval is its own run's: the question is whether a fresh run reaches the same conclusions, "
            "not whether it repeats the numbers.")
    return shared, ("Judged on the seeds both runs share (" + "; ".join(f"{t} {show(s)}" for t, s in shared.items())
                    + "): both tables rebuilt from those cells alone, so their intervals are those of that many seeds.")


def write_report(ours_table: pd.DataFrame, ours: str | Path, ref: str | Path | list) -> tuple[str, list[Path]]:
    """Compare OURS (its table already built) with REF's cells (a list: one run assembled from parts,
    results.union) on the seeds both share, or whole when they share none; write replication.md/.csv
    beside OURS's tables and return the Markdown."""
    seeds, note = shared_seeds(ours, ref)
    _, out = locate(ours)
    paths = [out / "replication.md", out / "replication.csv"]
    if seeds is not None:
        ours_table = load_table(ours, seeds)
    if isinstance(ref, list) and len(ref) > 1:
        note = (note + " " if note else "") + ("The reference is one run assembled from " + _name(ref) + ": each task's "
                                               "cells and RL start from the last folder that has the task.")
    report = compare_tables(ours_table, load_table(ref, seeds)).reindex(columns=CSV_COLUMNS)
    text = to_markdown(report, str(ours), _name(ref), note)
    paths[0].write_text(text)
    report.to_csv(paths[1], index=False, float_format="%.4g")
    return text, paths

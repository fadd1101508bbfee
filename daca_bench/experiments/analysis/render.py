"""The cell table rendered (results.py builds it): Markdown, CSV and LaTeX, and `write_tables`.

The Markdown has one section per base with the line of what each variant ran, a last section for
rows against another base's or arm's row, the compute lines and the footer that says how every
number was made; `write_tables` writes a folder's table.md, table.csv and table.tex where `locate` says.

    table, paths = write_tables("results/tiny")     # what `daca-bench table results/tiny` does
    print(to_markdown(load_table("results/tiny")))  # the Markdown alone (results.load_table)
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from .budgets import compute_lines
from .cellstore import START, locate
from .design import across
from .results import load_table


def num(x, fmt: str) -> str:
    """X formatted, or '-' for a missing value (None or NaN)."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


FOOTER = (
    "Accuracy: exact match on the family's one fixed test set, mean over seeds. Δpp: paired by seed and by "
    "prompt against `vs` (a variant against the baseline; the baseline against its RL start, the SFT model "
    "on the same prompts). 95 % CI: mixed-model interval, mean ± t(df) x SE with SE from the seed x cluster "
    "variance components (Satterthwaite df); where the seed term is estimated at 0 (df jumps to about "
    "clusters - 1) the seeds-only t-interval over per-seed means is printed beside it. p: two-sided, from the "
    "same t; adj. p: {method} within the primary and within the secondary family (`plan`), at alpha {alpha:g}; "
    "* = adjusted p < alpha, and, where the seed term dropped out, a seeds-only interval that excludes 0; an "
    "exploratory row (not declared before the run) is never starred. MDE: the smallest true difference this "
    "comparison detects with 80 % power at two-sided 5 %: λ(df) x SE / c4(df), λ the noncentrality at which "
    "the t-test on df finds it with that power (noncentral t), SE / c4(df) the SE freed of its downward bias "
    "on df degrees of freedom; where the seed term dropped out, the larger of that and the seeds-only test's "
    "(seeds - 1 df); a Δ smaller than its MDE is not evidence of no effect; none where no paired difference "
    "varies. CSV: the plain "
    "t-interval over per-seed differences (t_half), the crossed bootstrap interval (boot_lo, boot_hi) and the "
    "zero-variance group fraction (zero_std). Paper: the abstract's headline gain for the family (LLaDA-8B "
    "scale, not this model), beside a shipped task of an area the paper measured only."
)


def _ci(r) -> str:
    if not r["se"] > 0:
        return "no spread"
    ci = f"[{num(r['lo'], '+.1f')}, {num(r['hi'], '+.1f')}]"
    dropped = isinstance(r.get("seed_dropped"), (bool, np.bool_)) and r["seed_dropped"]
    return ci + (f"; seeds [{num(r['seeds_lo'], '+.1f')}, {num(r['seeds_hi'], '+.1f')}]" if dropped else "")


def _p(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else "<0.001" if x < 0.001 else f"{x:.3f}"


def _section(title: str, t: pd.DataFrame, cross: bool = False) -> list[str]:
    """One markdown block of TABLE rows; CROSS: rows against another row ('wd1 baseline' vs 'grpo +DACA')."""
    head = [
        "family",
        "task",
        "variant",
        "acc %",
        "Δpp",
        "vs",
        "95 % CI",
        "MDE",
        "p",
        "adj. p",
        "plan",
        "zero-std %",
        "paper (up to)",
    ]
    lines = [title, "", "| " + " | ".join(head) + " |", "|---|---|---|" + "---:|" * 10]
    for _, r in t.iterrows():
        has = "delta_pp" in r and not (isinstance(r.get("delta_pp"), float) and math.isnan(r["delta_pp"]))
        sig = r.get("sig")
        marked = isinstance(sig, (bool, np.bool_)) and bool(sig)  # NaN (no comparison) is no mark
        delta = (num(r["delta_pp"], "+.1f") + (" *" if marked else "")) if has else "-"
        paper = (
            f"+{r['paper_gain_pp']:.1f}"
            if r["variant"] == "baseline" and not cross and not math.isnan(r["paper_gain_pp"])
            else ""
        )
        cells = [
            r["family"],
            r["task"],
            f"{r['base']} {r['variant']}" if cross else r["variant"],
            num(r["acc"], ".1f"),
            delta,
            r.get("vs") if has else "",
            _ci(r) if has else "-",
            num(r.get("MDE"), ".1f") if has else "-",
            _p(r.get("p")) if has else "-",
            _p(r.get("p_adj")) if has else "-",
            r.get("plan") if has else "",
            num(100 * r.get("zero_std", math.nan), ".0f"),
            paper,
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines + [""]


def to_markdown(table: pd.DataFrame) -> str:
    lines = [table.attrs["design"], ""] if table.attrs.get("design") else []
    cross = table["vs"].map(across) if "vs" in table else pd.Series(False, index=table.index)
    for base, t in table[~cross].groupby("base", sort=True):
        lines += _section(f"### base method: {base}", t)
        lines += [table.attrs["variants"][base], ""] if base in table.attrs.get("variants", {}) else []
    if cross.any():
        lines += _section(
            "### across bases and arms (a row against another base's or arm's row, paired by seed and prompt)",
            table[cross],
            cross=True,
        )
    lines += compute_lines(table)
    seeds = table.loc[table["variant"] != START, "seeds"]
    prompts = table.loc[table["variant"] != START, "prompts"].dropna() if "prompts" in table else pd.Series(dtype=float)
    footer = FOOTER.format(
        method=table.attrs.get("multiplicity", "holm").capitalize(), alpha=table.attrs.get("alpha", 0.05)
    )
    k = table.attrs.get("n_starts", 1)  # several SFT starts: a row's cells are starts x seeds
    units = (
        _count(seeds, "seed", "per cell")
        if k < 2
        else f"{_count(seeds, 'cell', 'per arm')} ({k} SFT starts x {int(seeds.max()) // k} seeds)"
    )
    lines.append(
        f"{units}, {_count(prompts, 'paired test prompt', 'per comparison')}; "
        f"{_clusters(table)}. "
        + footer
        + table.attrs.get("starts", "")
        + (" " + table.attrs["regime"] if table.attrs.get("regime") else "")
    )
    return "\n".join(lines) + "\n"


def _clusters(table: pd.DataFrame) -> str:
    """'clusters per comparison: sudoku_tiny 69 of 512 prompts (the rest: each prompt its own)'."""
    if "clusters" not in table:
        return "each prompt its own cluster"
    done = table[table["clusters"].notna() & table["prompts"].notna()]
    grouped = done[done["clusters"] < done["prompts"]]
    if grouped.empty:
        return "each prompt its own cluster (the unit the interval resamples)"
    parts = []
    for task, g in grouped.groupby("task", sort=True):
        pairs = sorted({(int(c), int(p)) for c, p in zip(g["clusters"], g["prompts"])})
        parts.append(f"{task} {', '.join(f'{c} clusters of {p} prompts' for c, p in pairs)}")
    rest = " (every other task: each prompt its own)" if set(done["task"]) - set(grouped["task"]) else ""
    return "clusters per comparison (the unit the interval resamples): " + "; ".join(parts) + rest


def _count(values: pd.Series, noun: str, per: str) -> str:
    """'8 seeds per cell', '1 seed per cell', '2 to 8 seeds per cell' (a range only where they differ)."""
    lo, hi = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    plural = "" if hi == 1 else "s"
    return f"{lo}{'' if lo == hi else f' to {hi}'} {noun}{plural} {per}"


def to_csv(table: pd.DataFrame) -> str:
    return table.to_csv(index=False, float_format="%.4g")


def write_tables(folder: str | Path) -> tuple[pd.DataFrame, list[Path]]:
    """Build the table of FOLDER's cells and write table.md/.csv/.tex where `locate` says."""
    table = load_table(folder)
    _, out = locate(folder)
    paths = [out / "table.md", out / "table.csv", out / "table.tex"]
    paths[0].write_text(to_markdown(table))
    paths[1].write_text(to_csv(table))
    tex = table[["family", "task", "variant", "acc", "vs", "delta_pp", "lo", "hi", "MDE", "p_adj", "plan"]]
    paths[2].write_text(tex.to_latex(index=False, float_format="%.1f", na_rep="-", formatters={"p_adj": _p}))
    return table, paths

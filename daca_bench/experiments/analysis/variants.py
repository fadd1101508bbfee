"""What each row of a table ran, read from its cells' configs, and the paper's gain beside it (shared
by the table, results.py, and the figures, layout.py, so the two never disagree):

    regime(df)         # 'Regime: lr 0.0001, mu 2, ...': the regime keys over every cell
    variants_lines(df)  # {'grpo': 'What each variant of grpo ran (...): baseline: no DPS, no SML (K = 1); ...'}
    paper_area("sudoku_tiny", "constraint")   # 36.3; a task of one's own of that family: nan

A variant's name says what it is called, its cells' configs what it ran: `+DACA` of a grid is
`dps.enabled sml.k=4` on the grid's base, the headline's +DACA (`headline:+DACA`) its picked
reading in its regime. Nothing here imports matplotlib.
"""

from __future__ import annotations

import math

import pandas as pd

from .design import block_family

PAPER_GAIN_PP = {"math": 5.6, "code": 7.4, "constraint": 36.3, "json": 5.9}  # the abstract's "up to" figures
VARIANT_ORDER = ["baseline", "+DPS", "+SML", "+DACA", "+DPS-random"]
# the knobs that say which regime a cell trained in: table column -> (config section, key, default)
REGIME_KEYS = {
    "lr": ("train", "lr", None),
    "mu": ("train", "mu", 1),
    "beta": ("loss", "beta", 0.0),
    "epsilon": ("loss", "epsilon", None),
    "p_mask_prompt": ("sml", "p_mask_prompt", 0.0),
    "split": ("train", "eval_split", "test"),
}


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def regime(df: pd.DataFrame) -> str:
    """One line: the values of REGIME_KEYS over the grid's cells (a list where cells differ)."""
    parts = []
    for key in REGIME_KEYS:
        if key in df:
            vals = sorted({v for v in df[key] if v is not None}, key=str)
            parts.append(f"{key} {'/'.join(map(_fmt, vals))}")
    return (
        "Regime: " + ", ".join(parts) + " (clip_frac % and kl: per-cell means over steps, in the CSV)." if parts else ""
    )


def variant_root(variant: str) -> str:
    """The variant a row is of: '+DACA@32' (a training budget of +DACA's cells) -> '+DACA'."""
    return str(variant).split("@")[0]


def method(cfg: dict) -> str:
    """What a cell's config ran: its DPS score (when DPS is on), its SML partition and K (when K > 1)."""
    dps, sml = cfg.get("dps") or {}, cfg.get("sml") or {}
    score = f"DPS {dps['score']}" if dps.get("score") else "DPS"
    k = sml.get("k", 1)
    strata = (
        "no SML (K = 1)" if k <= 1 else f"SML {sml['partition']}, K = {k}" if sml.get("partition") else f"SML, K = {k}"
    )
    return f"{score if dps.get('enabled') else 'no DPS'}, {strata}"


def variants_lines(df: pd.DataFrame) -> dict[str, str]:
    """base -> one line: per variant of that base (budgets '@N' folded in), what its cells ran (`method`,
    several joined by ' / ' where its cells differ) and the REGIME_KEYS whose values differ between the
    table's (base, variant) pairs (each base its own lr, say)."""
    if df.empty or "config" not in df:
        return {}
    groups = {}
    for base, g in df.groupby("base", sort=True):
        roots = g["variant"].map(variant_root)
        names = [v for v in VARIANT_ORDER if v in set(roots)] + sorted(set(roots) - set(VARIANT_ORDER))
        groups[base] = {v: g[roots == v] for v in names}
    regimes = {
        (b, v): {k: tuple(sorted({_fmt(x) for x in g[k] if x is not None})) for k in REGIME_KEYS if k in g}
        for b, by in groups.items()
        for v, g in by.items()
    }
    differ = [k for k in REGIME_KEYS if len({r.get(k) for r in regimes.values()}) > 1]
    lines = {}
    for base, by in groups.items():
        parts = []
        for v, g in by.items():
            ran = " / ".join(dict.fromkeys(method(c) for c in g["config"]))
            keys = "".join(f", {k} {'/'.join(regimes[base, v][k])}" for k in differ if regimes[base, v].get(k))
            parts.append(f"{v}: {ran}{keys}")
        lines[base] = f"What each variant of {base} ran (from its cells' configs): " + "; ".join(parts) + "."
    return lines


def builtin_task(task: str) -> bool:
    """Is TASK one of the tasks daca-bench ships (registry.SHIPPED_TASKS: a fixed list)? Never decided by the
    folder a file lives in: a task of one's own in tasks/ is not one, and the same cells give the same table
    on every machine, wherever (or whether) the task is registered."""
    from ...registry import SHIPPED_TASKS

    return task in SHIPPED_TASKS


def paper_area(task: str, family: str) -> float:
    """The paper's "up to" gain (pp) for the area TASK belongs to, or nan: only a shipped task's family
    maps to one of the paper's areas; a custom task of the same family was never measured there."""
    return PAPER_GAIN_PP.get(block_family(family), math.nan) if builtin_task(task) else math.nan

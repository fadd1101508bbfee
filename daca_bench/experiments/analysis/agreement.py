"""What a replication report may claim (issue 58): two runs' estimates differ by more than their
noise (`difference`), several runs pooled (`pool`), equivalence only from two one-sided tests (TOST)
against a declared margin, a pooled estimate by Hartung-Knapp (a t interval on k - 1 df around the
random-effects mean), the RL start compared on the prompts both runs scored, and whether the runs
share an SFT checkpoint.

    difference(a, se_a, df_a, b, se_b, df_b)  # SE sqrt(se_a^2 + se_b^2), Welch-Satterthwaite t: diff, lo, hi, p
    pool(estimates, ses, dfs)             # inverse-variance mean, Cochran's Q, DerSimonian-Laird tau^2, I^2
    tost_p(diff, se, df, margin)          # p of "|true difference| >= margin": < alpha = equivalent within ±margin
    hartung_knapp(estimates, ses)         # (mean, se, df, lo, hi, tau2): random effects, DerSimonian-Laird tau2
    start_agreement(here, there)          # per-prompt rewards of two RL starts -> (shared, agreeing, acc, acc)
    checkpoints(folder)                   # the SFT checkpoints a run's cells started from
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from .stats import p_value


def tost_p(diff: float, se: float, df: float, margin: float) -> float:
    """Two one-sided t tests of H0: diff <= -margin or diff >= +margin (Schuirmann): the larger one-sided
    p. Below alpha: the difference lies within ±margin (its 1 - 2 alpha interval inside ±margin). NaN
    without a margin or without spread."""
    if not (margin and margin > 0 and math.isfinite(se) and se > 0 and math.isfinite(diff)):
        return math.nan
    dist = stats.t(df) if math.isfinite(df) else stats.norm()
    return float(max(dist.sf((diff + margin) / se), dist.cdf((diff - margin) / se)))


def hartung_knapp(estimates, ses, level: float = 0.95) -> dict:
    """Random-effects pooled estimate of k runs: weights 1 / (se_i^2 + tau2), tau2 DerSimonian-Laird,
    and the Hartung-Knapp variance sum w_i (x_i - m)^2 / ((k - 1) sum w_i) on a t with k - 1 df (never
    below the plain random-effects variance: the modified HK, so one run's agreement cannot narrow it)."""
    x, se = np.asarray(list(estimates), dtype=float), np.asarray(list(ses), dtype=float)
    k = int(x.size)
    nan = {"mean": math.nan, "se": math.nan, "df": math.nan, "lo": math.nan, "hi": math.nan, "tau2": math.nan}
    if k < 2 or not (np.isfinite(x).all() and np.isfinite(se).all() and (se > 0).all()):
        return nan
    w = 1 / se**2
    fixed = float((w * x).sum() / w.sum())
    q = float((w * (x - fixed) ** 2).sum())
    c = float(w.sum() - (w**2).sum() / w.sum())
    tau2 = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
    wr = 1 / (se**2 + tau2)
    m = float((wr * x).sum() / wr.sum())
    var = max(float((wr * (x - m) ** 2).sum() / ((k - 1) * wr.sum())), 1 / float(wr.sum()))
    half = float(stats.t.ppf((1 + level) / 2, k - 1) * math.sqrt(var))
    return {"mean": m, "se": math.sqrt(var), "df": float(k - 1), "lo": m - half, "hi": m + half, "tau2": tau2}


def _welch_df(parts) -> float:
    """Satterthwaite df of a sum of independent variances, each (variance, its df); an infinite df
    (a normal term) or a zero variance adds nothing to the denominator."""
    total = sum(v for v, _ in parts)
    den = sum(v * v / df for v, df in parts if v > 0 and math.isfinite(df))
    return float(total * total / den) if den > 0 else math.inf


def _half(se: float, df: float, level: float = 0.95) -> float:
    return float((stats.t.ppf((1 + level) / 2, df) if math.isfinite(df) else stats.norm.ppf((1 + level) / 2)) * se)


@dataclass(frozen=True)
class Difference:
    diff: float  # a - b
    se: float  # sqrt(se_a^2 + se_b^2): independent runs
    df: float  # Welch-Satterthwaite from the two runs' df
    lo: float  # 95 % interval: diff -+ t_{0.975, df} * se (hi the other end); p: two-sided, NaN without spread
    hi: float
    p: float


def difference(
    a: float, se_a: float, df_a: float, b: float, se_b: float, df_b: float, level: float = 0.95
) -> Difference:
    """a - b for two independent runs' estimates of one comparison (each with its SE and df): SE
    sqrt(se_a^2 + se_b^2) on the Welch-Satterthwaite df (each table's own t, carried over)."""
    d = float(a - b)
    se = math.sqrt(se_a**2 + se_b**2)
    if not (math.isfinite(se) and se > 0):
        return Difference(d, se, math.nan, d, d, math.nan)
    df = _welch_df([(se_a**2, df_a), (se_b**2, df_b)])
    half = _half(se, df, level)
    return Difference(d, se, df, d - half, d + half, p_value(d, se, df))


@dataclass(frozen=True)
class Pooled:
    mean: float  # inverse-variance pooled estimate: sum w_i x_i / W, w_i = 1 / se_i^2, W = sum w_i
    se: float  # 1 / sqrt(W), df: Satterthwaite W^2 / sum (w_i^2 / df_i), lo/hi: its 95 % t interval
    df: float
    lo: float
    hi: float
    k: int  # runs pooled
    q: float  # Cochran's Q = sum w_i (x_i - mean)^2 (q_p: its chi^2 p on k - 1 df)
    q_p: float
    tau2: float  # DerSimonian-Laird: max(0, (Q - (k-1)) / (W - sum w^2 / W)); i2: max(0, (Q - (k-1)) / Q)
    i2: float
    re_mean: float  # random effects, weights 1 / (se_i^2 + tau2), with a normal interval (re_lo, re_hi)
    re_se: float
    re_lo: float
    re_hi: float


def pool(estimates, ses, dfs=None, level: float = 0.95) -> Pooled:
    """Several runs' estimates of one comparison (SEs; df, default infinite) pooled (`Pooled`); NaN
    where a run has no spread (a zero SE has no finite weight)."""
    x = np.asarray(list(estimates), dtype=float)
    se = np.asarray(list(ses), dtype=float)
    df = np.full(x.shape, math.inf) if dfs is None else np.asarray(list(dfs), dtype=float)
    k = int(x.size)
    nan = math.nan
    if k == 0 or not (np.isfinite(se).all() and (se > 0).all() and np.isfinite(x).all()):
        return Pooled(nan, nan, nan, nan, nan, k, nan, nan, nan, nan, nan, nan, nan, nan)
    w = 1.0 / se**2
    W = float(w.sum())
    m = float((w * x).sum() / W)
    s = 1.0 / math.sqrt(W)
    den = float(sum(wi * wi / d for wi, d in zip(w, df) if math.isfinite(d)))
    dof = W * W / den if den > 0 else math.inf
    half = _half(s, dof, level)
    q = float((w * (x - m) ** 2).sum())
    q_p = float(stats.chi2.sf(q, k - 1)) if k > 1 else nan
    c = W - float((w * w).sum()) / W
    tau2 = max(0.0, (q - (k - 1)) / c) if k > 1 and c > 0 else 0.0
    i2 = max(0.0, (q - (k - 1)) / q) if k > 1 and q > 0 else 0.0
    wr = 1.0 / (se**2 + tau2)
    re_m = float((wr * x).sum() / wr.sum())
    re_s = 1.0 / math.sqrt(float(wr.sum()))
    z = float(stats.norm.ppf((1 + level) / 2))
    return Pooled(
        m,
        s,
        float(dof),
        m - half,
        m + half,
        k,
        q,
        q_p,
        float(tau2),
        float(i2),
        re_m,
        re_s,
        re_m - z * re_s,
        re_m + z * re_s,
    )


def start_agreement(here: dict, there: dict) -> tuple[int, int, float, float]:
    """(prompts both RL starts scored, of those the ones with the same reward, accuracy % here and there on
    them): id -> reward dicts (None = unscorable, left out)."""
    ids = sorted(i for i in set(here) & set(there) if here[i] is not None and there[i] is not None)
    if not ids:
        return 0, 0, math.nan, math.nan
    a, b = np.array([here[i] for i in ids], dtype=float), np.array([there[i] for i in ids], dtype=float)
    return len(ids), int((a == b).sum()), 100 * float(a.mean()), 100 * float(b.mean())


def checkpoints(folder: str | Path) -> set[str]:
    """The SFT checkpoints FOLDER's cells started from: each cell's init_sha256 where it recorded one, else
    its train.init's SFT folder name (the hash of the SFT config: the same name, the same checkpoint)."""
    out = set()
    for cfg in Path(folder).glob("*/config.json"):
        c = json.loads(cfg.read_text())
        init = c.get("train", {}).get("init") or ""
        out.add(c.get("init_sha256") or Path(init).parent.name or init)
    return out - {""}


def _folders(run) -> list:
    """The folders a run names (a folder, or a list of parts)."""
    return [f for one in run for f in _folders(one)] if isinstance(run, (list, tuple)) else [run]


def run_starts(run) -> dict:
    """task -> the per-prompt rewards of RUN's RL start (a run in parts: each task's from its last folder)."""
    from .results import load_start, locate

    out: dict = {}
    for one in _folders(run):
        out.update(load_start(locate(one)[0]))
    return out


def shared_note(ours, refs: list, starts: dict) -> str:
    """The replication footer's sentence on the SFT checkpoint: shared (a checkpoint both runs' cells
    recorded, or RL starts that agree on at least 99 % of the prompts both scored: STARTS, task ->
    start_agreement) or '' (no sign of one)."""
    from .results import locate

    def seen(run) -> set:
        return set().union(*(checkpoints(locate(one)[0]) for one in _folders(run)))

    same = seen(ours) & set().union(*(seen(r) for r in refs))
    agree = [t for t, (n, k, _, _) in starts.items() if n and k >= 0.99 * n]
    if not same and not agree:
        return ""
    why = (
        "the same recorded SFT checkpoint"
        if same
        else "RL starts that agree on at least 99 % of the prompts both scored (" + ", ".join(agree) + ")"
    )
    return (
        f" The runs share an SFT checkpoint ({why}): both estimates are conditional on that one start, their "
        "agreement says nothing about another start, and a pooled interval is narrower than one over starts."
    )

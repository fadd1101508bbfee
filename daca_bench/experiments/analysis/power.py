"""The SFT start as a random effect, always in the model (issue 58): the test `by_start` reports, its
variance components, the MDE a design of T starts x n seeds x P clusters would have, and a vectorised
simulation that checks both (null rate and power at the stated MDE).

Model of a paired difference x[u, p] (unit u = (start t, seed s), cluster p):
x = mu + a_t + b_ts + c_p + e, variances s2_start (the start x arm interaction), s2_seed, s2_prompt, s2_e.
Var(mean) = s2_start/T + s2_seed/N + s2_prompt/P + s2_e/(N P), estimated without a pretest by
(MS_starts + MS_prompts - MS_resid) / (N P) (the prompt term 0 where MS_prompts <= MS_resid, as in
stats.py), MS_starts on T - 1 df, with a Satterthwaite df capped at T - 1: two starts give one df.

    se, df = start_se_df(x, groups)                    # x: (units, clusters) or a stack (R, units, clusters)
    comps = start_components(x, groups)                # (s2_start, s2_seed, s2_prompt, s2_e)
    start_mde(comps, starts=8, seeds=2, clusters=68)   # what a design of 8 starts x 2 seeds would detect
    rejections(comps, 8, 2, 68, effect=0.0)            # its null rate by simulation (reps, fixed seed)
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .stats import noncentrality

COMPONENTS = ("s2_start", "s2_seed", "s2_prompt", "s2_e")


def _layout(groups, N: int) -> tuple[np.ndarray, int, int]:
    """(each unit's start index, T starts, n seeds per start); refuses an unbalanced design."""
    labels = list(groups)
    if len(labels) != N:
        raise ValueError(f"{len(labels)} start labels for {N} units")
    order = {g: i for i, g in enumerate(dict.fromkeys(labels))}
    idx = np.array([order[g] for g in labels])
    sizes = np.bincount(idx)
    if len(set(sizes.tolist())) != 1:
        raise ValueError(f"every SFT start needs the same number of seeds, got {dict(zip(order, sizes.tolist()))}")
    return idx, len(order), int(sizes[0])


def start_mean_squares(x, groups):
    """(MS_starts, MS_seeds within starts, MS_prompts, MS_resid) of a (units, clusters) matrix or a stack
    (R, units, clusters): floats, or arrays of R. MS_seeds is NaN with one seed per start."""
    x = np.asarray(x, dtype=float)
    N, P = x.shape[-2:]
    idx, T, n = _layout(groups, N)
    onehot = np.eye(T)[idx]  # (N, T)
    grand = x.mean(axis=(-2, -1))
    rows, cols = x.mean(-1), x.mean(-2)  # (..., N), (..., P)
    means = rows @ onehot / n  # (..., T)
    ms_b = P * n * ((means - grand[..., None]) ** 2).sum(-1) / (T - 1)
    ms_w = P * ((rows - means @ onehot.T) ** 2).sum(-1) / (T * (n - 1)) if n > 1 else np.full(np.shape(grand), math.nan)
    ms_p = N * ((cols - grand[..., None]) ** 2).sum(-1) / (P - 1)
    resid = x - rows[..., :, None] - cols[..., None, :] + grand[..., None, None]
    ms_e = (resid**2).sum(axis=(-2, -1)) / ((N - 1) * (P - 1))
    out = (ms_b, ms_w, ms_p, ms_e)
    return tuple(float(v) for v in out) if x.ndim == 2 else out


def _se_df(ms_b, ms_p, ms_e, T: int, N: int, P: int):
    """SE and df of the mean, the start term always in: the Satterthwaite df, at most the starts' T - 1
    (containment: with few starts a Satterthwaite df above T - 1 comes from a small MS_starts, the very
    draw whose SE is too small; it rejected a true null 6-7 % of the time at 2 starts, T - 1 at most 4 %)."""
    ms_b, ms_p, ms_e = (np.asarray(v, dtype=float) for v in (ms_b, ms_p, ms_e))
    on = ms_p > ms_e
    total = ms_b + np.where(on, ms_p - ms_e, 0.0)
    den = ms_b**2 / (T - 1) + np.where(on, ms_p**2 / (P - 1) + ms_e**2 / ((N - 1) * (P - 1)), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.sqrt(np.maximum(total, 0.0) / (N * P))
        df = np.where(den > 0, np.maximum(1.0, total * total / np.where(den > 0, den, 1.0)), math.inf)
    return se, np.minimum(df, T - 1.0)


def start_se_df(x, groups):
    """SE of mean(x) and its Satterthwaite df with the start term always in (no pretest): floats for
    one matrix, arrays for a stack. At least 2 starts and 2 clusters."""
    x = np.asarray(x, dtype=float)
    N, P = x.shape[-2:]
    _, T, _ = _layout(groups, N)
    if T < 2 or P < 2:
        raise ValueError(f"the start term needs at least 2 starts and 2 clusters, got {T} starts x {P} clusters")
    ms_b, _, ms_p, ms_e = start_mean_squares(x, groups)
    se, df = _se_df(ms_b, ms_p, ms_e, T, N, P)
    return (float(se), float(df)) if x.ndim == 2 else (se, df)


def start_p(x, groups):
    """Two-sided p of mean(x) / SE on the Satterthwaite df (arrays for a stack; NaN without spread)."""
    x = np.asarray(x, dtype=float)
    se, df = start_se_df(x, groups)
    m = x.mean(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(
            np.asarray(se) > 0, 2 * stats.t.sf(np.abs(m) / np.where(np.asarray(se) > 0, se, 1.0), df), math.nan
        )
    return float(p) if x.ndim == 2 else p


def start_components(x, groups) -> tuple[float, float, float, float]:
    """(s2_start, s2_seed, s2_prompt, s2_e) of a (units, clusters) matrix by the method of moments (a
    negative estimate is 0): what `start_mde` projects. With one seed per start the seed term is folded
    into the start term (s2_seed 0)."""
    x = np.asarray(x, dtype=float)
    N, P = x.shape
    _, T, n = _layout(groups, N)
    ms_b, ms_w, ms_p, ms_e = start_mean_squares(x, groups)
    within = ms_w if n > 1 else ms_e
    return (
        max(0.0, (ms_b - within) / (n * P)),
        max(0.0, (within - ms_e) / P) if n > 1 else 0.0,
        max(0.0, (ms_p - ms_e) / N),
        ms_e,
    )


def expected(comps, starts: int, seeds: int, clusters: int) -> tuple[float, float]:
    """(the true SE of the mean, the df the test will have in expectation) of a design of STARTS x
    SEEDS (per start) x CLUSTERS under COMPS: the expected mean squares through the test's formula."""
    s2_t, s2_s, s2_p, s2_e = comps
    T, n, P = int(starts), int(seeds), int(clusters)
    N = T * n
    ms_b, ms_p = s2_e + P * s2_s + P * n * s2_t, s2_e + N * s2_p
    se, df = _se_df(ms_b, ms_p, s2_e, T, N, P)
    return float(se), float(df)


def start_mde(comps, starts: int, seeds: int, clusters: int, alpha: float = 0.05, power: float = 0.80) -> float:
    """The planted difference a design finds with POWER at two-sided ALPHA: lambda(df) x SE with SE the
    true one (known components: no c4 correction) and lambda the noncentral t's at the expected df."""
    se, df = expected(comps, starts, seeds, clusters)
    return float(noncentrality(df, alpha, power) * se)


def simulate(comps, starts: int, seeds: int, clusters: int, effect: float, reps: int = 4000, seed: int = 0):
    """REPS (units, clusters) matrices of the model with mean EFFECT, as one (reps, T n, P) array, and
    each unit's start: Gaussian at the cluster level, a planted start x arm interaction of variance s2_start."""
    s2_t, s2_s, s2_p, s2_e = comps
    T, n, P = int(starts), int(seeds), int(clusters)
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(T), n)
    a = rng.normal(0, math.sqrt(s2_t), (reps, T))[:, groups]
    b = rng.normal(0, math.sqrt(s2_s), (reps, T * n))
    c = rng.normal(0, math.sqrt(s2_p), (reps, 1, P))
    e = rng.normal(0, math.sqrt(s2_e), (reps, T * n, P))
    return effect + (a + b)[:, :, None] + c + e, groups


def rejections(
    comps, starts: int, seeds: int, clusters: int, effect: float, reps: int = 4000, seed: int = 0, alpha: float = 0.05
) -> float:
    """The share of REPS simulated designs whose start-term test rejects at ALPHA (null rate at EFFECT 0,
    power at a planted EFFECT)."""
    x, groups = simulate(comps, starts, seeds, clusters, effect, reps, seed)
    return float(np.mean(start_p(x, groups) < alpha))


def power_block(
    comps_by_comparison: dict,
    starts: int,
    seeds: int,
    clusters: int,
    source: str,
    alpha: float = 0.05,
    power: float = 0.80,
) -> dict:
    """design.json's power analysis: per comparison its assumed components, the true SE, expected df and
    MDE of this design, written before the first cell."""
    rows = {}
    for name, comps in comps_by_comparison.items():
        se, df = expected(comps, starts, seeds, clusters)
        rows[name] = {
            **{k: round(float(v), 4) for k, v in zip(COMPONENTS, comps)},
            "se": round(se, 3),
            "df": round(df, 2),
            "mde_pp": round(start_mde(comps, starts, seeds, clusters, alpha, power), 2),
        }
    return {
        "starts": starts,
        "seeds_per_start": seeds,
        "clusters": clusters,
        "alpha": alpha,
        "power": power,
        "model": "x = mu + start + seed(start) + cluster + e; Var(mean) = s2_start/T + s2_seed/N + "
        "s2_prompt/P + s2_e/(N P), the start term always in, Satterthwaite df (analysis/power.py)",
        "components_from": source,
        "mde": rows,
        "max_mde_pp": max(r["mde_pp"] for r in rows.values()),
    }

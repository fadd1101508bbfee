"""Paired comparisons over seeds x test prompts: intervals and the minimum detectable effect.

Every cell of a grid is scored on its family's one fixed test set, so a comparison of a variant
with the baseline is a matrix of paired per-prompt differences d[s, p] (seed s, prompt p).
Its uncertainty has three sources: seeds, prompts and their interaction.

- `variance_components`: the variance of mean(d) from the two-way ANOVA mean squares of d (a
  crossed random-effects model: Var(mean) = s2_seed/S + s2_prompt/P + s2_resid/(S*P)), with a
  Satterthwaite degrees of freedom. The table's interval is mean +- t_{0.975, df} * SE: the
  mixed-model interval.
- `crossed_bootstrap`: the percentile interval of mean(d) from a two-way (crossed) bootstrap
  that resamples seeds and prompts independently (the hierarchical bootstrap for this design),
  kept beside it as a check. It counts the residual term more than once, so it is somewhat
  wider (conservative) when the seed x prompt noise is large.
- `mde`: the minimum detectable effect, lambda(df) * SE / c4(df): the true difference found with
  the given power by a two-sided t-test on the comparison's own df. lambda: the noncentrality of
  a noncentral t with that power; SE / c4(df): the SE freed of its downward bias on df. At df 7
  (8 seeds, seed-dominated) 3.39 SE, not the shortcut (t_0.975 + t_0.80) 3.26; at df 2 6.38, not
  5.36; 2.80 at large df. `table_tests`: the table's test and MDE on a stack of matrices at once.
- `t_interval`: the plain t-interval of per-seed means (the seeds-only interval). Where the seed
  term's estimate drops to 0 the mixed df jumps to about P - 1; `Comparison.seed_dropped` says so
  and the table prints the seeds-only interval beside the mixed one (and stars neither then
  unless the seeds-only interval excludes 0 too); the MDE is then the larger of the mixed
  model's and the seeds-only t-test's (S - 1 df), since both must find the effect.
- `by_cluster`: prompts that share a cluster (sudoku puzzles of one solution grid) are not
  independent: the (seeds, prompts) matrix becomes a (seeds, clusters) one whose column mean is
  the same prompt-level mean (a ratio estimator's linearisation), so the prompt unit of every
  interval, bootstrap and MDE is the cluster. `compare(d, clusters=keys)` does this first.
- `p_value` and `adjust`: the two-sided t-test p of the mixed model, and Holm's (or another)
  adjustment within a family (statsmodels' `multipletests`).
- `components`, `projected_mde`, `smallest`: planning. The three variances behind a measured
  comparison, the MDE it would have with other numbers of seeds and prompts, and the fewest of
  either that reach a target MDE (`daca-bench table RESULTS --plan 6`).

    c = compare(d, clusters=keys)   # d: (S, P) array, keys: P cluster keys -> Comparison(mean, lo, hi, p, ...)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats


@dataclass(frozen=True)
class Comparison:
    mean: float  # mean paired difference
    lo: float  # 95 % mixed-model interval: mean -+ t_{0.975, df} * se
    hi: float
    se: float  # standard error of the mean (variance components)
    df: float  # its Satterthwaite degrees of freedom
    mde: float  # minimum detectable effect (80 % power, two-sided 5 %, noncentral t on df, SE / c4(df))
    boot_lo: float  # 95 % crossed-bootstrap percentile interval
    boot_hi: float
    t_half: float  # half-width of the t-interval over per-seed means (NaN with one seed)
    seeds: int
    prompts: int
    clusters: int = 0  # the prompt unit's count: clusters of prompts (= prompts where each stands alone)
    p: float = math.nan  # two-sided p of the mixed-model t-test (NaN where there is no spread to judge)
    seed_dropped: bool = False  # the seed term was estimated at 0 (or one seed): df ~ clusters - 1

    @property
    def excludes_zero(self) -> bool:
        return self.lo > 0 or self.hi < 0

    @property
    def seeds_exclude_zero(self) -> bool:
        """The seeds-only interval (mean +- t_half over per-seed means) excludes 0."""
        return math.isfinite(self.t_half) and abs(self.mean) > self.t_half


def crossed_bootstrap(d: np.ndarray, n_boot: int = 2000, level: float = 0.95, seed: int = 0):
    """Percentile interval and bootstrap SE of mean(d) for a (seeds, prompts) matrix, resampling
    seeds and prompts independently. The mean over a resample is w_s^T d w_p / (S P), with w the
    multinomial counts of each draw, so no resampled matrix is ever built."""
    d = np.asarray(d, dtype=float)
    S, P = d.shape
    rng = np.random.default_rng(seed)
    ws = rng.multinomial(S, np.full(S, 1 / S), size=n_boot)  # (B, S)
    wp = rng.multinomial(P, np.full(P, 1 / P), size=n_boot)  # (B, P)
    means = np.einsum("bs,sp,bp->b", ws, d, wp) / (S * P)
    a = (1 - level) / 2
    lo, hi = np.quantile(means, [a, 1 - a])
    return float(lo), float(hi), float(means.std(ddof=1))


def mean_squares(d: np.ndarray) -> tuple[float, float, float]:
    """The two-way ANOVA mean squares of a (seeds, prompts) matrix: seeds, prompts, residual (for a
    stack (..., seeds, prompts), three arrays, one value per matrix)."""
    d = np.asarray(d, dtype=float)
    if d.ndim > 2:
        S, P = d.shape[-2:]
        grand = d.mean(axis=(-2, -1))
        row, col = d.mean(-1), d.mean(-2)
        ms_s = P * ((row - grand[..., None]) ** 2).sum(-1) / (S - 1)
        ms_p = S * ((col - grand[..., None]) ** 2).sum(-1) / (P - 1)
        resid = d - row[..., :, None] - col[..., None, :] + grand[..., None, None]
        return ms_s, ms_p, (resid**2).sum(axis=(-2, -1)) / ((S - 1) * (P - 1))
    S, P = d.shape
    grand = d.mean()
    row, col = d.mean(1), d.mean(0)
    ms_s = P * ((row - grand) ** 2).sum() / (S - 1)
    ms_p = S * ((col - grand) ** 2).sum() / (P - 1)
    resid = d - row[:, None] - col[None, :] + grand
    return float(ms_s), float(ms_p), float((resid**2).sum() / ((S - 1) * (P - 1)))


def _se_df(ms_s, ms_p, ms_e, S: int, P: int):
    """SE and Satterthwaite df of the mean from its mean squares (floats, or arrays of a stack).
    Var(mean) = s2_s/S + s2_p/P + s2_e/(S P) as a sum of mean squares; a component whose estimate
    is negative (its mean square below the residual's) is set to zero and drops out."""
    scalar = np.ndim(ms_s) == 0
    ms_s, ms_p, ms_e = (np.asarray(x, dtype=float) for x in (ms_s, ms_p, ms_e))
    df_e = (S - 1) * (P - 1)
    seed_on, prompt_on = ms_s > ms_e, ms_p > ms_e
    both, neither = seed_on & prompt_on, ~(seed_on | prompt_on)
    zero = np.zeros_like(ms_s)
    total = (
        np.where(seed_on, ms_s, zero)
        + np.where(prompt_on, ms_p, zero)
        + np.where(both, -ms_e, np.where(neither, ms_e, zero))
    )
    den = (
        np.where(seed_on, ms_s * ms_s / (S - 1), zero)
        + np.where(prompt_on, ms_p * ms_p / (P - 1), zero)
        + np.where(both | neither, ms_e * ms_e / df_e, zero)
    )
    var = total / (S * P)
    ok = var > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        se = np.where(ok, np.sqrt(np.where(ok, var, 0.0)), 0.0)
        df = np.where(ok & (den > 0), np.maximum(1.0, total * total / np.where(den > 0, den, 1.0)), math.inf)
    return (float(se), float(df)) if scalar else (se, df)


def variance_components(d: np.ndarray) -> tuple[float, float]:
    """SE of mean(d) and its Satterthwaite df from the two-way ANOVA of a (seeds, prompts) matrix.
    E[MS_seed] = s2_e + P s2_s, E[MS_prompt] = s2_e + S s2_p, E[MS_resid] = s2_e, hence
    Var(mean) = (MS_seed + MS_prompt - MS_resid) / (S P). With one seed (or one prompt) it is the
    one-way SE over the other axis."""
    d = np.asarray(d, dtype=float)
    S, P = d.shape
    if S == 1 or P == 1:
        x = d.ravel()
        n = x.size
        return (float(x.std(ddof=1) / math.sqrt(n)), float(n - 1)) if n > 1 else (math.nan, math.nan)
    return _se_df(*mean_squares(d), S, P)


def components(d: np.ndarray) -> tuple[float, float, float]:
    """The variances (s2_seed, s2_prompt, s2_resid) behind a (seeds, prompts) matrix, from its mean
    squares (method of moments; a negative estimate is 0): what `projected_mde` scales."""
    d = np.asarray(d, dtype=float)
    S, P = d.shape
    if S < 2 or P < 2:
        raise ValueError(f"components need at least 2 seeds and 2 prompts, got {S} x {P}")
    ms_s, ms_p, ms_e = mean_squares(d)
    return max(0.0, (ms_s - ms_e) / P), max(0.0, (ms_p - ms_e) / S), ms_e


def projected_mde(
    comps: tuple[float, float, float], seeds: int, prompts: int, alpha: float = 0.05, power: float = 0.80
) -> float:
    """The MDE the same comparison would have with `seeds` x `prompts`, if its variance components
    stay what they are: the mean squares that design would expect, through the table's own SE and
    Satterthwaite df. At the measured design it is the table's MDE."""
    s2_s, s2_p, s2_e = comps
    S, P = int(seeds), int(prompts)
    return mde(*_se_df(s2_e + P * s2_s, s2_e + S * s2_p, s2_e, S, P), alpha=alpha, power=power)


def smallest(
    comps: tuple[float, float, float],
    target: float,
    *,
    seeds: int | None = None,
    prompts: int | None = None,
    cap: int = 100_000,
    **kw,
) -> int | None:
    """The fewest seeds (give `prompts`) or prompts (give `seeds`) whose projected MDE is at most
    `target`, or None when even `cap` does not reach it (the other axis's spread alone is larger)."""
    if (seeds is None) == (prompts is None):
        raise ValueError("give exactly one of seeds= (to count prompts) or prompts= (to count seeds)")

    def ok(n: int) -> bool:
        return (
            projected_mde(comps, n, prompts, **kw) <= target
            if seeds is None
            else projected_mde(comps, seeds, n, **kw) <= target
        )

    if not ok(cap):
        return None
    lo, hi = 2, cap  # the MDE falls as either count grows: bisect for the first that reaches it
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def c4(df):
    """E[s] / sigma for an SE on df (s^2 = sigma^2 chi^2_df / df): sqrt(2/df) G((df+1)/2) / G(df/2)."""
    df = np.asarray(df, dtype=float)
    fin = np.isfinite(df) & (df > 0)
    safe = np.where(fin, df, 1.0)
    out = np.where(fin, np.sqrt(2.0 / safe) * np.exp(special.gammaln((safe + 1) / 2) - special.gammaln(safe / 2)), 1.0)
    return float(out) if out.ndim == 0 else out


def _power(lam, df, crit):
    """P(|T| > crit) for T noncentral t(df, lam) (normal where df is infinite)."""
    fin = np.isfinite(df)
    d = np.where(fin, df, 1.0)
    with np.errstate(invalid="ignore"):
        t = stats.nct.sf(crit, d, lam) + np.nan_to_num(stats.nct.cdf(-crit, d, lam))
    z = stats.norm.sf(crit - lam) + stats.norm.cdf(-crit - lam)
    return np.where(fin, t, z)


def noncentrality(df, alpha: float = 0.05, power: float = 0.80):
    """lambda with P(|T(df, lambda)| > t_{1-alpha/2, df}) = power (noncentral t; normal where df is
    infinite). Vectorised Newton steps from the Johnson-Welch approximation, to 1e-10."""
    df = np.asarray(df, dtype=float)
    fin = np.isfinite(df)
    d = np.where(fin, df, 1.0)
    crit = np.where(fin, stats.t.ppf(1 - alpha / 2, d), stats.norm.ppf(1 - alpha / 2))
    zp = stats.norm.ppf(power)
    lam = np.where(fin, crit * (1 - 1 / (4 * d)) + zp * np.sqrt(1 + crit**2 / (2 * d)), crit + zp)
    for _ in range(30):
        f = _power(lam, df, crit) - power
        h = 1e-5
        slope = (_power(lam + h, df, crit) - _power(lam - h, df, crit)) / (2 * h)
        step = np.where(slope > 0, f / np.where(slope > 0, slope, 1.0), 0.0)
        lam = np.maximum(lam - step, 1e-6)
        if np.all(np.abs(step) < 1e-10):
            break
    return float(lam) if lam.ndim == 0 else lam


def mde(se, df, alpha: float = 0.05, power: float = 0.80):
    """Minimum detectable effect of a two-sided level-alpha t-test on df degrees of freedom with
    the given power: noncentrality(df) * se / c4(df) (se / c4 is the unbiased estimate of the true
    SE behind a measured one). Floats, or arrays (a stack of comparisons)."""
    scalar = np.ndim(se) == 0 and np.ndim(df) == 0
    se, df = np.asarray(se, dtype=float), np.asarray(df, dtype=float)
    ok = np.isfinite(se) & ~np.isnan(df)
    if not ok.any():
        return math.nan if scalar else np.full(np.broadcast(se, df).shape, math.nan)
    out = np.where(
        ok, noncentrality(np.where(ok, df, math.inf), alpha, power) * se / c4(np.where(ok, df, math.inf)), math.nan
    )
    return float(out) if scalar else out


def t_interval(values, level: float = 0.95) -> tuple[float, float]:
    """Mean and t-interval half-width of a list (NaN half-width with fewer than two values)."""
    x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if x.size == 0:
        return math.nan, math.nan
    if x.size < 2:
        return float(x.mean()), math.nan
    return float(x.mean()), float(stats.t.ppf((1 + level) / 2, x.size - 1) * stats.sem(x))


def by_cluster(d: np.ndarray, clusters) -> np.ndarray:
    """(seeds, clusters) matrix from a (seeds, prompts) one and each prompt's cluster key: per seed s
    and cluster c, z = C/P * n_c * (mean of c's prompts - mean of s's row) + mean of s's row, so each
    row keeps its mean (the estimate is the prompt-level mean) while prompts of one cluster vary
    together. Clusters in the order they first appear; where each prompt is its own cluster, d."""
    d = np.asarray(d, dtype=float)
    keys = list(clusters)
    if len(keys) != d.shape[-1]:
        raise ValueError(f"{len(keys)} cluster keys for {d.shape[-1]} prompts")
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    C, P = len(index), d.shape[-1]
    if C == P:
        return d
    cols = np.array([index[k] for k in keys])
    onehot = np.zeros((P, C))
    onehot[np.arange(P), cols] = 1.0
    n = onehot.sum(0)  # (C,) prompts per cluster
    row = d.mean(-1, keepdims=True)  # (S, 1) (a stack: (..., S, 1))
    return C / P * (d @ onehot - n * row) + row  # (S, C)


def p_value(mean: float, se: float, df: float) -> float:
    """Two-sided p of mean / se against t(df) (normal where df is infinite); NaN without spread."""
    if not (math.isfinite(se) and se > 0):
        return math.nan
    z = abs(mean) / se
    return float(2 * (stats.t.sf(z, df) if math.isfinite(df) else stats.norm.sf(z)))


def adjust(pvalues, method: str = "holm") -> list[float]:
    """Family-wise adjusted p (statsmodels' multipletests; 'none' returns them as they are); NaN
    entries (comparisons without spread) stay NaN and do not count towards the family's size."""
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(p.shape, math.nan)
    ok = np.isfinite(p)
    if method == "none" or not ok.any():
        out[ok] = p[ok]
        return out.tolist()
    from statsmodels.stats.multitest import multipletests

    out[ok] = multipletests(p[ok], method=method)[1]
    return out.tolist()


def table_tests(d: np.ndarray, alpha: float = 0.05, clusters=None) -> dict[str, np.ndarray]:
    """What `compare` and the table decide about each matrix of a stack (R, seeds, prompts) at once,
    without the bootstrap: mean, se, df, p, mde, seed_dropped, seeds_ok and `sig`, the table's star
    for a comparison alone in its family (p < alpha and, where the seed term dropped out, a seeds-only
    interval that excludes 0). At least 2 seeds and 2 prompts (clusters)."""
    d = np.asarray(d, dtype=float)
    if clusters is not None:
        d = by_cluster(d, clusters)
    R, S, P = d.shape
    if S < 2 or P < 2:
        raise ValueError(f"table_tests needs at least 2 seeds and 2 prompts, got {S} x {P}")
    ms_s, ms_p, ms_e = mean_squares(d)
    se, df = _se_df(ms_s, ms_p, ms_e, S, P)
    m = d.mean(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(m) / np.where(se > 0, se, 1.0)
        tail = np.where(np.isfinite(df), stats.t.sf(z, np.where(np.isfinite(df), df, 1.0)), stats.norm.sf(z))
        p = np.where(se > 0, 2 * tail, math.nan)
        seeds = d.mean(-1)
        t_half = stats.t.ppf(0.975, S - 1) * seeds.std(-1, ddof=1) / math.sqrt(S)
    dropped = ms_s <= ms_e
    seeds_ok = np.abs(m) > t_half
    return {
        "mean": m,
        "se": se,
        "df": df,
        "p": p,
        "mde": np.where(se > 0, _table_mde(mde(se, df), dropped, t_half, S, alpha), math.nan),
        "seed_dropped": dropped,
        "seeds_ok": seeds_ok,
        "sig": (p < alpha) & (~dropped | seeds_ok),
    }


def compare(d: np.ndarray, n_boot: int = 2000, seed: int = 0, clusters=None) -> Comparison:
    """Everything the table reports about one paired comparison; with `clusters` (one key per
    prompt) the prompt unit is the cluster (`by_cluster`)."""
    d = np.asarray(d, dtype=float)
    if d.ndim == 1:
        d = d[None, :]
    S, P = d.shape
    if clusters is not None:
        d = by_cluster(d, clusters)
    boot_lo, boot_hi, _ = crossed_bootstrap(d, n_boot=n_boot, seed=seed)
    se, df = variance_components(d)
    m = float(d.mean())
    if not se > 0:  # no spread at all (every paired difference the same): nothing to judge, no MDE
        return Comparison(m, m, m, se, df, math.nan, boot_lo, boot_hi, math.nan, S, P, d.shape[1])
    half = float(stats.t.ppf(0.975, df) * se) if math.isfinite(df) else float(stats.norm.ppf(0.975) * se)
    _, t_half = t_interval(d.mean(1).tolist())
    dropped = S < 2 or (d.shape[1] > 1 and mean_squares(d)[0] <= mean_squares(d)[2])
    return Comparison(
        m,
        m - half,
        m + half,
        se,
        df,
        _table_mde(mde(se, df), dropped, t_half, S),
        boot_lo,
        boot_hi,
        t_half,
        S,
        P,
        d.shape[1],
        p_value(m, se, df),
        dropped,
    )


def _table_mde(mixed, dropped, t_half, S: int, alpha: float = 0.05, power: float = 0.80):
    """The MDE of the test the table stars by: the mixed model's, and where the seed term dropped out
    (the star then needs the seeds-only interval to exclude 0 too) the larger of it and the seeds-only
    t-test's MDE (SE t_half / t_{0.975, S-1} on S - 1 df). With one seed, the mixed model's."""
    if S < 2:
        return mixed
    se_seeds = np.asarray(t_half, dtype=float) / stats.t.ppf(0.975, S - 1)
    seeds = mde(se_seeds, np.full(np.shape(se_seeds), float(S - 1)), alpha, power)
    out = np.where(np.asarray(dropped) & np.isfinite(seeds), np.fmax(mixed, seeds), mixed)
    return float(out) if np.ndim(out) == 0 else out


def table_mde(d: np.ndarray, clusters=None, alpha: float = 0.05, power: float = 0.80) -> float:
    """The MDE the table reports for a (seeds, prompts) matrix (`compare`'s, without the bootstrap)."""
    d = np.asarray(d, dtype=float)
    if clusters is not None:
        d = by_cluster(d, clusters)
    S = d.shape[0]
    se, df = variance_components(d)
    if not se > 0:
        return math.nan
    dropped = S < 2 or (d.shape[1] > 1 and mean_squares(d)[0] <= mean_squares(d)[2])
    return _table_mde(mde(se, df, alpha, power), dropped, t_interval(d.mean(1).tolist())[1], S, alpha, power)

"""What a replication report may claim (issue 58): equivalence only from two one-sided tests (TOST)
against a declared margin, a pooled estimate by Hartung-Knapp (a t interval on k - 1 df around the
random-effects mean), the RL start compared on the prompts both runs scored, and whether the runs
share an SFT checkpoint.

    tost_p(diff, se, df, margin)          # p of "|true difference| >= margin": < alpha = equivalent within ±margin
    hartung_knapp(estimates, ses)         # (mean, se, df, lo, hi, tau2): random effects, DerSimonian-Laird tau2
    start_agreement(here, there)          # per-prompt rewards of two RL starts -> (shared, agreeing, acc, acc)
    checkpoints(folder)                   # the SFT checkpoints a run's cells started from
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from scipy import stats


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
    w = 1 / se ** 2
    fixed = float((w * x).sum() / w.sum())
    q = float((w * (x - fixed) ** 2).sum())
    c = float(w.sum() - (w ** 2).sum() / w.sum())
    tau2 = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
    wr = 1 / (se ** 2 + tau2)
    m = float((wr * x).sum() / wr.sum())
    var = max(float((wr * (x - m) ** 2).sum() / ((k - 1) * wr.sum())), 1 / float(wr.sum()))
    half = float(stats.t.ppf((1 + level) / 2, k - 1) * math.sqrt(var))
    return {"mean": m, "se": math.sqrt(var), "df": float(k - 1), "lo": m - half, "hi": m + half, "tau2": tau2}


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
    why = "the same recorded SFT checkpoint" if same else \
        "RL starts that agree on at least 99 % of the prompts both scored (" + ", ".join(agree) + ")"
    return (f" The runs share an SFT checkpoint ({why}): both estimates are conditional on that one start, their "
            "agreement says nothing about another start, and a pooled interval is narrower than one over starts.")

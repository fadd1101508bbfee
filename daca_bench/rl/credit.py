"""Denoising Progress Scores (DPS): per-token weights from the sampler's trajectory record,
with no extra forward pass (docs/method.md, section 4).

    w = dps_weights(batch.trajectory, batch.completion_mask, DPSConfig(enabled=True, score="progress"))  # (N, L)

A reading is a score (SCORES) and a normalisation (NORMS). Scores per token: the progress of
the step that committed it (`progress`: the mean confidence gain over the positions masked
at that step, a committed position counting as confidence 1, so the last step is scored like
the others), its surprise 1 - p(o_k) (`surprise`), its earliness 1 - (tau_k - 1)/T
(`commit_time`), or the control `random` (uniform draws keyed by the sequence id: no
information). Normalisations over each sequence's valid tokens turn scores into
w = clip(1 + lambda * z, w_min, w_max), rescaled to mean 1: `rank` (z from the score's rank:
the spread is set by lambda alone, the same for every score, so `random` is an exactly
matched control), `zscore` (z = standardised score) or `ratio` (z = (s - mean) / mean |s|:
scores that barely differ give weights near 1). The scope (SCOPES) is what a sequence's weights are
normalised over: the whole completion (`completion`) or each decoding block on its own (`block`: a block
model's blocks, the record's `block` index; every block's weights then have mean 1).
"""

from __future__ import annotations

import math
import warnings

import torch

from ..config import DPSConfig
from .strata import keyed_generator

SCORES = {}
NORMS = {}
SCOPES = {}


def _score(fn):
    SCORES[fn.__name__.removeprefix("score_")] = fn
    return fn


def _norm(fn):
    NORMS[fn.__name__.removeprefix("norm_")] = fn
    return fn


def step_progress(traj) -> torch.Tensor:
    """(N, T) progress g_t = mean over j in M_t of (c^{t+1}_j - c^t_j), where a position committed
    at step t counts as c^{t+1}_j = 1 (0 for a step with nothing masked)."""
    conf = traj.conf  # (N, T, L), NaN where not masked
    cur = conf
    nxt = torch.cat([conf[:, 1:], torch.full_like(conf[:, :1], math.nan)], dim=1)  # step t+1
    masked = ~torch.isnan(cur)  # j in M_t
    after = torch.where(torch.isnan(nxt), torch.ones_like(nxt), nxt)  # committed at t: confidence 1
    gain = torch.where(masked, after - cur, torch.zeros_like(cur))
    return gain.sum(-1) / masked.sum(-1).clamp(min=1)


@_score
def score_progress(traj, seq_ids=None, seed=0) -> torch.Tensor:
    g = step_progress(traj)  # (N, T)
    return g.gather(1, (traj.commit_step - 1).clamp(min=0))


@_score
def score_surprise(traj, seq_ids=None, seed=0) -> torch.Tensor:
    return 1 - traj.commit_logp.exp()


@_score
def score_commit_time(traj, seq_ids=None, seed=0) -> torch.Tensor:
    T = traj.commit_step.max(dim=1, keepdim=True).values.clamp(min=1)
    return 1 - (traj.commit_step - 1).float() / T


@_score
def score_random(traj, seq_ids=None, seed=0) -> torch.Tensor:
    """The control: uniform scores keyed by (seed, sequence id), independent of everything the
    sampler recorded. A real reading must beat it."""
    n, L = traj.commit_step.shape
    ids = range(n) if seq_ids is None else seq_ids
    return torch.stack([torch.rand(L, generator=keyed_generator(seed, "dps-random", sid)) for sid in ids])


def _masked_mean(x, v, n):
    return (x * v).sum(1, keepdim=True) / n


@_norm
def norm_rank(s, v, n):
    """z from the rank among the valid tokens (ties share their mean rank), scaled to unit variance."""
    big = torch.where(v.bool(), s, torch.full_like(s, math.inf))  # invalid tokens rank last
    lo = (big[:, :, None] > big[:, None, :]).float().sum(-1)  # tokens strictly below
    ties = (big[:, :, None] == big[:, None, :]).float().sum(-1)
    u = (lo + (ties + 1) / 2 - 0.5) / n  # mid-rank in (0, 1)
    return (u - 0.5) * math.sqrt(12)


@_norm
def norm_zscore(s, v, n):
    mean = _masked_mean(s, v, n)
    std = _masked_mean((s - mean) ** 2, v, n).sqrt()
    return (s - mean) / (std + 1e-6)


@_norm
def norm_ratio(s, v, n):
    mean = _masked_mean(s, v, n)
    return (s - mean) / (_masked_mean(s.abs(), v, n) + 1e-6)


def _weights(s, v, cfg: DPSConfig) -> torch.Tensor:
    """(R, C) scores and valid flags -> clip(1 + lambda * z) rescaled to mean 1 over each row's valid tokens."""
    n = v.sum(1, keepdim=True).clamp(min=1)
    w = (1 + cfg.lam * NORMS[cfg.norm](s, v, n)).clamp(cfg.w_min, cfg.w_max)
    return w / _masked_mean(w, v, n).clamp(min=1e-12)


def scope_completion(s, v, cfg: DPSConfig, traj) -> torch.Tensor:
    """One normalisation per sequence, over its whole completion (the default)."""
    return _weights(s, v, cfg)


def scope_block(s, v, cfg: DPSConfig, traj) -> torch.Tensor:
    """One normalisation per decoding block (the record's `block`, equal blocks): a block's weights rank its
    tokens against each other only, and every block keeps mean weight 1, as each factor
    log p(y_b | x, y_<b) keeps its share of the sequence's likelihood."""
    if traj.block is None:
        raise ValueError("dps.scope=block needs the trajectory record's block index (rl/sampler.py)")
    n, L = s.shape
    nb = int(traj.block.max()) + 1
    return _weights(s.reshape(n * nb, L // nb), v.reshape(n * nb, L // nb), cfg).reshape(n, L)


SCOPES.update(completion=scope_completion, block=scope_block)


def dps_weights(
    traj, valid: torch.Tensor, cfg: DPSConfig, *, seq_ids=None, seed: int = 0, warn_disabled: bool = True
) -> torch.Tensor:
    """(N, L) constant weights with mean 1 over each sequence's valid tokens; all 1 when disabled.
    `seq_ids` and `seed` key the `random` control's draws (the trainer passes its sequence ids)."""
    if not cfg.enabled:
        if warn_disabled:
            warnings.warn(
                "dps_weights: DPSConfig(enabled=False) gives all weights 1 (the plain base method); "
                "pass DPSConfig(enabled=True, ...) to apply DPS",
                stacklevel=2,
            )
        return torch.ones(valid.shape, dtype=torch.float32)
    if cfg.score not in SCORES:
        raise ValueError(f"unknown dps.score {cfg.score!r}; choose from {', '.join(SCORES)}")
    if cfg.norm not in NORMS:
        raise ValueError(f"unknown dps.norm {cfg.norm!r}; choose from {', '.join(NORMS)}")
    if cfg.scope not in SCOPES:
        raise ValueError(f"unknown dps.scope {cfg.scope!r}; choose from {', '.join(SCOPES)}")
    s = SCORES[cfg.score](traj, seq_ids=seq_ids, seed=seed).float()  # (N, L)
    w = SCOPES[cfg.scope](s, valid.float(), cfg, traj)
    return torch.where(valid, w, torch.ones_like(w)).detach()


def weight_stats(w: torch.Tensor, valid: torch.Tensor) -> dict:
    vals = w[valid]
    return {
        "dps_w_mean": vals.mean().item(),
        "dps_w_std": vals.std().item() if vals.numel() > 1 else 0.0,
        "dps_w_min": vals.min().item(),
        "dps_w_max": vals.max().item(),
    }

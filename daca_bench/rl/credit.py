"""Denoising Progress Scores (DPS): per-token weights from the sampler's trajectory record,
with no extra forward pass (docs/method.md, section 4).

    w = dps_weights(batch.trajectory, batch.completion_mask, DPSConfig(score="progress"))  # (N, L)

Progress of step t: g_t = mean over positions still masked after step t of (c^{t+1}_j - c^t_j),
g_T = 0. A token's score is the progress of the step that committed it (`progress`), its
surprise 1 - p(o_k) (`surprise`), or its earliness 1 - (tau_k - 1)/T (`commit_time`).
Weights: z-score over the valid tokens, w = clip(1 + lambda z, w_min, w_max), rescaled to mean 1.
"""
from __future__ import annotations

import torch

from ..config import DPSConfig

SCORES = {}




def _score(fn):
    SCORES[fn.__name__.removeprefix("score_")] = fn
    return fn


def step_progress(conf: torch.Tensor) -> torch.Tensor:
    """(N, T, L) confidences -> (N, T) progress g_t (0 where nothing stays masked, and at t = T)."""
    cur, nxt = conf[:, :-1], conf[:, 1:]  # steps t and t+1
    stays = ~torch.isnan(nxt)  # j in M_{t+1}
    diff = torch.where(stays, nxt - cur, torch.zeros_like(nxt))
    count = stays.sum(-1)
    g = diff.sum(-1) / count.clamp(min=1)
    return torch.cat([g, torch.zeros_like(g[:, :1])], dim=1)


@_score
def score_progress(traj) -> torch.Tensor:
    g = step_progress(traj.conf)  # (N, T)
    return g.gather(1, (traj.commit_step - 1).clamp(min=0))


@_score
def score_surprise(traj) -> torch.Tensor:
    return 1 - traj.commit_logp.exp()


@_score
def score_commit_time(traj) -> torch.Tensor:
    T = traj.commit_step.max(dim=1, keepdim=True).values.clamp(min=1)
    return 1 - (traj.commit_step - 1).float() / T


def dps_weights(traj, valid: torch.Tensor, cfg: DPSConfig) -> torch.Tensor:
    """(N, L) constant weights with mean 1 over each sequence's valid tokens; all 1 when disabled."""
    if not cfg.enabled:
        return torch.ones(valid.shape, dtype=torch.float32)
    if cfg.score not in SCORES:
        raise ValueError(f"unknown dps.score {cfg.score!r}; choose from {', '.join(SCORES)}")
    s = SCORES[cfg.score](traj).float()  # (N, L)
    v = valid.float()
    n = v.sum(1, keepdim=True).clamp(min=1)
    mean = (s * v).sum(1, keepdim=True) / n
    std = (((s - mean) ** 2) * v).sum(1, keepdim=True).div(n).sqrt()
    w = (1 + cfg.lam * (s - mean) / (std + 1e-6)).clamp(cfg.w_min, cfg.w_max)
    w = w / ((w * v).sum(1, keepdim=True) / n)
    return torch.where(valid, w, torch.ones_like(w)).detach()


def weight_stats(w: torch.Tensor, valid: torch.Tensor) -> dict:
    vals = w[valid]
    return {"dps_w_mean": vals.mean().item(), "dps_w_std": vals.std().item() if vals.numel() > 1 else 0.0,
            "dps_w_min": vals.min().item(), "dps_w_max": vals.max().item()}

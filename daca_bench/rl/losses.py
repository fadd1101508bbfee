"""Advantages and the policy losses of the three base methods; DPS weights and any
likelihood estimator plug into all of them (docs/method.md, section 8).

    adv = ADVANTAGES[cfg.base](rewards_grouped, cfg)          # (B*G,)
    loss, stats = LOSSES[cfg.base](logp, old_logp, ref_logp, adv, valid, weights, cfg)

- grpo (d1 diffu-GRPO): A = r - mean(group) (optionally / std), token-level clipped ratio,
  k3 KL to the reference with beta.
- gspo: sequence ratio exp(sum_k w_k (l_k - l_old_k) / sum_k w_k), clipped per sequence.
- reinforce_pp (REINFORCE++): group-mean baseline, advantage normalised over the whole
  batch, token clipping, KL as a per-token penalty on the advantage; no critic.
`cfg.loss_type` picks how token losses become one number (AGGREGATIONS): `grpo`, the mean
over each sequence's valid tokens then over sequences; `bnpo`, d1's sum over the batch's
valid tokens divided by their count; `dr_grpo`, the sum divided by the constant N * L
(Dr. GRPO: no length normalisation).
Rewards that are infrastructure failures (NaN) are left out of every statistic and get
advantage 0, so they contribute nothing.
"""
from __future__ import annotations

import torch

from ..config import LossConfig


def _group_stats(r: torch.Tensor):
    """(B, G) rewards with NaN = unscored -> finite mask, group mean and std over the scored ones."""
    ok = torch.isfinite(r)
    n = ok.sum(1, keepdim=True)
    r0 = torch.where(ok, r, torch.zeros_like(r))
    mean = r0.sum(1, keepdim=True) / n.clamp(min=1)
    var = (torch.where(ok, r - mean, torch.zeros_like(r)) ** 2).sum(1, keepdim=True) / n.clamp(min=1)
    return ok, mean, var.sqrt()


def advantages_grpo(r: torch.Tensor, cfg: LossConfig) -> torch.Tensor:
    ok, mean, std = _group_stats(r)
    adv = r - mean
    if cfg.scale_rewards:
        adv = adv / (std + 1e-4)
    return torch.where(ok, adv, torch.zeros_like(adv)).flatten()


def advantages_reinforce_pp(r: torch.Tensor, cfg: LossConfig) -> torch.Tensor:
    ok, mean, _ = _group_stats(r)
    adv = torch.where(ok, r - mean, torch.zeros_like(r))
    vals = adv[ok]
    std = vals.std(unbiased=False) if vals.numel() > 1 else torch.tensor(1.0)
    return torch.where(ok, (adv - vals.mean()) / (std + 1e-6), torch.zeros_like(adv)).flatten()


ADVANTAGES = {"grpo": advantages_grpo, "gspo": advantages_grpo, "reinforce_pp": advantages_reinforce_pp}


def _k3(logp, ref_logp):
    d = ref_logp - logp
    return d.exp() - d - 1


def _masked_mean(x, mask):
    """Mean over each sequence's valid tokens, then over sequences: (N, L) -> scalar."""
    return ((x * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()


def _token_mean(x, mask):
    """bnpo (d1): sum over the batch's valid tokens / their count."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


def _constant_norm(x, mask):
    """dr_grpo: sum over valid tokens / (N * L), the same constant for every batch of this shape."""
    return (x * mask).sum() / mask.numel()


AGGREGATIONS = {"grpo": _masked_mean, "bnpo": _token_mean, "dr_grpo": _constant_norm}


def _clip_stats(ratio, mask, eps):
    clipped = ((ratio < 1 - eps) | (ratio > 1 + eps)).float()
    return _masked_mean(clipped, mask)


def loss_grpo(logp, old_logp, ref_logp, adv, valid, weights, cfg: LossConfig):
    mask = valid.float()
    ratio = (logp - old_logp).exp()  # (N, L)
    a = adv[:, None]
    surrogate = torch.min(ratio * a, ratio.clamp(1 - cfg.epsilon, 1 + cfg.epsilon) * a)
    per_token = -weights * surrogate
    kl = _k3(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    if cfg.beta:
        per_token = per_token + cfg.beta * kl
    return AGGREGATIONS[cfg.loss_type](per_token, mask), {"kl": _masked_mean(kl, mask).item(),
                                           "clip_frac": _clip_stats(ratio, mask, cfg.epsilon).item()}


def loss_gspo(logp, old_logp, ref_logp, adv, valid, weights, cfg: LossConfig):
    mask = valid.float()
    w = weights * mask
    log_ratio = (w * (logp - old_logp)).sum(1) / w.sum(1).clamp(min=1e-8)  # (N,)
    s = log_ratio.exp()
    surrogate = torch.min(s * adv, s.clamp(1 - cfg.epsilon_seq, 1 + cfg.epsilon_seq) * adv)
    loss = -surrogate.mean()
    kl = _k3(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    if cfg.beta:
        loss = loss + cfg.beta * AGGREGATIONS[cfg.loss_type](kl, mask)
    clip = ((s < 1 - cfg.epsilon_seq) | (s > 1 + cfg.epsilon_seq)).float().mean()
    return loss, {"kl": _masked_mean(kl, mask).item(), "clip_frac": clip.item()}


def loss_reinforce_pp(logp, old_logp, ref_logp, adv, valid, weights, cfg: LossConfig):
    mask = valid.float()
    a = adv[:, None].expand_as(logp)
    kl = (old_logp - ref_logp).detach() if ref_logp is not None else torch.zeros_like(logp)
    if cfg.beta:
        a = a - cfg.beta * kl  # KL as a per-token reward penalty
    ratio = (logp - old_logp).exp()
    surrogate = torch.min(ratio * a, ratio.clamp(1 - cfg.epsilon, 1 + cfg.epsilon) * a)
    return AGGREGATIONS[cfg.loss_type](-weights * surrogate, mask), {"kl": _masked_mean(kl, mask).item(),
                                                      "clip_frac": _clip_stats(ratio, mask, cfg.epsilon).item()}


LOSSES = {"grpo": loss_grpo, "gspo": loss_gspo, "reinforce_pp": loss_reinforce_pp}

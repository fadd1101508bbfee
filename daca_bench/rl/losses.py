"""Advantages and the policy losses of every base method; DPS weights and any likelihood
estimator plug into all of them (docs/method.md, section 8 and "The field's methods as bases").

    adv = ADVANTAGES[cfg.base](rewards_grouped, cfg)          # (B*G,)
    loss, stats = LOSSES[cfg.base](logp, old_logp, ref_logp, adv, valid, weights, cfg)

- grpo (d1 diffu-GRPO): A = r - mean(group) (optionally / std), token-level clipped ratio,
  k3 KL to the reference with beta.
- gspo: sequence ratio exp(sum_k w_k (l_k - l_old_k) / sum_k w_k), clipped per sequence.
- reinforce_pp (REINFORCE++): group-mean baseline, advantage normalised over the whole
  batch, token clipping, KL as a per-token penalty on the advantage; no critic.
- the field's methods (wd1, spg, espo, coupled_grpo, map, tracerl) live one per module in rl/bases/
  and are registered here, so every reader of LOSSES and ADVANTAGES sees them.
`cfg.loss_type` picks how token losses become one number (AGGREGATIONS, rl/lossparts.py).
Rewards that are infrastructure failures (NaN) are left out of every statistic and get
advantage 0, so they contribute nothing.
"""

from __future__ import annotations

import torch

from ..config import LossConfig
from .lossparts import AGGREGATIONS, clip_stats, group_stats, k3, loss_grpo, masked_mean

__all__ = ["ADVANTAGES", "AGGREGATIONS", "LOSSES"]


def advantages_grpo(r: torch.Tensor, cfg: LossConfig) -> torch.Tensor:
    ok, mean, std = group_stats(r, cfg.std_unbiased)
    adv = r - mean
    if cfg.scale_rewards:
        adv = adv / (std + 1e-4)
    return torch.where(ok, adv, torch.zeros_like(adv)).flatten()


def advantages_reinforce_pp(r: torch.Tensor, cfg: LossConfig) -> torch.Tensor:
    ok, mean, _ = group_stats(r)
    adv = torch.where(ok, r - mean, torch.zeros_like(r))
    vals = adv[ok]
    std = vals.std(unbiased=False) if vals.numel() > 1 else torch.tensor(1.0)
    return torch.where(ok, (adv - vals.mean()) / (std + 1e-6), torch.zeros_like(adv)).flatten()


ADVANTAGES = {"grpo": advantages_grpo, "gspo": advantages_grpo, "reinforce_pp": advantages_reinforce_pp}


def loss_gspo(logp, old_logp, ref_logp, adv, valid, weights, cfg: LossConfig):
    mask = valid.float()
    w = weights * mask
    log_ratio = (w * (logp - old_logp)).sum(1) / w.sum(1).clamp(min=1e-8)  # (N,)
    s = log_ratio.exp()
    surrogate = torch.min(s * adv, s.clamp(1 - cfg.epsilon_seq, 1 + cfg.epsilon_seq) * adv)
    loss = -surrogate.mean()
    kl = k3(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    if cfg.beta:
        loss = loss + cfg.beta * AGGREGATIONS[cfg.loss_type](kl, mask)
    return loss, {"kl": masked_mean(kl, mask).item(), **clip_stats(s, adv, mask, cfg.epsilon_seq)}


def loss_reinforce_pp(logp, old_logp, ref_logp, adv, valid, weights, cfg: LossConfig):
    mask = valid.float()
    a = adv[:, None].expand_as(logp)
    kl = (old_logp - ref_logp).detach() if ref_logp is not None else torch.zeros_like(logp)
    if cfg.beta:
        a = a - cfg.beta * kl  # KL as a per-token reward penalty
    ratio = (logp - old_logp).exp()
    surrogate = torch.min(ratio * a, ratio.clamp(1 - cfg.epsilon, 1 + cfg.epsilon) * a)
    return AGGREGATIONS[cfg.loss_type](-weights * surrogate, mask), {
        "kl": masked_mean(kl, mask).item(),
        **clip_stats(ratio, adv, mask, cfg.epsilon),
    }


LOSSES = {"grpo": loss_grpo, "gspo": loss_gspo, "reinforce_pp": loss_reinforce_pp}


def _register_field_bases():
    from .bases import FIELD

    for name, base in FIELD.items():
        ADVANTAGES[name] = base.advantage
        LOSSES[name] = base.loss


_register_field_bases()

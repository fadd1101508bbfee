"""wd1: the ratio-free weighted likelihood (xiaohangt/wd1, wd1/trainers/rev_grpo_trainer.py:145-160).

    c = advantages_wd1(r, cfg)   # (B*G,): G (softmax_g(A) - softmax_g(-A)), A = r - mean_group
    loss = mean_i(-c_i sum_k w_k m_k l_ik)

wd1 raises the likelihood of each completion by its softmax weight over the group and lowers it
by the softmax of the negated advantage; no ratio, clip, old policy, reference or KL. The
softmax is taken per group here (in ADVANTAGES, so micro-batches never split it); wd1's is over
its per-device batch, which its recipe makes exactly one group. The likelihood is any per-token
estimator (SML included); DPS weights the token sum.
"""

from __future__ import annotations

import torch

from ..lossparts import group_stats


def advantages_wd1(r: torch.Tensor, cfg=None) -> torch.Tensor:
    ok, mean, _ = group_stats(r)
    a = torch.where(ok, r - mean, torch.zeros_like(r))  # (B, G)
    neg_inf = torch.full_like(a, -torch.inf)
    pos = torch.softmax(torch.where(ok, a, neg_inf), dim=1)
    neg = torch.softmax(torch.where(ok, -a, neg_inf), dim=1)
    c = r.shape[1] * (pos - neg)
    return torch.where(ok, c, torch.zeros_like(c)).nan_to_num(0.0).flatten()


def loss_wd1(logp, old_logp, ref_logp, adv, valid, weights, cfg):
    mask = valid.float()
    seq = (weights * mask * logp).sum(1)  # (N,): the token sum, as wd1
    return -(adv * seq).mean(), {"kl": 0.0, "clip_frac": 0.0, "clip_frac_any": 0.0}

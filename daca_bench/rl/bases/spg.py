"""SPG, sandwiched policy gradient (facebookresearch/SPG, spg/spg_trainer.py): a lower bound
(ELBO) for completions with A > 0 and an upper bound (EUBO) for the others; no ratio, no KL.

    A_i = r_i - mean(group)                                      (:720, no std)
    P_i = ELBO_i if A_i > 0 else EUBO_i (eubo) | w EUBO_i + (1 - w) ELBO_i (mix)   (:543-556)
    loss = -sum_i A_i |o_i| P_i / sum_i |o_i|                    (:115-118, per micro-batch)

ELBO_i and EUBO_i are means of per-token terms e_k and u_k (likelihood.spg_logprobs, block-wise
masks :334-378); DPS turns them into weighted means sum w e / sum w. Guards: a non-finite bound
stops the run in one line (SPG#5 saw NaN per-sequence log-probs), and a token whose upper bound is
already below `loss.spg_floor` is pushed no lower (SPG#2: `eubo` collapsed to a repeated token);
`mix`, the maintainers' mitigation, is the default.
"""
from __future__ import annotations

import functools

import torch

from ..likelihood import spg_logprobs
from ..lossparts import group_stats

MODES = ("mix", "eubo", "elbo")


def advantages_spg(r: torch.Tensor, cfg=None) -> torch.Tensor:
    ok, mean, _ = group_stats(r)
    return torch.where(ok, r - mean, torch.zeros_like(r)).flatten()


def estimator(cfg):
    return functools.partial(spg_logprobs, block=cfg.rollout.block_length, draws=cfg.loss.spg_draws,
                             beta=cfg.loss.spg_beta)


def bounds(logp, valid, weights, floor: float = -torch.inf):
    """(N, L, 3) [e, u, has_u] -> per-sequence ELBO and EUBO (N,), and the floored tokens (N, L)."""
    e, u, has = logp.unbind(-1)
    w = weights * valid.float()
    elbo = (w * e).sum(1) / w.sum(1).clamp(min=1e-8)
    floored = (u < floor) & has.bool() & valid
    u = torch.where(floored, u.detach(), u)  # the guard: no gradient pushes such a token further down
    wu = w * has
    eubo = (wu * u).sum(1) / wu.sum(1).clamp(min=1e-8)
    return elbo, eubo, floored


def loss_spg(logp, old_logp, ref_logp, adv, valid, weights, cfg):
    elbo, eubo, floored = bounds(logp, valid, weights, cfg.spg_floor)
    neg = {"eubo": eubo, "mix": cfg.spg_mix * eubo + (1 - cfg.spg_mix) * elbo, "elbo": elbo}[cfg.spg_mode]
    p = torch.where(adv > 0, elbo, neg)  # (N,)
    if not torch.isfinite(p).all():
        raise FloatingPointError(f"spg: {int((~torch.isfinite(p)).sum())} per-sequence bounds are not finite "
                                 "(SPG#5); lower train.lr or use loss.spg_mode=mix")
    length = valid.float().sum(1)
    loss = -(adv * length * p).sum() / length.sum().clamp(min=1)
    return loss, {"kl": 0.0, "clip_frac": 0.0, "clip_frac_any": 0.0, "elbo": elbo.mean().item(),
                  "eubo": eubo.mean().item(), "spg_floored": floored.float().sum().item() / max(1, int(valid.sum()))}

"""ESPO, a sequence-level ELBO ratio (ML-GSAI/ESPO, espo/espo_trainer.py).

    A = leave-one-out (:694-716)
    s_i = exp(sum_k w_k (e_k - e_old_k) / L)                     (:191, L = the canvas length)
    loss = -mean_i min(s_i A_i, clip(s_i, 1 - eps, 1 + eps) A_i) + beta mean_i (E_i - E_ref_i)^2 / (2L)  (:97-99, :200)

e_k is likelihood.espo_logprobs (its sum over the canvas is the ELBO E: :55-75, :376-437); like
ESPO, every canvas position counts, past the end of the completion too. DPS weights the sum in
the exponent (w = 1 past the end). +SML does not apply: the base keeps the likelihood it
defines (its coupled ELBO); ESPO with SML would keep its own clip, sequence KL, 1/L and
advantage, so it is not gspo +SML.
"""
from __future__ import annotations

import functools

import torch

from ..likelihood import espo_logprobs
from ..lossparts import advantages_rloo, clip_stats

__all__ = ["advantages_rloo", "estimator", "loss_espo"]


def estimator(cfg):
    return functools.partial(espo_logprobs, group_size=cfg.train.num_generations, mc=cfg.loss.espo_mc)


def loss_espo(logp, old_logp, ref_logp, adv, valid, weights, cfg):
    L = logp.shape[1]
    log_s = (weights * (logp - old_logp)).sum(1) / L  # (N,)
    s = log_s.exp()
    loss = -torch.min(s * adv, s.clamp(1 - cfg.epsilon, 1 + cfg.epsilon) * adv).mean()
    kl = ((logp.sum(1) - ref_logp.sum(1)) ** 2 / (2 * L)) if ref_logp is not None else torch.zeros_like(s)
    if cfg.beta:
        loss = loss + cfg.beta * kl.mean()
    return loss, {"kl": kl.mean().item(), **clip_stats(s, adv, valid, cfg.epsilon)}

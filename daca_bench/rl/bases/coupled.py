"""DiffuCoder's coupled-GRPO (apple/ml-diffucoder, src/open_r1/coupled_grpo.py): grpo's token-level
clipped ratio and k3 KL (:200-224) on the coupled three-pass estimator (:254-279, :105-122:
likelihood.coupled_logprobs), with leave-one-out advantages (:545-567).

DPS weights each token's clipped term as in grpo. +SML does not apply: SML would replace the
coupled estimator, which is then the grpo +SML cell; the two estimators are compared, not stacked.
"""
from __future__ import annotations

from ..likelihood import coupled_logprobs
from ..lossparts import advantages_rloo, loss_grpo

__all__ = ["advantages_rloo", "estimator", "loss_coupled"]


def estimator(cfg):
    return coupled_logprobs


def loss_coupled(logp, old_logp, ref_logp, adv, valid, weights, cfg):
    return loss_grpo(logp, old_logp, ref_logp, adv, valid, weights, cfg)

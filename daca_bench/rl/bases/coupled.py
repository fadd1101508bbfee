"""DiffuCoder's coupled-GRPO (apple/ml-diffucoder, src/open_r1/coupled_grpo.py): grpo's token-level
clipped ratio and k3 KL (:200-224) on the coupled three-pass estimator (:254-279, :105-122:
`coupled_logprobs`), with leave-one-out advantages (:545-567).

DPS weights each token's clipped term as in grpo. +SML does not apply: SML would replace the
coupled estimator, which is then the grpo +SML cell; the two estimators are compared, not stacked.
"""

from __future__ import annotations

import torch

from ...adapter import ModelAdapter
from ..likelihood import LOGIT_CHUNK, masked_passes
from ..lossparts import advantages_rloo, loss_grpo
from ..strata import keyed_generator

__all__ = ["advantages_rloo", "coupled_logprobs", "estimator", "loss_coupled"]


def coupled_logprobs(
    adapter: ModelAdapter,
    prompt_ids,
    prompt_mask,
    completion,
    *,
    seq_ids=None,
    inner: int = 0,
    seed: int = 0,
    p_mask_prompt: float = 0.0,
    t_range=(0.2, 0.8),
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
    **_,
) -> torch.Tensor:
    """DiffuCoder's coupled-GRPO estimator, (N, L): t ~ U(0.2, 0.8) per sequence, M = {k: u_k < t};
    three passes (completion all masked, M masked, the complement masked);
    l_k = (l0_k + (k in M ? l1_k / t : l2_k / (1 - t))) / 2."""
    n, L = completion.shape
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    hide, t = torch.zeros(n, L, dtype=torch.bool), torch.zeros(n, 1)
    for i, sid in enumerate(seq_ids):
        gen = keyed_generator(seed, "coupled", sid, inner)
        t[i] = t_range[0] + (t_range[1] - t_range[0]) * torch.rand(1, generator=gen)
        hide[i] = torch.rand(L, generator=gen) < t[i]
    logp = masked_passes(
        adapter,
        prompt_ids,
        prompt_mask,
        completion,
        torch.stack([torch.ones_like(hide), hide, ~hide]),
        seq_ids=seq_ids,
        inner=inner,
        seed=seed,
        p_mask_prompt=p_mask_prompt,
        tag="coupled",
        chunk=chunk,
        logit_chunk=logit_chunk,
    )  # (3, N, L)
    hide, t = hide.to(logp.device), t.to(logp.device)
    return (logp[0] + torch.where(hide, logp[1] / t, logp[2] / (1 - t))) / 2


def estimator(cfg):
    return coupled_logprobs


def loss_coupled(logp, old_logp, ref_logp, adv, valid, weights, cfg):
    return loss_grpo(logp, old_logp, ref_logp, adv, valid, weights, cfg)

"""ESPO, a sequence-level ELBO ratio (ML-GSAI/ESPO, espo/espo_trainer.py).

    A = leave-one-out (:694-716)
    s_i = exp(sum_k w_k (e_k - e_old_k) / L)                     (:191, L = the canvas length)
    loss = -mean_i min(s_i A_i, clip(s_i, 1 - eps, 1 + eps) A_i) + beta mean_i (E_i - E_ref_i)^2 / (2L)  (:97-99, :200)

e_k is `espo_logprobs` (its sum over the canvas is the ELBO E: :55-75, :376-437); like
ESPO, every canvas position counts, past the end of the completion too. DPS weights the sum in
the exponent (w = 1 past the end). +SML does not apply: the base keeps the likelihood it
defines (its coupled ELBO); ESPO with SML would keep its own clip, sequence KL, 1/L and
advantage, so it is not gspo +SML.
"""

from __future__ import annotations

import functools

import torch

from ...adapter import ModelAdapter
from ..likelihood import LOGIT_CHUNK, masked_passes
from ..lossparts import advantages_rloo, clip_stats
from ..strata import keyed_generator

__all__ = ["advantages_rloo", "espo_counts", "espo_logprobs", "estimator", "loss_espo"]


def espo_counts(L: int, group_size: int, seq_ids, inner, seed: int = 0) -> list[int]:
    """ESPO's masked-token counts: x_g = round(k + g (L+1)/G) mod (L+1), k ~ U{0..L} drawn once per
    group (keyed by the sequence id without its member index g), so a group's ratios are evenly spread."""
    out = []
    for sid in seq_ids:
        group, g = (sid[:-1], sid[-1]) if isinstance(sid, tuple) else (sid // group_size, sid % group_size)
        k = int(torch.randint(0, L + 1, (1,), generator=keyed_generator(seed, "espo-k", group, inner)))
        out.append(int(torch.round(torch.tensor(k + g * (L + 1) / group_size))) % (L + 1))
    return out


def espo_logprobs(
    adapter: ModelAdapter,
    prompt_ids,
    prompt_mask,
    completion,
    *,
    group_size: int,
    mc: int = 2,
    seq_ids=None,
    inner: int = 0,
    seed: int = 0,
    p_mask_prompt: float = 0.0,
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
    **_,
) -> torch.Tensor:
    """ESPO's coupled sequence ELBO per token, (N, L) (its sum over the canvas is the ELBO E): per draw,
    group member g masks x_g = round(k + g (L+1)/G) mod (L+1) positions (k ~ U{0..L} per group: the
    mask ratios are stratified within each group) and a second pass masks the complement;
    e_k = l_k (L+1)/x on the masked, l_k (L+1)/(L-x) on the rest, halved; mean over the `mc` draws."""
    n, L = completion.shape
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    out = 0
    for d in range(mc):
        hide, w = torch.zeros(n, L, dtype=torch.bool), torch.zeros(n, L)
        for i, (sid, x) in enumerate(zip(seq_ids, espo_counts(L, group_size, seq_ids, (inner, d), seed))):
            pos = torch.randperm(L, generator=keyed_generator(seed, "espo", sid, inner, d))[:x]
            hide[i, pos] = True
            w[i] = torch.where(hide[i], (L + 1) / max(x, 1), (L + 1) / max(L - x, 1))
        logp = masked_passes(
            adapter,
            prompt_ids,
            prompt_mask,
            completion,
            torch.stack([hide, ~hide]),
            seq_ids=seq_ids,
            inner=(inner, d),
            seed=seed,
            p_mask_prompt=p_mask_prompt,
            tag="espo",
            chunk=chunk,
            logit_chunk=logit_chunk,
        )  # (2, N, L)
        hide = hide.to(logp.device)
        out = out + torch.where(hide, logp[0], logp[1]) * w.to(logp.device) / 2
    return out / mc


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

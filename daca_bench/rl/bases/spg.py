"""SPG, sandwiched policy gradient (facebookresearch/SPG, spg/spg_trainer.py): a lower bound
(ELBO) for completions with A > 0 and an upper bound (EUBO) for the others; no ratio, no KL.

    A_i = r_i - mean(group)                                      (:720, no std)
    P_i = ELBO_i if A_i > 0 else EUBO_i (eubo) | w EUBO_i + (1 - w) ELBO_i (mix)   (:543-556)
    loss = -sum_i A_i |o_i| P_i / sum_i |o_i|                    (:115-118, per micro-batch)

ELBO_i and EUBO_i are means of per-token terms e_k and u_k (`spg_logprobs`, block-wise
masks :334-378: `spg_masks`); DPS turns them into weighted means sum w e / sum w. Guards: a non-finite bound
stops the run in one line (SPG#5 saw NaN per-sequence log-probs), and a token whose upper bound is
already below `loss.spg_floor` is pushed no lower (SPG#2: `eubo` collapsed to a repeated token);
`mix`, the maintainers' mitigation, is the default.
"""

from __future__ import annotations

import functools
import math

import torch

from ...adapter import ModelAdapter
from ..likelihood import LOGIT_CHUNK, masked_passes
from ..lossparts import group_stats
from ..strata import keyed_generator

MODES = ("mix", "eubo", "elbo")


def advantages_spg(r: torch.Tensor, cfg=None) -> torch.Tensor:
    ok, mean, _ = group_stats(r)
    return torch.where(ok, r - mean, torch.zeros_like(r)).flatten()


def spg_masks(valid: torch.Tensor, block: int, draws: int, seq_ids, inner, seed: int = 0) -> torch.Tensor:
    """SPG's `block_random` masks, (D, N, L): per draw a block b of the completion (a fresh order of
    the blocks, repeated when there are fewer blocks than draws); blocks before b clean, m ~ U{1..|b|}
    of b's valid tokens masked, every later position and every position past the completion masked."""
    n, L = valid.shape
    out = torch.ones(draws, n, L, dtype=torch.bool)
    for i, sid in enumerate(seq_ids):
        length = int(valid[i].sum())
        if length == 0:
            continue
        gen = keyed_generator(seed, "spg", sid, inner)
        n_blocks = -(-L // block)
        order = torch.randperm(n_blocks, generator=gen) % ((length - 1) // block + 1)
        for d in range(draws):
            start = int(order[d % n_blocks]) * block
            width = min(block, length - start)
            m = int(torch.randint(1, width + 1, (1,), generator=gen))
            out[d, i, :start] = False
            out[d, i, start : start + width] = False
            out[d, i, start + torch.randperm(width, generator=gen)[:m]] = True
    return out


def spg_logprobs(
    adapter: ModelAdapter,
    prompt_ids,
    prompt_mask,
    completion,
    *,
    valid,
    block: int,
    draws: int = 2,
    beta: float = 1.0,
    seq_ids=None,
    inner: int = 0,
    seed: int = 0,
    p_mask_prompt: float = 0.0,
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
    **_,
) -> torch.Tensor:
    """SPG's bounds per token, (N, L, 3): e_k = mean_j 1[k in M_j] l_jk / t_j (its mean over the valid
    tokens is the ELBO), u_k = (1/beta) log mean_j 1[k in M_j] p_jk^beta / t_j (the EUBO's term, in
    log space so p^beta never underflows), and 1[k masked in some draw] (where u_k is defined)."""
    n, L = completion.shape
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    valid = valid.bool().cpu()
    hide = spg_masks(valid, block, draws, seq_ids, inner, seed)  # (D, N, L)
    logp = masked_passes(
        adapter,
        prompt_ids,
        prompt_mask,
        completion,
        hide,
        seq_ids=seq_ids,
        inner=inner,
        seed=seed,
        p_mask_prompt=p_mask_prompt,
        tag="spg",
        chunk=chunk,
        logit_chunk=logit_chunk,
    )
    scored = (hide & valid[None]).to(logp.device)  # (D, N, L)
    t = scored.sum(-1, keepdim=True) / valid.sum(-1).clamp(min=1).to(logp.device)[None, :, None]  # (D, N, 1)
    t = t.clamp(min=1e-8)
    e = torch.where(scored, logp / t, torch.zeros_like(logp)).mean(0)  # (N, L)
    x = torch.where(scored, beta * logp - t.log(), torch.full_like(logp, -1e4))
    has = scored.any(0)
    u = torch.where(has, (torch.logsumexp(x, 0) - math.log(draws)) / beta, torch.zeros_like(e))
    return torch.stack([e, u, has.float()], dim=-1)


def estimator(cfg):
    return functools.partial(
        spg_logprobs, block=cfg.rollout.block_length, draws=cfg.loss.spg_draws, beta=cfg.loss.spg_beta
    )


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
        raise FloatingPointError(
            f"spg: {int((~torch.isfinite(p)).sum())} per-sequence bounds are not finite "
            "(SPG#5); lower train.lr or use loss.spg_mode=mix"
        )
    length = valid.float().sum(1)
    loss = -(adv * length * p).sum() / length.sum().clamp(min=1)
    return loss, {
        "kl": 0.0,
        "clip_frac": 0.0,
        "clip_frac_any": 0.0,
        "elbo": elbo.mean().item(),
        "eubo": eubo.mean().item(),
        "spg_floored": floored.float().sum().item() / max(1, int(valid.sum())),
    }

"""TraceRL, the trajectory-aware objective for block diffusion models (Gen-Verse/dLLM-RL @10b4fd1,
train/rl_sdar.py, training.method "TraceRL", without its value model): the policy is scored on the
sampler's own trace, one round of commits at a time, each block behind its clean predecessors.

    A_i = (r_i - mean) / std over the group, population std, 0 when std = 0   (reward/rl_reward.py, z_score_normalize)
    round(k) = rank of k's commit step among its block's distinct steps // shrink   (collapse_k_unique, :219)
    l_k = log p(o_k | x, clean earlier blocks, own block with round >= round(k) masked)   (one_round_vectorized, :366)
    rho_k = exp(clamp(l_k - l_old_k, -10, 10))
    loss = -1/(R L) sum_i sum_k w_k v_k min(rho_k A_i, clip(rho_k, 1 - eps, 1 + eps) A_i)   (forward_process, :711)
           + beta_old 1/(R L) sum_i sum_k v_k (e^t - 1 - t), t = clamp(l_old_k - l_k, -10, 10)

R counts the (sequence, round) rows that hold a scored token (TraceRL trains on one row per round and
divides by the rows in its batch); L is the completion length; v the valid tokens (TraceRL drops the
padding after the end); w the DPS weights (1 without DPS). Pass r masks, in every block at once, its
round r and later and scores round r's tokens: a round's pass serves every block (the blocks never see
each other's noise), so a step costs the largest number of rounds in any block. beta_old is
`loss.trace_kl`, TraceRL's `training.beta`: a k3 penalty to the OLD policy, not to a reference, so
loss.beta stays 0. +SML does not apply: the base defines its likelihood (its rounds are SML's causal
strata inside each block with K = the block's steps, the trace likelihood). Left out: the rollout-time
group filter (groups with under 20 % or over 80 % correct are dropped before training).
"""

from __future__ import annotations

import functools

import torch

from ..likelihood import LOGIT_CHUNK, masked_passes
from ..lossparts import clip_stats, group_stats, masked_mean
from ..strata import agreed_levels

__all__ = ["advantages_tracerl", "estimator", "loss_tracerl", "trace_rounds", "tracerl_logprobs"]


def advantages_tracerl(r: torch.Tensor, cfg=None) -> torch.Tensor:
    """(B, G) rewards -> (B*G,) z-scores over each group's scored members (population std; 0 where it is 0)."""
    ok, mean, std = group_stats(r, unbiased=False)
    adv = torch.where(std > 0, (r - mean) / std.clamp(min=1e-30), torch.zeros_like(r))
    return torch.where(ok, adv, torch.zeros_like(adv)).flatten()


def trace_rounds(commit_step: torch.Tensor, block: int, shrink: int = 1) -> torch.Tensor:
    """(N, L) commit steps -> (N, L) round of each token: the rank of its step among the distinct steps of its
    block (blocks of `block` from the completion's start), `shrink` consecutive distinct steps per round."""
    n, L = commit_step.shape
    if block < 1 or L % block:
        raise ValueError(f"TraceRL scores completions of whole blocks: length {L} is not a multiple of block {block}")
    steps = commit_step.reshape(n, L // block, block)
    # rank among the distinct values: how many distinct values of the block lie below each token's step
    below = steps[..., None, :] < steps[..., :, None]  # (n, nb, B, B): token j's step below token k's
    same = steps[..., :, None] == steps[..., None, :]  # (n, nb, B, B) [j, m]
    # count each distinct value once: j counts where no earlier position holds its step
    earlier = torch.tril(torch.ones(block, block, dtype=torch.bool, device=steps.device), diagonal=-1)
    first = ~(same & earlier).any(-1)  # (n, nb, B): no earlier position with the same step
    rank = (below & first[..., None, :]).sum(-1)  # (n, nb, B)
    return torch.div(rank, shrink, rounding_mode="floor").reshape(n, L)


def tracerl_logprobs(
    adapter,
    prompt_ids,
    prompt_mask,
    completion,
    *,
    commit_step,
    shrink: int = 1,
    seq_ids=None,
    inner: int = 0,
    seed: int = 0,
    p_mask_prompt: float = 0.0,
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
    par=None,
    **_,
) -> torch.Tensor:
    """(N, L, 2): l_k from the pass of k's round, and the round itself (a constant the loss counts rows by).
    One pass per round that holds a token in some row of some process (the same passes on every rank)."""
    block = getattr(adapter, "block_size", 0)
    if not block:
        raise ValueError("loss.base=tracerl scores a block model's trace: set model.block_size")
    n, L = completion.shape
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    rounds = trace_rounds(commit_step.cpu(), block, shrink)  # (N, L)
    levels = agreed_levels(rounds, block, par)  # (K',)
    hide = rounds[None] >= levels[:, None, None]  # (K', N, L): pass r masks round r and later in every block
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
        tag="tracerl",
        chunk=chunk,
        logit_chunk=logit_chunk,
    )  # (K', N, L)
    idx = torch.searchsorted(levels, rounds).to(logp.device)[None]  # each token from the pass of its round
    mine = logp.gather(0, idx).squeeze(0)
    return torch.stack([mine, rounds.to(mine)], dim=-1)


def estimator(cfg):
    return functools.partial(tracerl_logprobs, shrink=cfg.loss.trace_shrink)


def trace_rows(rounds: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """R: the (sequence, round) pairs holding a valid token."""
    r = rounds.long()
    hit = torch.zeros(r.shape[0], int(r.max()) + 1 if r.numel() else 1, dtype=torch.long, device=r.device)
    hit.scatter_add_(1, r, valid.long())
    return (hit > 0).sum()


def loss_tracerl(logp, old_logp, ref_logp, adv, valid, weights, cfg):
    lp, old, rounds = logp[..., 0], old_logp[..., 0], logp[..., 1].detach()
    mask = valid.float()
    norm = rounds.shape[1] * trace_rows(rounds, valid.bool()).clamp(min=1)  # L R
    d = torch.where(valid.bool(), lp - old, torch.zeros_like(lp)).clamp(-10.0, 10.0)
    ratio = d.exp()
    a = adv[:, None]
    surrogate = torch.min(ratio * a, ratio.clamp(1 - cfg.epsilon, 1 + cfg.epsilon) * a)
    loss = -(weights * surrogate * mask).sum() / norm
    t = (-d).clamp(-10.0, 10.0)
    kl = t.exp() - 1.0 + d  # k3 to the old policy
    if cfg.trace_kl:
        loss = loss + cfg.trace_kl * (kl * mask).sum() / norm
    return loss, {"kl": masked_mean(kl, mask).item(), **clip_stats(ratio, adv, mask, cfg.epsilon)}

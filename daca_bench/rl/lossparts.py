"""Pieces every policy loss shares: group statistics, the group-mean and leave-one-out
advantages, the token aggregations, the k3 KL and the clip statistics.

- `group_stats`: NaN rewards (infrastructure failures) stay out of every statistic; the std
  is the unbiased one (TRL, d1) unless `loss.std_unbiased=false` (the population std).
- `advantages_rloo`: A_i = r_i - mean_{j != i} r_j over the scored members of the group
  (ESPO, DiffuCoder's coupled-GRPO, MAP); no std.
- `clip_stats`: `clip_frac` is TRL's `clip_ratio/region_mean` (a ratio counts only where the clip
  binds for its advantage's sign: below 1 - eps with A < 0, above 1 + eps with A > 0);
  `clip_frac_any` is the unconditioned share outside [1 - eps, 1 + eps] (this project's earlier
  `clip_frac`).
- `loss_grpo`: the grpo loss itself, which coupled-GRPO reuses.
- `row_norms`: the trainer's per-row token denominators for one micro-batch, so that `bnpo` and the
  token-mean statistics give the same update and the same numbers at any GPU count and any
  `grad_accum` (the whole step's valid tokens, or d1's per-`loss.norm_rows` rows).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

import torch

# (stats, loss): per-row denominators (n,) of the current micro-batch; None outside the trainer's step
_NORMS: ContextVar = ContextVar("token_norms", default=None)


@contextmanager
def row_norms(stats: torch.Tensor, loss: torch.Tensor):
    """Within: a token mean of this micro-batch is sum_r (sum_t x_rt) / norm_r. The trainer sets
    norm_r = T * n / N (T the step's valid tokens over every rank, N its rows, n this micro-batch's
    rows), so that the micro-batches' means, weighted by n / N and averaged over ranks, equal the
    token mean of the whole step; `loss` holds bnpo's own (d1's granularity with loss.norm_rows)."""
    token = _NORMS.set((stats, loss))
    try:
        yield
    finally:
        _NORMS.reset(token)


def group_stats(r: torch.Tensor, unbiased: bool = True):
    """(B, G) rewards with NaN = unscored -> finite mask, group mean and std over the scored ones."""
    ok = torch.isfinite(r)
    n = ok.sum(1, keepdim=True)
    r0 = torch.where(ok, r, torch.zeros_like(r))
    mean = r0.sum(1, keepdim=True) / n.clamp(min=1)
    ss = (torch.where(ok, r - mean, torch.zeros_like(r)) ** 2).sum(1, keepdim=True)
    var = ss / (n - 1).clamp(min=1) if unbiased else ss / n.clamp(min=1)
    return ok, mean, var.sqrt()


def advantages_rloo(r: torch.Tensor, cfg=None) -> torch.Tensor:
    """Leave-one-out: r_i minus the mean of the other scored members, = n/(n-1) (r_i - mean)."""
    ok, mean, _ = group_stats(r)
    n = ok.sum(1, keepdim=True).float()
    adv = (r - mean) * n / (n - 1).clamp(min=1)
    return torch.where(ok & (n > 1), adv, torch.zeros_like(adv)).flatten()


def k3(logp, ref_logp):
    d = ref_logp - logp
    return d.exp() - d - 1


def step_norms(valid: torch.Tensor, norm_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, L) valid tokens of the whole step -> per-row token denominators (N,) for the statistics (the
    step's token count) and for bnpo (the same, or, with loss.norm_rows = n, the count of the row's block
    of n rows times the number of blocks: the mean of per-block token means, d1's per-device granularity)."""
    lengths = valid.float().sum(1)
    whole = lengths.sum().clamp(min=1).expand(len(lengths))
    if norm_rows <= 0:
        return whole, whole
    block = torch.arange(len(lengths), device=valid.device) // norm_rows
    per_block = torch.zeros(int(block.max()) + 1, device=valid.device).index_add_(0, block, lengths).clamp(min=1)
    return whole, per_block[block] * len(per_block)


def masked_mean(x, mask):
    """Mean over each sequence's valid tokens, then over sequences: (N, L) -> scalar."""
    return ((x * mask).sum(1) / mask.sum(1).clamp(min=1)).mean()


def token_mean(x, mask):
    """Sum over the batch's valid tokens / their count (in a trainer step: the step's count, `row_norms`)."""
    norms = _NORMS.get()
    if norms is None:
        return (x * mask).sum() / mask.sum().clamp(min=1)
    return ((x * mask).sum(1) / norms[0].to(x.device)).sum()


def bnpo_mean(x, mask):
    """bnpo (d1): the token mean, over the whole step or per loss.norm_rows rows (`row_norms`)."""
    norms = _NORMS.get()
    if norms is None:
        return token_mean(x, mask)
    return ((x * mask).sum(1) / norms[1].to(x.device)).sum()


def constant_norm(x, mask):
    """dr_grpo: sum over valid tokens / (N * L), the same constant for every batch of this shape."""
    return (x * mask).sum() / mask.numel()


AGGREGATIONS = {"grpo": masked_mean, "bnpo": bnpo_mean, "dr_grpo": constant_norm}


def clip_stats(ratio, adv, mask, eps, eps_high=None) -> dict:
    """Token ratios (N, L) or sequence ratios (N,): TRL's region mean and the unconditioned share."""
    hi = eps if eps_high is None else eps_high
    a = adv if ratio.dim() == 1 else adv[:, None].expand_as(ratio)
    low, high = ratio < 1 - eps, ratio > 1 + hi
    region = ((low & (a < 0)) | (high & (a > 0))).float()
    anywhere = (low | high).float()
    if ratio.dim() == 1:
        return {"clip_frac": region.mean().item(), "clip_frac_any": anywhere.mean().item()}
    # TRL / DiffuCoder: over the batch's valid tokens; the earlier count: per sequence, then over sequences
    return {"clip_frac": token_mean(region, mask).item(), "clip_frac_any": masked_mean(anywhere, mask).item()}


def loss_grpo(logp, old_logp, ref_logp, adv, valid, weights, cfg):
    """d1's diffu-GRPO loss (token-clipped ratio, k3 KL with beta); here so that every base module
    can build on it without importing losses.py, which registers them (rl/losses.py's LOSSES)."""
    mask = valid.float()
    ratio = (logp - old_logp).exp()  # (N, L)
    a = adv[:, None]
    surrogate = torch.min(ratio * a, ratio.clamp(1 - cfg.epsilon, 1 + cfg.epsilon) * a)
    per_token = -weights * surrogate
    kl = k3(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    if cfg.beta:
        per_token = per_token + cfg.beta * kl
    return AGGREGATIONS[cfg.loss_type](per_token, mask), {
        "kl": masked_mean(kl, mask).item(),
        **clip_stats(ratio, adv, mask, cfg.epsilon),
    }

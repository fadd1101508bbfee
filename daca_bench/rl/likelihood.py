"""Per-token log-likelihood estimators for masked diffusion LMs, behind one interface.

    logp = sml_logprobs(adapter, prompt_ids, prompt_mask, completion, k=4, seq_ids=ids, inner=0)  # (N, L)

Stratified Masking Likelihood (docs/method.md, sections 5-7): the L completion positions are split into K
balanced strata; for stratum j one forward pass sees the completion with S_j masked, and
log p(o_k | x^(j)) is read for k in S_j. K = 1 is d1's one-pass mean-field estimator
(completion fully masked), K = 2 with `random` strata is a complementary mask pair like
DiffuCoder's (not its estimator: that adds an all-masked pass and 1/t weights, t ~ U(0.2, 0.8)),
K = L is the pseudo-likelihood. `causal` strata follow the sampler's commit order and the pass for
stratum j masks S_j and every later stratum, so each token sees exactly the tokens committed
before it: the step-merged decode-order likelihood (d2, TraceRL); with K = the sampler's steps
it equals the recorded `commit_logp`. The strata, keyed masks and the passes agreed across ranks
are built in `strata.py`. On a block model (docs/method.md section 12) every canvas also carries a
clean stream, so each block is scored behind its clean predecessors.
`elbo_logprobs` is LLaDA's Monte Carlo ELBO (l ~ U{1..L} masked tokens, weight L/l).
The field's estimators (SPG's, ESPO's, DiffuCoder's coupled one: daca_bench.rl.bases) share
`masked_passes`, one pass per mask draw.

Memory: log p(target) is read as `logit[target] - logsumexp(logits)` over at most
`logit_chunk` tokens at a time (`target_logprobs`, `logsumexp_max`), so no float32 copy of
the full (M, L, V) logits and no full log_softmax is ever made (at V = 126k that is
tens of GB); the backward pass recomputes the softmax chunk by chunk.
"""

from __future__ import annotations

import torch

from ..adapter import ModelAdapter
from .strata import CAUSAL, agreed_levels, assign_strata, keyed_generator, mask_prompts

LOGIT_CHUNK = 1024  # tokens per float32 log-softmax chunk: 0.5 GB at LLaDA's vocabulary of 126,464


def _chunks(logits: torch.Tensor, chunk: int):
    """(rows, positions) slices covering (M, L, ...) with at most `chunk` tokens each; views, never copies."""
    m, L = logits.shape[:2]
    chunk = chunk or m * L
    rows, pos = max(1, chunk // L), min(L, chunk)
    return [(slice(r, r + rows), slice(q, q + pos)) for r in range(0, m, rows) for q in range(0, L, pos)]


class _TargetLogp(torch.autograd.Function):
    """log p(target) = logit[target] - logsumexp(logits), chunked both ways: the backward pass writes
    (onehot - softmax) * grad into one gradient in the logits' dtype, one float32 chunk at a time."""

    @staticmethod
    def forward(ctx, logits, target, chunk):
        lse = logsumexp_max(logits, chunk)[0]
        ctx.save_for_backward(logits, target, lse)
        ctx.chunk = chunk
        return logits.gather(-1, target[..., None]).squeeze(-1).float() - lse

    @staticmethod
    def backward(ctx, grad_out):
        logits, target, lse = ctx.saved_tensors
        grad = torch.empty_like(logits)
        for r, q in _chunks(logits, ctx.chunk):
            g = -(logits[r, q].float() - lse[r, q, None]).exp()
            g.scatter_add_(-1, target[r, q, None], torch.ones_like(g[..., :1]))
            grad[r, q] = (g * grad_out[r, q, None]).to(grad.dtype)
        return grad, None, None


def target_logprobs(logits: torch.Tensor, target: torch.Tensor, chunk: int = LOGIT_CHUNK) -> torch.Tensor:
    """(M, L, V) logits in any dtype, (M, L) ids -> (M, L) float32 log p(target), `chunk` tokens at a time."""
    return _TargetLogp.apply(logits, target, chunk)


@torch.no_grad()
def logsumexp_max(logits: torch.Tensor, chunk: int = LOGIT_CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, L, V) logits -> (M, L) float32 logsumexp and max over V, `chunk` tokens at a time."""
    lse = torch.empty(logits.shape[:2], dtype=torch.float32, device=logits.device)
    top = torch.empty_like(lse)
    for r, q in _chunks(logits, chunk):
        x = logits[r, q].float()
        lse[r, q] = torch.logsumexp(x, dim=-1)
        top[r, q] = x.amax(dim=-1)
    return lse, top


def token_logprobs(
    adapter: ModelAdapter,
    ids,
    attn,
    completion,
    prompt_len: int,
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
):
    """(M, P+L) canvases -> (M, L) log p(completion_k | canvas): forward passes of `chunk` rows."""
    out = []
    chunk = chunk or ids.shape[0]
    for s in range(0, ids.shape[0], chunk):
        clean = {"clean": completion[s : s + chunk]} if getattr(adapter, "block_size", 0) else {}  # two streams
        logits = adapter.logits(ids[s : s + chunk], attn[s : s + chunk], **clean)[
            :, prompt_len:
        ]  # (m, L, V), model dtype
        out.append(target_logprobs(logits, completion[s : s + chunk], logit_chunk))
    return torch.cat(out)


def sml_logprobs(
    adapter: ModelAdapter,
    prompt_ids,
    prompt_mask,
    completion,
    *,
    k: int = 4,
    partition: str = "random",
    seq_ids=None,
    inner: int = 0,
    seed: int = 0,
    p_mask_prompt: float = 0.0,
    commit_step=None,
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
    valid=None,
    fewest=None,
    par=None,
) -> torch.Tensor:
    """SML per-token log-probs (N, L); differentiable (`valid` is unused: every position is scored). The K passes run
    as one (K*N, P+L) batch or in chunks. Under several processes `par` agrees the strata's passes across ranks
    and `fewest` (`fewest_steps` of the whole step) clamps a causal K alike in every micro-batch."""
    n, L = completion.shape
    device = adapter.device
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    strata = assign_strata(
        n, L, k, partition, seq_ids, inner, seed, commit_step, getattr(adapter, "block_size", 0), fewest, par
    ).to(device)  # (N, L)
    prompt = mask_prompts(
        prompt_ids.to(device), prompt_mask, p_mask_prompt, adapter.mask_token_id, seq_ids, inner, seed
    )
    completion = completion.to(device)
    attn = torch.cat([prompt_mask.to(device), torch.ones_like(completion)], dim=1)
    levels = agreed_levels(
        strata, k, par
    )  # (K',) sorted: the strata that hold a token (a stratum no row has gets no pass)
    canvases = []
    for j in levels.tolist():
        hide = strata >= j if partition in CAUSAL else strata == j  # (N, L): what pass j cannot see
        noisy = torch.where(hide, torch.full_like(completion, adapter.mask_token_id), completion)
        canvases.append(torch.cat([prompt, noisy], dim=1))
    k = len(canvases)
    ids = torch.cat(canvases)  # (K'*N, P+L), stratum-major
    logp = token_logprobs(adapter, ids, attn.repeat(k, 1), completion.repeat(k, 1), prompt.shape[1], chunk, logit_chunk)
    logp = logp.view(k, n, L)
    return logp.gather(0, torch.searchsorted(levels, strata)[None]).squeeze(
        0
    )  # each token from the pass that masked it


def elbo_logprobs(
    adapter: ModelAdapter,
    prompt_ids,
    prompt_mask,
    completion,
    *,
    draws: int = 32,
    seq_ids=None,
    seed: int = 0,
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
    pad: int = 0,
) -> torch.Tensor:
    """LLaDA's Monte Carlo ELBO, per token (N, L): mean over draws of (L / l) 1[k masked] log p(o_k | x_l).
    `pad` mask tokens after the completion, masked in every draw and never scored: a block model's
    completion cut short of a whole block (the marginal of its first tokens; docs/method.md 12.9)."""
    n, L = completion.shape
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    masks, weights = [], []
    for d in range(draws):
        rows, w = [], []
        for sid in seq_ids:
            gen = keyed_generator(seed, "elbo", sid, d)
            n_masked = int(torch.randint(1, L + 1, (1,), generator=gen))  # the paper's l ~ U{1..L}
            row = torch.zeros(L, dtype=torch.bool)
            row[torch.randperm(L, generator=gen)[:n_masked]] = True
            rows.append(row)
            w.append(L / n_masked)
        masks.append(torch.stack(rows))
        weights.append(torch.tensor(w))
    terms = elbo_terms(
        adapter, prompt_ids, prompt_mask, completion, torch.stack(masks), torch.stack(weights), chunk, logit_chunk, pad
    )
    return terms.mean(0)


def elbo_terms(
    adapter: ModelAdapter,
    prompt_ids,
    prompt_mask,
    completion,
    masks,
    weights,
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
    pad: int = 0,
) -> torch.Tensor:
    """(D, N, L) masks and (D, N) weights -> (D, N, L): weight 1[k masked] log p(o_k | canvas d), one canvas
    per draw; `pad` trailing mask tokens masked on every canvas and not scored (elbo_logprobs)."""
    device = adapter.device
    masks, weights = masks.to(device), weights.to(device)
    draws, n, L = masks.shape
    completion = completion.to(device)
    prompt = prompt_ids.to(device)
    if pad:  # the padding is a masked position of every canvas, its target never read
        filler = torch.full((n, pad), adapter.mask_token_id, dtype=completion.dtype, device=device)
        completion = torch.cat([completion, filler], dim=1)
        masks = torch.cat([masks, torch.ones(draws, n, pad, dtype=torch.bool, device=device)], dim=2)
    noisy = torch.where(masks, torch.full_like(masks, adapter.mask_token_id, dtype=torch.long), completion[None])
    ids = torch.cat([prompt[None].expand(draws, -1, -1), noisy], dim=2).reshape(draws * n, -1)
    attn = torch.cat([prompt_mask.to(device), torch.ones_like(completion)], dim=1).repeat(draws, 1)
    logp = token_logprobs(adapter, ids, attn, completion.repeat(draws, 1), prompt.shape[1], chunk, logit_chunk).view(
        draws, n, L + pad
    )
    return (logp * masks * weights[..., None])[..., :L]


ESTIMATORS = {"sml": sml_logprobs, "elbo": elbo_logprobs}


# ---- one pass per mask draw: the field's estimators' forward passes (daca_bench.rl.bases) -----------
def masked_passes(
    adapter: ModelAdapter,
    prompt_ids,
    prompt_mask,
    completion,
    hide,
    *,
    seq_ids,
    inner,
    seed: int = 0,
    p_mask_prompt: float = 0.0,
    tag: str = "pass",
    chunk: int | None = None,
    logit_chunk: int = LOGIT_CHUNK,
) -> torch.Tensor:
    """(D, N, L) bool `hide` -> (D, N, L) log p(o_k | canvas d): one pass per draw d, all D sharing one prompt
    mask per sequence and inner iteration (as SML's K canvases do)."""
    D, n, L = hide.shape
    device = adapter.device
    completion, hide = completion.to(device), hide.to(device)
    mask = torch.full_like(completion, adapter.mask_token_id)
    prompt = mask_prompts(
        prompt_ids.to(device), prompt_mask, p_mask_prompt, adapter.mask_token_id, seq_ids, (inner, tag), seed
    )
    canvases = [torch.cat([prompt, torch.where(hide[d], mask, completion)], dim=1) for d in range(D)]
    attn = torch.cat([prompt_mask.to(device), torch.ones_like(completion)], dim=1).repeat(D, 1)
    logp = token_logprobs(
        adapter, torch.cat(canvases), attn, completion.repeat(D, 1), prompt_ids.shape[1], chunk, logit_chunk
    )
    return logp.view(D, n, L)

"""Per-token log-likelihood estimators for masked diffusion LMs, behind one interface.

    logp = sml_logprobs(adapter, batch_ids, attn, prompt_len, k=4, seq_ids=ids, inner=0)  # (N, L)

Stratified Masking Likelihood (docs/method.md, sections 5-7): the L completion positions are split into K
balanced strata; for stratum j one forward pass sees the completion with S_j masked, and
log p(o_k | x^(j)) is read for k in S_j. K = 1 is d1's one-pass mean-field estimator
(completion fully masked), K = 2 with `random` strata is a complementary mask pair like
DiffuCoder's (not its estimator: that adds an all-masked pass and 1/t weights, t ~ U(0.2, 0.8)),
K = L is the pseudo-likelihood. `causal` strata follow the sampler's commit order and the pass for
stratum j masks S_j and every later stratum, so each token sees exactly the tokens committed
before it: the step-merged decode-order likelihood (d2, TraceRL); with K = the sampler's steps
it equals the recorded `commit_logp`. Masks come from generators keyed by (seed, sequence id,
inner iteration) so the current, old and reference policies see the same masks. On a block model
(docs/method.md section 12) every canvas also carries a clean stream, so each block is scored behind
its clean predecessors, and the strata are drawn inside each block (`block_strata`).
`elbo_logprobs` is LLaDA's Monte Carlo ELBO (l ~ U{1..L} masked tokens, weight L/l).
The field's estimators (`spg_logprobs`: SPG's ELBO and EUBO terms from block-wise masks;
`espo_logprobs`: ESPO's group-stratified, complement-coupled sequence ELBO; `coupled_logprobs`:
DiffuCoder's three-pass coupled estimator) share `masked_passes`, one pass per mask draw.

Memory: log p(target) is read as `logit[target] - logsumexp(logits)` over at most
`logit_chunk` tokens at a time (`target_logprobs`, `logsumexp_max`), so no float32 copy of
the full (M, L, V) logits and no full log_softmax is ever made (at V = 126k that is
tens of GB); the backward pass recomputes the softmax chunk by chunk.
"""
from __future__ import annotations

import hashlib
import math
import warnings

import torch

from ..adapter import ModelAdapter

LOGIT_CHUNK = 1024  # tokens per float32 log-softmax chunk: 0.5 GB at LLaDA's vocabulary of 126,464

STRATA = {}


def keyed_generator(*key) -> torch.Generator:
    digest = hashlib.sha256(repr(key).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))


def _strata(fn):
    STRATA[fn.__name__.removeprefix("strata_")] = fn
    return fn


@_strata
def strata_random(L: int, K: int, gen: torch.Generator, commit_step=None) -> torch.Tensor:
    perm = torch.randperm(L, generator=gen)
    out = torch.empty(L, dtype=torch.long)
    out[perm] = torch.arange(L) % K
    return out


@_strata
def strata_strided(L: int, K: int, gen=None, commit_step=None) -> torch.Tensor:
    return torch.arange(L) % K


@_strata
def strata_commit_order(L: int, K: int, gen=None, commit_step=None) -> torch.Tensor:
    """Contiguous runs of the decoding order: the first-committed L/K tokens form stratum 0, and so on."""
    if commit_step is None:
        raise ValueError("sml.partition=commit_order needs the rollouts' trajectory record")
    rank = torch.empty(L, dtype=torch.long)
    rank[torch.argsort(commit_step, stable=True)] = torch.arange(L)
    return rank * K // L


@_strata
def strata_causal(L: int, K: int, gen=None, commit_step=None) -> torch.Tensor:
    """The sampler's steps merged into K consecutive groups: stratum = (tau_k - 1) * K // T, with T
    this sequence's number of steps; K = T gives one stratum per step. Scored cumulatively (CAUSAL).
    Balances decoding steps (each stratum holds T/K of them, +-1), not tokens: a stratum has as many
    tokens as its steps committed. K above T would leave strata empty: assign_strata clamps K to T."""
    if commit_step is None:
        raise ValueError("sml.partition=causal needs the rollouts' trajectory record")
    T = int(commit_step.max().clamp(min=1))
    return ((commit_step - 1).clamp(min=0) * K) // T


CAUSAL = {"causal"}  # partitions whose pass j masks every stratum >= j, not only stratum j


def fewest_steps(commit_step: torch.Tensor, block: int = 0, par=None) -> torch.Tensor:
    """(blocks,) the fewest denoising steps any row took, per block of `block` positions (one entry without
    blocks; a block's steps counted from its first), the minimum over every process when `par` (an
    engine.parallel.Parallel) is given: K is then clamped alike on every rank and every micro-batch."""
    n, L = commit_step.shape
    width = block or L
    if L % width:
        raise ValueError(f"the completion length {L} is not a multiple of model.block_size={block}")
    parts = commit_step.reshape(n, L // width, width)
    steps = parts.amax(-1) - parts.amin(-1) + 1 if block else parts.amax(-1)
    fewest = steps.clamp(min=1).amin(0).long().cpu()  # (blocks,)
    return fewest if par is None else par.reduce(fewest, "min")


def agreed_levels(strata: torch.Tensor, k: int, par=None) -> torch.Tensor:
    """The strata (< k) that hold a token in some row of some process, sorted: one pass each. Every process runs
    the same passes (a stratum empty in its own rows gets an empty pass), so under FSDP2 every rank makes the
    same all-gathers and no rank waits forever; without `par`, the strata of these rows only."""
    present = torch.bincount(strata.flatten().cpu(), minlength=k)[:k] > 0
    if par is not None:
        present = par.reduce(present.long(), "max") > 0
    return present.nonzero().flatten().to(strata.device)


def assign_strata(n: int, L: int, K: int, partition: str, seq_ids, inner: int, seed: int = 0,
                  commit_step: torch.Tensor | None = None, block: int = 0, fewest=None, par=None) -> torch.Tensor:
    """(N, L) stratum index in [0, K) per completion position. `random`, `strided` and `commit_order`
    balance tokens (every stratum holds L/K of each sequence's positions, +-1); `causal` balances
    decoding steps (see strata_causal) and clamps K to the fewest steps of any sequence, with a warning:
    `fewest` (from `fewest_steps`, over the whole step's rows on every process) when given, else these rows'
    (over every process with `par`). block > 0 (a block model): the strata are drawn inside each block of
    that many positions (`block_strata`)."""
    if block:
        return block_strata(n, L, K, partition, seq_ids, inner, seed, commit_step, block, fewest, par)
    if not 1 <= K <= L:
        raise ValueError(f"sml.k={K} must be between 1 and the completion length {L}")
    if partition not in STRATA:
        raise ValueError(f"unknown sml.partition {partition!r}; choose from {', '.join(STRATA)}")
    if partition in CAUSAL and commit_step is not None:
        steps = int((fewest_steps(commit_step, 0, par) if fewest is None else fewest)[0])  # the fewest of any row
        if K > steps:
            warnings.warn(f"sml.partition=causal: sml.k={K} is above the {steps} denoising steps of the "
                          f"rollouts; using k={steps} (more strata than steps would leave some empty)", stacklevel=3)
            K = steps
    rows = [STRATA[partition](L, K, keyed_generator(seed, "strata", sid, inner),
                              None if commit_step is None else commit_step[i]) for i, sid in enumerate(seq_ids)]
    return torch.stack(rows)


def block_strata(n: int, L: int, K: int, partition: str, seq_ids, inner: int, seed: int, commit_step, block: int,
                 fewest=None, par=None):
    """A block model's strata: each block's B positions split into min(K, B) strata as `assign_strata` splits
    a completion (keyed by the block too; `causal` and `commit_order` from the block's own commit steps,
    counted from its first; `causal` clamps each block's K to `fewest`, from `fewest_steps(..., block, par)`).
    Pass j then masks stratum j of every block at once: each block is scored with
    the clean blocks before it and (K-1)/K of itself (K >= B: its pseudo-likelihood)."""
    if L % block:
        raise ValueError(f"the completion length {L} is not a multiple of model.block_size={block}")
    if partition in CAUSAL and commit_step is not None and fewest is None:
        fewest = fewest_steps(commit_step, block, par)  # one reduction for every block
    out = []
    for j in range(0, L, block):
        steps = None if commit_step is None else commit_step[:, j:j + block]
        steps = None if steps is None else steps - steps.amin(1, keepdim=True) + 1  # the block's own steps from 1
        out.append(assign_strata(n, block, min(K, block), partition, [(sid, "block", j) for sid in seq_ids], inner,
                                 seed, steps, fewest=None if fewest is None else fewest[j // block:j // block + 1]))
    return torch.cat(out, dim=1)


def mask_prompts(prompt_ids, prompt_mask, p: float, mask_id: int, seq_ids, inner: int, seed: int = 0):
    """d1's random prompt masking (p_mask_prompt), keyed like the strata; padding is never masked."""
    if p <= 0:
        return prompt_ids
    draws = torch.stack([torch.rand(prompt_ids.shape[1], generator=keyed_generator(seed, "prompt", sid, inner))
                         for sid in seq_ids])
    hide = (draws < p) & prompt_mask.bool().cpu()
    return torch.where(hide.to(prompt_ids.device), torch.full_like(prompt_ids, mask_id), prompt_ids)


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


def token_logprobs(adapter: ModelAdapter, ids, attn, completion, prompt_len: int, chunk: int | None = None,
                   logit_chunk: int = LOGIT_CHUNK):
    """(M, P+L) canvases -> (M, L) log p(completion_k | canvas): forward passes of `chunk` rows."""
    out = []
    chunk = chunk or ids.shape[0]
    for s in range(0, ids.shape[0], chunk):
        clean = {"clean": completion[s:s + chunk]} if getattr(adapter, "block_size", 0) else {}  # two streams
        logits = adapter.logits(ids[s:s + chunk], attn[s:s + chunk], **clean)[:, prompt_len:]  # (m, L, V), model dtype
        out.append(target_logprobs(logits, completion[s:s + chunk], logit_chunk))
    return torch.cat(out)


def sml_logprobs(adapter: ModelAdapter, prompt_ids, prompt_mask, completion, *, k: int = 4,
                 partition: str = "random", seq_ids=None, inner: int = 0, seed: int = 0,
                 p_mask_prompt: float = 0.0, commit_step=None, chunk: int | None = None,
                 logit_chunk: int = LOGIT_CHUNK, valid=None, fewest=None, par=None) -> torch.Tensor:
    """SML per-token log-probs (N, L); differentiable (`valid` is unused: every position is scored). The K passes run
    as one (K*N, P+L) batch or in chunks. Under several processes `par` agrees the strata's passes across ranks
    and `fewest` (`fewest_steps` of the whole step) clamps a causal K alike in every micro-batch."""
    n, L = completion.shape
    device = adapter.device
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    strata = assign_strata(n, L, k, partition, seq_ids, inner, seed, commit_step,
                           getattr(adapter, "block_size", 0), fewest, par).to(device)  # (N, L)
    prompt = mask_prompts(prompt_ids.to(device), prompt_mask, p_mask_prompt, adapter.mask_token_id, seq_ids, inner, seed)
    completion = completion.to(device)
    attn = torch.cat([prompt_mask.to(device), torch.ones_like(completion)], dim=1)
    levels = agreed_levels(strata, k, par)  # (K',) sorted: the strata that hold a token (a stratum no row has gets no pass)
    canvases = []
    for j in levels.tolist():
        hide = strata >= j if partition in CAUSAL else strata == j  # (N, L): what pass j cannot see
        noisy = torch.where(hide, torch.full_like(completion, adapter.mask_token_id), completion)
        canvases.append(torch.cat([prompt, noisy], dim=1))
    k = len(canvases)
    ids = torch.cat(canvases)  # (K'*N, P+L), stratum-major
    logp = token_logprobs(adapter, ids, attn.repeat(k, 1), completion.repeat(k, 1), prompt.shape[1], chunk, logit_chunk)
    logp = logp.view(k, n, L)
    return logp.gather(0, torch.searchsorted(levels, strata)[None]).squeeze(0)  # each token from the pass that masked it


def elbo_logprobs(adapter: ModelAdapter, prompt_ids, prompt_mask, completion, *, draws: int = 32,
                  seq_ids=None, seed: int = 0, chunk: int | None = None,
                  logit_chunk: int = LOGIT_CHUNK) -> torch.Tensor:
    """LLaDA's Monte Carlo ELBO, per token (N, L): mean over draws of (L / l) 1[k masked] log p(o_k | x_l)."""
    n, L = completion.shape
    device = adapter.device
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
    masks = torch.stack(masks).to(device)  # (D, N, L)
    weights = torch.stack(weights).to(device)  # (D, N)
    completion = completion.to(device)
    prompt = prompt_ids.to(device)
    noisy = torch.where(masks, torch.full_like(masks, adapter.mask_token_id, dtype=torch.long), completion[None])
    ids = torch.cat([prompt[None].expand(draws, -1, -1), noisy], dim=2).reshape(draws * n, -1)
    attn = torch.cat([prompt_mask.to(device), torch.ones_like(completion)], dim=1).repeat(draws, 1)
    logp = token_logprobs(adapter, ids, attn, completion.repeat(draws, 1), prompt.shape[1], chunk,
                          logit_chunk).view(draws, n, L)
    return (logp * masks * weights[..., None]).mean(0)


ESTIMATORS = {"sml": sml_logprobs, "elbo": elbo_logprobs}


# ---- the field's estimators (docs/method.md, "The field's methods as bases") -----------------
def masked_passes(adapter: ModelAdapter, prompt_ids, prompt_mask, completion, hide, *, seq_ids, inner, seed: int = 0,
                  p_mask_prompt: float = 0.0, tag: str = "pass", chunk: int | None = None,
                  logit_chunk: int = LOGIT_CHUNK) -> torch.Tensor:
    """(D, N, L) bool `hide` -> (D, N, L) log p(o_k | canvas d): one pass per draw d, all D sharing one prompt
    mask per sequence and inner iteration (as SML's K canvases do)."""
    D, n, L = hide.shape
    device = adapter.device
    completion, hide = completion.to(device), hide.to(device)
    mask = torch.full_like(completion, adapter.mask_token_id)
    prompt = mask_prompts(prompt_ids.to(device), prompt_mask, p_mask_prompt, adapter.mask_token_id, seq_ids,
                          (inner, tag), seed)
    canvases = [torch.cat([prompt, torch.where(hide[d], mask, completion)], dim=1) for d in range(D)]
    attn = torch.cat([prompt_mask.to(device), torch.ones_like(completion)], dim=1).repeat(D, 1)
    logp = token_logprobs(adapter, torch.cat(canvases), attn, completion.repeat(D, 1), prompt_ids.shape[1], chunk,
                          logit_chunk)
    return logp.view(D, n, L)


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
            out[d, i, start:start + width] = False
            out[d, i, start + torch.randperm(width, generator=gen)[:m]] = True
    return out


def spg_logprobs(adapter: ModelAdapter, prompt_ids, prompt_mask, completion, *, valid, block: int, draws: int = 2,
                 beta: float = 1.0, seq_ids=None, inner: int = 0, seed: int = 0, p_mask_prompt: float = 0.0,
                 chunk: int | None = None, logit_chunk: int = LOGIT_CHUNK, **_) -> torch.Tensor:
    """SPG's bounds per token, (N, L, 3): e_k = mean_j 1[k in M_j] l_jk / t_j (its mean over the valid
    tokens is the ELBO), u_k = (1/beta) log mean_j 1[k in M_j] p_jk^beta / t_j (the EUBO's term, in
    log space so p^beta never underflows), and 1[k masked in some draw] (where u_k is defined)."""
    n, L = completion.shape
    seq_ids = list(range(n)) if seq_ids is None else list(seq_ids)
    valid = valid.bool().cpu()
    hide = spg_masks(valid, block, draws, seq_ids, inner, seed)  # (D, N, L)
    logp = masked_passes(adapter, prompt_ids, prompt_mask, completion, hide, seq_ids=seq_ids, inner=inner, seed=seed,
                         p_mask_prompt=p_mask_prompt, tag="spg", chunk=chunk, logit_chunk=logit_chunk)
    scored = (hide & valid[None]).to(logp.device)  # (D, N, L)
    t = scored.sum(-1, keepdim=True) / valid.sum(-1).clamp(min=1).to(logp.device)[None, :, None]  # (D, N, 1)
    t = t.clamp(min=1e-8)
    e = torch.where(scored, logp / t, torch.zeros_like(logp)).mean(0)  # (N, L)
    x = torch.where(scored, beta * logp - t.log(), torch.full_like(logp, -1e4))
    has = scored.any(0)
    u = torch.where(has, (torch.logsumexp(x, 0) - math.log(draws)) / beta, torch.zeros_like(e))
    return torch.stack([e, u, has.float()], dim=-1)


def espo_counts(L: int, group_size: int, seq_ids, inner, seed: int = 0) -> list[int]:
    """ESPO's masked-token counts: x_g = round(k + g (L+1)/G) mod (L+1), k ~ U{0..L} drawn once per
    group (keyed by the sequence id without its member index g), so a group's ratios are evenly spread."""
    out = []
    for sid in seq_ids:
        group, g = (sid[:-1], sid[-1]) if isinstance(sid, tuple) else (sid // group_size, sid % group_size)
        k = int(torch.randint(0, L + 1, (1,), generator=keyed_generator(seed, "espo-k", group, inner)))
        out.append(int(torch.round(torch.tensor(k + g * (L + 1) / group_size))) % (L + 1))
    return out


def espo_logprobs(adapter: ModelAdapter, prompt_ids, prompt_mask, completion, *, group_size: int, mc: int = 2,
                  seq_ids=None, inner: int = 0, seed: int = 0, p_mask_prompt: float = 0.0, chunk: int | None = None,
                  logit_chunk: int = LOGIT_CHUNK, **_) -> torch.Tensor:
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
        logp = masked_passes(adapter, prompt_ids, prompt_mask, completion, torch.stack([hide, ~hide]), seq_ids=seq_ids,
                             inner=(inner, d), seed=seed, p_mask_prompt=p_mask_prompt, tag="espo", chunk=chunk,
                             logit_chunk=logit_chunk)  # (2, N, L)
        hide = hide.to(logp.device)
        out = out + torch.where(hide, logp[0], logp[1]) * w.to(logp.device) / 2
    return out / mc


def coupled_logprobs(adapter: ModelAdapter, prompt_ids, prompt_mask, completion, *, seq_ids=None, inner: int = 0,
                     seed: int = 0, p_mask_prompt: float = 0.0, t_range=(0.2, 0.8), chunk: int | None = None,
                     logit_chunk: int = LOGIT_CHUNK, **_) -> torch.Tensor:
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
    logp = masked_passes(adapter, prompt_ids, prompt_mask, completion, torch.stack([torch.ones_like(hide), hide, ~hide]),
                         seq_ids=seq_ids, inner=inner, seed=seed, p_mask_prompt=p_mask_prompt, tag="coupled", chunk=chunk,
                         logit_chunk=logit_chunk)  # (3, N, L)
    hide, t = hide.to(logp.device), t.to(logp.device)
    return (logp[0] + torch.where(hide, logp[1] / t, logp[2] / (1 - t))) / 2

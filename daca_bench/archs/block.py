"""Block diffusion (SDAR, Fast-dLLM v2, LLaDA2's layout) for a model that takes a 4-D attention mask (the
tiny BERT): causal across blocks of B tokens, bidirectional inside a block (docs/method.md, section 12).

    allowed = block_allowed(index, noisy, key_mask)         # (N, S, S) bool: which keys each query row sees
    logits = block_logits(adapter, ids, attn)               # one canvas under the block-causal mask
    logits = block_logits(adapter, ids, attn, clean=y)      # two streams: each noisy block sees clean earlier blocks
    logits, c0, c1 = block_step(adapter, x, attn, p, lo, hi, "block", kv, fresh)   # a sampler pass (exact cache)

Blocks are counted back from the canvas's end, so a completion of whole blocks starts a block and the
prompt falls into blocks of B before it (the first possibly partial, with the left padding).
"""

from __future__ import annotations

import dataclasses

import torch

from .common import KVCache


def block_index(length: int, block: int, device=None) -> torch.Tensor:
    """(length,) block of each position, counted back from the end: -1 for the last block, -2 before it..."""
    return torch.div(torch.arange(length, device=device) - length, block, rounding_mode="floor")


def block_allowed(index: torch.Tensor, noisy: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """(S,) block index and noisy flag per position, (N, S) 1/0 keys -> (N, S, S) bool, row = query.
    A clean query (the prompt, a clean block) sees clean keys of its own and earlier blocks; a noisy
    query sees clean keys of earlier blocks and the noisy keys of its own block. Every row sees itself
    (a padding row has no other key: SDPA would give NaN)."""
    bq, bk = index[:, None], index[None, :]
    nq, nk = noisy[:, None], noisy[None, :]
    allowed = (~nk & ((bk < bq) | ((bk == bq) & ~nq))) | (nk & nq & (bk == bq))  # (S, S)
    allowed = allowed[None] & key_mask.bool()[:, None, :]
    return allowed | torch.eye(len(index), dtype=torch.bool, device=index.device)


def model_mask(allowed: torch.Tensor, model) -> torch.Tensor:
    """(N, S, S) bool -> the (N, 1, S, S) mask the model takes: bool for SDPA, an additive float otherwise."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(core.config, "_attn_implementation", "sdpa") == "sdpa":
        return allowed[:, None]
    dtype = next(core.parameters()).dtype
    return torch.zeros(allowed[:, None].shape, dtype=dtype, device=allowed.device).masked_fill(
        ~allowed[:, None], torch.finfo(dtype).min
    )


def block_logits(adapter, input_ids: torch.Tensor, attention_mask=None, keep=None, clean=None) -> torch.Tensor:
    """`ModelAdapter.logits` of a block model: (N, S) canvas -> (N, S, V) (or the `keep` rows), every
    position under the block-causal mask. clean = (N, L) the completion the canvas's last L positions
    are a noisy copy of: a second stream of its clean blocks is appended (same positions, its last
    block left out: no one reads it), so that each noisy block sees the prompt, the clean earlier
    blocks and itself (SDAR's and BD3-LM's training layout): one pass of S + L - B tokens scores every
    block of log p(y_b | x, y_<b) at once. Returns the canvas's own rows."""
    B = adapter.block_size
    S = input_ids.shape[1]
    device = input_ids.device
    mask = getattr(attention_mask, "mask", attention_mask)
    mask = torch.ones_like(input_ids) if mask is None else mask.to(device)
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    index, noisy, ids = block_index(S, B, device), torch.zeros(S, dtype=torch.bool, device=device), input_ids
    if clean is not None:
        L = clean.shape[1]
        if L % B or L > S:
            raise ValueError(
                f"a block model scores completions of whole blocks: length {L} is not a multiple of "
                f"model.block_size={B} (or is longer than the canvas {S})"
            )
        span = slice(S - L, S - B)  # the clean copies of every block but the last
        ids = torch.cat([input_ids, clean[:, : L - B].to(device)], dim=1)
        mask = torch.cat([mask, torch.ones_like(clean[:, : L - B], device=device)], dim=1)
        positions = torch.cat([positions, positions[:, span]], dim=1)
        noisy = torch.cat(
            [torch.arange(S, device=device) >= S - L, torch.zeros(L - B, dtype=torch.bool, device=device)]
        )
        index = torch.cat([index, index[span]])
    allowed = block_allowed(index, noisy, mask)
    out = adapter.model(input_ids=ids, attention_mask=model_mask(allowed, adapter.model), position_ids=positions)
    logits = (out.logits if hasattr(out, "logits") else out[0])[:, :S]
    return logits if keep is None else logits[:, keep[0] : keep[1]]


def block_step(
    adapter,
    x: torch.Tensor,
    attn,
    p: int,
    lo: int,
    hi: int,
    cache: str,
    kv: KVCache | None,
    fresh: bool,
    record: bool = True,
) -> tuple[torch.Tensor, int, int]:
    """One sampler pass of a block model whose open block is completion positions [lo, hi): (N, hi-lo, V)
    logits of that block, and lo, hi (a block model's record holds its own block's confidences only).
    none: the whole canvas under the block-causal mask, every step (the reference). block: the exact
    cache. A block's first pass (`fresh`) runs the finished block before it (clean, now final) and the
    new block together as a window that appends both to the cache; the prompt and block 0 open with one
    pass that fills it; every later pass of the block recomputes the block alone against the cache.
    Later blocks are never computed (no one sees them). As many passes as `none`, each over 1-2 blocks."""
    if cache == "none":
        return adapter.logits(x, attn, keep=(p + lo, p + hi)), lo, hi
    end = p + hi  # a block boundary: the blocks counted back from here are the whole canvas's
    first = 0 if lo == 0 and fresh else p + lo - (hi - lo) if fresh else p + lo
    allowed = block_allowed(
        block_index(end, hi - lo, x.device), torch.zeros(end, dtype=torch.bool, device=x.device), attn.mask[:, :end]
    )
    rows = dataclasses.replace(
        attn, mask=attn.mask[:, :end], positions=attn.positions[:, :end], padded=True, sdpa=allowed[:, None, first:end]
    )
    window = None if first == 0 else (first, end)
    return adapter.forward_cached(x[:, :end], rows, kv, window=window, keep=(p + lo, p + hi)), lo, hi

"""The sampler's cache variants (`sampler.cache`, docs/method.md section 3.1): one denoising step's forward pass.

`none` runs the whole canvas every step; as Fast-dLLM does, `prefix` and `dual` run the whole canvas at a
block's first step and then only the block onward (`prefix`) or the block alone (`dual`) against the cached
keys and values. A block-diffusion model's exact cache (`block`) is archs/block.py's `block_step`.

    logits, c0, c1 = step_logits(adapter, x, attn, p, lo, hi, "prefix", KVCache(), fresh=True)
"""

from __future__ import annotations

import torch

from ..adapter import ModelAdapter
from ..archs.common import KVCache

CACHES = {"none": None, "prefix": "prefix", "dual": "dual", "block": "block"}  # sampler.cache


def step_logits(
    adapter: ModelAdapter,
    x,
    attn,
    p: int,
    lo: int,
    hi: int,
    cache: str,
    kv: KVCache | None,
    fresh: bool,
    record: bool = True,
) -> tuple[torch.Tensor, int, int]:
    """One step's forward pass over the (N, P+L) canvas whose current block is completion
    positions [lo, hi): (N, c1-c0, V) logits of completion positions c0..c1-1, and c0, c1.
    none: the whole canvas, every step. prefix / dual: the whole canvas at a block's first step
    (`fresh`; it refills `kv`), then [lo, L) (prefix) or [lo, hi) (dual) against the cached keys.
    The output layer runs only on the positions the step reads: the completion positions the pass
    computed (`record`: the confidence record covers them), or the block alone (no record)."""
    L = x.shape[1] - p
    if cache != "none" and not fresh:
        end = L if cache == "prefix" else hi
        c0, c1 = (lo, end) if record else (lo, hi)
        return adapter.forward_cached(x, attn, kv, window=(p + lo, p + end), keep=(p + c0, p + c1)), c0, c1
    c0, c1 = (0, L) if record else (lo, hi)
    if cache == "none":
        return adapter.logits(x, attn, keep=(p + c0, p + c1)), c0, c1
    return adapter.forward_cached(x, attn, kv, keep=(p + c0, p + c1)), c0, c1

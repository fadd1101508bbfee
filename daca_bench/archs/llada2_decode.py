"""LLaDA2.0's block decode (the authors' `generate`, greedy) on the native class, with the exact block KV
cache: the finished blocks' keys and values are computed once and each denoising pass recomputes the
open block only.

    tokens = llada2_generate(model, prompt, gen_length=64, block_length=32, steps=32, threshold=0.95)
    tokens = llada2_generate(model, prompt, ..., cache=False)   # every pass over the whole window (theirs)

The canvas is the prompt followed by mask tokens, cut into blocks of `block_length` counted from
position 0 (the prompt's last block is decoded together with the first completion tokens; its prompt
tokens stay). Block by block, each pass takes the argmax token and its probability at every masked
position of the open block; those above `threshold` are committed, or, if fewer than the step's quota
(block_length split over `steps` as evenly as possible, the larger shares first), the quota's most
confident. A block whose tokens contain `eos_id` ends the decode. Returns the completion up to and
including the first EOS, at most `gen_length` tokens. One prompt (1, P), as the authors' code.

A pass's open block sees every finished block and itself (block-causal); a finished block never sees a
later one, so its keys are final once it is: the cached decode equals the uncached one up to float
rounding (tests/unit/base/test_archs_llada2.py, tokens identical on the golden model).
"""

from __future__ import annotations

import torch

from .common import KVCache


def transfer_quota(block_length: int, steps: int) -> list[int]:
    """How many tokens each of `steps` passes commits at least: block_length split evenly, larger first."""
    base, extra = divmod(block_length, steps)
    return [base + (i < extra) for i in range(steps)]


def _pass(model, x, end, block, kv, window):
    """Logits (block, V) of the open block [end - block, end): the whole window, or `window` against the cache."""
    b = torch.arange(end, device=x.device) // block
    allowed = (b[None, :] <= b[:, None])[None, None]  # (1, 1, end, end) block-causal
    lo, hi = window or (0, end)
    if kv is not None:
        kv.window = window
    keep = torch.arange(hi - lo - block, hi - lo, device=x.device)
    out = model(
        input_ids=x[:, lo:hi],
        attention_mask=allowed,
        position_ids=torch.arange(lo, hi, device=x.device)[None],
        past_key_values=kv,
        logits_to_keep=keep,
    )
    return out.logits[0].float()


@torch.no_grad()
def llada2_generate(
    model,
    prompt: torch.Tensor,
    gen_length: int = 2048,
    block_length: int = 32,
    steps: int = 32,
    threshold: float = 0.95,
    minimal_topk: int = 1,
    eos_id: int | None = None,
    mask_id: int | None = None,
    cache: bool = True,
) -> torch.Tensor:
    """prompt (1, P) -> (1, n) completion tokens (module docstring). eos_id / mask_id default to the config's."""
    if prompt.dim() != 2 or prompt.shape[0] != 1:
        raise ValueError(f"llada2_generate decodes one prompt of shape (1, P), got {tuple(prompt.shape)}")
    if gen_length < 1 or block_length < 1 or steps < 1:
        raise ValueError("llada2_generate: gen_length, block_length and steps must be positive")
    cfg = model.config
    eos_id = cfg.eos_token_id if eos_id is None else eos_id
    mask_id = cfg.mask_token_id if mask_id is None else mask_id
    steps = min(steps, gen_length // minimal_topk)
    quota = transfer_quota(block_length, steps)
    device = next(model.parameters()).device
    p = prompt.shape[1]
    blocks = -(-(p + gen_length) // block_length)
    x = torch.full((1, blocks * block_length), mask_id, dtype=torch.long, device=device)
    x[0, :p] = prompt[0].to(device)
    first = p // block_length
    kv = KVCache() if cache else None
    for blk in range(first, blocks):
        end = (blk + 1) * block_length
        span = x[0, end - block_length : end]  # a view: commits land in x
        for step in range(steps):
            active = span == mask_id
            if not bool(active.any()):
                break
            if not cache or (step == 0 and blk == first):
                window = None  # the whole window (fills the cache)
            else:
                window = (end - 2 * block_length if step == 0 else end - block_length, end)
            logits = _pass(model, x, end, block_length, kv, window)  # (block, V)
            token = logits.argmax(dim=-1)
            conf = torch.softmax(logits, dim=-1).gather(-1, token[:, None]).squeeze(-1)
            conf = torch.where(active, conf, torch.full_like(conf, -torch.inf))
            high = conf > threshold
            if int(high.sum()) >= quota[step]:
                pick = high
            else:
                pick = torch.zeros_like(high)
                pick[conf.topk(min(quota[step], int(active.sum()))).indices] = True
            span[pick] = token[pick]
        if eos_id is not None and bool((x[0, p:end] == eos_id).any()):
            break
    out = x[0, p : p + gen_length]
    eos = (out == eos_id).nonzero()
    n = int(eos[0, 0]) + 1 if len(eos) else gen_length
    return out[:n][None]

"""Pieces shared by the native LLaDA, Dream, SDAR and LLaDA2 classes: RMSNorm, the SwiGLU MLP, rotary embeddings
computed from position ids (no buffers to initialise), the attention-mask forms SDPA takes, and GQA.

    cos, sin = rope(position_ids, head_dim, theta)            # (B, T, D) float32
    q = apply_rope(q, cos, sin)                               # q: (B, H, T, D)
    bias = sdpa_mask(attention_mask, dtype)                   # None | (B, 1, 1|T, T) bool or float
    cache = KVCache(); model(ids, past_key_values=cache)      # fill; then cache.window = (lo, hi)
    rows = keep_index(logits_to_keep, T, device)              # the rows a pass's output is read at
    x, cos, sin, mask = query_rows(x, cos, sin, mask, rows)   # the last layer: those rows' queries only

Written for this project from the architectures' published descriptions (Llama-style blocks).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """Normalise in float32, cast back, then scale by the weight (LLaDA's and Dream's order); with
    scale_in_float, scale in float32 too and cast last (SDAR's fused kernel: equal in fp32)."""

    def __init__(self, size: int, eps: float, scale_in_float: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps
        self.scale_in_float = scale_in_float

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.scale_in_float:
            return (h * self.weight.float()).to(x.dtype)
        return self.weight * h.to(x.dtype)


class SwiGLU(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)), no biases: the MLP of Dream, SDAR and LLaDA2 (a dense layer,
    one routed expert, the shared experts), under the published key names."""

    def __init__(self, hidden: int, inner: int):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(hidden, inner, bias=False), nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def default_positions(input_ids: torch.Tensor, cache=None) -> torch.Tensor:
    """(B, T) positions 0..T-1 for every row (lo..lo+T-1 for a cache window starting at lo)."""
    b, t = input_ids.shape
    lo = cache.window[0] if cache is not None and cache.window is not None else 0
    return torch.arange(lo, lo + t, device=input_ids.device)[None].expand(b, -1)


def rope(position_ids: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary angles for (B, T) positions -> cos, sin of shape (B, T, head_dim), float32."""
    inv_freq = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, device=position_ids.device, dtype=torch.int64).float() / head_dim)
    )  # (D/2,)
    angles = position_ids[..., None].float() * inv_freq  # (B, T, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (B, T, D)
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (B, H, T, D); cos/sin: (B, T, D) in x's dtype or float32 (then x is promoted)."""
    x1, x2 = x.chunk(2, dim=-1)
    rotated = torch.cat([-x2, x1], dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


def repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, Hkv, T, D) -> (B, Hkv * groups, T, D), each key head repeated for its query heads."""
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def sdpa_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """The mask SDPA takes. (B, L) 1/0 (keys to attend) -> (B, 1, 1, L) bool, None when nothing is
    masked; (B, 1, L, L) bool passes through; a 4-D float mask is an additive bias (cast to dtype)."""
    if attention_mask is None:
        return None
    if attention_mask.dim() == 2:
        if bool(attention_mask.bool().all()):
            return None
        return attention_mask.bool()[:, None, None, :]
    if attention_mask.dim() != 4:
        raise ValueError(f"attention_mask must be (B, L) or (B, 1, L, L), got shape {tuple(attention_mask.shape)}")
    return attention_mask if attention_mask.dtype == torch.bool else attention_mask.to(dtype)


def keep_index(logits_to_keep, t: int, device) -> torch.Tensor | None:
    """transformers' `logits_to_keep` as a 1-D index tensor of the rows kept out of t (None: all rows):
    None or 0 all, an int n the last n, a 1-D index tensor those rows (in its order)."""
    if logits_to_keep is None or (isinstance(logits_to_keep, int) and logits_to_keep == 0):
        return None
    if isinstance(logits_to_keep, int):
        return torch.arange(t - logits_to_keep, t, device=device)
    return logits_to_keep


def query_rows(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask, rows: torch.Tensor | None):
    """The last layer of a pass whose output is read at `rows` only needs those rows' queries, residual
    and MLP (every row's keys and values still): x (B, T, d), cos / sin (B, T, D) and a (B, 1, T, S) mask
    cut to those rows (a (B, 1, 1, S) mask or None unchanged)."""
    if rows is None:
        return x, cos, sin, mask
    if mask is not None and mask.dim() == 4 and mask.shape[-2] > 1:
        mask = mask.index_select(-2, rows)
    return x.index_select(1, rows), cos.index_select(1, rows), sin.index_select(1, rows), mask


class KVCache:
    """Keys and values of a whole canvas, per layer, from one full pass (`window` None: each layer
    keeps its (B, Hkv, S, D) K and V, the full pass's own tensors, no copy). A later pass over canvas
    positions [lo, hi) only (`window` = (lo, hi), its input ids x[:, lo:hi]) writes its fresh keys
    and values into rows [lo, hi) of the store in place and attends to the whole store: no
    per-pass concatenation. So a window pass reads the stored rows outside its window and its own
    rows inside it; a later window must cover the rows an earlier one wrote (the sampler repeats
    one window per block, then refills with a full pass). Fast-dLLM's prefix cache is the window
    [block start, S), its dual cache [block start, block end). With autograd on, a window pass
    concatenates instead (an in-place write would break the backward); the rollouts run without it.
    A window past the store's end grows the store to it (a block model appends each finished block)."""

    def __init__(self):
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.window: tuple[int, int] | None = None

    def update(self, k: torch.Tensor, v: torch.Tensor, layer: int, *_, **__) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v: (B, Hkv, T, D) of this pass -> the keys and values to attend to."""
        if self.window is None:  # a full pass: (re)fill
            if layer == len(self.keys):
                self.keys.append(k)
                self.values.append(v)
            else:
                self.keys[layer], self.values[layer] = k, v
            return k, v
        if layer >= len(self.keys):
            raise ValueError("KVCache: a window pass before any full pass filled the cache")
        lo, hi = self.window
        K, V = self.keys[layer], self.values[layer]  # (B, Hkv, S, D)
        if hi > K.shape[2]:  # a block model's cache opening its next block (archs/block.py): the store grows
            K = self.keys[layer] = torch.nn.functional.pad(K, (0, 0, 0, hi - K.shape[2]))
            V = self.values[layer] = torch.nn.functional.pad(V, (0, 0, 0, hi - V.shape[2]))
        if torch.is_grad_enabled() and (k.requires_grad or v.requires_grad):
            return torch.cat([K[:, :, :lo], k, K[:, :, hi:]], dim=2), torch.cat([V[:, :, :lo], v, V[:, :, hi:]], dim=2)
        K[:, :, lo:hi] = k
        V[:, :, lo:hi] = v
        return K, V

    def rows(self, mask: torch.Tensor | None) -> torch.Tensor | None:
        """A (B, 1, S, S) mask cut to this pass's query rows (B, 1, hi - lo, S); other masks (one already
        cut to those rows, as archs/block.py's `block_step` hands it) unchanged."""
        if (
            mask is None
            or self.window is None
            or mask.dim() != 4
            or mask.shape[-2] in (1, self.window[1] - self.window[0])
        ):
            return mask
        return mask[:, :, self.window[0] : self.window[1]]

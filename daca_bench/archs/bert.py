"""A KV-cached forward pass for transformers' `BertForMaskedLM` (the tiny default model), run
through the model's own submodules, so LoRA layers and trained weights act as in `model(...)`.

    cache = KVCache()
    logits = bert_cached(model, ids, mask, positions, cache)                  # fill: (B, S, V)
    cache.window = (lo, hi)
    logits = bert_cached(model, ids[:, lo:hi], mask, positions[:, lo:hi], cache)   # (B, hi-lo, V)
    logits = bert_cached(..., keep=rows)      # the head on those rows of the pass only: (B, len(rows), V)

Only absolute position embeddings and an encoder (no cross-attention) are supported; the
attention is SDPA at BERT's scale 1/sqrt(head_dim), dropout off (rollouts run in eval mode).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import KVCache, keep_index, sdpa_mask


def supports(model) -> bool:
    """Whether `model` is a BERT masked LM this forward reproduces."""
    config = getattr(model, "config", None)
    return (
        type(model).__name__ == "BertForMaskedLM"
        and not getattr(config, "is_decoder", False)
        and getattr(config, "position_embedding_type", "absolute") == "absolute"
    )


def bert_cached(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor,
    cache: KVCache,
    keep=None,
) -> torch.Tensor:
    """input_ids, position_ids (B, T) for the cache's window (the whole canvas when it is None);
    attention_mask None, (B, S) 1/0 or (B, 1, 1, S) bool over the whole canvas. Returns (B, T, V)
    logits, or with `keep` (`logits_to_keep`'s convention: an int n, a 1-D index tensor) the MLM
    head run on those rows only."""
    bert = model.bert
    h = bert.embeddings(input_ids=input_ids, position_ids=position_ids)  # (B, T, hidden)
    mask = sdpa_mask(attention_mask, h.dtype)  # None | (B, 1, 1, S) bool
    b, t, _ = h.shape
    for i, layer in enumerate(bert.encoder.layer):
        att = layer.attention.self
        heads, hd = att.num_attention_heads, att.attention_head_size

        def split(y):  # (B, T, heads * hd) -> (B, heads, T, hd)
            return y.view(b, t, heads, hd).transpose(1, 2)

        q, k, v = split(att.query(h)), split(att.key(h)), split(att.value(h))
        k, v = cache.update(k, v, i)  # (B, heads, S, hd)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, heads, T, hd)
        a = layer.attention.output(a.transpose(1, 2).reshape(b, t, heads * hd), h)  # dense, residual, LayerNorm
        h = layer.output(layer.intermediate(a), a)
    rows = keep_index(keep, t, h.device)
    return model.cls(h if rows is None else h.index_select(1, rows))

"""Dream (Dream-org/Dream-v0-Instruct-7B) as a native transformers `PreTrainedModel`: a Qwen2-style
decoder run without a causal mask (RMSNorm, rotary, SwiGLU, GQA, q/k/v biases) that loads the
published checkpoint by its own key names (`model.layers.N.self_attn.q_proj`, `lm_head`, ...).

    model = DreamModel.from_pretrained("path/to/Dream-v0-Instruct-7B")    # no trust_remote_code
    raw = model(input_ids, attention_mask=mask, position_ids=pos).logits   # (B, T, V), unshifted

Like the published code, row i of the output predicts token i+1 (Dream was adapted from an
autoregressive model): the adapter (`daca_bench.adapter.ModelAdapter`, shift_logits) moves it one
position right so that logits[i] predicts token i, as for every other model. The attention mask
may be None, (B, T) 1/0 or the published code's (B, 1, T, T) bool form. `past_key_values` takes
a `KVCache` (common.py): the prefix and dual caches of `sampler.cache`.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import MaskedLMOutput

from .common import (
    KVCache,
    RMSNorm,
    SwiGLU,
    apply_rope,
    default_positions,
    keep_index,
    query_rows,
    repeat_kv,
    rope,
    sdpa_mask,
)


class DreamConfig(PretrainedConfig):
    """The published config's fields; defaults are Dream-v0-7B's."""

    model_type = "Dream"

    def __init__(
        self,
        vocab_size=152064,
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        hidden_act="silu",
        max_position_embeddings=131072,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        rope_scaling=None,
        use_sliding_window=False,
        attention_dropout=0.0,
        mask_token_id=151666,
        pad_token_id=151643,
        bos_token_id=151643,
        eos_token_id=151643,
        tie_word_embeddings=False,
        use_cache=False,
        **kwargs,
    ):
        kwargs.pop("auto_map", None)  # the native class needs no remote code
        for key, value, need in (
            ("rope_scaling", rope_scaling, None),
            ("use_sliding_window", use_sliding_window, False),
            ("hidden_act", hidden_act, "silu"),
            ("tie_word_embeddings", tie_word_embeddings, False),
        ):
            if value != need:
                raise ValueError(
                    f"Dream config {key}={value!r} is not supported by the native class "
                    f"(needs {need!r}); load it with model.trust_remote_code=true"
                )
        self.vocab_size, self.hidden_size, self.intermediate_size = vocab_size, hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.hidden_act, self.max_position_embeddings = hidden_act, max_position_embeddings
        self.initializer_range, self.rms_norm_eps, self.rope_theta = initializer_range, rms_norm_eps, rope_theta
        self.use_sliding_window, self.attention_dropout = False, attention_dropout
        self.mask_token_id, self.use_cache = mask_token_id, use_cache
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            tie_word_embeddings=False,
            **kwargs,
        )


class DreamAttention(nn.Module):
    def __init__(self, config: DreamConfig):
        super().__init__()
        h = config.hidden_size
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = h // self.heads
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=False)
        self.dropout = config.attention_dropout

    def forward(self, x, cos, sin, mask, cache=None, layer=0, rows=None):
        """x (B, T, hidden) -> (B, T, hidden), or (B, len(rows), hidden): those rows' queries only."""
        b, t, h = x.shape  # (B, T, hidden)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, hd)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # Dream turns q, k in the model's dtype
        k = apply_rope(k, cos, sin)
        if cache is not None:  # keys and values of the whole canvas, this pass's rows fresh
            k, v = cache.update(k, v, layer)
        x, cos, sin, mask = query_rows(x, cos, sin, mask, rows)
        t = x.shape[1]
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        q = apply_rope(q, cos, sin)
        groups = self.heads // self.kv_heads
        a = F.scaled_dot_product_attention(
            q,
            repeat_kv(k, groups),
            repeat_kv(v, groups),
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.o_proj(a.transpose(1, 2).reshape(b, t, h))


class DreamDecoderLayer(GradientCheckpointingLayer):
    def __init__(self, config: DreamConfig):
        super().__init__()
        self.self_attn, self.mlp = DreamAttention(config), SwiGLU(config.hidden_size, config.intermediate_size)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, cos, sin, mask, cache=None, layer=0, rows=None):
        """With `rows` (the last layer of a pass read at those rows only): (B, len(rows), hidden)."""
        a = self.self_attn(self.input_layernorm(x), cos, sin, mask, cache, layer, rows)
        x = (x if rows is None else x.index_select(1, rows)) + a
        return x + self.mlp(self.post_attention_layernorm(x))


class DreamBaseModel(nn.Module):
    """`model`: embed_tokens (pad row zero-initialised and frozen, as published), layers, norm."""

    def __init__(self, config: DreamConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList(DreamDecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class DreamModel(PreTrainedModel):
    config_class = DreamConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["DreamDecoderLayer"]
    _supports_sdpa = True

    def __init__(self, config: DreamConfig):
        super().__init__(config)
        self.model = DreamBaseModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        inputs_embeds=None,
        past_key_values: KVCache | None = None,
        logits_to_keep=None,
        **kwargs,
    ):
        """input_ids (B, T); attention_mask None | (B, T) | (B, 1, 1|T, T) bool; position_ids (B, T).
        Returns the published code's raw logits (B, T, V): row i predicts token i+1. With a `KVCache`
        whose window is (lo, hi): input_ids are canvas positions lo..hi-1, the mask covers the canvas.
        `logits_to_keep` (None | int n: the last n rows | 1-D index tensor): the raw rows returned; the
        last layer's queries and MLP, the final norm and lm_head run on those rows only."""
        x = self.model.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, hidden)
        if position_ids is None:
            position_ids = default_positions(x[..., 0], past_key_values)
        cos, sin = rope(
            position_ids, self.config.hidden_size // self.config.num_attention_heads, self.config.rope_theta
        )
        mask = sdpa_mask(attention_mask, x.dtype)
        if past_key_values is not None:
            mask = past_key_values.rows(mask)
        rows = keep_index(logits_to_keep, x.shape[1], x.device)
        last = len(self.model.layers) - 1
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, mask, past_key_values, i, rows if i == last else None)
        if rows is not None and last < 0:
            x = x.index_select(1, rows)
        return MaskedLMOutput(logits=self.lm_head(self.model.norm(x)))

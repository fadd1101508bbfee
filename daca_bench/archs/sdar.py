"""SDAR (JetAstra/SDAR; TraDo, its RL'd variant) as a native transformers `PreTrainedModel`: a Qwen3
decoder (RMSNorm, q/k RMSNorm per head, rotary, SwiGLU, GQA, head_dim apart from hidden / heads)
run as a block diffusion LM: causal across blocks of `config.block_size` tokens, bidirectional inside
one. It loads the published checkpoint by its own key names (`model.layers.N.self_attn.q_norm`, ...).

    model = SDARModelLM.from_pretrained("path/to/SDAR-1.7B-Chat")          # no trust_remote_code
    logits = model(input_ids, position_ids=pos).logits                     # (B, T, V), block-causal
    logits = model(ids, attention_mask=allowed[:, None]).logits            # any (B, 1, T, S) bool mask

Row i predicts token i (no shift). The attention mask may be (B, 1, T, S) bool or additive float
(what archs/block.py builds: the harness's layout, blocks counted back from the canvas's end), the
published generator's (B | 1, T, S) 1/0 form, or None / a (B, S) 1/0 key mask: then the class builds
the block-causal mask itself from the position ids, block = position // block_size (SDAR's own
convention: blocks from each row's first real token). `past_key_values` takes a `KVCache` (common.py):
a window pass attends to the stored rows, the exact block cache (a None mask there reads every stored
row of an earlier or the same block). Verified against golden numbers from the published code
(tests/unit/base/test_archs_block.py, scripts/golden_sdar.py).
"""

from __future__ import annotations

import torch
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


class SDARConfig(PretrainedConfig):
    """The published config's fields; defaults are SDAR-8B-Chat's."""

    model_type = "sdar"

    def __init__(
        self,
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        hidden_act="silu",
        max_position_embeddings=32768,
        initializer_range=0.02,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        rope_scaling=None,
        attention_bias=False,
        attention_dropout=0.0,
        use_sliding_window=False,
        block_size=4,
        mask_token_id=151669,
        pad_token_id=None,
        bos_token_id=151643,
        eos_token_id=151643,
        tie_word_embeddings=False,
        use_cache=False,
        **kwargs,
    ):
        for key in ("auto_map", "attn_implementation"):  # no remote code; the native class runs SDPA
            kwargs.pop(key, None)
        for key, value, need in (
            ("rope_scaling", rope_scaling, None),
            ("use_sliding_window", use_sliding_window, False),
            ("hidden_act", hidden_act, "silu"),
        ):
            if value != need:
                raise ValueError(
                    f"SDAR config {key}={value!r} is not supported by the native class "
                    f"(needs {need!r}); load it with model.trust_remote_code=true"
                )
        if int(block_size) < 1:
            raise ValueError(f"SDAR config block_size={block_size} must be a positive block length")
        self.vocab_size, self.hidden_size, self.intermediate_size = vocab_size, hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.head_dim = head_dim or hidden_size // num_attention_heads
        self.hidden_act, self.max_position_embeddings = hidden_act, max_position_embeddings
        self.initializer_range, self.rms_norm_eps, self.rope_theta = initializer_range, rms_norm_eps, rope_theta
        self.attention_bias, self.attention_dropout = attention_bias, attention_dropout
        self.use_sliding_window, self.block_size = False, int(block_size)
        self.mask_token_id, self.use_cache = mask_token_id, use_cache
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )


class SDARAttention(nn.Module):
    def __init__(self, config: SDARConfig):
        super().__init__()
        h, bias = config.hidden_size, config.attention_bias
        self.heads, self.kv_heads, self.head_dim = (
            config.num_attention_heads,
            config.num_key_value_heads,
            config.head_dim,
        )
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps, scale_in_float=True)  # per head, before rotary
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps, scale_in_float=True)
        self.dropout = config.attention_dropout

    def forward(self, x, cos, sin, mask, cache=None, layer=0, rows=None):
        """x (B, T, hidden) -> (B, T, hidden), or (B, len(rows), hidden): those rows' queries only."""
        b, t, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)).transpose(1, 2)  # (B, Hkv, T, hd)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # SDAR turns q, k in the model's dtype
        k = apply_rope(k, cos, sin)
        if cache is not None:  # keys and values of the whole canvas, this pass's rows fresh
            k, v = cache.update(k, v, layer)
        x, cos, sin, mask = query_rows(x, cos, sin, mask, rows)
        t = x.shape[1]
        q = self.q_norm(self.q_proj(x).view(b, t, self.heads, self.head_dim)).transpose(1, 2)  # (B, H, T, hd)
        q = apply_rope(q, cos, sin)
        groups = self.heads // self.kv_heads
        a = F.scaled_dot_product_attention(
            q,
            repeat_kv(k, groups),
            repeat_kv(v, groups),
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.o_proj(a.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class SDARDecoderLayer(GradientCheckpointingLayer):
    def __init__(self, config: SDARConfig):
        super().__init__()
        self.self_attn, self.mlp = SDARAttention(config), SwiGLU(config.hidden_size, config.intermediate_size)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, scale_in_float=True)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, scale_in_float=True)

    def forward(self, x, cos, sin, mask, cache=None, layer=0, rows=None):
        """With `rows` (the last layer of a pass read at those rows only): (B, len(rows), hidden)."""
        a = self.self_attn(self.input_layernorm(x), cos, sin, mask, cache, layer, rows)
        x = (x if rows is None else x.index_select(1, rows)) + a
        return x + self.mlp(self.post_attention_layernorm(x))


class SDARBaseModel(nn.Module):
    """`model`: embed_tokens, layers, norm."""

    def __init__(self, config: SDARConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList(SDARDecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, scale_in_float=True)


def block_causal_mask(attention_mask, position_ids: torch.Tensor, block: int, cache: KVCache | None):
    """The (B, 1, T, S) bool mask for a None or (B, S) 1/0 mask: a query sees the keys of its own and
    earlier blocks (block = position // block), among the keys the mask keeps; a full pass's rows see
    themselves (a padding row would have no key). A cache window's keys are the store's rows: their
    positions from the (B, S) mask (as the adapter gives them), else 0..S-1."""
    windowed = cache is not None and cache.window is not None
    if not windowed:
        keys = position_ids
    elif attention_mask is not None:
        keys = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    else:
        stored = cache.keys[0].shape[2] if cache.keys else 0
        keys = torch.arange(max(stored, cache.window[1]), device=position_ids.device)[None]
    allowed = torch.div(keys[:, None, :], block, rounding_mode="floor") <= torch.div(
        position_ids[:, :, None], block, rounding_mode="floor"
    )  # (B, T, S)
    if attention_mask is not None:
        allowed = allowed & attention_mask.bool()[:, None, :]
    if not windowed:
        allowed = allowed | torch.eye(allowed.shape[-1], dtype=torch.bool, device=allowed.device)
    return allowed[:, None]


class SDARModelLM(PreTrainedModel):
    config_class = SDARConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["SDARDecoderLayer"]
    _supports_sdpa = True
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}  # tied only where the config says so

    def __init__(self, config: SDARConfig):
        super().__init__(config)
        self.model = SDARBaseModel(config)
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
        """input_ids (B, T); attention_mask None | (B, S) 1/0 | (B | 1, T, S) 1/0 | (B, 1, T, S) bool or float;
        position_ids (B, T). Returns logits (B, T, V), row i predicting token i. With a `KVCache` whose
        window is (lo, hi): input_ids are canvas positions lo..hi-1, a 4-D mask covers the canvas.
        `logits_to_keep` (None | int n: the last n rows | 1-D index tensor): the rows returned; the last
        layer's queries and MLP, the final norm and lm_head run on those rows only."""
        x = self.model.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, hidden)
        if position_ids is None:
            position_ids = default_positions(x[..., 0], past_key_values)
        cos, sin = rope(position_ids, self.config.head_dim, self.config.rope_theta)
        if attention_mask is not None and attention_mask.dim() == 3:  # the published generator's 1/0 form
            attention_mask = attention_mask[:, None] > 0
        if attention_mask is None or attention_mask.dim() == 2:
            mask = block_causal_mask(attention_mask, position_ids, self.config.block_size, past_key_values)
        else:
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

"""LLaDA (GSAI-ML/LLaDA-8B-Instruct) as a native transformers `PreTrainedModel`: a Llama-style
bidirectional decoder (RMSNorm, rotary, SwiGLU, no causal mask) that loads the published
checkpoint by its own key names (`model.transformer.wte`, `...blocks.N.q_proj`, `...ff_out`).

    model = LLaDAModelLM.from_pretrained("path/to/LLaDA-8B-Instruct")     # no trust_remote_code
    logits = model(input_ids, attention_mask=mask, position_ids=pos).logits  # (B, T, V)

Unlike the published code, the attention mask and position ids are honoured (without them the
result equals the published code's, which ignores both: tests/unit/base/test_archs.py). SDPA attention,
gradient checkpointing through the standard API (`activation_checkpointing_enable`), bf16.
`past_key_values` takes a `KVCache` (common.py): the prefix and dual caches of `sampler.cache`.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import MaskedLMOutput

from .common import KVCache, RMSNorm, apply_rope, default_positions, keep_index, query_rows, repeat_kv, rope, sdpa_mask

# options of the published config this class does not implement, with the value it needs
UNSUPPORTED = {
    "alibi": False,
    "block_type": "llama",
    "layer_norm_type": "rms",
    "attention_layer_norm": False,
    "scale_logits": False,
    "input_emb_norm": False,
    "weight_tying": False,
    "rope": True,
    "multi_query_attention": None,
    "block_group_size": 1,
}


class LLaDAConfig(PretrainedConfig):
    """The published config's fields (d_model, n_heads, n_layers, ...); defaults are LLaDA-8B's."""

    model_type = "llada"
    attribute_map = {"hidden_size": "d_model", "num_attention_heads": "n_heads", "num_hidden_layers": "n_layers"}

    def __init__(
        self,
        d_model=4096,
        n_heads=32,
        n_kv_heads=None,
        n_layers=32,
        mlp_hidden_size=12288,
        mlp_ratio=4,
        vocab_size=126464,
        embedding_size=126464,
        max_sequence_length=4096,
        rope_theta=500000.0,
        rms_norm_eps=1e-5,
        include_bias=False,
        include_qkv_bias=False,
        init_std=0.02,
        mask_token_id=126336,
        eos_token_id=126081,
        pad_token_id=126081,
        use_cache=False,
        **kwargs,
    ):
        kwargs.pop("auto_map", None)  # the native class needs no remote code
        self.d_model, self.n_heads, self.n_layers = d_model, n_heads, n_layers
        self.n_kv_heads = n_kv_heads
        self.mlp_hidden_size, self.mlp_ratio = mlp_hidden_size, mlp_ratio
        self.vocab_size, self.embedding_size = vocab_size, embedding_size
        self.max_sequence_length, self.rope_theta, self.rms_norm_eps = max_sequence_length, rope_theta, rms_norm_eps
        self.include_bias, self.include_qkv_bias, self.init_std = include_bias, include_qkv_bias, init_std
        self.mask_token_id, self.use_cache = mask_token_id, use_cache
        for key, need in UNSUPPORTED.items():
            if kwargs.get(key, need) != need:
                raise ValueError(
                    f"LLaDA config {key}={kwargs[key]!r} is not supported by the native class "
                    f"(needs {need!r}); load it with model.trust_remote_code=true"
                )
        super().__init__(eos_token_id=eos_token_id, pad_token_id=pad_token_id, **kwargs)

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def ffn_size(self) -> int:
        return self.mlp_hidden_size or self.mlp_ratio * self.d_model


class LLaDABlock(GradientCheckpointingLayer):
    """attn_norm -> q/k/v -> rotary -> SDPA -> attn_out; ff_norm -> silu(ff_proj) * up_proj -> ff_out."""

    def __init__(self, config: LLaDAConfig):
        super().__init__()
        d, hd, bias = config.d_model, config.d_model // config.n_heads, config.include_bias
        qkv_bias = config.include_bias or config.include_qkv_bias
        self.heads, self.kv_heads, self.head_dim = config.n_heads, config.kv_heads, hd
        self.attn_norm = RMSNorm(d, config.rms_norm_eps)
        self.ff_norm = RMSNorm(d, config.rms_norm_eps)
        self.q_proj = nn.Linear(d, d, bias=qkv_bias)
        self.k_proj = nn.Linear(d, self.kv_heads * hd, bias=qkv_bias)
        self.v_proj = nn.Linear(d, self.kv_heads * hd, bias=qkv_bias)
        self.attn_out = nn.Linear(d, d, bias=bias)
        self.ff_proj = nn.Linear(d, config.ffn_size, bias=bias)
        self.up_proj = nn.Linear(d, config.ffn_size, bias=bias)
        self.ff_out = nn.Linear(config.ffn_size, d, bias=bias)

    def forward(self, x, cos, sin, mask, cache=None, layer=0, rows=None):
        """x (B, T, d_model) -> (B, T, d_model); with `rows` (the last block of a pass read at those rows
        only) -> (B, len(rows), d_model): every row's keys and values, those rows' queries and MLP."""
        b, t, d = x.shape
        h = self.attn_norm(x)
        k = self.k_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, Hkv, T, hd)
        v = self.v_proj(h).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        k = apply_rope(k.float(), cos, sin).to(k.dtype)  # rope in fp32
        if cache is not None:  # keys and values of the whole canvas, this pass's rows fresh
            k, v = cache.update(k, v, layer)
        x, cos, sin, mask = query_rows(x, cos, sin, mask, rows)
        h, t = (h, t) if rows is None else (h.index_select(1, rows), rows.shape[0])
        q = self.q_proj(h).view(b, t, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        q = apply_rope(q.float(), cos, sin).to(q.dtype)
        groups = self.heads // self.kv_heads
        a = F.scaled_dot_product_attention(q, repeat_kv(k, groups), repeat_kv(v, groups), attn_mask=mask)
        x = x + self.attn_out(a.transpose(1, 2).reshape(b, t, d))
        h = self.ff_norm(x)
        return x + self.ff_out(F.silu(self.ff_proj(h)) * self.up_proj(h))


class LLaDACore(nn.Module):
    """`model.transformer`: wte, blocks, ln_f and the untied output layer ff_out, as the checkpoint names them."""

    def __init__(self, config: LLaDAConfig):
        super().__init__()
        rows = config.embedding_size or config.vocab_size
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(rows, config.d_model),
                "blocks": nn.ModuleList(LLaDABlock(config) for _ in range(config.n_layers)),
                "ln_f": RMSNorm(config.d_model, config.rms_norm_eps),
                "ff_out": nn.Linear(config.d_model, rows, bias=config.include_bias),
            }
        )


class LLaDAModelLM(PreTrainedModel):
    config_class = LLaDAConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["LLaDABlock"]
    _supports_sdpa = True

    def __init__(self, config: LLaDAConfig):
        super().__init__(config)
        self.model = LLaDACore(config)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.transformer.wte

    def set_input_embeddings(self, value):
        self.model.transformer.wte = value

    def get_output_embeddings(self):
        return self.model.transformer.ff_out

    def set_output_embeddings(self, value):
        self.model.transformer.ff_out = value

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
        With a `KVCache` whose window is (lo, hi): input_ids are canvas positions lo..hi-1 and the
        mask covers the whole canvas ((B, S) or (B, 1, 1|S, S)). `logits_to_keep` (None | int n: the
        last n rows | 1-D index tensor): the rows whose logits are returned; the last block's queries and
        MLP, the final norm and the output layer run on those rows only."""
        tr = self.model.transformer
        x = tr.wte(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, d)
        if position_ids is None:
            position_ids = default_positions(x[..., 0], past_key_values)
        cos, sin = rope(position_ids, self.config.d_model // self.config.n_heads, self.config.rope_theta)
        mask = sdpa_mask(attention_mask, x.dtype)
        if past_key_values is not None:
            mask = past_key_values.rows(mask)
        rows = keep_index(logits_to_keep, x.shape[1], x.device)
        last = len(tr.blocks) - 1
        for i, block in enumerate(tr.blocks):
            x = block(x, cos, sin, mask, past_key_values, i, rows if i == last else None)
        if rows is not None and last < 0:
            x = x.index_select(1, rows)
        return MaskedLMOutput(logits=tr.ff_out(tr.ln_f(x)))  # (B, T or len(rows), V)

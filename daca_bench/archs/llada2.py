"""LLaDA2.0 (inclusionAI/LLaDA2.0-mini, -flash) as a native transformers `PreTrainedModel`: a block
diffusion MoE decoder (BailingMoeV2 layout) that loads the published checkpoint by its own key names
(`model.word_embeddings`, `model.layers.N.attention.query_key_value`, `...mlp.experts.E.gate_proj`,
`...mlp.gate.expert_bias`, `lm_head`) without trust_remote_code.

    model = LLaDA2MoeModelLM.from_pretrained("path/to/LLaDA2.0-mini")      # no trust_remote_code
    logits = model(ids, attention_mask=allowed[:, None], position_ids=pos).logits   # (B, T, V), unshifted
    out = llada2_generate(model, prompt, gen_length=64, block_length=32, steps=32)  # archs/llada2_decode.py

Each layer: RMSNorm, fused q/k/v, per-head RMSNorm on q and k, rotary on the first
`partial_rotary_factor` of each head, GQA, SDPA; then a dense SwiGLU (the first `first_k_dense_replace`
layers) or the MoE: a sigmoid router with a per-expert routing bias, group-limited top-k (the best
`topk_group` of `n_group` groups, a group scored by its two best experts), the chosen scores normalised
and scaled by `routed_scaling_factor`, plus always-on shared experts. Logits[i] predicts token i (the
same-token labels of dFactory's block-diffusion training; no shift). The mask is whatever the caller
builds: None (bidirectional), (B, T) 1/0 (padding only), or a (B, 1, T, S) bool / additive float mask,
such as the block-causal mask of archs/block.py or dFactory's two-stream training mask.
`past_key_values` takes a `KVCache` (common.py): the exact block cache of `sampler.cache=block`.

Under the FSDP2 engine (engine/parallel.py) each decoder layer and, inside it, each MoE layer's expert
set (`LLaDA2MoeExperts`, a ModuleList with a forward: key names unchanged) are separate units: the
attention and the experts of a layer are all-gathered one after the other. Every rank calls every
expert (an empty batch where none of its tokens went), so the ranks' collectives stay in step. Expert
parallelism would instead place whole experts on ranks (dFactory shards its fused expert tensors on the
expert dimension) and send each token to its experts' ranks by an all-to-all, so no rank gathers all of
a layer's experts; it is not implemented here (docs/paper-presets.md). Written for this project from
the architecture's published description; verified against the authors' code by
tests/unit/base/test_archs_llada2.py (scripts/golden_blocks.py).
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


class LLaDA2MoeConfig(PretrainedConfig):
    """The published config's fields; defaults are LLaDA2.0-mini's. `block_size` (not in the published
    config) is the block length the adapter uses for its block-causal attention (the authors' 32)."""

    model_type = "llada2_moe"

    def __init__(
        self,
        vocab_size=157184,
        hidden_size=2048,
        intermediate_size=5120,
        num_hidden_layers=20,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=128,
        hidden_act="silu",
        use_qkv_bias=False,
        use_bias=False,
        rms_norm_eps=1e-6,
        max_position_embeddings=16384,
        rope_theta=600000.0,
        partial_rotary_factor=0.5,
        rope_scaling=None,
        num_experts=256,
        num_shared_experts=1,
        num_experts_per_tok=8,
        n_group=8,
        topk_group=4,
        routed_scaling_factor=2.5,
        moe_intermediate_size=512,
        first_k_dense_replace=1,
        attention_dropout=0.0,
        initializer_range=0.02,
        tie_word_embeddings=False,
        pad_token_id=156892,
        eos_token_id=156892,
        mask_token_id=156895,
        block_size=32,
        use_cache=False,
        **kwargs,
    ):
        kwargs.pop("auto_map", None)  # the native class needs no remote code
        for key, value, need in (
            ("rope_scaling", rope_scaling, None),
            ("hidden_act", hidden_act, "silu"),
            ("tie_word_embeddings", tie_word_embeddings, False),
        ):
            if value != need:
                raise ValueError(
                    f"LLaDA2 config {key}={value!r} is not supported by the native class (needs {need!r}); "
                    "load it with model.trust_remote_code=true"
                )
        if num_experts and (num_experts % n_group or topk_group > n_group):
            raise ValueError(f"LLaDA2 config: num_experts={num_experts} must split into n_group={n_group} groups")
        self.vocab_size, self.hidden_size, self.intermediate_size = vocab_size, hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_key_value_heads = num_key_value_heads or num_attention_heads
        self.head_dim = head_dim or hidden_size // num_attention_heads
        self.hidden_act, self.use_qkv_bias, self.use_bias = hidden_act, use_qkv_bias, use_bias
        self.rms_norm_eps, self.max_position_embeddings = rms_norm_eps, max_position_embeddings
        self.rope_theta, self.partial_rotary_factor = rope_theta, partial_rotary_factor
        self.num_experts, self.num_shared_experts, self.num_experts_per_tok = (
            num_experts,
            num_shared_experts,
            num_experts_per_tok,
        )
        self.n_group, self.topk_group, self.routed_scaling_factor = n_group, topk_group, routed_scaling_factor
        self.moe_intermediate_size, self.first_k_dense_replace = moe_intermediate_size, first_k_dense_replace
        self.attention_dropout, self.initializer_range = attention_dropout, initializer_range
        self.mask_token_id, self.block_size, self.use_cache = mask_token_id, block_size, use_cache
        super().__init__(pad_token_id=pad_token_id, eos_token_id=eos_token_id, tie_word_embeddings=False, **kwargs)


class LLaDA2MoeAttention(nn.Module):
    def __init__(self, config: LLaDA2MoeConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = (
            config.num_attention_heads,
            config.num_key_value_heads,
            config.head_dim,
        )
        self.rope_dim = int(self.head_dim * config.partial_rotary_factor)
        self.query_key_value = nn.Linear(
            config.hidden_size, (self.heads + 2 * self.kv_heads) * self.head_dim, bias=config.use_qkv_bias
        )
        self.query_layernorm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.key_layernorm = RMSNorm(self.head_dim, config.rms_norm_eps)
        self.dense = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=config.use_bias)
        self.dropout = config.attention_dropout

    def _rotate(self, x, cos, sin):
        """Rotary on the first rope_dim channels of each head, the rest passed through."""
        r = self.rope_dim
        return torch.cat([apply_rope(x[..., :r], cos, sin), x[..., r:]], dim=-1)

    def forward(self, x, cos, sin, mask, cache=None, layer=0, rows=None):
        """x (B, T, hidden) -> (B, T, hidden), or (B, len(rows), hidden): those rows' queries only."""
        b, t, _ = x.shape
        qkv = self.query_key_value(x).view(b, t, self.heads + 2 * self.kv_heads, self.head_dim)
        q, k, v = qkv.split([self.heads, self.kv_heads, self.kv_heads], dim=2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H|Hkv, T, hd)
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # the published code turns q, k in the model's dtype
        k = self._rotate(self.key_layernorm(k), cos, sin)
        if cache is not None:  # keys and values of the whole canvas, this pass's rows fresh
            k, v = cache.update(k, v, layer)
        if rows is not None:
            q = q.index_select(2, rows)
            _, cos, sin, mask = query_rows(x, cos, sin, mask, rows)
        q = self._rotate(self.query_layernorm(q), cos, sin)
        groups = self.heads // self.kv_heads
        a = F.scaled_dot_product_attention(
            q,
            repeat_kv(k, groups),
            repeat_kv(v, groups),
            attn_mask=mask,
            dropout_p=self.dropout if self.training else 0.0,
        )
        return self.dense(a.transpose(1, 2).reshape(b, q.shape[2], -1))


class LLaDA2MoeGate(nn.Module):
    """The router: `weight` (E, hidden) and the routing-only `expert_bias` (E,), a checkpoint buffer."""

    def __init__(self, config: LLaDA2MoeConfig):
        super().__init__()
        self.top_k, self.n_group, self.topk_group = config.num_experts_per_tok, config.n_group, config.topk_group
        self.scale = config.routed_scaling_factor
        self.weight = nn.Parameter(torch.empty(config.num_experts, config.hidden_size))
        self.register_buffer("expert_bias", torch.zeros(config.num_experts))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (N, hidden) -> the chosen experts (N, k) and their weights (N, k), float32."""
        scores = torch.sigmoid(F.linear(x.float(), self.weight.float()))  # (N, E)
        biased = scores + self.expert_bias.float()
        n = biased.shape[0]
        groups = biased.view(n, self.n_group, -1)  # (N, G, E/G)
        group_scores = groups.topk(2, dim=-1).values.sum(-1)  # (N, G): a group's two best experts
        keep = torch.zeros_like(group_scores).scatter_(1, group_scores.topk(self.topk_group, dim=-1).indices, 1.0)
        allowed = keep.bool()[:, :, None].expand_as(groups).reshape(n, -1)
        idx = biased.masked_fill(~allowed, float("-inf")).topk(self.top_k, dim=-1).indices  # (N, k)
        w = scores.gather(1, idx)
        if self.top_k > 1:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * self.scale


class LLaDA2MoeExperts(nn.ModuleList):
    """The routed experts of one layer (`experts.E.gate_proj`, ...): a ModuleList with a forward, so
    that FSDP2 shards the set as one unit. Every expert is called, an empty batch where none is routed."""

    def forward(self, x: torch.Tensor, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """x (N, hidden), idx / w (N, k) -> sum over each token's k experts of weight * expert(x)."""
        out = torch.zeros_like(x, dtype=torch.float32)
        flat = idx.reshape(-1)
        rows, n = divmod(flat.numel(), len(self))
        for e, expert in enumerate(self):
            if x.is_meta:  # shapes only (daca-bench cost): the N * k routed rows split evenly; FLOPs are exact
                hit = torch.zeros(rows + (e < n), dtype=torch.long, device=x.device)
            else:
                hit = (flat == e).nonzero().squeeze(-1)  # (M,) positions in the (N * k) routing table
            tokens = torch.div(hit, idx.shape[1], rounding_mode="floor")
            y = expert(x.index_select(0, tokens)).float() * w.reshape(-1).index_select(0, hit)[:, None]
            out = out.index_add(0, tokens, y)
        return out.to(x.dtype)


class LLaDA2MoeSparseMoeBlock(nn.Module):
    def __init__(self, config: LLaDA2MoeConfig):
        super().__init__()
        h = config.hidden_size
        self.experts = LLaDA2MoeExperts(SwiGLU(h, config.moe_intermediate_size) for _ in range(config.num_experts))
        self.gate = LLaDA2MoeGate(config)
        shared = config.num_shared_experts
        self.shared_experts = SwiGLU(h, config.moe_intermediate_size * shared) if shared else None

    def forward(self, x):
        b, t, h = x.shape
        flat = x.reshape(-1, h)
        idx, w = self.gate(flat)
        y = self.experts(flat, idx, w).view(b, t, h)
        return y if self.shared_experts is None else y + self.shared_experts(x)


class LLaDA2MoeDecoderLayer(GradientCheckpointingLayer):
    def __init__(self, config: LLaDA2MoeConfig, index: int):
        super().__init__()
        self.attention = LLaDA2MoeAttention(config)
        moe = config.num_experts and index >= config.first_k_dense_replace
        self.mlp = LLaDA2MoeSparseMoeBlock(config) if moe else SwiGLU(config.hidden_size, config.intermediate_size)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x, cos, sin, mask, cache=None, layer=0, rows=None):
        a = self.attention(self.input_layernorm(x), cos, sin, mask, cache, layer, rows)
        x = (x if rows is None else x.index_select(1, rows)) + a
        return x + self.mlp(self.post_attention_layernorm(x))


class LLaDA2MoeModel(nn.Module):
    """`model`: word_embeddings, layers, norm, as the checkpoint names them."""

    def __init__(self, config: LLaDA2MoeConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList(LLaDA2MoeDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LLaDA2MoeModelLM(PreTrainedModel):
    config_class = LLaDA2MoeConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["LLaDA2MoeDecoderLayer", "LLaDA2MoeExperts"]
    _supports_sdpa = True
    _input_embed_layer = "word_embeddings"  # transformers' accessors: self.model.word_embeddings, self.lm_head

    def __init__(self, config: LLaDA2MoeConfig):
        super().__init__(config)
        self.model = LLaDA2MoeModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, LLaDA2MoeGate):
            nn.init.normal_(module.weight, 0.0, std)
            nn.init.zeros_(module.expert_bias)
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)

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
        """input_ids (B, T); attention_mask None | (B, T) | (B, 1, T, S) bool or additive; position_ids (B, T).
        Returns logits (B, T, V), row i predicting token i. With a `KVCache` whose window is (lo, hi):
        input_ids are canvas positions lo..hi-1 and a 4-D mask covers the canvas's rows. `logits_to_keep`
        (None | int n: the last n rows | 1-D index tensor): only those rows go through the last layer's
        queries and MLP, the final norm and lm_head."""
        x = self.model.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds  # (B, T, hidden)
        if position_ids is None:
            position_ids = default_positions(x[..., 0], past_key_values)
        rope_dim = int(self.config.head_dim * self.config.partial_rotary_factor)
        cos, sin = rope(position_ids, rope_dim, self.config.rope_theta)
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

"""A Llama-style bidirectional decoder shaped like LLaDA, for tests and the GPU check: RMSNorm,
rotary position embeddings, SwiGLU MLPs, no causal mask (padding keys are masked), untied
output head. Loaded as remote code (`auto_map`) through the same path as LLaDA and Dream."""
import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import MaskedLMOutput

from .configuration_llada_tiny import LLaDATinyConfig


class RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * self.weight.float()).to(x.dtype)


def rotate(x, cos, sin):
    """Rotary embedding on (B, H, T, D): the two halves of D turn by the position's angles."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class Block(GradientCheckpointingLayer):
    def __init__(self, config):
        super().__init__()
        h, f = config.hidden_size, config.intermediate_size
        self.heads = config.num_attention_heads
        self.attn_norm = RMSNorm(h, config.rms_norm_eps)
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(h, h, bias=False) for _ in range(4))
        self.mlp_norm = RMSNorm(h, config.rms_norm_eps)
        self.gate_proj, self.up_proj = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
        self.down_proj = nn.Linear(f, h, bias=False)

    def forward(self, x, cos, sin, key_bias):
        b, t, h = x.shape
        y = self.attn_norm(x)
        q, k, v = (p(y).view(b, t, self.heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        a = F.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v, attn_mask=key_bias)
        x = x + self.o_proj(a.transpose(1, 2).reshape(b, t, h))
        y = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class LLaDATinyModel(PreTrainedModel):
    config_class = LLaDATinyConfig
    base_model_prefix = "llada_tiny"
    supports_gradient_checkpointing = True
    _no_split_modules = ["Block"]
    _supports_sdpa = True

    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=self.config.initializer_range)
        elif isinstance(module, RMSNorm):
            nn.init.ones_(module.weight)

    def get_input_embeddings(self):
        return self.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids, attention_mask=None, position_ids=None, **kwargs):
        b, t = input_ids.shape
        x = self.embed_tokens(input_ids)
        if position_ids is None:
            position_ids = torch.arange(t, device=input_ids.device)[None].expand(b, -1)
        d = self.config.hidden_size // self.config.num_attention_heads
        inv_freq = self.config.rope_theta ** -(torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
        angles = position_ids[..., None].float() * inv_freq  # (B, T, D/2)
        angles = torch.cat([angles, angles], dim=-1)[:, None]  # (B, 1, T, D)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        key_bias = None  # bidirectional: every position sees every real token
        if attention_mask is not None:
            keep = attention_mask[:, None, None, :].bool()
            key_bias = torch.zeros(keep.shape, dtype=x.dtype, device=x.device).masked_fill(~keep, torch.finfo(x.dtype).min)
        for layer in self.layers:
            x = layer(x, cos, sin, key_bias)
        return MaskedLMOutput(logits=self.lm_head(self.norm(x)))

"""Golden numbers from the ORIGINAL SDAR code, for tests/unit/base/test_archs_block.py.

    python scripts/golden_models.py --sdar DIR            # writes tests/fixtures/golden/sdar.pt
    python scripts/golden_models.py --sdar DIR --check    # recomputes, compares, writes nothing

DIR holds three published files of JetAstra/SDAR (commit c2041a8), fetched into a temporary folder
and never committed: configuration_sdar.py and modeling_sdar.py (training/model/SDAR-8B-Chat/, the
files the hub checkpoints ship) and generate.py (the repository root: `block_diffusion_generate`).

They need CUDA-only packages, so before the import a few stand-ins are put in sys.modules (no file is
edited; each computes what the package computes, in plain torch on the CPU):
  - flash_attn: `rms_norm_fn` (normalise and scale in float32, cast back to the input's dtype) and
    `flash_attn_func` (non-causal attention of (B, T, H, D) tensors, GQA) by SDPA;
  - einops: `rearrange` for the two patterns the file uses ('b h l d -> b l (h d)', 'b l h d -> b l (h d)');
  - the fused Triton loss (fused_linear_diffusion_cross_entropy.py): sum over kept rows of
    cross-entropy / p_mask (its kernel's formula at label_smoothing 0); it also records each row's term;
  - transformers.utils.LossKwargs (gone in transformers 5): an empty TypedDict.
After the import: ROPE_INIT_FUNCTIONS gains "default" (plain RoPE); the training path's
torch.compile'd flex attention (which has no CPU backward) runs as SDPA under the same mask, read from the
BlockMask it builds (on the CPU); the
generator's DynamicCache gains the `cache[layer] -> (keys, values)` read of transformers 4;
`forward_add_noise_packed` is wrapped to record the noise it draws (its result is unchanged).

Outputs, tiny config (block size 4), fp32, random weights from a fixed seed:
  - logits of 2 rows of 3 blocks under the block-causal mask (the 3-D 1/0 form generate.py builds);
  - the same rows with one row left-padded by one block (4-D bool mask, positions from the first real token);
  - the training forward (model.train(), labels -100 on the prompt): its two-stream layout, the noise
    it drew, each masked token's -log p / p_mask and the loss, and the loss's gradient on three weights;
  - `block_diffusion_generate` decodes (top_k=1, so its multinomial draw is the argmax): "sequential"
    (2 tokens a step), "low_confidence_dynamic" (threshold 0.85: a block a step), and "low_confidence_static"
    with its sampler replaced by argmax + softmax probability (temperature 0: the confidence order).
"""

from __future__ import annotations

import functools
import importlib
import shutil
import sys
import types
import typing
from pathlib import Path

import torch
import torch.nn.functional as F

FILES = ("configuration_sdar.py", "modeling_sdar.py", "generate.py")
CONFIG = dict(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,  # not hidden_size / heads, as in SDAR-4B
    hidden_act="silu",
    max_position_embeddings=64,
    rms_norm_eps=1e-6,
    rope_theta=1000000.0,
    rope_scaling=None,
    attention_bias=False,
    attention_dropout=0.0,
    use_sliding_window=False,
    sliding_window=None,
    tie_word_embeddings=False,
    use_cache=False,
    fuse_cross_entropy=True,
    block_size=4,
    mask_token_id=95,
    bos_token_id=94,
    eos_token_id=94,
    pad_token_id=94,
)
GRADS = ("model.embed_tokens.weight", "model.layers.0.self_attn.q_norm.weight", "lm_head.weight")
RECORD: dict = {}


def _rms_norm_fn(x, weight, bias=None, eps=1e-6, **_):
    """flash_attn's rms_norm_fn: float32 normalisation and scale, the input's dtype out."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    return (h if bias is None else h + bias.float()).to(x.dtype)


def _default_rope(config, device=None, **_):
    """Plain RoPE inverse frequencies over config.head_dim (transformers 5 has no "default" entry)."""
    dim = config.head_dim
    inv = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float().to(device) / dim))
    return inv, 1.0


def _flash_attn_func(q, k, v, causal=False, softmax_scale=None, **_):
    """flash_attn_func on (B, T, H, D) tensors, by SDPA."""
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, scale=softmax_scale, enable_gqa=True
    )
    return out.transpose(1, 2)


def _flex_by_sdpa(query, key, value, attention_mask, enable_gqa=False, scale=None, return_lse=False, **_):
    """The training path's compiled flex attention (no backward on the CPU), as SDPA under the same mask:
    the BlockMask's mask_mod read at every (batch, query, key)."""
    b, _, q, k = query.shape[0], None, query.shape[2], key.shape[2]
    idx = torch.arange(b)[:, None, None], torch.arange(q)[None, :, None], torch.arange(k)[None, None, :]
    dense = attention_mask.mask_mod(idx[0], None, idx[1], idx[2])  # (B, Q, K) bool
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=dense[:, None], scale=scale, enable_gqa=enable_gqa
    )
    return (out, None) if return_lse else out


def _rearrange(x, pattern):
    """einops.rearrange for the two patterns modeling_sdar.py uses."""
    p = pattern.replace(" ", "")
    if p == "bhld->bl(hd)":
        x = x.transpose(1, 2)
    elif p != "blhd->bl(hd)":
        raise NotImplementedError(pattern)
    return x.reshape(x.shape[0], x.shape[1], -1)


class _DiffusionCE(torch.nn.Module):
    """The fused loss's value: sum over rows with a target of (logsumexp - logit_target) / p_mask."""

    def __init__(self, ignore_index=-100, reduction="mean", **_):
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, x, target, weight, bias=None, p_mask=None):
        logits = F.linear(x.reshape(-1, x.shape[-1]), weight, bias).float()
        target = target.reshape(-1)
        p_mask = torch.ones_like(target, dtype=torch.float) if p_mask is None else p_mask.reshape(-1)
        keep = target != self.ignore_index
        nll = torch.logsumexp(logits, -1) - logits.gather(-1, target.clamp(min=0)[:, None])[:, 0]
        rows = torch.where(keep, nll / p_mask, torch.zeros_like(nll))
        RECORD["rows"] = rows.detach().clone()
        return rows.sum() if self.reduction == "sum" else rows.sum() / keep.sum()


def _stand_ins(pkg: str) -> None:
    """The CUDA-only packages the published files import, as plain-torch stand-ins in sys.modules."""
    for name in ("flash_attn", "flash_attn.ops", "flash_attn.ops.triton", "flash_attn.ops.triton.layer_norm"):
        sys.modules[name] = types.ModuleType(name)
    sys.modules["flash_attn.ops.triton.layer_norm"].rms_norm_fn = _rms_norm_fn
    sys.modules["flash_attn"].flash_attn_func = _flash_attn_func
    sys.modules["einops"] = types.ModuleType("einops")
    sys.modules["einops"].rearrange = _rearrange
    loss = types.ModuleType(f"{pkg}.fused_linear_diffusion_cross_entropy")
    loss.FusedLinearDiffusionCrossEntropyLoss = _DiffusionCE
    sys.modules[loss.__name__] = loss
    import transformers.utils

    if not hasattr(transformers.utils, "LossKwargs"):
        transformers.utils.LossKwargs = typing.TypedDict("LossKwargs", {}, total=False)


def load_original(folder: Path, tmp: Path):
    """(config class, model class, generate module) of the published code, patched in memory."""
    from torch.nn.attention import flex_attention as flex
    from transformers.cache_utils import DynamicCache

    pkg = tmp / "original_sdar"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in FILES:
        if not (folder / name).exists():
            raise SystemExit(f"golden_models: {folder} has no {name}")
        shutil.copy(folder / name, pkg / name)
    sys.path.insert(0, str(tmp))
    _stand_ins(pkg.name)
    config = importlib.import_module(f"{pkg.name}.configuration_sdar")
    modeling = importlib.import_module(f"{pkg.name}.modeling_sdar")
    generate = importlib.import_module(f"{pkg.name}.generate")
    funcs = dict(modeling.ROPE_INIT_FUNCTIONS)
    funcs.setdefault("default", _default_rope)
    modeling.ROPE_INIT_FUNCTIONS = funcs
    modeling.fused_flex_attention = _flex_by_sdpa
    modeling.create_block_mask = functools.partial(flex.create_block_mask, device="cpu")
    noise = modeling.forward_add_noise_packed

    def recorded_noise(*args, **kwargs):
        out = noise(*args, **kwargs)
        RECORD["noise"] = out
        return out

    modeling.forward_add_noise_packed = recorded_noise

    class LayerCache(DynamicCache):
        def __getitem__(self, layer):
            return self.layers[layer].keys, self.layers[layer].values

    generate.DynamicCache = LayerCache
    modeling.SDARForCausalLM._tied_weights_keys = {}
    return config.SDARConfig, modeling.SDARForCausalLM, generate


def block_causal(length: int, block: int) -> torch.Tensor:
    """(1, L, L) 1/0 float: generate.py's block-diffusion mask (blocks from position 0)."""
    n = (length + block - 1) // block
    tri = torch.tril(torch.ones(n, n))
    return tri.repeat_interleave(block, 0).repeat_interleave(block, 1)[None, :length, :length]


def _greedy_sampler(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Temperature 0 for generate.py: the argmax and its softmax probability."""
    probs = F.softmax(logits.float(), dim=-1)
    p, tok = probs.max(-1)
    return tok, p


def run(folder: Path, tmp: Path) -> dict:
    from golden_models import random_state

    config_cls, model_cls, gen = load_original(folder, tmp)
    config = config_cls(**CONFIG)
    model = model_cls(config)
    state = random_state(model, seed=4)
    model.load_state_dict(state, strict=True)
    model.eval()
    B, V = CONFIG["block_size"], CONFIG["vocab_size"]
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, V - 2, (2, 3 * B), generator=g)  # (2, 12): three blocks, no pad or mask ids
    out = {
        "family": "sdar",
        "config": CONFIG,
        "state": state,
        "ids": ids,
        "weights": torch.randn(2, 3 * B, V, generator=g),
    }
    mask3 = block_causal(3 * B, B)
    with torch.no_grad():
        out["logits"] = model(input_ids=ids, attention_mask=mask3, position_ids=torch.arange(3 * B)[None]).logits
        prefix = torch.randint(0, V - 2, (B,), generator=g)
        padded = torch.stack(
            [torch.cat([prefix, ids[0]]), torch.cat([torch.full((B,), CONFIG["pad_token_id"]), ids[1]])]
        )
        keys = torch.ones_like(padded)
        keys[1, :B] = 0
        square = block_causal(4 * B, B).bool()[None] & keys.bool()[:, None, None, :]  # (2, 1, 16, 16)
        square = square | torch.eye(4 * B, dtype=torch.bool)  # a pad row sees itself (else SDPA gives NaN)
        pos = (keys.cumsum(-1) - 1).clamp(min=0)
        out.update(padded=padded, mask=keys, padded_positions=pos)
        out["padded_logits"] = model(input_ids=padded, attention_mask=square, position_ids=pos).logits
    # the training forward: prompt = the first block, completion = the last two (labels -100 on the prompt)
    model.train()
    labels = ids.clone()
    labels[:, :B] = -100
    torch.manual_seed(6)
    loss = model(input_ids=ids, position_ids=torch.arange(3 * B)[None].expand(2, -1), labels=labels).loss
    noisy, masked, p_mask = RECORD["noise"]
    out.update(labels=labels, noisy=noisy, masked=masked, p_mask=p_mask, loss=loss.detach(), rows=RECORD["rows"])
    model.zero_grad()
    loss.backward()
    params = dict(model.named_parameters())
    out["loss_grads"] = {n: params[n].grad.detach().clone() for n in GRADS}
    model.eval()
    out["decodes"] = decodes(model, gen, g)
    return out


def decodes(model, gen, g) -> list[dict]:
    """Greedy `block_diffusion_generate` runs: prompt 6 tokens (1.5 blocks), 8 to generate, block 4."""
    B, V = CONFIG["block_size"], CONFIG["vocab_size"]
    runs = []
    for strategy, steps, greedy in (
        ("sequential", 2, False),
        ("low_confidence_dynamic", 4, False),
        ("low_confidence_static", 4, True),
    ):
        prompt = torch.randint(0, V - 2, (1, 6), generator=g)
        sampler = gen.sample_with_temperature_topk_topp
        if greedy:
            gen.sample_with_temperature_topk_topp = _greedy_sampler
        try:
            x = gen.block_diffusion_generate(
                model,
                {"input_ids": prompt},
                CONFIG["mask_token_id"],
                gen_length=8,
                block_length=B,
                denoising_steps=steps,
                top_k=1,
                remasking_strategy=strategy,
                confidence_threshold=0.85,
            )
        finally:
            gen.sample_with_temperature_topk_topp = sampler
        runs.append({"strategy": strategy, "steps": steps, "argmax_sampler": greedy, "prompt": prompt, "tokens": x})
    return runs

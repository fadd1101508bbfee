"""Golden numbers for the block-diffusion families from their AUTHORS' code, for
tests/unit/base/test_archs_llada2.py (LLaDA2.0, MoE).

    python scripts/golden_blocks.py --llada2 DIR            # writes tests/fixtures/golden/llada2.pt
    python scripts/golden_blocks.py --llada2 DIR --check    # recomputes, compares, writes nothing

DIR holds three files of inclusionAI/dFactory (commit 92b6890808088b112fcf5fc73a341b78b6ab76bf, the
authors' block-diffusion training code), fetched into a temporary folder and never committed:
models/llada2_moe/modeling_llada2_moe.py, models/llada2_moe/configuration_llada2_moe.py and
tasks/train_llada2_bd.py. They are imported from a temporary package and patched in memory so that they
run on the installed transformers 5.25 without VeOmni (which dFactory needs only for its fused kernels,
expert parallelism and logging): a stand-in `veomni` package (no liger kernels, no expert parallelism,
the transformers logger); `is_torch_fx_available` (gone from transformers 5) answered False; the
"default" RoPE (gone from `ROPE_INIT_FUNCTIONS`) supplied as transformers 4 computed it (the
partial rotary dimension head_dim * partial_rotary_factor); the config's model_type set to "llada2_moe"
(the published checkpoints' per-expert layout, `mlp.experts.E.gate_proj`, instead of dFactory's fused
experts); a 4-D float mask cast to the activations' dtype before SDPA (generate builds it in bf16, which
SDPA refuses beside fp32 queries; its values, 0 and -inf, are unchanged); generate at temperature 0 takes
the argmax and its softmax probability (this commit samples from the temperature-1 softmax even at
temperature 0; the later published generate takes the argmax, as here).

Outputs (fp32, a tiny config with the published fields, random weights from a fixed seed):
- logits of an unpadded batch without a mask (bidirectional), and under generate's block-causal mask;
- the two-stream training pass of train_llada2_bd.py: [noisy | clean] with its `block_diffusion_mask`,
  positions repeated, logits of the noisy half; per-token log-probabilities of the masked completion
  tokens and the same-token cross-entropy loss; one gradient of that loss (train mode, the MoE's
  training path);
- generate's greedy block decode (block_length 4, threshold 0.6) of three prompts, two ending inside a
  block, one stopped by its EOS.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import shutil
import sys
import tempfile
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/fixtures/golden"
FILES = ("configuration_llada2_moe.py", "modeling_llada2_moe.py", "train_llada2_bd.py")
CONFIG = dict(
    vocab_size=96,
    hidden_size=32,
    intermediate_size=48,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    hidden_act="silu",
    use_qkv_bias=False,
    use_bias=False,
    rms_norm_eps=1e-6,
    max_position_embeddings=64,
    rope_theta=600000.0,
    partial_rotary_factor=0.5,
    rope_scaling=None,
    num_experts=8,
    num_shared_experts=1,
    num_experts_per_tok=2,
    n_group=4,
    topk_group=2,
    routed_scaling_factor=2.5,
    moe_intermediate_size=16,
    first_k_dense_replace=1,
    attention_dropout=0.0,
    embedding_dropout=0.0,
    output_dropout=0.0,
    tie_word_embeddings=False,
    pad_token_id=94,
    eos_token_id=93,
    mask_token_id=95,
    block_size=4,
    use_cache=False,
)
MASK_ID, EOS_ID, BLOCK = 95, 93, 4
GRADS = (
    "model.word_embeddings.weight",
    "model.layers.1.attention.query_key_value.weight",
    "model.layers.2.mlp.gate.weight",
)


def _veomni_stub() -> None:
    """A stand-in `veomni` with the names the modeling file imports (none of them is used on this path)."""
    from transformers.utils import logging

    def module(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        return m

    def unavailable(*_, **__):
        raise RuntimeError("golden_blocks: VeOmni's fused path is not available here")

    module("veomni")
    module("veomni.ops", causallm_loss_function=unavailable, fused_moe_forward=unavailable)
    module("veomni.distributed")
    module("veomni.distributed.parallel_state", get_parallel_state=unavailable)
    module("veomni.utils", logging=logging)
    module("veomni.utils.import_utils", is_liger_kernel_available=lambda: False)


def _default_rope(config, device=None, *_, **__):
    """transformers 4's default RoPE: inverse frequencies over head_dim * partial_rotary_factor channels."""
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dim = int(head_dim * getattr(config, "partial_rotary_factor", 1.0))
    inv = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float().to(device) / dim))
    return inv, 1.0


def load_original(folder: Path, tmp: Path):
    """(config class, model class, block_diffusion_mask) of the authors' code, patched in memory."""
    import transformers.utils.import_utils as iu

    pkg = tmp / "original_llada2"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in FILES:
        if not (folder / name).exists():
            raise SystemExit(f"golden_blocks: {folder} has no {name}")
        shutil.copy(folder / name, pkg / name)
    _veomni_stub()
    if not hasattr(iu, "is_torch_fx_available"):
        iu.is_torch_fx_available = lambda: False
    sys.path.insert(0, str(tmp))
    config = importlib.import_module(f"{pkg.name}.configuration_llada2_moe")
    modeling = importlib.import_module(f"{pkg.name}.modeling_llada2_moe")
    modeling.ROPE_INIT_FUNCTIONS = {**modeling.ROPE_INIT_FUNCTIONS, "default": _default_rope}
    config.LLaDA2MoeConfig.model_type = "llada2_moe"
    prepare = modeling._prepare_4d_causal_attention_mask_for_sdpa

    def prepare_sdpa(mask, shape, embeds, past):
        if mask is not None and mask.dim() == 4 and mask.is_floating_point():
            mask = mask.to(embeds.dtype)
        return prepare(mask, shape, embeds, past)

    modeling._prepare_4d_causal_attention_mask_for_sdpa = prepare_sdpa
    sample = modeling.LLaDA2MoeModelLM._sample_with_temperature_topk_topp

    def greedy(self, logits, temperature=1.0, top_k=0, top_p=1.0):
        if temperature:
            return sample(self, logits, temperature=temperature, top_k=top_k, top_p=top_p)
        probs = torch.softmax(logits.float(), dim=-1)
        token = logits.argmax(dim=-1, keepdim=True)
        return token.squeeze(-1), probs.gather(-1, token).squeeze(-1)

    modeling.LLaDA2MoeModelLM._sample_with_temperature_topk_topp = greedy
    # train_llada2_bd.py imports VeOmni's trainer: only its mask function is taken, by its source
    tree = ast.parse((pkg / "train_llada2_bd.py").read_text())
    fn = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "block_diffusion_mask"]
    space = {"torch": torch}
    exec(compile(ast.Module(body=fn, type_ignores=[]), "train_llada2_bd.py", "exec"), space)
    return config.LLaDA2MoeConfig, modeling.LLaDA2MoeModelLM, space["block_diffusion_mask"]


def random_state(model: torch.nn.Module, seed: int) -> dict:
    """Norms near 1, routing biases N(0, 0.1), matrices N(0, 0.2) (the published inits would make every logit alike)."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, p in model.state_dict().items():
        noise = torch.randn(p.shape, generator=gen)
        out[name] = 1 + 0.1 * noise if name.endswith("norm.weight") else (0.1 if "bias" in name else 0.2) * noise
    return out


def block_causal(length: int, block: int, dtype=torch.float32) -> torch.Tensor:
    """generate's mask: (1, 1, L, L) additive, 0 where the key's block <= the query's block, counted from 0."""
    b = torch.arange(length) // block
    return torch.where(b[None, :] <= b[:, None], 0.0, float("-inf")).to(dtype)[None, None]


def run(folder: Path, tmp: Path) -> dict:
    config_cls, model_cls, bd_mask = load_original(folder, tmp)
    config = config_cls(**CONFIG)
    config._attn_implementation = "sdpa"
    model = model_cls(config)
    state = random_state(model, seed=11)
    model.load_state_dict(state, strict=True)
    model.eval()
    gen = torch.Generator().manual_seed(12)
    vocab = CONFIG["vocab_size"]
    ids = torch.randint(0, vocab - 3, (2, 12), generator=gen)  # (B, T): no eos, pad or mask ids
    out = {"family": "llada2", "config": CONFIG, "state": state, "ids": ids, "block": BLOCK, "mask_id": MASK_ID}
    with torch.no_grad():
        out["logits"] = model(input_ids=ids).logits.float()  # no mask: bidirectional
        causal = block_causal(ids.shape[1], BLOCK).expand(2, -1, -1, -1)
        pos = torch.arange(ids.shape[1])[None].expand(2, -1)
        out["block_logits"] = model(input_ids=ids, attention_mask=causal, position_ids=pos).logits.float()
    # the two-stream training pass (train_llada2_bd.py, block_diffusion_mode, same_token_labels)
    n, prompt = ids.shape[1], 4
    noisy = ids.clone()
    hide = torch.rand(ids.shape, generator=gen) < 0.5
    hide[:, :prompt] = False
    hide[:, prompt] = True  # at least one masked token per row
    noisy[hide] = MASK_ID
    labels = ids.clone()
    labels[~hide] = -100
    flag = bd_mask(None, None, torch.arange(2 * n)[:, None], torch.arange(2 * n)[None, :], block_size=BLOCK, n=n)
    two = torch.zeros(flag.shape).masked_fill(~flag, float("-inf"))[None, None].expand(2, -1, -1, -1)
    full = torch.cat([noisy, ids], dim=1)
    pos2 = torch.cat([torch.arange(n), torch.arange(n)])[None].expand(2, -1).clone()
    out.update(noisy=noisy, labels=labels, prompt=prompt, train_mask=flag, train_positions=pos2)
    with torch.no_grad():
        logits = model(input_ids=full, attention_mask=two, position_ids=pos2, use_cache=False).logits[:, :n].float()
    logp = torch.log_softmax(logits, -1).gather(-1, ids[..., None]).squeeze(-1)
    out["train_logits"], out["token_logp"] = logits, torch.where(hide, logp, torch.zeros_like(logp))
    model.train()
    model.zero_grad()
    logits = model(input_ids=full, attention_mask=two, position_ids=pos2, use_cache=False).logits[:, :n]
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1), reduction="none")
    loss = ce.sum() / (labels != -100).sum()
    loss.backward()
    out["loss"] = loss.detach()
    params = dict(model.named_parameters())
    out["grads"] = {k: params[k].grad.detach().clone() for k in GRADS}
    model.eval()
    # generate: greedy block decode; prompts of 6 (ends inside a block) and 8 tokens; the third case names
    # as EOS a token the first one decodes (16, its first token), so that the EOS exit is exercised
    out["decode"] = []
    for length, eos, gen_length in ((6, EOS_ID, 8), (8, EOS_ID, 8), (6, 16, 12)):
        prompt_ids = torch.randint(0, vocab - 3, (1, length), generator=gen)
        kw = dict(temperature=0.0, block_length=BLOCK, steps=BLOCK, gen_length=gen_length, threshold=0.6, eos_id=eos)
        tokens = model.generate(inputs=prompt_ids, mask_id=MASK_ID, **kw)
        out["decode"].append({"prompt": prompt_ids, "kwargs": kw, "tokens": tokens})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llada2", type=Path, required=True, help="folder with dFactory's three files (docstring)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with the committed fixture instead of writing")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        got = run(args.llada2, Path(tmp))
    path = args.out / "llada2.pt"
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save(got, path)
        print(f"wrote {path} ({path.stat().st_size // 1024} KiB)")
        return 0
    ref, bad = torch.load(path), 0
    for key in ("logits", "block_logits", "train_logits", "token_logp", "loss"):
        diff = (got[key] - ref[key]).abs().max().item()
        print(f"llada2 {key}: max |diff| {diff:.2e}")
        bad += diff > 1e-6
    for a, b in zip(got["decode"], ref["decode"]):
        bad += not torch.equal(a["tokens"], b["tokens"])
    return int(bad > 0)


if __name__ == "__main__":
    sys.exit(main())

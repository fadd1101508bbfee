"""The paper's models at full size on one GPU, built by the native classes with random bf16
weights (no download): LLaDA-8B-Instruct and Dream-v0-Instruct-7B. Times a forward pass, a
rollout through the project's sampler (256 tokens, blocks of 32, 128 steps) and one SML
likelihood + backward with LoRA r = 128 and gradient checkpointing; prints a markdown table.

    python -m benchmarks.gpu.gpu_models                 # CUDA, both models (< 5 min on an H200)
    python -m benchmarks.gpu.gpu_models --tiny          # CPU, seconds: the same code at a toy width

Peak memory is torch.cuda.max_memory_allocated per model (the process's RSS on the CPU).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import torch

from daca_bench.adapter import ModelAdapter
from daca_bench.archs import DreamConfig, DreamModel, LLaDAConfig, LLaDAModelLM
from daca_bench.config import SamplerConfig
from daca_bench.engine.memory import enable_gradient_checkpointing
from daca_bench.models import count_parameters
from daca_bench.rl.likelihood import sml_logprobs
from daca_bench.rl.sampler import pad_prompts, sample
from daca_bench.testing.paper import paper_config, paper_tokenizer

PUBLISHED = {
    "llada": dict(d_model=4096, n_heads=32, n_kv_heads=32, n_layers=32, mlp_hidden_size=12288),
    "dream": dict(
        hidden_size=3584, num_attention_heads=28, num_key_value_heads=4, num_hidden_layers=28, intermediate_size=18944
    ),
}
SHAPES = {
    "full": {"prompt": 200, "gen": 256, "block": 32, "steps": 128, "rows": 6, "lora_r": 128},
    "tiny": {"prompt": 24, "gen": 8, "block": 4, "steps": 4, "rows": 2, "lora_r": 4},
}
CLASSES = {"llada": (LLaDAConfig, LLaDAModelLM), "dream": (DreamConfig, DreamModel)}


def build(family: str, tiny: bool, device: torch.device) -> ModelAdapter:
    """Random weights at the published size (or paper_config's tiny one), bf16 on CUDA, built on the device."""
    fields = paper_config(family, **({} if tiny else PUBLISHED[family]))
    config_cls, model_cls = CLASSES[family]
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = model_cls(config_cls(**{k: v for k, v in fields.items() if k != "model_type"}))
    model = model.to(dtype)
    tok = paper_tokenizer(family)
    return ModelAdapter(
        model,
        tok,
        fields["mask_token_id"],
        fields["eos_token_id"],
        fields["pad_token_id"],
        shift_logits=family == "dream",
        source=f"{family}-random",
    )


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def _peak_gib(device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def measure(family: str, tiny: bool, device: torch.device) -> dict:
    from peft import LoraConfig, get_peft_model

    shape = SHAPES["tiny" if tiny else "full"]
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    tick = time.perf_counter()
    adapter = build(family, tiny, device)
    _sync(device)
    row = {
        "model": family,
        "parameters_b": round(count_parameters(adapter.model) / 1e9, 3),
        "build_s": round(time.perf_counter() - tick, 2),
    }
    text = ("Answer with the number only. " * 20)[: shape["prompt"]]
    prompts = [text] * shape["rows"]
    p, m = pad_prompts(adapter, prompts)
    p, m = p.to(device), m.to(device)
    adapter.model.eval()
    canvas = torch.full((p.shape[0], shape["gen"]), adapter.mask_token_id, device=device)
    with torch.no_grad():
        adapter.logits(torch.cat([p, canvas], 1), torch.cat([m, torch.ones_like(canvas)], 1))  # warm-up
        _sync(device)
        tick = time.perf_counter()
        logits = adapter.logits(torch.cat([p, canvas], 1), torch.cat([m, torch.ones_like(canvas)], 1))
        _sync(device)
    row["forward_s"] = round(time.perf_counter() - tick, 3)
    row["finite"] = bool(torch.isfinite(logits).all())
    del logits
    cfg = SamplerConfig(
        gen_length=shape["gen"],
        block_length=shape["block"],
        steps=shape["steps"],
        temperature=0.9,
        batch_size=shape["rows"],
    )
    tick = time.perf_counter()
    batch = sample(adapter, prompts, cfg, seed=0)
    _sync(device)
    row["rollout_s"] = round(time.perf_counter() - tick, 2)
    row["rollout_tok_per_s"] = round(shape["rows"] * shape["gen"] / row["rollout_s"], 1)
    adapter.model = get_peft_model(
        adapter.model,
        LoraConfig(
            r=shape["lora_r"],
            lora_alpha=64,
            lora_dropout=0.05,
            target_modules=["q_proj", "k_proj", "v_proj", "up_proj"],
        ),
    )
    enable_gradient_checkpointing(adapter.model)
    adapter.model.train()
    tick = time.perf_counter()
    logp = sml_logprobs(adapter, p, m, batch.completion_ids.to(device), k=1, p_mask_prompt=0.15)
    logp.sum().backward()
    _sync(device)
    row["likelihood_backward_s"] = round(time.perf_counter() - tick, 2)
    grads = [q.grad for n, q in adapter.model.named_parameters() if "lora_B" in n]
    row["lora_grad_finite"] = bool(grads) and all(g is not None and torch.isfinite(g).all() for g in grads)
    row["peak_gib"] = round(_peak_gib(device), 2)
    del adapter, batch, logp
    return row


def markdown(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    return "\n".join(lines + ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows])


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="toy width on the CPU (what the test suite runs)")
    ap.add_argument("--models", nargs="+", default=["llada", "dream"], choices=["llada", "dream"])
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.tiny
    if not args.tiny and not cuda:
        raise SystemExit("gpu_models: no CUDA GPU visible; run with --tiny on a CPU")
    device = torch.device("cuda" if cuda else "cpu")
    rows = []
    for family in args.models:
        rows.append(measure(family, args.tiny, device))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{torch.cuda.get_device_name() if cuda else 'CPU'}, torch {torch.__version__}\n")
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])

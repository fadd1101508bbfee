"""One-command GPU check at the paper shape: a ~1B-parameter LLaDA built by the native class
(daca_bench.archs, the published config format and vocabulary; random weights, no download), 3 trainer steps for the baseline and for +DACA (K = 4),
then `eval` on 32 prompts; peak memory, seconds per phase, tokens/s and MFU, as JSON.

    python benchmarks/gpu/gpu_check.py --json gpu_check.json     # CUDA: prompt 200, completion 256, G = 6
    python benchmarks/gpu/gpu_check.py --toy --json toy.json     # CPU, seconds (run by the test suite)

Paper shape: prompt 200 tokens, completion 256, block 32, 128 denoising steps, G = 6, LoRA
r = 128 (dropout 0.05), bf16, gradient checkpointing. FLOPs count 2 * parameters per token per
forward pass and a backward pass as two forwards (attention FLOPs left out, so MFU is a lower
bound); MFU divides by --peak-tflops (H200 dense bf16: 989).
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import torch

from daca_bench.config import RLConfig, apply
from daca_bench.engine.memory import enable_gradient_checkpointing
from daca_bench.engine.policy import load_policy
from daca_bench.eval.runner import evaluate_lengths, protocol
from daca_bench.models import count_parameters
from daca_bench.registry import get_task
from daca_bench.testing.paper import write_paper_folder
from daca_bench.train.trainer import PassCounter, train_step

SHAPES = {
    "paper": {
        "model": dict(d_model=2048, n_layers=12, n_heads=16, n_kv_heads=16, mlp_hidden_size=5632),
        "prompt": 200,
        "gen": 256,
        "block": 32,
        "steps": 128,
        "G": 6,
        "lora_r": 128,
        "eval_n": 32,
    },
    "toy": {
        "model": dict(d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, mlp_hidden_size=64),
        "prompt": 12,
        "gen": 8,
        "block": 4,
        "steps": 4,
        "G": 2,
        "lora_r": 4,
        "eval_n": 4,
    },
}
VARIANTS = {"baseline": {"sml.k": 1, "dps.enabled": False}, "daca_k4": {"sml.k": 4, "dps.enabled": True}}
PHASES = ("rollout", "verify", "credit", "likelihood_old", "update")


def _config(folder: Path, shape: dict, cuda: bool) -> RLConfig:
    return apply(
        RLConfig(),
        {
            "model": {"name": str(folder), "trust_remote_code": False, "dtype": "bfloat16" if cuda else "float32"},
            "train": {
                "task": "arithmetic",
                "prompts_per_step": 1,
                "num_generations": shape["G"],
                "lr": 3e-6,
                "lora": True,
                "lora_r": shape["lora_r"],
                "lora_alpha": 64,
                "lora_dropout": 0.05,
                "gradient_checkpointing": True,
                "adam_beta2": 0.99,
                "weight_decay": 0.1,
            },
            "rollout": {
                "gen_length": shape["gen"],
                "block_length": shape["block"],
                "steps": shape["steps"],
                "temperature": 0.9,
                "batch_size": shape["G"],
            },
            "sml": {"p_mask_prompt": 0.15},
            "loss": {"beta": 0.04, "loss_type": "bnpo"},
        },
    )


def _peak_bytes(cuda: bool) -> int:
    if cuda:
        return torch.cuda.max_memory_allocated()
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # process high-water mark (Linux: KiB)


def _token_counter(model, counter: PassCounter) -> Counter:
    """Tokens fed to the model per phase (a forward pre-hook beside the pass counter)."""
    tokens = Counter()
    model.register_forward_pre_hook(
        lambda _m, args, kw: tokens.update(
            {counter.phase: int((kw.get("input_ids") if "input_ids" in kw else args[0]).numel())}
        ),
        with_kwargs=True,
    )
    return tokens


def run_variant(cfg: RLConfig, prompts, task, steps: int, device, params: int, peak_flops: float | None) -> dict:
    adapter = load_policy(cfg, None)
    adapter.model.to(device)
    enable_gradient_checkpointing(adapter.model)
    counter = PassCounter(adapter.model)
    tokens = _token_counter(adapter.model, counter)
    trainable = [p for p in adapter.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        trainable,
        lr=cfg.train.lr,
        betas=(cfg.train.adam_beta1, cfg.train.adam_beta2),
        weight_decay=cfg.train.weight_decay,
    )
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    seconds, rows = Counter(), []
    for step in range(steps):
        m = train_step(adapter, adapter if cfg.loss.beta > 0 else None, cfg, prompts, task, step, opt, counter)
        seconds.update({k: m[f"seconds_{k}"] for k in PHASES})
        rows.append(m)
    if device.type == "cuda":
        torch.cuda.synchronize()
    total = sum(seconds.values())
    # forward FLOPs 2*N per token; the update's forward pass is followed by a backward pass of ~2 forwards
    flops = 2 * params * (tokens["rollout"] + tokens["likelihood_old"] + 3 * tokens["likelihood"])
    completion_tokens = steps * len(prompts) * cfg.train.num_generations * cfg.rollout.gen_length
    return {
        "peak_memory_gib": round(_peak_bytes(device.type == "cuda") / 2**30, 3),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "seconds_total": round(total, 3),
        "rollout_tokens_per_s": round(completion_tokens / max(seconds["rollout"], 1e-9), 1),
        "step_tokens_per_s": round(completion_tokens / max(total, 1e-9), 1),
        "model_tflops": round(flops / 1e12, 3),
        "mfu": round(flops / total / peak_flops, 4) if peak_flops else None,
        "forward_passes": dict(counter.counts),
        "loss": [r["loss"] for r in rows],
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--toy", action="store_true", help="a toy size that runs on CPU in seconds")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--json", type=Path, default=Path("gpu_check.json"))
    ap.add_argument("--peak-tflops", type=float, default=989.0, help="the device's dense bf16 peak (H200: 989)")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.toy
    if not args.toy and not cuda:
        raise SystemExit("gpu_check: no CUDA GPU visible; run with --toy on a CPU")
    shape = SHAPES["toy" if args.toy else "paper"]
    device = torch.device("cuda" if cuda else "cpu")
    report = {
        "machine": torch.cuda.get_device_name() if cuda else f"CPU {platform.machine()}",
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "shape": {**shape, "toy": args.toy},
    }
    with tempfile.TemporaryDirectory() as tmp:
        tick = time.perf_counter()
        folder = write_paper_folder(
            "llada", Path(tmp) / "model", dtype=torch.bfloat16 if cuda else torch.float32, **shape["model"]
        )
        report["seconds_build"] = round(time.perf_counter() - tick, 2)
        task = get_task("arithmetic", split="train", n=8)
        pad = "Answer with the number only. "
        prompts = [
            replace(s, prompt=(pad * shape["prompt"] + s.prompt)[-shape["prompt"] :]) for s in list(task.samples)[:1]
        ]
        cfg0 = _config(folder, shape, cuda)
        params = None
        for name, over in VARIANTS.items():
            cfg = apply(cfg0, over)
            if params is None:
                params = count_parameters(load_policy(replace(cfg, train=replace(cfg.train, lora=False)), None).model)
                report["model_parameters"] = params
            report[name] = run_variant(
                cfg, prompts, task, args.steps, device, params, args.peak_tflops * 1e12 if cuda else None
            )
            print(f"{name}: {json.dumps(report[name])}", flush=True)
        adapter = load_policy(replace(cfg0, train=replace(cfg0.train, lora=False)), None)
        adapter.model.to(device)
        test = get_task("arithmetic", split="test", n=shape["eval_n"])
        cfgs = {shape["gen"]: protocol(shape["gen"], shape["block"], batch_size=shape["eval_n"])}
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        tick = time.perf_counter()
        table = evaluate_lengths(
            adapter, test, list(test.samples)[: shape["eval_n"]], cfgs, Path(tmp) / "eval", chat=False, progress=False
        )
        secs = time.perf_counter() - tick
        report["eval"] = {
            "n": table[0]["n"],
            "seconds": round(secs, 3),
            "peak_memory_gib": round(_peak_bytes(cuda) / 2**30, 3),
            "tokens_per_s": round(table[0]["n"] * shape["gen"] / secs, 1),
        }
    print(f"eval: {json.dumps(report['eval'])}")
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])

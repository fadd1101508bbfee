"""The FSDP2 engine (daca_bench/engine/parallel.py) on one GPU, in one prepared run (estimated 4-5 minutes;
gpu_parallel.sh stops it at 8, keeping the JSON of the runs done):

G1   the LoRA preset (configs/paper/llada_gsm8k.yaml) at LLaDA-8B's shape with random bf16 weights, trained
     with train.parallel=none and then train.parallel=replicate at one process, the same steps: seconds
     per phase, peak allocated and reserved memory. Targets: the engine costs <= 3 % of a step and <= 1 GB.
G3   full fine-tuning (configs/paper/llada_gsm8k_full.yaml) of the ~1.1B model of benchmarks/gpu/gpu_check.py
     with train.parallel=shard at one process: fp32 master weights, gradients and AdamW state, bf16 compute.
     Targets: the memory held between steps within 15 % of 16 bytes per parameter (+ 2 for the bf16
     reference); weights move at lr 3e-6. The peak is reported beside 18 + 2 bytes per parameter (the
     state and the bf16 copy of the policy the rollout unshards); the rest is activations.
MFU  for every run, the rollout's and the update's apart, with the FLOP formula printed (FORMULA).

    bash benchmarks/gpu/gpu_parallel.sh --json gpu_parallel.json     # CUDA; refuses in one line (exit 2) without
    python -m benchmarks.gpu.gpu_parallel --toy --json toy.json      # CPU, toy widths: the same code, seconds

Random weights earn no reward, so the rewards are drawn at random (seeded): the advantages and the
gradients are then nonzero, as in a real run; these are cost figures, not learning.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import sys
import time
from collections import Counter
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
PRESETS = {"g1": "configs/paper/llada_gsm8k.yaml", "g3": "configs/paper/llada_gsm8k_full.yaml"}
# LLaDA-8B-Instruct's published shape, gpu_check's ~1.1B model, and toy widths for the CPU
SIZES = {
    "8b": dict(d_model=4096, n_heads=32, n_kv_heads=32, n_layers=32, mlp_hidden_size=12288),
    "1b": dict(d_model=2048, n_layers=12, n_heads=16, n_kv_heads=16, mlp_hidden_size=5632),
    "toy": dict(d_model=32, n_layers=2, n_heads=2, n_kv_heads=2, mlp_hidden_size=64),
}
PAPER = {"prompt": 200, "gen": 256, "block": 32, "steps": 128}  # the presets' rollout shape
TOY = {"prompt": 12, "gen": 8, "block": 4, "steps": 4}
PHASES = ("rollout", "verify", "credit", "likelihood_old", "update")
PEAKS = {"H200": 989.0, "H100 PCIe": 756.0, "H100": 989.0, "A100": 312.0}  # dense bf16 TFLOP/s
FORMULA = (
    "forward FLOPs = 2 * N * T + 4 * n_layers * d_model * sum(rows * S^2), with N the parameters "
    "in matrix multiplies (the input embedding is a lookup and left out; LoRA's included), T the "
    "tokens through the model, S a pass's sequence length (the attention term counts QK^T and AV "
    "over the whole bidirectional sequence). rollout and likelihood_old: forward only. update, "
    "model FLOPs (MFU): forward x 3 for full fine-tuning (backward = activation + weight gradients), "
    "x 2 for LoRA (the frozen base's backward needs activation gradients only; LoRA's own weight "
    "gradients are left out). HFU adds one forward for gradient checkpointing's recompute. "
    "MFU = FLOPs / seconds / the device's dense bf16 peak (--peak-tflops)."
)


def refuse_without_cuda(toy: bool) -> None:
    if not toy and not torch.cuda.is_available():
        print(
            "gpu_parallel: no CUDA GPU visible; this benchmark needs one (python -m benchmarks.gpu.gpu_parallel "
            "--toy runs its code at toy widths on a CPU)",
            file=sys.stderr,
        )
        sys.exit(2)


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _t(flop: float) -> float:
    """FLOPs as TFLOP, 4 significant digits (toy runs stay nonzero)."""
    return float(f"{flop / 1e12:.4g}")


def _gb(n: float) -> float:
    return round(n / 1e9, 3)


def _free(device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def build(size: str, device, dtype, compact: bool, seed: int = 0):
    """A LLaDA of the named size with random weights, built directly on the device (no folder, no
    download) through the native class, with the paper tokenizer (compact ids at toy width)."""
    from daca_bench.adapter import ModelAdapter
    from daca_bench.archs import LLaDAConfig, LLaDAModelLM
    from daca_bench.testing.paper import paper_config, paper_tokenizer

    fields = paper_config("llada", compact, **SIZES[size])
    torch.manual_seed(seed)
    with torch.device(device):
        model = LLaDAModelLM(LLaDAConfig(**{k: v for k, v in fields.items() if k != "model_type"}))
    model = model.to(dtype)
    _free(device)
    return ModelAdapter(
        model,
        paper_tokenizer("llada", compact),
        fields["mask_token_id"],
        fields["eos_token_id"],
        fields["pad_token_id"],
        source=f"llada-{size}-random",
    )


def config(part: str, mode: str, args, rows: int):
    """The preset with the benchmark's shape: arithmetic prompts padded to the preset's length (the
    d1 data is not needed), `rows` completions per step, every likelihood pass of all rows."""
    from daca_bench.config import RLConfig, load_config

    shape = TOY if args.toy else PAPER
    over = [
        f"train.parallel={mode}",
        "train.task=arithmetic",
        "train.reward=exact",
        "train.prompts_per_step=1",
        f"train.num_generations={rows}",
        f"rollout.gen_length={shape['gen']}",
        f"rollout.block_length={shape['block']}",
        f"rollout.steps={shape['steps']}",
        f"rollout.batch_size={rows}",
        f"sml.chunk={rows}",
    ]
    if args.mu:
        over.append(f"train.mu={args.mu}")
    if args.toy:
        over += ["train.lora_r=4", "train.lora_alpha=8", "model.dtype=float32"]
    return load_config(ROOT / PRESETS[part], over, RLConfig)


def policy(cfg, size: str, device, compact: bool):
    """What train() builds before its first step (train/trainer.py): the policy (LoRA over the base when
    train.lora), gradient checkpointing, dropout off, the engine's wrap, the reference and AdamW."""
    from dataclasses import replace

    from peft import LoraConfig, get_peft_model

    from daca_bench.engine.memory import enable_gradient_checkpointing
    from daca_bench.engine.parallel import Parallel
    from daca_bench.engine.policy import disable_dropout, lora_targets
    from daca_bench.models import DTYPES

    t = cfg.train
    dtype = DTYPES.get(cfg.model.dtype) or torch.float32
    adapter = build(size, device, dtype, compact)
    if t.lora:
        adapter = replace(
            adapter,
            model=get_peft_model(
                adapter.model,
                LoraConfig(
                    r=t.lora_r,
                    lora_alpha=t.lora_alpha,
                    lora_dropout=t.lora_dropout,
                    target_modules=lora_targets(t.lora_target_modules),
                ),
            ),
        )
    if t.gradient_checkpointing:
        enable_gradient_checkpointing(adapter.model)
    if t.disable_dropout:
        disable_dropout(adapter.model)
    par = Parallel(t.parallel, 0, 1, t.offload)
    par.wrap(adapter.model)
    reference = None
    if cfg.loss.beta > 0:
        reference = adapter if t.lora else build(size, device, dtype, compact)  # the same seed: the same weights
        if reference is not adapter:
            reference.model.eval().requires_grad_(False)
            par.wrap(reference.model, trainable=False)
    trainable = [p for p in adapter.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=t.lr, betas=(t.adam_beta1, t.adam_beta2), weight_decay=t.weight_decay)
    return adapter, reference, opt, par


class Flops:
    """Tokens and rows * S^2 fed to the models per phase (a forward pre-hook on the policy, and on a
    separate reference, beside the trainer's pass counter, whose phase it reads)."""

    def __init__(self, counter, *models):
        self.tokens, self.square = {}, {}
        for model in models:
            model.register_forward_pre_hook(self._hook(counter), with_kwargs=True)

    def _hook(self, counter):
        def hook(_module, args, kw):
            ids = kw["input_ids"] if "input_ids" in kw else args[0]
            rows, seq = ids.shape
            self.tokens[counter.phase] = self.tokens.get(counter.phase, 0) + rows * seq
            self.square[counter.phase] = self.square.get(counter.phase, 0) + rows * seq * seq

        return hook

    def forward(self, phase: str, params: int, layers: int, width: int) -> float:
        return 2.0 * params * self.tokens.get(phase, 0) + 4.0 * layers * width * self.square.get(phase, 0)


def _matmul_params(model) -> int:
    embedding = model.get_input_embeddings().weight
    return sum(p.numel() for p in model.parameters()) - embedding.numel()


def random_rewards(seed: int):
    """score() for train_step with seeded random rewards in [0, 1] (random weights earn none)."""
    from daca_bench.eval.evaluate import summarize
    from daca_bench.types import Reward

    rng = random.Random(seed)

    def score(task, samples, completions, workers: int = 1):
        values = [rng.random() for _ in completions]
        return summarize([Reward(v, "correct" if v > 0.5 else "wrong") for v in values])

    return score


def prompts_for(args):
    from dataclasses import replace

    from daca_bench.registry import get_task

    task = get_task("arithmetic", split="train", n=8)
    n = (TOY if args.toy else PAPER)["prompt"]
    pad = "Answer with the number only. "
    return task, [replace(s, prompt=(pad * n + s.prompt)[-n:]) for s in list(task.samples)[:1]]


def _sample(model, limit: int = 65536) -> dict:
    """Up to `limit` elements of every trainable weight (the local shard under FSDP2), on the CPU."""
    out = {}
    for name, p in model.named_parameters():
        if p.requires_grad:
            local = p.to_local() if hasattr(p, "to_local") else p
            out[name] = local.detach().reshape(-1)[:limit].float().cpu().clone()
    return out


def run(part: str, mode: str, size: str, args, device, peak_flops: float | None) -> dict:
    """Build as train() does, then warm-up + measured steps of train_step; times, memory and FLOPs."""
    import daca_bench.train.trainer as trainer

    rows = args.rows
    cfg = config(part, mode, args, rows)
    task, prompts = prompts_for(args)
    trainer.score = random_rewards(args.seed)  # this process only
    _free(device)
    tick = time.perf_counter()
    adapter, reference, opt, par = policy(cfg, size, device, args.toy)
    _sync(device)
    built_s = time.perf_counter() - tick
    counter = trainer.PassCounter(adapter.model)
    separate = reference is not None and reference is not adapter  # full fine-tuning: a second, frozen model
    flops = Flops(counter, adapter.model, *([reference.model] if separate else []))
    core = adapter.model.get_base_model() if hasattr(adapter.model, "get_base_model") else adapter.model
    params = sum(p.numel() for p in adapter.model.parameters())
    trainable = sum(p.numel() for p in adapter.model.parameters() if p.requires_grad)
    matmul = _matmul_params(core)
    layers, width = core.config.n_layers, core.config.d_model
    for step in range(args.warmup):  # compilation of kernels, the allocator's first growth, NCCL's first call
        trainer.train_step(adapter, reference, cfg, prompts, task, step, opt, counter, par)
    _sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    flops.tokens.clear()
    flops.square.clear()
    passes = Counter(counter.counts)  # the trainer's pass counter (or its ledger): read, never reset
    booked = counter.snapshot() if hasattr(counter, "snapshot") else None
    before = _sample(adapter.model) if part == "g3" else None
    seconds = {k: 0.0 for k in PHASES}
    walls = []
    held = None
    for step in range(args.warmup, args.warmup + args.steps):
        tick = time.perf_counter()
        m = trainer.train_step(adapter, reference, cfg, prompts, task, step, opt, counter, par)
        _sync(device)
        walls.append(time.perf_counter() - tick)
        for k in PHASES:
            seconds[k] += m.get(f"seconds_{k}", 0.0)
        if device.type == "cuda" and held is None:
            held = torch.cuda.memory_allocated()  # between steps: weights, gradients, AdamW state, reference
    row = {
        "part": part,
        "mode": par.mode,
        "model": size,
        "parameters": params,
        "trainable": trainable,
        "rows_per_step": rows,
        "mu": cfg.train.mu,
        "steps": args.steps,
        "warmup_steps": args.warmup,
        "build_s": round(built_s, 2),
        "s_per_step": round(sum(walls) / len(walls), 3),
        "s_per_step_each": [round(w, 3) for w in walls],
        "seconds_per_step": {k: round(v / args.steps, 3) for k, v in seconds.items()},
        "forward_passes": dict(Counter(counter.counts) - passes),
    }
    if device.type == "cuda":
        row.update(
            peak_allocated_gb=_gb(torch.cuda.max_memory_allocated()),
            peak_reserved_gb=_gb(torch.cuda.max_memory_reserved()),
            held_between_steps_gb=_gb(held or 0),
        )
    roll = flops.forward("rollout", matmul, layers, width)
    old = flops.forward("likelihood_old", matmul, layers, width)
    fwd = flops.forward("likelihood", matmul, layers, width)
    factor = 2 if cfg.train.lora else 3
    update = factor * fwd
    rate = {"rollout": roll / max(seconds["rollout"], 1e-9), "update": update / max(seconds["update"], 1e-9)}
    row["flops"] = {
        "matmul_parameters": matmul,
        "rollout_tflop": _t(roll),
        "likelihood_old_tflop": _t(old),
        "update_tflop": _t(update),
        "update_factor": factor,
        "update_hfu_tflop": _t(update + fwd),
        "rollout_tflops_per_s": _t(rate["rollout"]),
        "update_tflops_per_s": _t(rate["update"]),
    }
    if booked is not None:  # the trainer's ledger: the policy's passes (not a separate reference's), forward and
        # backward as torch's FlopCounterMode counts them; a cross-check of the formula
        row["ledger_tflop"] = {
            ph: _t(c["flops_forward"] + c["flops_backward"])
            for ph, c in counter.since(booked).items()
            if c["flops_forward"] or c["flops_backward"]
        }
    if peak_flops:
        row["mfu"] = {
            "rollout": round(rate["rollout"] / peak_flops, 4),
            "update": round(rate["update"] / peak_flops, 4),
            "update_hfu": round((update + fwd) / max(seconds["update"], 1e-9) / peak_flops, 4),
            "step": round((roll + old + update) / max(sum(walls), 1e-9) / peak_flops, 4),
        }
    if before is not None:
        after = _sample(adapter.model)
        moved = sum(int((after[k] != before[k]).sum()) for k in before)
        seen_bf16 = sum(int((after[k].bfloat16() != before[k].bfloat16()).sum()) for k in before)
        total = sum(v.numel() for v in before.values())
        row["weights"] = {
            "sampled": total,
            "moved_frac": round(moved / total, 5),  # the fp32 master weights
            "bf16_copy_changed_frac": round(seen_bf16 / total, 5),
            "lr": cfg.train.lr,
            "steps": args.steps,
        }
    del adapter, reference, opt, core, counter, flops
    _free(device)
    return row


def g1_verdict(none: dict, rep: dict) -> dict:
    out = {"time_overhead": round(rep["s_per_step"] / none["s_per_step"] - 1, 4), "time_target": 0.03}
    if "peak_allocated_gb" in none:
        out.update(
            allocated_overhead_gb=round(rep["peak_allocated_gb"] - none["peak_allocated_gb"], 3),
            reserved_overhead_gb=round(rep["peak_reserved_gb"] - none["peak_reserved_gb"], 3),
            memory_target_gb=1.0,
        )
        out["pass"] = (
            out["time_overhead"] <= 0.03 and out["allocated_overhead_gb"] <= 1.0 and out["reserved_overhead_gb"] <= 1.0
        )
    return out


def g3_verdict(row: dict) -> dict:
    n_ref = row["parameters"]  # the reference has the policy's shape
    state = 16 * row["parameters"] + 2 * n_ref
    out = {
        "bytes_model": "16 B/param (fp32 weights, gradients, two AdamW moments) + 2 B/param (bf16 reference)",
        "model_gb": _gb(state),
        "rollout_copy_gb": _gb(2 * row["parameters"]),
        "moved_frac": row["weights"]["moved_frac"],
    }
    if "held_between_steps_gb" in row:
        held = row["held_between_steps_gb"] * 1e9
        out.update(
            held_gb=row["held_between_steps_gb"],
            held_vs_model=round(held / state - 1, 4),
            peak_gb=row["peak_allocated_gb"],
            peak_minus_model_and_copy_gb=round(row["peak_allocated_gb"] - _gb(state + 2 * row["parameters"]), 3),
        )
        out["pass"] = abs(out["held_vs_model"]) <= 0.15 and out["moved_frac"] > 0.5
    return out


def table(report: dict) -> str:
    lines = [
        "| run | mode | s/step | rollout | likelihood_old | update | peak alloc GB | peak reserved GB "
        "| MFU rollout | MFU update |",
        "|" + "---|" * 10,
    ]
    for key in ("g1_none", "g1_replicate", "g3_shard"):
        r = report.get(key)
        if not r:
            continue
        s, mfu = r["seconds_per_step"], r.get("mfu", {})
        lines.append(
            f"| {key} | {r['mode']} | {r['s_per_step']} | {s['rollout']} | {s['likelihood_old']} | {s['update']} "
            f"| {r.get('peak_allocated_gb', '-')} | {r.get('peak_reserved_gb', '-')} "
            f"| {mfu.get('rollout', '-')} | {mfu.get('update', '-')} |"
        )
    out = "\n".join(lines)
    if "g1" in report:
        out += f"\n\nG1 (engine overhead, LoRA replicate vs none at one process): {json.dumps(report['g1'])}"
    if "g3" in report:
        out += f"\nG3 (full fine-tuning, shard at one process): {json.dumps(report['g3'])}"
    return out + f"\n\nFLOPs: {FORMULA}"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=Path("gpu_parallel.json"))
    ap.add_argument("--toy", action="store_true", help="toy widths on the CPU (the code path, not the figures)")
    ap.add_argument("--parts", nargs="+", default=["g1", "g3"], choices=["g1", "g3"])
    ap.add_argument("--steps", type=int, default=2, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=1, help="steps run first and not measured")
    ap.add_argument("--rows", type=int, default=6, help="completions per step (one prompt x G)")
    ap.add_argument("--mu", type=int, default=0, help="inner updates per step (0: the preset's, 12)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="dense bf16 peak (0: from the device name)")
    args = ap.parse_args(argv)
    refuse_without_cuda(args.toy)
    cuda = torch.cuda.is_available() and not args.toy
    device = torch.device("cuda" if cuda else "cpu")
    name = torch.cuda.get_device_name() if cuda else f"CPU {platform.machine()}"
    peak = args.peak_tflops or next((v for k, v in PEAKS.items() if k in name), 0.0)
    if cuda:
        torch.cuda.set_device(0)
    report = {
        "machine": name,
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "toy": args.toy,
        "peak_tflops": peak or None,
        "flop_formula": FORMULA,
    }
    print(f"gpu_parallel on {name}, torch {torch.__version__}; FLOPs: {FORMULA}", flush=True)

    def save():
        args.json.write_text(json.dumps(report, indent=2) + "\n")

    if "g1" in args.parts:
        size = "toy" if args.toy else "8b"
        for mode in ("none", "replicate"):
            report[f"g1_{mode}"] = run("g1", mode, size, args, device, peak * 1e12 or None)
            print(f"g1 {mode}: {json.dumps(report[f'g1_{mode}'])}", flush=True)
            save()
        report["g1"] = g1_verdict(report["g1_none"], report["g1_replicate"])
        save()
    if "g3" in args.parts:
        report["g3_shard"] = run("g3", "shard", "toy" if args.toy else "1b", args, device, peak * 1e12 or None)
        print(f"g3 shard: {json.dumps(report['g3_shard'])}", flush=True)
        report["g3"] = g3_verdict(report["g3_shard"])
        save()
    print("\n" + table(report))
    print(f"\nwrote {args.json}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])

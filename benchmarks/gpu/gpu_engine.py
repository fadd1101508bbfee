"""Issue 56's engine checks on one GPU, as 2 processes sharing it (torchrun --nproc_per_node 2; the process group is
gloo for CPU and CUDA tensors, since NCCL refuses two ranks on one device): what the CPU tests check with gloo,
here with CUDA tensors, a LLaDA of ~0.4 B parameters with random weights, and the GPU's own memory counters.

E1  item 1: threshold-decoded rows take unequal steps per rank; `causal` SML and the `map` base under `shard` and
    `replicate` agree K and every pass across ranks: no hang (60 s collective timeout), the log-probs of one
    process (a plain copy on every row) to 1e-5 (fp32), the same forward calls on every rank.
E2  item 2: train.grad_accum=2 under `shard`: the gradient elements each rank holds after the first micro-batch
    (1/2 expected: reduce-scattered at once), the gradients of 2 micro-batches against one process's, the memory.
E4  item 4: FSDP2's all-gathers in one micro-batch after a rollout: 2 (units - 1) + 1 (the root kept gathered).
E5  item 5: start-up: peak GPU memory per rank of the plain path (the whole policy loaded, cast to fp32, sharded)
    against the sharded start (meta device, each rank reading its slices), equal weights; the streamed final
    save's largest host holding against the weights' size.

    torchrun --nproc_per_node 2 -m benchmarks.gpu.gpu_engine --json gpu_engine.json   # via gpu_parallel.sh
    torchrun --nproc_per_node 2 -m benchmarks.gpu.gpu_engine --cpu                     # toy widths, gloo, the CPU

Each check is timed and written as it ends (rank 0), an error kept as one line: a cut run keeps what it measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

SIZES = {
    "gpu": dict(d_model=1024, n_layers=8, n_heads=8, n_kv_heads=8, mlp_hidden_size=2816),
    "cpu": dict(d_model=32, n_layers=4, n_heads=2, n_kv_heads=2, mlp_hidden_size=64),
}


def build(size: str, device, compact: bool, seed: int = 0):
    """A LLaDA of `size` with random fp32 weights (the native class, the paper tokenizer), the same on every rank."""
    from daca_bench.adapter import ModelAdapter
    from daca_bench.archs import LLaDAConfig, LLaDAModelLM
    from daca_bench.testing.paper import paper_config, paper_tokenizer

    fields = paper_config("llada", compact, **SIZES[size])
    torch.manual_seed(seed)
    with torch.device(device):
        model = LLaDAModelLM(LLaDAConfig(**{k: v for k, v in fields.items() if k != "model_type"}))
    tok = paper_tokenizer("llada", compact)
    return ModelAdapter(model.eval(), tok, fields["mask_token_id"], fields["eos_token_id"], fields["pad_token_id"])


def data(n: int, P: int, L: int, vocab: int):
    """Prompts, completions, and commit steps as threshold decoding leaves them: the first half of the rows (rank
    0's) took 2-3 steps, the second half 3-4, so each rank alone would choose another K and other passes."""
    gen = torch.Generator().manual_seed(0)
    prompt, comp = (
        torch.randint(4, vocab - 8, (n, P), generator=gen),
        torch.randint(4, vocab - 8, (n, L), generator=gen),
    )
    rows = []
    for i in range(n):
        g = torch.Generator().manual_seed(i)
        T = 2 + i % 2 + (i >= n // 2)
        steps = torch.cat([torch.arange(1, T + 1), torch.randint(1, T + 1, (L - T,), generator=g)])
        rows.append(steps[torch.randperm(L, generator=g)])
    return prompt, torch.ones(n, P, dtype=torch.long), comp, torch.stack(rows)


def _peak(device) -> int | None:
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def _reset(device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def e1(size, device, rank, world, compact) -> dict:
    from daca_bench.engine.parallel import Parallel
    from daca_bench.rl.bases.map import map_logprobs
    from daca_bench.rl.likelihood import sml_logprobs
    from daca_bench.rl.strata import fewest_steps

    single = build(size, device, compact)
    n, P, L = 8, 16, 16
    prompt, mask, comp, step = (t.to(device) for t in data(n, P, L, single.model.config.vocab_size))
    mine = slice(rank * n // world, (rank + 1) * n // world)
    out = {}
    for mode in ("shard", "replicate"):
        par = Parallel(mode, rank, world)
        adapter = build(size, device, compact)
        par.wrap(adapter.model)
        calls = []
        adapter.model.register_forward_pre_hook(
            lambda m, a, kw: calls.append((a or [kw["input_ids"]])[0].shape[0]), with_kwargs=True
        )
        for name, fn, kw in (("causal", sml_logprobs, dict(k=4, partition="causal")), ("map", map_logprobs, {})):
            with torch.no_grad():
                one = fn(single, prompt, mask, comp, commit_step=step, seq_ids=range(n), **kw)[mine]
                before = len(calls)
                got = fn(
                    adapter,
                    prompt[mine],
                    mask[mine],
                    comp[mine],
                    commit_step=step[mine],
                    seq_ids=range(n)[mine],
                    par=par,
                    fewest=fewest_steps(step[mine], 0, par),
                    chunk=n // world,
                    **kw,
                )
            passes = par.gather_objects(calls[before:])
            out[f"{name}-{mode}"] = {
                "max_diff": (got.float() - one.float()).abs().max().item(),
                "forward_calls": len(passes[0]),
                "same_calls_on_every_rank": all(p == passes[0] for p in passes),
            }
        del adapter
    out["pass"] = all(v["max_diff"] <= 1e-5 and v["same_calls_on_every_rank"] for v in out.values())
    return out


def e2_e4(size, device, rank, world, compact) -> tuple[dict, dict]:
    from torch.distributed.fsdp._fully_shard import _fsdp_param_group as group

    from daca_bench.engine.parallel import Parallel
    from daca_bench.rl.likelihood import sml_logprobs

    n, P, L = 8, 16, 16
    single = build(size, device, compact)
    prompt, mask, comp, _ = (t.to(device) for t in data(n, P, L, single.model.config.vocab_size))
    sml_logprobs(single, prompt, mask, comp, k=2, seq_ids=range(n)).mean(-1).sum().backward()
    want = {k: p.grad for k, p in single.model.named_parameters()}
    total = sum(p.numel() for p in single.model.parameters())
    del single
    par = Parallel("shard", rank, world)
    adapter = build(size, device, compact)
    par.wrap(adapter.model)
    rows = torch.arange(n).view(world, 2, -1)[rank]
    _reset(device)
    for m, sl in enumerate(rows):
        with par.micro(adapter.model, last=m == 1):
            loss = sml_logprobs(adapter, prompt[sl], mask[sl], comp[sl], k=2, seq_ids=sl.tolist()).mean(-1).sum()
            loss.backward()
        if m == 0:
            held = sum(p.grad.to_local().numel() for p in adapter.model.parameters() if p.grad is not None)
    diff = max((p.grad.full_tensor() * world - want[k]).abs().max().item() for k, p in adapter.model.named_parameters())
    e2 = {
        "grad_elements_held_frac": round(held / total, 4),
        "expected_frac": round(1 / world, 4),
        "grad_max_diff": diff,
        "peak_gb": None if _peak(device) is None else round(_peak(device) / 1e9, 3),
        "unsharded_fp32_grad_gb": round(4 * total / 1e9, 3),
    }
    e2["pass"] = abs(e2["grad_elements_held_frac"] - 1 / world) < 0.02 and diff <= 1e-4
    with par.rollout(adapter.model), torch.no_grad():
        adapter.logits(prompt[rows[0]], mask[rows[0]])
    real, calls = group.foreach_all_gather, []
    group.foreach_all_gather = lambda *a, **kw: calls.append(1) or real(*a, **kw)
    try:
        with par.micro(adapter.model, last=True):
            sml_logprobs(adapter, prompt[rows[0]], mask[rows[0]], comp[rows[0]], k=1).sum().backward()
    finally:
        group.foreach_all_gather = real
    units = len(par._fsdp(adapter.model))
    e4 = {"all_gathers_per_micro_batch": len(calls), "fsdp_units": units, "expected": 2 * (units - 1) + 1}
    e4["pass"] = e4["all_gathers_per_micro_batch"] == e4["expected"]
    return e2, e4


def e5(size, device, rank, world, compact, folder: Path) -> dict:
    from daca_bench.engine.parallel import Parallel
    from daca_bench.engine.shards import start_sharded, stream_save
    from daca_bench.models import load_pretrained

    if rank == 0:
        build(size, "cpu", compact).save(folder)  # a bf16-or-fp32 save_pretrained folder, as an SFT run's final/
    dist.barrier()
    par = Parallel("shard", rank, world)
    _reset(device)
    plain = load_pretrained(str(folder))
    plain.model.to(device)
    par.wrap(plain.model)
    plain_peak = _peak(device)
    want = {k: p.full_tensor().cpu() for k, p in plain.model.named_parameters()}
    del plain
    _reset(device)
    empty = load_pretrained(str(folder), empty=True)
    stats = start_sharded(empty.model, folder, par, device)
    sharded_peak = _peak(device)
    diff = max((p.full_tensor().cpu() - want[k]).abs().max().item() for k, p in empty.model.named_parameters())
    save = stream_save(folder.with_name("final"), empty, par, torch.bfloat16, shard_bytes=256 * 2**20)
    row = {
        "weights_max_diff": diff,
        "model_fp32_gb": round(stats["model_bytes"] / 1e9, 3),
        "held_gb": round(stats["held_bytes"] / 1e9, 3),
        "read_gb": round(stats["read_bytes"] / 1e9, 3),
        "file_gb": round(stats["file_bytes"] / 1e9, 3),
        "largest_slice_gb": round(stats["largest_slice"] / 1e9, 4),
        "save_rank0_held_peak_gb": round(save["held_peak"] / 1e9, 3),
        "save_total_gb": round(save["total"] / 1e9, 3),
    }
    if plain_peak is not None:
        row.update(
            plain_startup_peak_gb=round(plain_peak / 1e9, 3), sharded_startup_peak_gb=round(sharded_peak / 1e9, 3)
        )
    row["bytes"] = {k: stats[k] for k in ("model_bytes", "held_bytes", "read_bytes", "file_bytes", "largest_slice")}
    # the peak: measured on a GPU; on the CPU counted (the shards held plus the largest slice read), in bytes
    counted = sharded_peak if sharded_peak is not None else stats["held_bytes"] + stats["largest_slice"]
    row["pass"] = diff == 0 and counted < 0.7 * stats["model_bytes"] and save["held_peak"] < save["total"]
    return row


def markdown(report: dict) -> str:
    lines = [
        f"#### Engine checks (issue 56), {report['machine']}, torch {report['torch']}, {report['date']}, "
        f"2 processes on one device{' (CPU, toy widths: the code path, not the figures)' if report['cpu'] else ''}",
        "",
        "| check | result | figures |",
        "|---|---|---|",
    ]
    for key, title in (("e1", "1: agreed passes"), ("e2", "2: grad_accum, shard"), ("e4", "4: root resharding"),
                       ("e5", "5: sharded start-up")):  # fmt: skip
        r = report.get(key)
        if r is None:
            continue
        verdict = "error" if "error" in r else ("pass" if r.get("pass") else "FAIL")
        figures = {k: v for k, v in r.items() if k not in ("pass", "seconds")}
        lines.append(f"| {title} | {verdict} ({r.get('seconds', '-')} s) | `{json.dumps(figures)}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=Path("gpu_engine.json"))
    ap.add_argument("--cpu", "--dry", action="store_true", help="toy widths, gloo on the CPU: the code path")
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.cpu
    if not cuda and not args.cpu:
        print("gpu_engine: no CUDA GPU visible; --cpu runs the checks at toy widths", file=sys.stderr)
        sys.exit(2)
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(0)  # every rank on the one GPU
    dist.init_process_group(
        "cpu:gloo,cuda:gloo" if cuda else "gloo", timeout=datetime.timedelta(seconds=60)
    )  # the watchdog: a collective waiting 60 s raises
    rank, world = dist.get_rank(), dist.get_world_size()
    size, compact = ("gpu", False) if cuda else ("cpu", True)
    report = {
        "machine": torch.cuda.get_device_name() if cuda else "CPU",
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "cpu": not cuda,
        "world": world,
    }
    box = [tempfile.mkdtemp(prefix="gpu_engine-") if rank == 0 else None]  # rank 0's folder, for every rank
    dist.broadcast_object_list(box, src=0)
    folder = Path(box[0]) / "init"

    def save() -> None:
        if rank == 0:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
            args.json.with_suffix(".md").write_text(markdown(report))

    checks = (
        ("e1", lambda: e1(size, device, rank, world, compact)),
        ("e2", lambda: e2_e4(size, device, rank, world, compact)),
        ("e5", lambda: e5(size, device, rank, world, compact, folder)),
    )
    for key, run in checks:
        tick = time.perf_counter()
        try:
            got = run()
            if key == "e2":
                report["e2"], report["e4"] = got
                report["e4"]["seconds"] = "with e2"
            else:
                report[key] = got
        except Exception as exc:  # noqa: BLE001 - one line in the report; the next check still runs
            report[key] = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"}
            if rank == 0:
                traceback.print_exc()
        report[key]["seconds"] = round(time.perf_counter() - tick, 1)
        if rank == 0:
            print(f"{key}: {json.dumps(report[key])}", flush=True)
        save()
        _reset(device)
    if rank == 0:
        print("\n" + markdown(report))
        print(f"wrote {args.json} and {args.json.with_suffix('.md')}")
    dist.destroy_process_group()
    return report


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(sys.argv[1:])

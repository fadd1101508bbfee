"""`daca-bench sample`: completions of a task's prompts from a model, with the sampler's trajectory record
(daca_bench.rl.sampler), one JSON line each: the completion, its reward, commit steps and log-probs.

    daca-bench sample --model runs/sft-tiny/final --task sudoku_tiny --n 4 sampler.temperature=0.9
    daca-bench sample --model tiny --task arithmetic --n 2 --output samples.jsonl   # random weights: noise

A tiny task whose gold answers the default canvas cannot hold is sampled on a canvas that holds them.
"""

from __future__ import annotations

import json
import sys

from ...rl.sampler import sample

CANVAS_KEYS = ("sampler.gen_length", "sampler.block_length", "sampler.steps")


def configure(parser) -> None:
    parser.add_argument("--model", default=None, help="tiny | a save_pretrained folder | a hub id (model.name)")
    parser.add_argument("--task", required=True, help="task whose prompts to sample (see `daca-bench tasks`)")
    parser.add_argument("--split", default="test")
    parser.add_argument("--n", type=int, default=8, help="number of prompts")
    parser.add_argument("--output", help="JSONL file for the completions and their trajectory record")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trust-remote-code", action="store_true", default=None, help="model.trust_remote_code=true")
    parser.add_argument(
        "overrides",
        nargs="*",
        help="model.KEY=VALUE and sampler.KEY=VALUE (e.g. sampler.temperature=0.9 model.dtype=bfloat16)",
    )


def _fitting_canvas(cfg, task, adapter, name: str, chosen: bool):
    """`cfg`, or where its canvas cannot hold the task's gold answers and no canvas was chosen (no canvas
    key given, no run's canvas found) the tiny families' kind of canvas that holds them: one block of
    the longest answer plus EOS rounded up to even, decoded two tokens per step; said on stderr."""
    from dataclasses import replace

    from ...canvas import check, gold_lengths
    from ...errors import ConfigError

    gold = gold_lengths(task, adapter.encode)
    try:
        check(cfg.sampler, "sampler", gold, name, eos=False)
        return cfg
    except ConfigError:
        if chosen or not gold:
            raise
    L = max(gold) + 1 + (max(gold) + 1) % 2  # sudoku_tiny: 16 digits + EOS -> 18, its family's canvas
    canvas = {"gen_length": L, "block_length": L, "steps": L // 2}
    cfg = replace(cfg, sampler=replace(cfg.sampler, **canvas))
    check(cfg.sampler, "sampler", gold, name, eos=False)
    print(
        f"sampler.gen_length={L}: the default canvas cannot hold {name}'s answers ({max(gold)} tokens); sampling "
        "on " + " ".join(f"sampler.{k}={v}" for k, v in canvas.items()),
        file=sys.stderr,
    )
    return cfg


def run(args) -> int:
    from ...canvas import check, check_fits
    from ...config import RunConfig, apply, command_config
    from ...models import default_device, load_model, run_canvas
    from ...registry import get_task, task_spec

    options = {"model.name": args.model, "model.trust_remote_code": args.trust_remote_code}
    cfg = command_config(args.overrides, ("model", "sampler"), options)
    trained = run_canvas(cfg.model.name)
    if trained and not any(o.split("=")[0] in CANVAS_KEYS for o in args.overrides):
        cfg = command_config(
            args.overrides, ("model", "sampler"), options, base=apply(RunConfig(), {"sampler": trained[0]})
        )
        print(
            f"canvas from {trained[1]}: " + " ".join(f"sampler.{k}={v}" for k, v in trained[0].items()), file=sys.stderr
        )
    task = get_task(args.task, split=args.split, n=args.n, seed=args.seed)
    samples = list(task.samples)[: args.n]
    check(cfg.sampler, "sampler")
    adapter = load_model(cfg.model)
    if task_spec(args.task).tiny:  # the gold is the whole answer: the canvas must hold it and EOS
        cfg = _fitting_canvas(
            cfg,
            task,
            adapter,
            args.task,
            chosen=bool(trained) or any(o.split("=")[0] in CANVAS_KEYS for o in args.overrides),
        )
    check_fits(adapter, [s.prompt for s in samples], [cfg.sampler.gen_length], "sampler.gen_length")
    sink = open(args.output, "w") if args.output else sys.stdout  # a bad output path fails before the work
    if cfg.model.name == "tiny":
        print(
            f"note: model tiny is built with random weights (model.seed={cfg.model.seed}): its completions are "
            "noise; give a trained model folder (e.g. --model runs/sft-tiny/final) for real ones",
            file=sys.stderr,
        )
    adapter.model.to(default_device()).eval()
    batch = sample(adapter, [s.prompt for s in samples], cfg.sampler, seed=args.seed)
    for i, s in enumerate(samples):
        r = task.verify(s, batch.texts[i])
        row = {
            "id": s.id,
            "prompt": s.prompt,
            "completion": batch.texts[i],
            "reward": r.as_json_value(),
            "status": r.status,
            "commit_step": batch.trajectory.commit_step[i].tolist(),
            "commit_logp": [round(v, 5) for v in batch.trajectory.commit_logp[i].tolist()],
        }
        sink.write(json.dumps(row) + "\n")
    if args.output:
        sink.close()
        print(f"wrote {len(samples)} completions to {args.output} ({batch.forward_passes} forward passes)")
    return 0

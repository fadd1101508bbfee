"""`daca-bench sft`: the command line of masked-diffusion SFT (daca_bench.train.sft).

    daca-bench sft --config configs/tiny_sft.yaml sft.steps=500
    torchrun --nproc_per_node 8 -m daca_bench sft --config configs/tiny_sft.yaml   # FSDP2 (sft.parallel)

The config is the YAML file, then the KEY=VALUE overrides; running the same command again resumes from
the newest intact checkpoint, `--fresh` sets the earlier run aside (daca_bench.runfolder).
"""

from __future__ import annotations

import sys

from ...config import command_config, load_config
from ...engine.parallel import barrier, init_process_group, rank_and_world
from ...runfolder import set_aside
from ...train.sft import train_sft


def configure(parser) -> None:
    parser.add_argument("--config", default=None, help="YAML preset (e.g. configs/tiny_sft.yaml)")
    parser.add_argument("--output-dir", default=None, help="run folder (default: output_dir of the config)")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start over: a run already in OUTPUT is set aside in OUTPUT/.stale/N/, never deleted",
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("overrides", nargs="*", help="dotted KEY=VALUE overrides, e.g. sft.steps=500")


def run(args) -> int:
    cfg = command_config(args.overrides, ("model", "sampler", "sft", "output_dir"), base=load_config(args.config))
    out = args.output_dir or cfg.output_dir
    init_process_group()  # under torchrun: before --fresh, so that one process (rank 0) sets the run aside
    aside = set_aside(out) if args.fresh and rank_and_world()[0] == 0 else None
    if aside:
        print(f"--fresh: the earlier run in {out} is set aside in {aside}", file=sys.stderr)
    barrier()
    summary = train_sft(cfg, out, resume=not args.fresh, progress=not args.no_progress)
    if rank_and_world()[0] or summary.get("stopped"):  # stopped by a signal: the loop said so on stderr
        return 0
    ran = summary["steps"] - summary["resumed_from_step"]
    speed = (f"{summary['tokens_per_s']:.0f} tokens/s" if ran else "no step left to run") + (
        f", resumed at step {summary['resumed_from_step']}" if summary["resumed_from_step"] else ""
    )
    early = ", stopped early at the dev target" if summary["stopped_early"] else ""
    print(
        f"{summary['task']}: greedy test accuracy {summary['accuracy']:.3f} on {summary['n_eval']} held-out "
        f"prompts after {summary['steps']} SFT steps ({speed}{early}); model in {out}/final"
    )
    if summary["accuracy"] == 0:  # an RL start that answers nothing: every group's rewards are equal, no signal
        print(
            f"warning: the SFT model answers none of the {summary['n_eval']} test prompts correctly; RL from it "
            "sees no reward to learn from (a grid's cells would all stay at 0 %): train longer (sft.steps=...) or "
            "check the task's targets (`daca-bench tasks --show`) before a grid",
            file=sys.stderr,
        )
    return 0

"""`daca-bench train`: the command line of the DACA-GRPO trainer (daca_bench.train.trainer).

    daca-bench train --config configs/tiny.yaml --variant +DACA train.task=sudoku_tiny
    daca-bench train --config configs/tiny.yaml dps.enabled=true sml.k=4 --output-dir runs/daca

The config is the YAML file, then the keys of `--variant` (the headline's cell of that name,
experiments/grid/headline.py), then the KEY=VALUE overrides. `--fresh` sets a run already in the
output folder aside (daca_bench.runfolder); the last line names what the run trained.
"""

from __future__ import annotations

import sys

from ...config import RLConfig, load_config
from ...engine.parallel import barrier, init_process_group, rank_and_world
from ...train.trainer import train


def configure(parser) -> None:
    parser.add_argument("--config", default=None, help="YAML preset (e.g. configs/tiny.yaml)")
    parser.add_argument(
        "--variant",
        default=None,
        metavar="NAME",
        help="run what the headline table's cell of NAME ran (baseline, +DPS, +SML, +DACA, +DPS-random): "
        "its regime, the task family's canvas and steps, and the picked reading; KEY=VALUE "
        "overrides still win",
    )
    parser.add_argument("--output-dir", default=None)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue from the newest intact OUTPUT/checkpoint-STEP (the default when one exists)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="start over: a run already in OUTPUT is set aside in OUTPUT/.stale/N/, never deleted",
    )
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--print-config", action="store_true", help="list every key, its value and help, then stop")
    parser.add_argument(
        "overrides",
        nargs="*",
        help="dotted KEY=VALUE, e.g. loss.base=gspo dps.enabled=true sml.k=4 "
        "(TRL's names too: learning_rate=1e-5 importance_sampling_level=sequence)",
    )


def run_config(args) -> RLConfig:
    """The config file, then the variant's keys (for the task the command line names), then the overrides."""
    cfg = load_config(args.config, args.overrides, RLConfig)
    if not args.variant:
        return cfg
    from ...config import apply, parse_overrides, trl_aliases
    from ..grid.headline import HEADLINE, variant_keys

    keys = variant_keys(args.variant, cfg.train.task)
    given = trl_aliases(parse_overrides(args.overrides))
    kept = {k: v for k, v in keys.items() if k not in given}  # what the run takes from the preset's cell
    print(
        f"--variant {args.variant} (the {HEADLINE} preset's cell): "
        + " ".join(f"{k}={v}" for k, v in kept.items())
        + (
            f"; overridden on the command line: {' '.join(f'{k}={given[k]}' for k in keys if k in given)}"
            if len(kept) < len(keys)
            else ""
        ),
        file=sys.stderr,
    )
    return apply(apply(load_config(args.config, [], RLConfig), keys), given)


def summary_line(s: dict) -> str:
    """The run's one line: what it trained (DPS score, SML strata and partition) and its accuracy."""
    dps = f"dps={s['dps_score']}" if s["dps"] and s.get("dps_score") else f"dps={'on' if s['dps'] else 'off'}"
    sml = f"sml.k={s['sml_k']}" + (f" ({s['sml_partition']})" if s["sml_k"] > 1 and s.get("sml_partition") else "")
    mean = f" (mean reward {s['test_mean_reward']:.3f})" if "test_mean_reward" in s else ""
    return (
        f"{s['task']} {s['base']} {dps} {sml}: greedy test accuracy {s['test_accuracy']:.3f}{mean} "
        f"after {s['steps']} steps"
    )


def run(args) -> int:
    cfg = run_config(args)
    if args.print_config:
        from ...confighelp import print_config

        print_config(cfg)
        return 0
    out = args.output_dir or cfg.output_dir
    init_process_group()  # under torchrun: before --fresh, so that one process (rank 0) sets the run aside
    if args.fresh and rank_and_world()[0] == 0:
        from ...runfolder import set_aside

        aside = set_aside(out)
        if aside:
            print(f"--fresh: the earlier run in {out} is set aside in {aside}", file=sys.stderr)
    barrier()  # the others start only once it has
    summary = train(cfg, out, resume=not args.fresh, progress=not args.no_progress)
    if "test_accuracy" in summary and rank_and_world()[0] == 0:
        print(summary_line(summary))
    return 0

"""`daca-bench lm-eval`: lm-evaluation-harness on any model the project loads, as lm_eval model `daca`.

    daca-bench lm-eval --model daca --model_args model=tiny,gen_length=32,steps=16 --tasks TASK --include_path DIR
    torchrun --nproc_per_node 2 -m daca_bench lm-eval --model daca --model_args model=runs/sft-tiny/final --tasks gsm8k

Everything after `lm-eval` is lm_eval's own command line (`lm_eval --help`); this command only registers the
model class first (importing daca_bench.eval.lmeval, whose docstring lists the model_args) and makes
`--model daca` the default. `--tasks daca_gsm8k_local,daca_mc_local` (daca_bench/eval/localtasks.py)
run offline on data the project generates: without --include_path their YAMLs are written to a temporary
folder and included.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from ...eval import (
    lmeval,  # noqa: F401 - registers lm_eval model `daca`
    localtasks,
)


# ---- CLI: `daca-bench lm-eval ARGS...` (cli.py hands the whole line over) --------------------------
def configure(parser) -> None:
    import argparse

    parser.add_argument("args", nargs=argparse.REMAINDER, help="lm_eval's own options (see `lm_eval --help`)")


def run(args) -> int:
    return run_argv(list(args.args))


def run_argv(argv: list[str]) -> int:
    """lm_eval's command line with the `daca` model registered (this module is imported) and the default."""
    from lm_eval.__main__ import cli_evaluate

    if not any(a == "--model" or a.startswith("--model=") for a in argv):
        argv = ["--model", "daca", *argv]  # this command's own model, not lm_eval's `hf`
    with tempfile.TemporaryDirectory(prefix="daca-lmeval-tasks-") as tmp:
        if _names_local_task(argv) and not any(a.startswith("--include_path") for a in argv):
            argv = [*argv, "--include_path", str(localtasks.write_local_tasks(Path(tmp)))]
        saved = sys.argv
        sys.argv = ["lm_eval", *argv]
        try:
            cli_evaluate()
        finally:
            sys.argv = saved
    return 0


def _names_local_task(argv: list[str]) -> bool:
    tasks = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--tasks"]
    tasks += [a.split("=", 1)[1] for a in argv if a.startswith("--tasks=")]
    return any(t in localtasks.TASKS for group in tasks for t in group.split(","))

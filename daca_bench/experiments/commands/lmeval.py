"""`daca-bench lm-eval`: lm-evaluation-harness on any model the project loads, as lm_eval model `daca`.

    daca-bench lm-eval --model daca --model_args model=tiny,gen_length=32,steps=16 --tasks TASK --include_path DIR
    torchrun --nproc_per_node 2 -m daca_bench lm-eval --model daca --model_args model=runs/sft-tiny/final --tasks gsm8k

Everything after `lm-eval` is lm_eval's own command line (`lm_eval --help`); this command only registers the
model class first (importing daca_bench.eval.lmeval, whose docstring lists the model_args).
"""
from __future__ import annotations

import sys

from ...eval import lmeval  # noqa: F401 - registers lm_eval model `daca`


# ---- CLI: `daca-bench lm-eval ARGS...` (cli.py hands the whole line over) --------------------------
def configure(parser) -> None:
    import argparse

    parser.add_argument("args", nargs=argparse.REMAINDER, help="lm_eval's own options (see `lm_eval --help`)")


def run(args) -> int:
    return run_argv(list(args.args))


def run_argv(argv: list[str]) -> int:
    """lm_eval's command line with the `daca` model registered (this module is imported)."""
    from lm_eval.__main__ import cli_evaluate

    saved = sys.argv
    sys.argv = ["lm_eval", *argv]
    try:
        cli_evaluate()
    finally:
        sys.argv = saved
    return 0

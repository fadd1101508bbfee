"""`daca-bench tasks`: list the registered tasks, check one with the task battery, show its samples.

    daca-bench tasks                                   # every task: family, version, split sizes
    daca-bench tasks --tasks-dir my_tasks --check sort4          # the battery (rewards/battery.py)
    daca-bench tasks --tasks-dir my_tasks --show sort4 --split dev -n 5   # ids, prompts, targets
    daca-bench tasks --show gsm8k --protocol d1 --fixture gsm8k.jsonl --model GSAI-ML/LLaDA-8B-Instruct  # as the trainer renders it

A task is any registered one: a file of the shipped tasks/, a file in a folder given by --tasks-dir
or DACA_BENCH_TASKS, or an installed plug-in (entry-point group `daca_bench.tasks`). `--check` exits
1 when a check fails; `--show` with `--model` renders each prompt through that model's chat
template as `train.chat_template=true` makes the trainer do (with the sample's prefill), and counts
its tokens.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from ... import registry
from ...errors import ConfigError
from ...rewards.battery import CHECKS, battery


def configure(parser) -> None:
    registry.configure(parser)  # the listing's --family, --tiny
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", metavar="NAME", help="run the task battery on task NAME (exit 1 if a check fails)")
    what.add_argument("--show", metavar="NAME", help="print ids, rendered prompts and targets of task NAME")
    parser.add_argument("--split", default=None, help="--show: the split (default: test, else the task's first)")
    parser.add_argument("-n", type=int, default=5, help="--show: how many samples (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="--show: the draw's seed (default 0)")
    parser.add_argument(
        "--model",
        default=None,
        help="--show: render prompts with this model's tokenizer and chat "
        "template (hub id or folder; `tiny`: the character model)",
    )
    parser.add_argument("--trust-remote-code", action="store_true", help="--show --model: a model's own tokenizer code")
    parser.add_argument("--raw", action="store_true", help="--show --model: prompts as written, no chat template")
    parser.add_argument("--json", action="store_true", help="--show: one JSON line per sample")
    parser.add_argument(
        "--protocol", default="", help="--show: the task as it declares this protocol (d1), as train.protocol poses it"
    )
    parser.add_argument(
        "--fixture",
        metavar="FILE",
        default=None,
        help="--check/--show: a hub task's local data file (the builder's path=); --check then "
        "checks that file's split only, as tests/unit/rewards/test_tasks_battery.py does with its fixtures",
    )


def run(args) -> int:
    if args.check:
        if args.protocol:
            raise ConfigError("--protocol goes with --show NAME; --check runs the battery on the task as registered")
        return check(args.check, _kw(args))
    if args.show:
        return show(
            args.show,
            args.split,
            args.n,
            args.seed,
            args.model,
            args.trust_remote_code,
            args.raw,
            args.json,
            {**_kw(args), **({"protocol": args.protocol} if args.protocol else {})},
        )
    for opt in ("split", "model", "fixture", "protocol"):
        if getattr(args, opt) not in (None, ""):
            raise ConfigError(f"--{opt} goes with --show NAME (or --check NAME); alone, `daca-bench tasks` lists tasks")
    return registry.run(args)


def _kw(args) -> dict:
    return {"path": args.fixture} if args.fixture else {}


def check(name: str, kw: dict | None = None) -> int:
    """Print each check of the battery on task NAME; 1 if one fails."""
    spec = registry.task_spec(name)
    print(
        f"{spec.name}: {spec.family}, version {spec.version}, splits {'/'.join(spec.splits)}, cluster "
        f"{_cluster_name(spec)}; from {registry.task_source(spec)}"
    )
    checks = battery(spec, kw)
    width = max(len(n) for n in CHECKS)
    for c in checks:
        mark = "skip" if c.skipped else "ok" if c.ok else "FAIL"
        print(f"  {mark:<4}  {c.name:<{width}}  {c.what}" + (f" ({c.skipped})" if c.skipped else ""))
        for problem in c.problems[:5]:
            print(f"{'':>{width + 10}}- {problem}")
        if len(c.problems) > 5:
            print(f"{'':>{width + 10}}- and {len(c.problems) - 5} more")
    failed = [c.name for c in checks if not c.ok]
    ran = [c for c in checks if not c.skipped]
    print(
        f"{spec.name}: {len(ran) - len(failed)} of {len(ran)} checks pass"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


def _cluster_name(spec) -> str:
    if spec.cluster is None:
        return "none (each item its own)"
    return repr(spec.cluster) if isinstance(spec.cluster, str) else getattr(spec.cluster, "__name__", "function")


def _renderer(model: str | None, trust_remote_code: bool, raw: bool):
    """(adapter-like object with the tokenizer, whether the chat template applies, a note) for MODEL."""
    if model is None:
        return None, False, "prompts as written (give --model to render them with a model's chat template)"
    from ...chars import build_char_tokenizer
    from ...models import load_tokenizer

    tok = build_char_tokenizer() if model == "tiny" else load_tokenizer(model, trust_remote_code)
    adapter = SimpleNamespace(tokenizer=tok, source=model)
    if raw:
        return adapter, False, f"prompts as written (--raw), tokens counted by {model}'s tokenizer"
    if not getattr(tok, "chat_template", None):
        return (
            adapter,
            False,
            f"{model}'s tokenizer has no chat template: prompts as written (train.chat_template=false)",
        )
    return adapter, True, f"{model}'s chat template, one user message plus the prefill, as train.chat_template=true"


def show(
    name: str,
    split: str | None,
    n: int,
    seed: int = 0,
    model: str | None = None,
    trust_remote_code: bool = False,
    raw: bool = False,
    as_json: bool = False,
    kw: dict | None = None,
) -> int:
    """Print the first N samples of task NAME's SPLIT (drawn with SEED): id, cluster, prompt, target."""
    spec = registry.task_spec(name)
    split = split or ("test" if "test" in spec.splits else spec.splits[0])
    if split not in spec.splits:
        raise ConfigError(f"task {name!r} has no split {split!r}; its splits: {', '.join(spec.splits)}")
    samples = list(registry.get_task(name, split=split, n=n, seed=seed, **(kw or {})).samples)[:n]
    adapter, chat, note = _renderer(model, trust_remote_code, raw)
    if adapter is None:
        prompts = [s.prompt for s in samples]
    else:
        from ...eval.prompts import task_prompts

        prompts = task_prompts(adapter, samples, chat)
    if as_json:
        for s, p in zip(samples, prompts):
            print(json.dumps({"id": s.id, "cluster": spec.cluster_of(s), "prompt": p, "target": s.target}))
        return 0
    print(f"{spec.name} {split}: {len(samples)} sample(s), seed {seed}; {note}")
    for i, (s, p) in enumerate(zip(samples, prompts), 1):
        tokens = (
            f"; {len(adapter.tokenizer(p)['input_ids'])} prompt tokens, "
            f"{len(adapter.tokenizer(s.target or '')['input_ids'])} target tokens"
            if adapter is not None
            else ""
        )
        cluster = spec.cluster_of(s)
        print(f"\n[{i}] {s.id}" + (f"  (cluster {cluster})" if cluster != s.id else "") + tokens)
        print("  prompt:\n" + _indent(p))
        print("  target:\n" + _indent(s.target or "(none)"))
    return 0


def _indent(text: str) -> str:
    """TEXT indented by 4 spaces, a trailing newline shown as ⏎ (what the model sees ends there)."""
    shown = text[:-1] + "⏎" if text.endswith("\n") else text
    return "\n".join("    " + line for line in shown.split("\n"))

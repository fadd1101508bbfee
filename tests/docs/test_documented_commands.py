"""Every command shown in a code block of README.md and docs/*.md runs as written, from a folder
laid out like a fresh clone (the repository's files linked in, results/ copied, no runs/), with
`daca-bench` and `python` being this checkout's. A block runs as one bash (or Python) script.

Where running a command as written would take too long, the page says so in a comment right
above its block, `<!-- docs-test: SUB ARGS...; SUB ARGS... -->`: each `daca-bench SUB` line of
the block gets ARGS appended (small overrides such as `train.steps=1`). The commands that are
not run at all are listed in EXCLUDED with the reason; a rule that matches nothing fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from repo_paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_WORDS = ("daca-bench", "bash", "pip", "torchrun", "python", "export", "time", "echo", "cat", "printf", "cd")
MARKER = re.compile(r"<!--\s*docs-test:(.*?)-->", re.S)
TIMEOUT = 400  # seconds per block (about 40 s on an idle 2-core machine for the slowest)

# (pattern on one command, why it is not run here). Checked in order; the first match wins.
EXCLUDED = [
    (r"^bash scripts/test\.sh", "the whole test suite: CI runs it first (.ci/run)"),
    (r"^bash scripts/main\.sh", "the full reproduce of the embedded default (about 20 min on 2 cores)"),
    (r"^pip (wheel|install) ", "builds and installs the wheel: scripts/check_wheel.sh does it in CI, in a fresh venv"),
    (r"^torchrun ", "two training processes: tests/unit/train/test_trainer.py runs data-parallel training"),
    (
        r"LLaDA|--trust-remote-code|DACA_BENCH_D1_DATA|configs/paper/(sdar|llada2)_",
        "an 8B hub model on a CUDA GPU (or d1's data files): benchmarks/gpu/gpu_check.sh on a GPU machine",
    ),
    (
        r"^daca-bench reproduce (?!--list$)|^daca-bench reproduce$",
        "a whole reproduce (minutes to hours): tests/integration/test_reproduce.py runs small ones",
    ),
    (r"^daca-bench table (results/tiny-quick|runs/)", "reads the output of a run excluded above"),
    (
        r"^daca-bench tasks && daca-bench verify",
        "the installed wheel's first commands, from any folder: scripts/check_wheel.sh runs them in CI outside the checkout",
    ),
    (
        r"^(time )?daca-bench estimators",
        "the estimator study on reproduce's SFT starts (minutes): tests/unit/studies/test_gradients.py",
    ),
    (
        r'GRPOTrainer\(model="Qwen',
        "downloads a hub model and gsm8k: examples/trl_grpo.py runs the same offline (tests/integration/test_interop.py)",
    ),
    (
        r"^(daca-bench|bash|python|time) .*(\[-|\w\|\w|(?<![\w./-])[A-Z][A-Z0-9_]{2,}\b(?!=))",
        "a synopsis (optional [...] parts, a|b choices or PLACEHOLDERS), not a command",
    ),
]


@dataclass
class Block:
    page: Path
    line: int
    lang: str  # "bash" or "python"
    commands: list[str] = field(default_factory=list)  # logical lines (continuations joined)
    append: dict[str, str] = field(default_factory=dict)  # daca-bench SUB -> extra args

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _strip_comment(line: str) -> str:
    """A shell line without its trailing # comment (a # inside quotes stays)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _logical(lines: list[str]) -> list[str]:
    """Commands, one a line: a line ending in a backslash, or an indented line (a synopsis's
    wrapped options), continues the one before."""
    out, cur = [], ""
    for raw in lines:
        text = _strip_comment(raw).strip()
        if raw[:1].isspace() and text and out and not cur:
            out[-1] += " " + re.sub(r"\s+", " ", text)
            continue
        if text.endswith("\\"):
            cur += text[:-1].rstrip() + " "
            continue
        cur += text
        if cur.strip():
            out.append(re.sub(r"\s+", " ", cur.strip()))
        cur = ""
    return out


def _marker(before: list[str]) -> dict[str, str]:
    """The docs-test comment right above a block (blank lines may sit between)."""
    text = "\n".join(before[-4:])
    m = None
    for m in MARKER.finditer(text):  # noqa: B007 - the last match
        pass
    if m is None or text[m.end() :].strip():
        return {}
    out = {}
    for part in m.group(1).split(";"):
        sub, _, args = part.strip().partition(" ")
        if sub:
            out[sub] = args.strip()
    return out


def blocks(page: Path) -> list[Block]:
    """The code blocks of a page that hold commands: fenced (bash, sh, console, python or no
    language) and indented ones, whose first command starts with a shell word."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)(```|~~~)\s*(\w*)", line)
        if fence:
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence.group(2)):
                j += 1
            body, lang = lines[i + 1 : j], fence.group(3).lower()
            if lang == "python":
                found.append(Block(page, i + 1, "python", ["\n".join(body)], _marker(lines[:i])))
            elif lang in ("", "bash", "sh", "shell", "console"):
                found.append(Block(page, i + 1, "bash", _logical(body), _marker(lines[:i])))
            i = j + 1
            continue
        if (
            line.startswith("    ")
            and (i == 0 or not lines[i - 1].strip())
            and not line.lstrip().startswith(("-", "*", "|"))
        ):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            found.append(Block(page, i + 1, "bash", _logical([x[4:] for x in lines[i:j]]), _marker(lines[:i])))
            i = j
            continue
        i += 1
    return [b for b in found if b.lang == "python" or (b.commands and b.commands[0].split()[0] in SHELL_WORDS)]


def excluded(command: str) -> str | None:
    for pattern, reason in EXCLUDED:
        if re.search(pattern, command):
            return reason
    return None


def runnable(block: Block) -> list[str]:
    """The block's commands that run here, each with the overrides its page names."""
    out = []
    for command in block.commands:
        if excluded(command):
            continue
        words = command.split()
        if block.lang == "bash" and words[0] == "daca-bench" and len(words) > 1 and words[1] in block.append:
            command = f"{command} {block.append[words[1]]}"
        out.append(command)
    return out


ALL = [b for page in PAGES for b in blocks(page)]
RUN = list({(b.lang, tuple(runnable(b))): b for b in reversed(ALL) if runnable(b)}.values())[
    ::-1
]  # a repeated block runs once


def _clone(tmp: Path, block: Block) -> Path:
    """A folder like a fresh clone: the repository's files linked in, results/ copied."""
    clone = tmp / "clone"
    clone.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in (
            ".git",
            ".venv",
            "runs",
            "cache",
            "site",
            "dist",
            "build",
            "results",
        ) or entry.name.startswith("."):
            continue
        (clone / entry.name).symlink_to(entry)
    if any("results/" in c for c in block.commands):
        shutil.copytree(ROOT / "results", clone / "results", ignore=shutil.ignore_patterns(".stale"))
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, target in (("daca-bench", f'"{sys.executable}" -m daca_bench'), ("python", f'"{sys.executable}"')):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {target} "$@"\n')
        script.chmod(0o755)
    return clone


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN, ids=lambda b: b.name)
def test_documented_block_runs_as_written(block, tmp_path):
    if block.lang == "python" and "evaluate" in block.commands[0]:
        pytest.importorskip("evaluate", reason="the `evaluate` extra is not installed")
    clone = _clone(tmp_path, block)
    env = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    if block.lang == "python":
        argv, script = [sys.executable, "-"], runnable(block)[0]
    else:
        argv, script = ["bash", "-euo", "pipefail", "-s"], "\n".join(runnable(block)) + "\n"
    done = subprocess.run(argv, input=script, cwd=clone, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, (
        f"{block.name} failed (exit {done.returncode}):\n{script}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


def test_the_readme_examples_are_found_and_run():
    readme = [c for b in ALL if b.page.name == "README.md" for c in runnable(b)]
    for expected in (
        "daca-bench verify arithmetic",
        "daca-bench sft",
        "daca-bench train",
        "daca-bench reproduce --list",
    ):
        assert any(c.startswith(expected) for c in readme), f"README.md's `{expected}` is not run by this test"
    assert any("train.steps=1" in c for c in readme), "the README's docs-test override was not applied"


def test_every_exclusion_is_used():
    """EXCLUDED is the list of what is not run; a rule that matches no documented command is stale."""
    commands = [c for b in ALL for c in b.commands]
    unused = [reason for pattern, reason in EXCLUDED if not any(re.search(pattern, c) for c in commands)]
    assert not unused, f"exclusions that match no documented command: {unused}"


def test_parser_reads_markers_continuations_and_synopses(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Text\n\n<!-- docs-test: train train.steps=1 -->\n```bash\n"
        "daca-bench train --config configs/tiny.yaml \\\n    sml.k=4   # +SML\n# a comment line\n```\n\n"
        "    daca-bench reproduce --preset NAME [--seeds 0 1]\n\n"
        "```\nlog p = sum_k l_k\n```\n"
    )
    got = blocks(page)
    assert [b.commands for b in got] == [
        ["daca-bench train --config configs/tiny.yaml sml.k=4"],
        ["daca-bench reproduce --preset NAME [--seeds 0 1]"],
    ]
    assert runnable(got[0]) == ["daca-bench train --config configs/tiny.yaml sml.k=4 train.steps=1"]
    assert runnable(got[1]) == [] and "synopsis" in excluded("daca-bench verify T --input FILE.jsonl")


def _not_run() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for b in ALL:
        for c in b.commands:
            if (reason := excluded(c)) is not None:
                out.setdefault(reason, []).append(f"{b.name}: {c.splitlines()[0][:80]}")
    return out


@pytest.mark.parametrize("reason", sorted(_not_run()))
def test_excluded_commands_are_listed(reason):
    """Shows in pytest's summary (-ra) what is not run here and why, one line per reason."""
    where = _not_run()[reason]
    pytest.skip(f"{len(where)} documented command(s) not run ({reason}), e.g. {where[0]}")

"""Code-task scoring: assemble the program from a completion, run its tests in the sandbox,
turn the sandbox's verdict into a Reward.

A code sample's metadata holds `prefix` (text the completion continues, e.g. HumanEval's
signature and docstring), `preamble` (text placed before a completion that defines the whole
function), `entry_point` and `test`. Verdicts: passed -> 1 correct; failed, memory,
output_limit -> 0 wrong; timeout -> 0 timeout; sandbox_error or an unreachable sandbox ->
infra_error (NaN: never a 0 that would poison the group baseline).
    verifier = CodeVerifier(); verifier.batch(samples, completions, workers=2)

Partial credit (`CodeVerifier(shaping="dense")`, RL's `train.reward=dense`): a test program that
counts its own cases prints `TESTS_LINE k n` before its final assert (see `counting_tests`);
a failed program then earns PARTIAL_WEIGHT x k/n from that one sandbox run. The line is read
only when n is the sample's own number of cases, and only for a program that failed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..types import Reward, Sample
from .answers import code_answer
from .scoring import check_shaping, correct_if, dense_reward, infra_error, no_answer, timeout

WRONG_VERDICTS = {"failed": "tests_failed", "memory": "memory_limit", "output_limit": "output_limit"}
TESTS_LINE = "__daca_tests_passed__"
_backend = None  # None = daca_bench.containers; tests may install a double with use_backend()


def use_backend(module) -> None:
    """Install an object with run_batch(jobs, timeout, workers) and SandboxUnavailable
    (a test double, or another sandbox with the same API); None restores the default."""
    global _backend
    _backend = module


def backend():
    if _backend is not None:
        return _backend
    from .. import (
        containers as sandbox,  # imported on first use: the sandbox client is another room
    )

    return sandbox


def defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None


def program(sample: Sample, completion: str) -> tuple[str | None, str]:
    """(program, how it was read) or (None, why) when the completion holds no code."""
    code, how = code_answer(completion)
    if not code.strip():
        return None, how
    meta = sample.metadata
    entry = meta.get("entry_point")
    if entry and defines(code, entry):  # a whole definition: it replaces the prompt's stub
        preamble = meta.get("preamble", "")
        return (preamble.rstrip() + "\n\n\n" if preamble.strip() else "") + code, how + "+definition"
    return meta.get("prefix", "") + code, how


def counting_tests(call: str, cases: Sequence[tuple]) -> str:
    """Test code that checks `call.format(x) == y` for every (x, y) in CASES, prints
    `TESTS_LINE passed total`, then asserts that all passed (the exact verdict is unchanged:
    passed only if every case passes; an exception in one case fails that case alone)."""
    listed = ", ".join(f"({x!r}, {y!r})" for x, y in cases)
    return (
        f"_cases = [{listed}]\n_passed = 0\nfor _x, _y in _cases:\n    try:\n"
        f"        _passed += bool({call.format('_x')} == _y)\n    except Exception:\n        pass\n"
        f"print({TESTS_LINE!r}, _passed, len(_cases))\nassert _passed == len(_cases), 'failed cases'\n"
    )


def tests_passed(stdout: str, total: int) -> int | None:
    """The number of passed cases the counting test printed, or None (no line, or a line whose
    total is not this sample's: not the harness's)."""
    found = re.findall(rf"^{TESTS_LINE} (\d+) (\d+)$", stdout or "", re.MULTILINE)
    if not found or int(found[-1][1]) != total:
        return None
    return min(int(found[-1][0]), total)


def reward_of(result) -> Reward:
    """An ExecResult of the sandbox as a Reward."""
    details = {
        "verdict": result.status,
        "seconds": round(float(getattr(result, "seconds", 0.0) or 0.0), 4),
        "returncode": getattr(result, "returncode", None),
        "stderr_tail": (getattr(result, "stderr", "") or "")[-400:],
    }
    if result.status == "passed":
        return correct_if(True, **details)
    if result.status in WRONG_VERDICTS:
        return correct_if(False, reason=WRONG_VERDICTS[result.status], **details)
    if result.status == "timeout":
        return timeout(**details)
    return infra_error(f"sandbox verdict {result.status!r}", **details)


class CodeVerifier:
    """The `verify` of a code task: `verifier(sample, completion)` for one, `.batch()` for many
    (one sandbox round trip, run in parallel by the sandbox's workers)."""

    def __init__(self, timeout: float = 5.0, shaping: str | None = None):
        if check_shaping(shaping) not in (None, "dense"):
            raise ValueError(f"this task has no {shaping!r} shaping")
        self.timeout = timeout
        self.shaping = shaping
        self.__name__ = "verify_code" + ("_dense" if shaping else "")

    def _shaped(self, sample: Sample, reward: Reward, stdout: str) -> Reward:
        """The dense partial credit of a failed program: the fraction of its cases that passed."""
        if self.shaping != "dense" or not reward.scored or reward.status == "correct":
            return reward
        total = len(sample.metadata.get("tests") or ())
        passed = tests_passed(stdout, total) if total else None
        return dense_reward(reward, passed / total if passed is not None else 0.0)

    def __call__(self, sample: Sample, completion: str) -> Reward:
        return self.batch([sample], [completion])[0]

    def batch(self, samples: Sequence[Sample], completions: Sequence[str], workers: int | None = None) -> list[Reward]:
        out: list[Reward | None] = [None] * len(samples)
        jobs, where = [], []
        for i, (sample, completion) in enumerate(zip(samples, completions)):
            code, how = program(sample, completion)
            if code is None:
                out[i] = self._shaped(sample, no_answer(rule=how), "")
            else:
                jobs.append((code, sample.metadata["test"]))
                where.append((i, how))
        if jobs:
            sandbox = backend()
            try:
                results = sandbox.run_batch(jobs, timeout=self.timeout, workers=workers)
            except Exception as exc:  # SandboxUnavailable, or any failure of the machinery
                unavailable = isinstance(exc, getattr(sandbox, "SandboxUnavailable", ()))
                kind = "sandbox unavailable" if unavailable else f"sandbox failed ({type(exc).__name__})"
                results = [None] * len(jobs)
                for i, _how in where:
                    out[i] = infra_error(f"{kind}: {str(exc)[:300]}", rule=how)
                return out
            if len(results) != len(jobs):
                for i, _how in where:
                    out[i] = infra_error(f"sandbox returned {len(results)} results for {len(jobs)} jobs")
                return out
            for (i, how), result in zip(where, results):
                reward = reward_of(result)
                reward = type(reward)(reward.value, reward.status, {**reward.details, "rule": how})
                out[i] = self._shaped(samples[i], reward, getattr(result, "stdout", ""))
        return out

"""Score completions with a task's verifier: the `daca-bench verify` command and a TRL-style
reward function for other GRPO trainers.

    daca-bench verify gsm8k --input completions.jsonl --output scored.jsonl --workers 2
Each input line holds the task's fields plus `completion`; each output line is the input plus
`reward` (a number, or null when it could not be scored) and `status`. Output line N is input
line N: a line that cannot be decoded, parsed or scored (a blank one too) is written with
status bad_input and an `error` naming FILE:LINE and the reason (a line that is not a JSON
object as {"line", "raw"}), reported on stderr, and the exit code is then 2.

    from daca_bench.rewards.verify import reward_function
    trainer = GRPOTrainer(..., reward_funcs=[reward_function("gsm8k")])  # f(prompts, completions, **columns)
"""

from __future__ import annotations

import inspect
import json
import math
import multiprocessing
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import RewardError
from ..jsonl import dumps_line, read_jsonl
from ..registry import task_spec
from ..types import BAD_INPUT, INFRA_ERROR, STATUSES, Reward, Sample
from .scoring import bad_input, infra_error

RAW_CHARS = 2000  # a bad line's text is written back up to this length
BUILD_ERRORS = (KeyError, ValueError, TypeError, IndexError, AttributeError, json.JSONDecodeError)


def completion_text(value: Any) -> str:
    """A completion as text: a string, or chat messages (the assistant contents joined)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    if isinstance(value, (list, tuple)) and all(isinstance(m, dict) for m in value):
        parts = [m.get("content") for m in value if m.get("role", "assistant") == "assistant"]
        if all(isinstance(p, str) for p in parts) and parts:
            return "".join(parts)
    raise TypeError(f"completion must be a string or chat messages, not {type(value).__name__}")


def json_value(reward: Reward) -> float | None:
    """The reward as written out: null for what could not be scored (infra failure, bad input)."""
    if reward.status in (INFRA_ERROR, BAD_INPUT) or math.isnan(reward.value):
        return None
    return float(reward.value)


def _build_kwargs(name: str, task_kw: dict) -> dict:
    spec = task_spec(name)
    params = inspect.signature(spec.build).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    unknown = [k for k in task_kw if k not in params and not takes_any]
    if unknown:
        raise TypeError(f"task {name!r} takes no option {', '.join(unknown)}")
    if "records" not in params and not takes_any:
        raise TypeError(f"task {name!r} cannot build samples from records (its builder has no `records=`)")
    return task_kw


def build_samples(name: str, rows: Sequence[dict], **task_kw):
    """(verify, [Sample or Reward(bad_input)]) with one sample per record, built one by one so
    that a bad record only spoils itself."""
    spec = task_spec(name)
    kw = _build_kwargs(name, task_kw)
    split = "test" if "test" in spec.splits else spec.splits[0]
    verify, out = None, []
    for row in rows:
        if not isinstance(row, dict):
            out.append(bad_input(f"record must be a JSON object, not {type(row).__name__}"))
            continue
        try:
            task = spec.build(split=split, records=[row], **kw)
            if len(task.samples) != 1:
                raise TypeError(f"task {name!r} ignored its records (built {len(task.samples)} samples)")
            out.append(task.samples[0])
            verify = verify or task.verify
        except BUILD_ERRORS as exc:
            out.append(bad_input(f"{type(exc).__name__}: {_message(exc)[:300]}"))
    if verify is None:  # no good record: any build gives the verifier
        verify = spec.build(split=split, records=[], **kw).verify
    return verify, out


def _message(exc: Exception) -> str:
    """An exception's text; a KeyError's without the quotes its str() adds (other messages keep theirs)."""
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return str(exc.args[0])
    return str(exc)


_pool_verify: Callable | None = None  # set before a fork pool starts; read in its children


def _verify_chunk(pairs):
    return [_safe_verify(_pool_verify, s, c) for s, c in pairs]


def _safe_verify(verify, sample: Sample, completion: str) -> Reward:
    try:
        return verify(sample, completion)
    except RewardError:  # a value the task does not allow: refused, never an infrastructure failure
        raise
    except Exception as exc:  # a verifier bug must not pass for a wrong answer
        return infra_error(f"verifier raised {type(exc).__name__}: {str(exc)[:300]}")


def verify_many(verify, samples: Sequence[Sample], completions: Sequence[str], workers: int = 1) -> list[Reward]:
    """Rewards in order. Uses verify.batch (code: one parallel sandbox run) when there is one,
    else `workers` forked processes (math-verify's timers need each check in a main thread)."""
    global _pool_verify
    if hasattr(verify, "batch"):
        try:
            return verify.batch(samples, completions, workers=workers)
        except RewardError:
            raise
        except Exception as exc:
            return [infra_error(f"batch verifier raised {type(exc).__name__}: {exc}")] * len(samples)
    pairs = list(zip(samples, completions))
    if workers <= 1 or len(pairs) < 2 * workers or "fork" not in multiprocessing.get_all_start_methods():
        return [_safe_verify(verify, s, c) for s, c in pairs]
    _pool_verify = verify
    size = max(1, len(pairs) // (workers * 4))
    chunks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return [r for chunk in pool.map(_verify_chunk, chunks) for r in chunk]


def score_records(
    name: str, rows: Sequence[dict], completions: Sequence[Any], workers: int = 1, **task_kw
) -> list[Reward]:
    """One Reward per (record, completion): bad records and bad completions are bad_input."""
    verify, built = build_samples(name, rows, **task_kw)
    return score_built(verify, built, completions, workers)


def score_built(verify, built: Sequence[Sample | Reward], completions: Sequence[Any], workers: int = 1) -> list[Reward]:
    """score_records after build_samples: the Rewards already in `built` are kept."""
    rewards: list[Reward | None] = [None] * len(built)
    todo, texts = [], []
    for i, (item, completion) in enumerate(zip(built, completions)):
        if isinstance(item, Reward):
            rewards[i] = item
            continue
        try:
            texts.append(completion_text(completion))
            todo.append(i)
        except TypeError as exc:
            rewards[i] = bad_input(str(exc))
    for i, reward in zip(todo, verify_many(verify, [built[i] for i in todo], texts, workers)):
        rewards[i] = reward
    return rewards


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)) and prompt and isinstance(prompt[-1], dict):
        users = [m.get("content", "") for m in prompt if m.get("role") == "user"]
        return str(users[-1] if users else prompt[-1].get("content", ""))
    return str(prompt)


class _Fields(dict):
    """A sample's metadata taken from dataset columns; a missing one is a MissingColumn."""

    def __missing__(self, key):
        raise MissingColumn(key)


class MissingColumn(KeyError):
    pass


def reward_function(name: str, *, workers: int = 1, **task_kw) -> Callable[..., list[float | None]]:
    """A TRL-style reward function `f(prompts, completions, **columns) -> list[float | None]`.
    Each row's columns rebuild its sample: the task's record fields (e.g. gsm8k's `question`,
    `answer`), or else the scoring fields that `Task.to_hf_dataset()` writes (the sample's
    metadata, e.g. gsm8k's gold `answer`). None = not scorable; a row that lacks a column the
    verifier needs is None, with one warning per missing column naming it."""
    _build_kwargs(name, task_kw)  # unknown task or option: fail now, not mid-training
    warned: set[str] = set()

    def from_fields(verify, row: dict, completion: Any, record_error: str) -> float | None:
        sample = Sample(id=str(row.get("id", "")), prompt=str(row.get("prompt", "")), target="", metadata=_Fields(row))
        try:
            return json_value(verify(sample, completion_text(completion)))
        except MissingColumn as exc:
            column = exc.args[0]
            if column not in warned:
                warned.add(column)
                warnings.warn(
                    f"reward_function({name!r}): rows lack the column {column!r} "
                    f"(nor could they be read as records: {record_error}); their reward is None",
                    stacklevel=3,
                )
            return None
        except RewardError:
            raise
        except TypeError:  # a completion that is neither text nor chat messages
            return None
        except Exception as exc:
            return json_value(infra_error(f"verifier raised {type(exc).__name__}: {str(exc)[:300]}"))

    def reward(prompts=None, completions=None, **columns) -> list[float | None]:
        if completions is None:
            raise TypeError("reward function needs completions")
        n = len(completions)
        rows = []
        for i in range(n):
            row = {k: v[i] for k, v in columns.items() if isinstance(v, (list, tuple)) and len(v) == n}
            if prompts is not None and "prompt" not in row:
                row["prompt"] = _prompt_text(prompts[i])
            rows.append(row)
        verify, built = build_samples(name, rows, **task_kw)
        rewards = [json_value(r) for r in score_built(verify, built, completions, workers)]
        for i, item in enumerate(built):  # records that do not build: score from the scoring fields
            if isinstance(item, Reward) and item.status == BAD_INPUT:
                rewards[i] = from_fields(verify, rows[i], completions[i], item.details.get("error", ""))
        return rewards

    reward.__name__ = f"{name}_reward"
    reward.__qualname__ = reward.__name__
    return reward


# ---- CLI: `daca-bench verify` ----------------------------------------------------------------
def configure(parser) -> None:
    parser.add_argument("task", help="registered task name (see `daca-bench tasks`)")
    parser.add_argument("--input", required=True, help="JSONL: the task's fields plus `completion`")
    parser.add_argument("--output", required=True, help="JSONL: each input line plus `reward` and `status`")
    parser.add_argument("--workers", type=int, default=1, help="parallel verifier processes / sandbox workers")
    parser.add_argument("--shaping", choices=["d1"], default=None, help="d1-compatible reward shaping (off by default)")
    parser.add_argument("--timeout", type=float, default=None, help="per-answer time limit in seconds (task default)")
    parser.add_argument("--details", action="store_true", help="also write each reward's details")


def _read(path: str) -> list[tuple[int, Any, str | None]]:
    """(line number, record or the line's text, error) for every line, blank ones included."""
    out = []
    for line in read_jsonl(path):
        if line.error:
            out.append((line.number, line.text, line.error))
        elif not isinstance(line.record, dict):
            out.append((line.number, line.text, "line must be a JSON object"))
        elif "completion" not in line.record:
            out.append((line.number, line.record, "line has no `completion` field"))
        else:
            out.append((line.number, line.record, None))
    return out


def run(args) -> int:
    kw = {k: v for k, v in (("shaping", args.shaping), ("timeout", args.timeout)) if v is not None}
    try:
        _build_kwargs(args.task, kw)
    except (KeyError, TypeError) as exc:
        print(f"daca-bench verify: {_message(exc)}", file=sys.stderr)
        return 2
    lines = _read(args.input)
    out = open(args.output, "w", encoding="utf-8")  # a bad output path fails before the scoring
    good = [(i, rec) for i, (_, rec, err) in enumerate(lines) if err is None]
    rows = [{k: v for k, v in rec.items() if k != "completion"} for _, rec in good]
    rewards = score_records(args.task, rows, [rec["completion"] for _, rec in good], args.workers, **kw)
    by_line: dict[int, Reward] = {i: r for (i, _), r in zip(good, rewards)}
    statuses, values, bad = Counter(), [], 0
    with out:
        for i, (number, record, error) in enumerate(lines):
            reward = by_line.get(i) or bad_input(error)
            record = dict(record) if isinstance(record, dict) else {"line": number, "raw": record[:RAW_CHARS]}
            record["reward"], record["status"] = json_value(reward), reward.status
            if reward.status == BAD_INPUT:
                bad += 1
                record["error"] = f"{args.input}:{number}: {reward.details.get('error', '')}"
                print(f"{args.input}:{number}: bad_input: {reward.details.get('error', '')}", file=sys.stderr)
            if args.details:
                record["details"] = dict(reward.details)
            out.write(dumps_line(record))
            statuses[reward.status] += 1
            if record["reward"] is not None:
                values.append(record["reward"])
    shown = ", ".join(f"{s}={statuses[s]}" for s in STATUSES if statuses[s])
    if not lines:
        print(f"{args.task}: {args.input} has no lines: nothing to score ({args.output} is empty)")
    elif not values:
        print(f"{args.task}: {len(lines)} lines, none could be scored, so there is no mean reward; {shown}")
    else:
        print(
            f"{args.task}: {len(lines)} lines, accuracy {statuses['correct'] / len(values):.4f} (the share "
            f"correct), mean reward {sum(values) / len(values):.4f} over {len(values)} scored; {shown}"
        )
    if statuses[INFRA_ERROR]:
        print(
            f"warning: {statuses[INFRA_ERROR]} lines could not be scored (infrastructure failure, "
            "reward null); see their details with --details",
            file=sys.stderr,
        )
    return 2 if bad else 0

"""What a model reads, and how a protocol poses a task: each sample's prompt as one user message of
the chat template and its prefill, cut to the last N tokens as d1 does (`task_prompts`, for training
and evaluation alike); the task loaded as it declares the protocol (`load_task`), the prompts rebuilt
from a row's template and worked exemplars (`prompt_text`), and its answers read by the row's reader
before the task's verifier (`protocol_task`).

    texts = task_prompts(adapter, samples, chat=True, max_tokens=200)
    task = load_task("d1", "gsm8k", split="test", n=8)          # d1's system prompt and prefill
    posed = protocol_task("llada", get_task("gsm8k"), adapter, chat=True)

The prompt templates are written in this project's words; $DACA_BENCH_PROTOCOL_PROMPTS names a JSON file
{"llada": {"gsm8k": "..."}} with a user's own copy of a source's wording (not shipped here).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..types import Sample, Task
from .protocols import SHOT_IDS, row
from .readers import READERS

if TYPE_CHECKING:
    from ..adapter import ModelAdapter

PROMPTS_ENV = "DACA_BENCH_PROTOCOL_PROMPTS"


def chat_prompts(adapter: ModelAdapter, prompts: list[str], prefills: list[str] | None = None) -> list[str]:
    """Each prompt as one user message through the tokenizer's chat template, generation prompt
    added (d1), then its prefill: the start of the answer written for the model (d1's evaluation
    prompts end in `<reasoning>`)."""
    if not getattr(adapter.tokenizer, "chat_template", None):
        raise ValueError(f"{adapter.source}: the tokenizer has no chat template; set train.chat_template=false")
    prefills = prefills or [""] * len(prompts)
    return [
        adapter.tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
        )
        + f
        for p, f in zip(prompts, prefills)
    ]


def task_prompts(adapter: ModelAdapter, samples, chat: bool, max_tokens: int = 0) -> list[str]:
    """The prompts the model sees for these samples: each prompt (with `chat`: one user message of
    the chat template) followed by the sample's prefill (metadata["prefill"]: d1's `<reasoning>`); with
    `max_tokens`, cut to their last max_tokens tokens (d1 keeps the last 200 of a training prompt)."""
    prefills = [str(s.metadata.get("prefill", "")) for s in samples]
    texts = (
        chat_prompts(adapter, [s.prompt for s in samples], prefills)
        if chat
        else [s.prompt + f for s, f in zip(samples, prefills)]
    )
    return [truncate_prompt(adapter, t, max_tokens) for t in texts] if max_tokens else texts


def truncate_prompt(adapter: ModelAdapter, text: str, max_tokens: int) -> str:
    """`text` cut from the left to at most max_tokens tokens. The result encodes to exactly a
    suffix of text's tokens (a leading token that would not decode and re-encode alike is dropped too)."""
    ids = adapter.encode([text])[0]
    if len(ids) <= max_tokens:
        return text
    for start in range(len(ids) - max_tokens, len(ids)):
        cut = adapter.tokenizer.decode(ids[start:], skip_special_tokens=False)
        if adapter.encode([cut])[0] == ids[start:]:
            return cut
    return ""


def load_task(name: str, task: str, split: str = "test", n: int | None = None, seed: int = 0, **kw) -> Task:
    """TASK's SPLIT as protocol NAME poses it: the task's own declaration of the protocol where the row
    asks for one and the task makes one (gsm8k under d1: d1's system prompt, `<reasoning>` prefill and
    verdict; registry.register_protocol), else the task as registered."""
    from ..registry import get_task, task_protocols

    pose = row(name, task).pose
    if pose and pose in task_protocols(task):
        kw["protocol"] = pose
    return get_task(task, split=split, n=n, seed=seed, **kw)


def fields(task: str, s: Sample) -> dict:
    """The sample's raw fields (question; MBPP's text and tests; HumanEval's prompt), read back from the
    task's own prompt layout (tasks/math_reasoning.py PROMPT, tasks/programming.py MBPP_PROMPT)."""
    if task in ("gsm8k", "math500"):
        m = re.search(r"Problem: (.*)\n\Z", s.prompt, re.S)
        return {"question": m.group(1) if m else s.prompt}
    if task == "mbpp":
        m = re.match(r"(.*)\nYour code should pass these tests:\n(.*)\nWrite the Python code", s.prompt, re.S)
        return {"text": m.group(1), "tests": m.group(2)} if m else {"text": s.prompt, "tests": ""}
    return {"prompt": s.prompt}


def template(name: str, task: str) -> str:
    """The row's prompt template, or a user's copy of the source's wording ($DACA_BENCH_PROTOCOL_PROMPTS)."""
    ours = row(name, task).prompt
    file = os.environ.get(PROMPTS_ENV)
    if not file or not ours:
        return ours
    try:
        table = json.loads(Path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{PROMPTS_ENV}={file}: cannot read it as JSON ({exc})") from None
    text = (table.get(name) or {}).get(task) if isinstance(table, dict) else None
    return text if isinstance(text, str) else ours


def shot_answer(task: str, s: Sample) -> str:
    """A worked exemplar's answer in the source's layout: GSM8K's solution ending `The answer is N`, MBPP's
    reference code between [BEGIN] and [DONE]."""
    if task == "gsm8k":
        reasoning = re.sub(r"</?reasoning>|<answer>.*", "", s.target, flags=re.S).strip()
        return f"{reasoning}\nThe answer is {s.metadata['answer']}\n"
    code = re.sub(r"\A```python\n|\n```\Z", "", s.target)
    return f"[BEGIN]\n '{code}' \n[DONE] \n\n "


def messages(name: str, task: str, s: Sample, shots: list[Sample]) -> list[dict]:
    """The chat turns of one prompt: the shots as user / assistant pairs, then the question."""
    tpl = template(name, task)
    turns = []
    for shot in shots:
        turns += [
            {"role": "user", "content": tpl.format(**fields(task, shot))},
            {"role": "assistant", "content": shot_answer(task, shot)},
        ]
    return turns + [{"role": "user", "content": tpl.format(**fields(task, s))}]


def prompt_text(name: str, task: str, adapter, s: Sample, shots: list[Sample], chat: bool) -> str:
    """What the model reads. A row without a template: the task's prompt as `eval` always posed it (one user
    message of the chat template, then the sample's prefill). Else the turns through the chat template
    (generation prompt added) and the reply opening; without a template the turns' text joined, as
    OpenCompass's base-model path joins them."""
    r = row(name, task)
    if not r.prompt:
        return task_prompts(adapter, [s], chat)[0] + r.reply
    turns = messages(name, task, s, shots)
    if chat:
        return adapter.tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True) + r.reply
    return "".join(t["content"] for t in turns) + r.reply


def load_shots(name: str, task: str, k: int, seed: int) -> list[Sample]:
    """The k exemplars: MBPP's prompt-split tasks 2-4 (OpenCompass's three); for GSM8K the first k
    samples of the train split (OpenCompass's four are edited GSM8K train solutions; docs/evaluation.md)."""
    from ..registry import get_task

    if not k:
        return []
    split, ids = SHOT_IDS.get(task, ("train", ()))
    try:
        samples = list(get_task(task, split=split, seed=seed).samples)
    except Exception as exc:  # noqa: BLE001 - any failure to load the exemplars is one line
        raise ConfigError(
            f"--protocol {name}: {task} needs {k} worked examples from its {split} split, which "
            f"cannot be loaded ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
            f"give it with --data-file {split}=FILE"
        ) from None
    chosen = [s for s in samples if s.id.rsplit("/", 1)[-1] in ids] if ids else samples
    return (chosen or samples)[:k]


def protocol_task(name: str, task: Task, adapter, chat: bool, seed: int = 0) -> Task:
    """The task as the protocol poses and scores it: prompts rebuilt, answers read by the protocol's reader
    before the task's verifier (the reading goes to the reward's details["read"]). `chat` with a tokenizer that
    has no chat template is one ConfigError line (runner.chat_used decides the flag)."""
    r = row(name, task.name)
    shots = load_shots(name, task.name, r.shots, seed)
    if chat and not getattr(adapter.tokenizer, "chat_template", None):  # never a plain prompt recorded as chat
        raise ConfigError(f"{adapter.source}: the tokenizer has no chat template; pose the task with chat=False")
    samples = [replace(s, prompt=prompt_text(name, task.name, adapter, s, shots, chat)) for s in task.samples]
    read, verify = READERS[r.reader], task.verify
    if r.reader == "ours":
        return replace(task, samples=samples)

    def scored(s: Sample, completion: str):
        text = read(completion)
        reward = verify(s, text)
        return replace(reward, details={**reward.details, "read": text[:400]})

    return replace(task, samples=samples, verify=scored)

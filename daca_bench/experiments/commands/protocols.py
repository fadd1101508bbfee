"""Evaluation protocols of `daca-bench eval --protocol`: how the field's papers decode, prompt and score.

    d1     today's behaviour (d1's eval/eval.py): block 32, steps = length / 2, our task prompts
           (d1's system prompt and `<reasoning>` prefill on the *_d1 tasks), our verifiers
    llada  LLaDA's OpenCompass settings for LLaDA-8B-Instruct (ML-GSAI/LLaDA opencompass/examples):
           block = length, steps = length, its EOS rules, its prompts (in our words) and answer readings
    dare   DARE's OpenCompass settings for LLaDA-8B-Instruct (yjyddq/DARE opencompass/llada_examples):
           LLaDA's prompts and readings, shorter blocks for math, a prefix KV cache (which drops the EOS rules)

Every element and its source file:line is in docs/evaluation.md. The prompt templates are written in
this project's words; $DACA_BENCH_PROTOCOL_PROMPTS names a JSON file {"llada": {"gsm8k": "..."}} with a
user's own copy of a source's wording (not shipped here). A task the table does not list runs under a
protocol's generic row: the task's own prompt and verifier with the protocol's decoding rule.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ...errors import ConfigError
from ...rl.sampler import Suppress
from ...types import Sample, Task

PROMPTS_ENV = "DACA_BENCH_PROTOCOL_PROMPTS"


@dataclass(frozen=True)
class Row:
    """One protocol's settings for one task. block/steps None: equal to the length; "half": length / 2."""
    length: int
    block: int | None = None
    steps: int | str | None = None
    never: tuple[str, ...] = ()  # LLaDA's logits_eos_inf: token names ("eos", "eot") never chosen
    late: tuple[str, ...] = ()  # LLaDA's confidence_eos_eot_inf: committed last
    prompt: str = ""  # "" = the task's own prompt; else a template over the sample's fields
    shots: int = 0
    reply: str = ""  # the assistant turn's opening, written for the model (MBPP's [BEGIN])
    reader: str = "ours"  # how the answer is read before our verifier scores it (READERS)
    cache: str = "none"
    decode: str = "to_eos"  # to_eos: up to the first EOS; skip_special: every token but special ones


GSM8K = "Question: {question}\nLet us work it out step by step.\nAnswer:"
MATH = "{question}\nWork through it step by step, then write the final answer inside \\boxed{{}}."
HUMANEVAL = "Finish the following Python code:\n{prompt}"
MBPP = "You are a skilled Python programmer. Your task: {text} The code must pass these tests:\n\n {tests}  \n"
LLADA = {"gsm8k": Row(512, late=("eos", "eot"), prompt=GSM8K, shots=4, reader="last_number"),
         "math500": Row(512, late=("eos", "eot"), prompt=MATH, reader="boxed_or_sentence"),
         "humaneval": Row(512, never=("eos",), prompt=HUMANEVAL, reader="first_fence"),
         "mbpp": Row(256, late=("eos", "eot"), prompt=MBPP, shots=3, reply="[BEGIN]\n", reader="begin_done")}
PROTOCOLS = {
    "d1": {"*": Row(256, 32, "half")},
    "llada": {**{k: replace(v, decode="skip_special") for k, v in LLADA.items()},
              "*": Row(512, decode="skip_special")},
    # DARE sets use_cache=True in every LLaDA example: its model class then calls the prefix-cache generator,
    # which takes no EOS flags, so the flags its humaneval / mbpp examples set have no effect
    "dare": {"gsm8k": replace(LLADA["gsm8k"], length=256, block=8, late=(), cache="prefix", decode="skip_special"),
             "math500": replace(LLADA["math500"], block=64, late=(), cache="prefix", decode="skip_special"),
             "humaneval": replace(LLADA["humaneval"], never=(), cache="prefix", decode="skip_special"),
             "mbpp": replace(LLADA["mbpp"], late=(), cache="prefix", decode="skip_special"),
             "*": Row(512, cache="prefix", decode="skip_special")},
}
ALLOWS = {"d1": {"cache", "threshold"}, "llada": set(), "dare": {"cache", "threshold"}}  # what each source exposes
SHOT_IDS = {"mbpp": ("prompt", ("2", "3", "4"))}  # OpenCompass's three MBPP exemplars: the prompt split's tasks 2-4
BASE = {"gsm8k_d1": "gsm8k", "math500_d1": "math500"}


def parse(text: str) -> list[str]:
    """`d1,llada` -> ["d1", "llada"]; an unknown name is one ConfigError line."""
    names = [p.strip() for p in str(text).split(",") if p.strip()]
    bad = [n for n in names if n not in PROTOCOLS]
    if bad or not names:
        raise ConfigError(f"--protocol {text}: unknown protocol {', '.join(bad) or '(none)'}; "
                          f"choose from {', '.join(PROTOCOLS)} (several: --protocol d1,llada)")
    return list(dict.fromkeys(names))


def row(name: str, task: str) -> Row:
    table = PROTOCOLS[name]
    return table.get(task) or table.get(BASE.get(task, "")) or table["*"]


def canvas(name: str, task: str, length: int | None, block: int | None, steps: int | None) -> tuple[int, int, int]:
    """(length, block, steps) of a protocol on a task, each overridable (--gen-length, --block-length, --steps)."""
    r = row(name, task)
    L = length or r.length
    b = min(block or r.block or L, L)
    default = max(L // 2, L // b) if r.steps == "half" else (r.steps or L)
    return L, b, steps or default


def check_options(name: str, cache: str, threshold: float | None) -> None:
    """Refuse, in one line, a speed-up the protocol's source does not have (its numbers would not be its)."""
    asked = {"cache"} if cache != "none" else set()
    asked |= {"threshold"} if threshold is not None else set()
    refused = asked - ALLOWS[name]
    if refused:
        raise ConfigError(f"--protocol {name}: its source decodes without "
                          f"{' or '.join('a KV cache' if r == 'cache' else 'threshold decoding' for r in sorted(refused))}; "
                          f"drop {' '.join('--' + r for r in sorted(refused))}, or use --protocol d1 or dare")


def suppress(name: str, task: str, adapter, cache: str) -> Suppress | None:
    """The EOS rule as token ids: "eos" the model's EOS, "eot" the tokenizer's <|eot_id|> where it has
    one. Only the uncached path of the sources applies the rules (LLaDA's generate.py; DARE's cache drops them)."""
    r = row(name, task)
    if cache != "none" or not (r.never or r.late):
        return None
    ids = {"eos": [adapter.eos_token_id], "eot": _token_id(adapter.tokenizer, "<|eot_id|>")}
    pick = lambda names: tuple(sorted({i for n in names for i in ids[n]}))  # noqa: E731
    return Suppress(pick(r.never), pick(r.late))


def _token_id(tokenizer, token: str) -> list[int]:
    i = tokenizer.convert_tokens_to_ids(token)
    return [] if i is None or i == getattr(tokenizer, "unk_token_id", None) else [int(i)]


def fields(task: str, s: Sample) -> dict:
    """The sample's raw fields (question; MBPP's text and tests; HumanEval's prompt), read back from the
    task's own prompt layout (tasks/math_reasoning.py PROMPT, tasks/programming.py MBPP_PROMPT)."""
    base = BASE.get(task, task)
    if base in ("gsm8k", "math500"):
        m = re.search(r"Problem: (.*)\n\Z", s.prompt, re.S)
        if task in BASE and "\n\n" in s.prompt:  # the *_d1 tasks: d1's system prompt, a blank line, the question
            return {"question": s.prompt.split("\n\n", 1)[1]}
        return {"question": m.group(1) if m else s.prompt}
    if base == "mbpp":
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
    text = (table.get(name) or {}).get(BASE.get(task, task)) if isinstance(table, dict) else None
    return text if isinstance(text, str) else ours


def shot_answer(task: str, s: Sample) -> str:
    """A worked exemplar's answer in the source's layout: GSM8K's solution ending `The answer is N`, MBPP's
    reference code between [BEGIN] and [DONE]."""
    base = BASE.get(task, task)
    if base == "gsm8k":
        reasoning = re.sub(r"</?reasoning>|<answer>.*", "", s.target, flags=re.S).strip()
        return f"{reasoning}\nThe answer is {s.metadata['answer']}\n"
    code = re.sub(r"\A```python\n|\n```\Z", "", s.target)
    return f"[BEGIN]\n '{code}' \n[DONE] \n\n "


def messages(name: str, task: str, s: Sample, shots: list[Sample]) -> list[dict]:
    """The chat turns of one prompt: the shots as user / assistant pairs, then the question."""
    tpl = template(name, task)
    turns = []
    for shot in shots:
        turns += [{"role": "user", "content": tpl.format(**fields(task, shot))},
                  {"role": "assistant", "content": shot_answer(task, shot)}]
    return turns + [{"role": "user", "content": tpl.format(**fields(task, s))}]


def prompt_text(name: str, task: str, adapter, s: Sample, shots: list[Sample], chat: bool) -> str:
    """What the model reads. A row without a template: the task's prompt as `eval` always posed it (one user
    message of the chat template, then the sample's prefill). Else the turns through the chat template
    (generation prompt added) and the reply opening; without a template the turns' text joined, as
    OpenCompass's base-model path joins them."""
    from ...models import task_prompts

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
    from ...registry import get_task

    if not k:
        return []
    base = BASE.get(task, task)
    split, ids = SHOT_IDS.get(base, ("train", ()))
    try:
        samples = list(get_task(base, split=split, seed=seed).samples)
    except Exception as exc:  # noqa: BLE001 - any failure to load the exemplars is one line
        raise ConfigError(f"--protocol {name}: {task} needs {k} worked examples from its {split} split, which "
                          f"cannot be loaded ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                          f"give it with --data-file {split}=FILE") from None
    chosen = [s for s in samples if s.id.rsplit("/", 1)[-1] in ids] if ids else samples
    return (chosen or samples)[:k]


# ---- the answer readings: the source's post-processing, then our verifier on what it read ----------
def _last_number(text: str) -> str:
    found = re.findall(r"-?\d+\.\d+|-?\d+", text.split("Question:")[0])
    return f"<answer>\n{found[-1]}\n</answer>" if found else ""


def _boxed_or_sentence(text: str) -> str:
    from ...rewards.answers import last_boxed

    found = last_boxed(text)
    if found is None:
        parts = text.split(".")
        found = next((p for p in parts if re.search("final answer|answer is", p.lower())), parts[0])
    return f"<answer>\n{found.strip()}\n</answer>"


def _first_fence(text: str) -> str:
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.S)
    return "```python\n" + (blocks[0] if blocks else text).lstrip() + "\n```"


def _begin_done(text: str) -> str:
    """Our reading of OpenCompass's MBPP cascade: the code between the BEGIN / DONE markers (brackets and
    quotes optional), else a fenced block, else what follows BEGIN, else the whole text."""
    for pattern in (r"\[?BEGIN\]?\s*'?(.*?)'?\s*\[?DONE\]?", r"```(?:python)?\s*(.*?)\s*```", r"\[?BEGIN\]?\s*'?(.*)"):
        m = re.search(pattern, text, re.S)
        if m and m.group(1).strip():
            text = m.group(1)
            break
    return "```python\n" + text.replace("\r\n", "\n").strip() + "\n```"


READERS = {"ours": lambda t: t, "last_number": _last_number, "boxed_or_sentence": _boxed_or_sentence,
           "first_fence": _first_fence, "begin_done": _begin_done}


def protocol_task(name: str, task: Task, adapter, chat: bool, seed: int = 0) -> Task:
    """The task as the protocol poses and scores it: prompts rebuilt, answers read by the protocol's reader
    before the task's verifier (the reading goes to the reward's details["read"])."""
    r = row(name, task.name)
    shots = load_shots(name, task.name, r.shots, seed)
    chat = chat and bool(getattr(adapter.tokenizer, "chat_template", None))
    samples = [replace(s, prompt=prompt_text(name, task.name, adapter, s, shots, chat)) for s in task.samples]
    read, verify = READERS[r.reader], task.verify
    if r.reader == "ours":
        return replace(task, samples=samples)

    def scored(s: Sample, completion: str):
        text = read(completion)
        reward = verify(s, text)
        return replace(reward, details={**reward.details, "read": text[:400]})

    return replace(task, samples=samples, verify=scored)

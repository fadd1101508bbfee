"""Answer extraction: find the answer inside a model completion, one rule per family.

The rules (documented in tasks/README.md) are shared by every task so that one reading of a
completion holds across the benchmark:
  1. the answer is the content of the LAST `<answer>...</answer>` (multi-line allowed); an
     empty pair is no answer, non-empty content is the answer even if it is unusable (wrong);
  2. otherwise, per family: math -> last `\\boxed{}` (balanced braces), then `#### x`, then the
     last number; sudoku -> last run of N*N digits (separators ignored); json -> last fenced
     ```json block, else the first balanced JSON value; code -> last fenced python block, else
     the completion itself (a continuation of the prompt). Countdown's expression finder lives
     in tasks/countdown.py.
Every function returns None when it finds nothing: the task then says `no_answer`.
    >>> last_boxed(r"so \\boxed{\\frac{1}{2}} and \\boxed{3}")
    '3'
"""

from __future__ import annotations

import json
import re

# DOTALL: the answer may span lines; non-greedy inside, the last match wins.
_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_HASH = re.compile(r"####\s*([^\n]*)")
# A number: optional sign not glued to a word or a digit before it, thousands groups or plain
# digits, optional decimals; or a leading-dot decimal. A slash joins a fraction a/b.
_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+"
_NUMBER = re.compile(rf"(?<![\w.])(?:[-\u2212](?=[\d.]))?(?:{_NUM})(?:\s*/\s*(?:{_NUM}))?")
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_SUDOKU_SEPARATORS = set(" \t\r\n,;|_-+[]()")


def tagged(text: str) -> str | None:
    """Content of the last `<answer>...</answer>`, stripped; None when there is no such pair."""
    found = _TAG.findall(text)
    return found[-1].strip() if found else None


def balanced(text: str, start: int, open_: str = "{", close: str = "}") -> int | None:
    """Index just past the bracket that closes the one at `start`, or None if it never closes.
    Escaped brackets (`\\{`, `\\}` in LaTeX) do not count."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def last_boxed(text: str) -> str | None:
    r"""Content of the last `\boxed{...}` (or `\fbox{...}`) with balanced braces."""
    best = None
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        end = balanced(text, m.end() - 1)
        if end is not None:
            best = text[m.end() : end - 1].strip()
    return best


def hash_answer(text: str) -> str | None:
    """What follows the last `#### ` marker (GSM8K's convention), or None."""
    found = [s.strip() for s in _HASH.findall(text)]
    found = [s for s in found if s]
    return found[-1] if found else None


def numbers(text: str) -> list[str]:
    """Every number in the text, in order (thousands commas kept; a/b fractions whole)."""
    return [m.group(0).replace("\u2212", "-") for m in _NUMBER.finditer(text)]


def last_number(text: str) -> str | None:
    found = numbers(text)
    return found[-1] if found else None


def math_answer(completion: str) -> tuple[str | None, str]:
    """(answer string, how it was found). Inside tags a `\\boxed{}` still wins over the rest."""
    inner = tagged(completion)
    if inner is not None:
        boxed = last_boxed(inner)
        if boxed is not None:
            return boxed, "tag+boxed"
        return (inner, "tag") if inner else (None, "empty_tag")
    for rule, fn in (("boxed", last_boxed), ("hash", hash_answer), ("last_number", last_number)):
        found = fn(completion)
        if found:
            return found, rule
    return None, "none"


def gold_math_answer(answer: str) -> str:
    """A dataset's gold field: GSM8K `... #### 72` -> `72`, `\\boxed{x}` -> `x`, else as given."""
    text = str(answer)
    for fn in (hash_answer, last_boxed):
        found = fn(text)
        if found:
            return found
    return text.strip()


def digit_run(text: str, count: int) -> str | None:
    """The last run of at least `count` digits, separators ignored; its last `count` digits.

    Separators are whitespace and , ; | _ - + [ ] ( ); any other character ends a run.
    """
    best, run = None, []
    for ch in text + "\x00":
        if ch.isdigit() and ch.isascii():
            run.append(ch)
        elif ch in _SUDOKU_SEPARATORS:
            continue
        else:
            if len(run) >= count:
                best = "".join(run[-count:])
            run = []
    return best


def fenced_blocks(text: str, languages: tuple[str, ...] | None = None) -> list[str]:
    """Bodies of the complete ``` fenced blocks, in order, optionally only these languages
    (an untagged fence counts as any language)."""
    out = []
    for m in _FENCE.finditer(text):
        lang = m.group(1).lower()
        if languages is None or lang in languages or lang == "":
            out.append(m.group(2))
    return out


def first_json_value(text: str) -> tuple[str | None, bool]:
    """(candidate text, found): the whole stripped text if it is JSON (a string may hold brackets),
    else the first balanced {...} or [...] (string-aware). found=False means nothing JSON-like was there."""
    stripped = text.strip()
    if stripped:
        try:
            loads_strict(stripped)
            return stripped, True
        except (ValueError, RecursionError):
            pass
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    for start in sorted(starts):
        end = _json_end(text, start)
        if end is not None:
            return text[start:end], True
    if starts:  # an opening bracket that never closes: an answer, but not valid JSON
        return text[min(starts) :].strip(), True
    return None, False


def _json_end(text: str, start: int) -> int | None:
    depth, in_str, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def json_answer(completion: str) -> tuple[str | None, str]:
    """(JSON text, how it was found) under rule 1 then the json rule."""
    inner = tagged(completion)
    if inner == "":
        return None, "empty_tag"
    text = completion if inner is None else inner
    how = "" if inner is None else "tag+"
    blocks = fenced_blocks(text, ("json", "json5", "jsonc"))
    if blocks:
        return blocks[-1].strip(), how + "fence"
    candidate, found = first_json_value(text)
    if found:
        return candidate, how + "value"
    return (inner, "tag") if inner else (None, "none")  # tagged non-JSON: an answer, invalid


def loads_strict(text: str):
    """json.loads that refuses NaN/Infinity (not JSON) and duplicate keys (ambiguous)."""

    def no_constants(name):
        raise ValueError(f"{name} is not valid JSON")

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError(f"duplicate key in object: {sorted({k for k in keys if keys.count(k) > 1})}")
        return dict(pairs)

    return json.loads(text, parse_constant=no_constants, object_pairs_hook=no_duplicates)


def code_answer(completion: str) -> tuple[str, str]:
    """(code, how): the last fenced python (or untagged) block; else the tail after an unclosed
    ```python fence; else the completion itself up to a dangling bare ``` (a continuation of
    the prompt, closing the block the prompt may have opened)."""
    inner = tagged(completion)
    text = completion if inner is None else inner
    how = "" if inner is None else "tag+"
    blocks = list(_FENCE.finditer(text))
    python = [m.group(2) for m in blocks if m.group(1).lower() in ("python", "py", "python3", "")]
    if python:
        return python[-1], how + "fence"
    tail_start = blocks[-1].end() if blocks else 0
    m = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n").search(text, tail_start)  # a bare ``` closes
    if m:
        return text[m.end() :], how + "open_fence"
    cut = text.find("```", tail_start)
    return (text[:cut] if cut >= 0 else text), how + "continuation"


# ---- d1's readings (dllm-reasoning/d1), re-implemented so that d1's numbers can be shown beside ours ----
# They are deliberately NOT the rules above: d1 reads the first `\boxed{...}` on one line for GSM8K,
# the text after the last `<answer>` for its training rewards, and the whole completion when a
# math answer has no box. docs/paper-presets.md lists where each rule sits in d1's code.
_D1_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)  # case-sensitive, as d1's
_D1_SPECIAL = re.compile(r"<\|[A-Za-z0-9_]+\|>")


def d1_plain(text: str) -> str:
    """The completion as d1's training rewards see it: decoded without special tokens
    (`<|eot_id|>` and the like removed)."""
    return _D1_SPECIAL.sub("", text)


def d1_xml_answer(text: str) -> str:
    """d1's training reading: what follows the last `<answer>` up to the next `</answer>`,
    stripped; the whole text (stripped) when there is no `<answer>`."""
    tail = text.rsplit("<answer>", 1)[-1]
    return tail.split("</answer>", 1)[0].strip()


def d1_first_tag(text: str) -> str | None:
    """d1's evaluation fallback: the FIRST `<answer>...</answer>` (multi-line), stripped."""
    m = _D1_TAG.search(text)
    return m.group(1).strip() if m else None


def d1_last_tag(text: str) -> str | None:
    """d1's training reading for countdown and sudoku: the LAST `<answer>...</answer>`, stripped."""
    found = _D1_TAG.findall(text)
    return found[-1].strip() if found else None


def d1_boxed(text: str) -> str | None:
    r"""d1's `\boxed` reading (its math and countdown parsers): the content of the last
    `\boxed{...}`; with a `\boxed ` (space) anywhere, what follows the last one up to a `$`;
    the WHOLE text when there is neither `\boxed` nor `\fbox`; an `\fbox{...}` whole. None
    where d1's reading fails (the last box never closes), which d1 treats as "no box"."""
    if "\\boxed " in text:
        return text.split("\\boxed ")[-1].split("$")[0]
    start = text.rfind("\\boxed")
    if start < 0:
        start = text.rfind("\\fbox")
        if start < 0:
            return text
    depth, end = 0, None
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                end = i
                break
    if end is None:
        return None
    box = text[start : end + 1]
    return box[len("\\boxed{") : -1] if box.startswith("\\boxed{") else box


_D1_BOX_ON_A_LINE = re.compile(r"\\boxed{(.*?)}")
_D1_NUMBER = re.compile(r"-?\d+\.?\d*")


def _d1_float(text: str, last: bool) -> float | None:
    try:
        return float(text)
    except ValueError:
        found = _D1_NUMBER.findall(text)
        return float(found[-1 if last else 0]) if found else None


def d1_gsm8k_answer(completion: str) -> float | None:
    r"""d1's GSM8K evaluation reading: the first `\boxed{...}` on one line whose content is a
    number (else its first number), skipping empty and `...` boxes; else the first
    `<answer>` pair's content as a number (else its last number); else None."""
    for content in _D1_BOX_ON_A_LINE.findall(completion):
        content = content.strip()
        if not content or set(content) == {"."}:
            continue
        value = _d1_float(content, last=False)
        if value is not None:
            return value
    inner = d1_first_tag(completion)
    return _d1_float(inner, last=True) if inner else None


def d1_gsm8k_gold(answer: str) -> float | None:
    """d1's GSM8K gold: the number after `####` (a `$` and thousands commas allowed)."""
    m = re.search(r"####\s*\$?([\d,]+(?:\.\d+)?)", str(answer))
    if m is None:  # our records keep the gold without its marker
        m = re.search(r"^\s*\$?([\d,]+(?:\.\d+)?)", str(answer))
    return float(m.group(1).replace(",", "")) if m else None

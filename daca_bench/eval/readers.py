"""The protocols' answer readings: each source's post-processing of a reply (LLaDA's and DARE's
OpenCompass configs), written in this project's words from the behaviour of the sources' code, before our
own verifier scores what it read.

    READERS["last_number"]("... so 3 + 4 = 7.")          # -> "<answer>\n7\n</answer>"
    READERS["begin_done"](" 'def f(): return 1' \n[DONE]")  # MBPP after the prefilled [BEGIN] -> the code

`ours` reads nothing (the task's verifier sees the reply); each source and file:line is in docs/evaluation.md.
"""

from __future__ import annotations

import re


def _last_number(text: str) -> str:
    """OC datasets/gsm8k.py gsm8k_postprocess: the last number of the text before any `Question:`."""
    found = re.findall(r"-?\d+\.\d+|-?\d+", text.split("Question:")[0])
    return f"<answer>\n{found[-1]}\n</answer>" if found else ""


def _oc_last_box(text: str) -> str | None:
    r"""OC datasets/math.py extract_boxed_answer: the last `\boxed` (else `\fbox`) occurrence must open a
    `\boxed{...}` that closes; else None. One pair of doubled braces is stripped ({{x}} -> x)."""
    start = text.rfind("\\boxed")
    start = text.rfind("\\fbox") if start < 0 else start
    if start < 0 or not text.startswith("\\boxed{", start):
        return None
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if text[i] == "}" and depth == 0:
            inner = text[start + len("\\boxed{") : i]
            doubled = re.fullmatch(r"\{(.*)\}", inner, re.S)
            return doubled.group(1) if doubled else inner
    return None


def _final_sentence(sentence: str) -> str:
    """The part of OC's normalize_final_answer that picks the answer out of a sentence: spaces and line
    breaks dropped, \\text / \\textbf / \\overline / \\boxed unwrapped, then what follows the last `answer is` (or `answeris:`), a box's content, a $...$."""
    s = re.sub(r"\s+|\\ ", "", sentence)
    for wrapper in ("text", "textbf", "overline"):
        s = re.sub(rf"\\{wrapper}\{{(.*?)\}}", r"\1", s)
    s = re.sub(r"\\boxed\{(.*)\}", r"\1", s)
    for pattern in (r"finalansweris(.*)", r"answer?is:?(.*)", r"oxed\{(.*?)\}", r"\$(.*?)\$"):
        found = re.findall(pattern, s)
        s = found[-1] if found else s
    return s.replace("$", "").strip()


def _boxed_or_sentence(text: str) -> str:
    """OC math_postprocess_v2: the last box (an empty one counts as none), else the first `.`-separated
    piece naming "final answer" / "answer is", else the first piece; the sentence's answer picked out."""
    found = _oc_last_box(text)
    if not found:
        parts = text.split(".")
        found = _final_sentence(next((p for p in parts if re.search("final answer|answer is", p.lower())), parts[0]))
    return f"<answer>\n{found.strip()}\n</answer>"


def _first_fence(text: str) -> str:
    """OC humaneval_postprocess_v2: the first fenced block of any language, else the text; left-stripped."""
    blocks = re.findall(r"```\w*\n(.*?)```", text, re.S)
    return "```python\n" + (blocks[0] if blocks else text).lstrip() + "\n```"


def _mbpp_patterns() -> list[str]:
    """OpenCompass's MBPP cascade in its order: the code between a BEGIN and a DONE marker (each bracketed or
    not), first quoted on both sides, then opened by a quote, then unquoted; then a fenced block (closed,
    then open to the end); then what precedes a fence; then what follows [BEGIN]; then a quoted program
    before [DONE] (the reply to a prompt that already ends with [BEGIN])."""
    ends = [(b, d) for d in (r"\[DONE\]", "DONE") for b in (r"\[BEGIN\]", "BEGIN")]
    quoted = [f"{b}\\s*'(.*)'\\s*{d}" for b, d in ends] + [f"{b}\\s*'(.*)\\s*{d}" for b, d in ends]
    plain = [f"{b}\\s*(.*)\\s*{d}" for b, d in ends]
    fenced = [f"```{lang}\\s*(.*)\\s*{end}" for end in ("```", "$") for lang in ("python", "")]
    return quoted + plain + fenced + [r"(.*)\s*```.*", r"\[BEGIN\]\s*'(.*)", r"\[BEGIN\](.*)", r"'(.*)'\s*\[DONE\]"]


MBPP_PATTERNS = [re.compile(p, re.S) for p in _mbpp_patterns()]


def _begin_done(text: str) -> str:
    """LLaDA's copy of OpenCompass's MBPPEvaluator reading: the first pattern of the cascade that matches
    (greedy, across lines) gives the code; then it is cut at the first fence and at the first DONE marker
    (with a quote, spaces and bracket before it), `\\_` unescaped, stripped, and one quote dropped at
    each end. The program goes to our sandbox as a fenced block."""
    for pattern in MBPP_PATTERNS:
        m = pattern.search(text)
        if m:
            text = m.group(1)
            break
    text = re.split(r"'?\s*\[?DONE\]?", text.split("```")[0])[0].replace("\\_", "_").strip()
    text = text[1:] if text.startswith("'") else text
    text = text[:-1] if text.endswith("'") else text
    return "```python\n" + text.replace("\r\n", "\n") + "\n```"


READERS = {
    "ours": lambda t: t,
    "last_number": _last_number,
    "boxed_or_sentence": _boxed_or_sentence,
    "first_fence": _first_fence,
    "begin_done": _begin_done,
}

"""Math answer equivalence: exact rationals for plain numbers, `math-verify` for the rest.

`equivalent(gold, answer, timeout=5.0)` is True iff the two answers are the same value. Plain
numbers (`72`, `1,000`, `-3.50`, `3/4`, `$72.`) compare as exact fractions; anything else goes
through math-verify (LaTeX and expressions, via sympy), then a normalised-string comparison
(for answers such as `\\text{(C)}` that sympy cannot read).

math-verify's own timeouts use signal.alarm, which raises outside the main thread, so they are
switched off here and this module enforces its own: in the main thread with an interval timer,
elsewhere by running the check in a one-process helper pool. A check past its time raises
MathTimeout (the task scores it 0 with status `timeout`).
"""
from __future__ import annotations

import re
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from fractions import Fraction

MAX_CHARS = 2000  # longer answers are cut before sympy sees them (bounded work)


class MathTimeout(Exception):
    """The equivalence check ran past its time limit."""


class _Alarm(BaseException):  # BaseException: math-verify's `except Exception` must not eat it
    pass


_PLAIN = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:/(?:\d+))?")


def as_number(text: str) -> Fraction | None:
    """`72`, `-1,000.5`, `$72.`, `3/4`, `\\$5` -> Fraction; anything else -> None."""
    s = str(text).strip().replace("\u2212", "-").replace("\\$", "").replace("$", "")
    s = s.replace("\\!", "").replace("{,}", ",").strip().rstrip(".").strip()
    if not s or not _PLAIN.fullmatch(s) or not any(c.isdigit() for c in s.split("/")[0]):
        return None
    try:
        if "/" in s:
            num, den = s.split("/")
            return Fraction(num.replace(",", "")) / Fraction(den)
        return Fraction(s.replace(",", ""))
    except (ValueError, ZeroDivisionError):
        return None


_STRIP = [r"\left", r"\right", r"\!", r"\,", r"\;", r"\:", r"\displaystyle", r"^\circ", r"^{\circ}",
          "$", " ", "\n", "\t"]


def normalize(text: str) -> str:
    """A formatting-free spelling used as the last, string-level comparison."""
    s = str(text)
    for tok in _STRIP:
        s = s.replace(tok, "")
    s = re.sub(r"\\(?:text|textbf|mathrm|mathbf|mbox|operatorname)\{([^{}]*)\}", r"\1", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").rstrip(".")
    if re.fullmatch(r"\(([A-Za-z0-9]+)\)", s):
        s = s[1:-1]
    return s


def _check(gold: str, answer: str) -> bool:
    gold, answer = str(gold)[:MAX_CHARS], str(answer)[:MAX_CHARS]
    g, a = as_number(gold), as_number(answer)
    if g is not None and a is not None:
        return g == a
    from math_verify import parse, verify  # heavy import (sympy), only when needed

    gold_parsed = parse("\\boxed{" + gold + "}", parsing_timeout=None) or parse(gold, parsing_timeout=None)
    answer_parsed = (parse(answer, parsing_timeout=None) or parse("$" + answer + "$", parsing_timeout=None)
                     or parse("\\boxed{" + answer + "}", parsing_timeout=None))
    if gold_parsed and answer_parsed and verify(gold_parsed, answer_parsed, timeout_seconds=None):
        return True
    return normalize(gold) == normalize(answer) != ""


def _check_with_alarm(gold: str, answer: str, timeout: float) -> bool | None:
    """Run _check in the main thread under an interval timer; None on timeout."""
    def on_alarm(signum, frame):
        raise _Alarm()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return _check(gold, answer)
    except _Alarm:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def _helper() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            import multiprocessing
            _pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        return _pool


def _reset_helper() -> None:
    global _pool
    with _pool_lock:
        if _pool is not None:
            for proc in list(getattr(_pool, "_processes", {}).values()):
                proc.kill()
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None


def equivalent(gold: str, answer: str, timeout: float = 5.0) -> bool:
    """True iff `answer` is the same mathematical value as `gold`; MathTimeout past `timeout` s."""
    if threading.current_thread() is threading.main_thread():
        result = _check_with_alarm(gold, answer, timeout)
    else:
        try:
            result = _helper().submit(_check_with_alarm, gold, answer, timeout).result(timeout + 30)
        except FutureTimeout:
            _reset_helper()
            result = None
    if result is None:
        raise MathTimeout(f"equivalence check over {timeout:g}s")
    return result

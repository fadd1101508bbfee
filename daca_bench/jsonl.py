"""Line-faithful JSONL: the one reader every command that reads JSONL uses, and the one writer
of JSONL lines.

    for line in read_jsonl("completions.jsonl"):   # one Line per input line, blank ones included
        line.number, line.record, line.error         # error: None, or why the line is bad
    out.write(dumps_line(record))                    # valid UTF-8 JSON, whatever the strings hold

The file is read as bytes and each line is decoded on its own, so a bad byte, a line that is
not JSON, a number past Python's digit limit or a blank line spoils only its own line.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Line:
    number: int  # 1-based line number in the file
    record: Any  # the parsed JSON value (None when error is set)
    error: str | None  # None for a good line, else the reason ("blank line", "not UTF-8 ...", "not JSON ...")
    text: str  # the line as text (undecodable bytes replaced), for reporting a bad line


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def parse_line(raw: bytes, number: int) -> Line:
    """One line of bytes (without its newline) -> a Line; never raises."""
    raw = raw[:-1] if raw.endswith(b"\r") else raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Line(
            number, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})", raw.decode("utf-8", errors="replace")
        )
    if not text.strip():
        return Line(number, None, "blank line", text)
    try:
        return Line(number, json.loads(text, parse_constant=_reject_constant), None, text)
    except RecursionError:
        return Line(number, None, "not JSON: nested too deeply", text)
    except ValueError as exc:  # JSONDecodeError, and the int-digits limit of huge numbers
        return Line(number, None, f"not JSON: {str(exc)[:200]}", text)


def read_jsonl(path: str | Path) -> list[Line]:
    """Every line of the file, in order (a final newline ends the last line; it adds none)."""
    return parse_jsonl(Path(path).read_bytes())


def parse_jsonl(data: bytes) -> list[Line]:
    """read_jsonl of a file's bytes already read (a packed run's record, say)."""
    chunks = data.split(b"\n")
    if chunks and chunks[-1] == b"":
        chunks.pop()
    return [parse_line(raw, i) for i, raw in enumerate(chunks, 1)]


def _finite(value: Any) -> Any:
    """NaN and infinities (not JSON) as null, anywhere in a record."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps_line(record: Any) -> str:
    """One JSONL line (with its newline) that is valid JSON and valid UTF-8: non-ASCII text stays
    readable, a record holding a lone surrogate is written with \\u escapes instead, NaN as null."""
    try:
        text = json.dumps(record, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        record = _finite(record)
        text = json.dumps(record, ensure_ascii=False, default=str, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(record, ensure_ascii=True, default=str, allow_nan=False)
    return text + "\n"


def column_means(path: str | Path | list[Line], keys) -> dict[str, float]:
    """key -> mean of its numeric values over a metrics JSONL file's records (one read; NaN where the
    file or the key is missing): a run's metrics.jsonl summarised. PATH: the file, or its Lines read."""
    vals: dict[str, list[float]] = {k: [] for k in keys}
    if isinstance(path, list) or Path(path).exists():
        for line in path if isinstance(path, list) else read_jsonl(path):
            if isinstance(line.record, dict):
                for k in keys:
                    v = line.record.get(k)
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        vals[k].append(float(v))
    return {k: sum(v) / len(v) if v else math.nan for k, v in vals.items()}

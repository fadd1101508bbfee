"""JSON-schema adherence: does a completion's JSON value validate under a schema?

The schema's declared draft (`$schema`) picks the validator, 2020-12 by default, and formats
are ASSERTED: jsonschema only checks the formats whose optional packages are installed and
silently passes the rest, so this module adds strict checkers of its own for date-time, time,
duration, hostname, uri, uri-reference, iri, iri-reference, json-pointer and
relative-json-pointer. Unknown (custom) formats are annotations, as the specification says.
    score_json({"type": "integer"}, "<answer>3</answer>").status  # 'correct'
"""
from __future__ import annotations

import datetime as _dt
import json
import re
from functools import lru_cache

from ..types import Reward
from .answers import json_answer, loads_strict
from .scoring import bad_input, correct_if, no_answer, wrong

_DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))")
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))")
_DURATION = re.compile(r"P(?:\d+W|(?=\d|T\d)(?:\d+Y)?(?:\d+M)?(?:\d+D)?(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+S)?)?)")
_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`]*")
_URI_REF = re.compile(r"[^\s<>\"{}|\\^`]*")
_POINTER = re.compile(r"(?:/(?:[^~/]|~[01])*)*")
_REL_POINTER = re.compile(r"(?:0|[1-9]\d*)(?:#|(?:/(?:[^~/]|~[01])*)*)")


def _times_ok(h, m, s, oh=None, om=None) -> bool:
    return int(h) < 24 and int(m) < 60 and int(s) <= 60 and (oh is None or (int(oh) < 24 and int(om) < 60))


def _date_time(v: str) -> bool:
    m = _DATE_TIME.fullmatch(v)
    if not m:
        return False
    try:
        _dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return False
    return _times_ok(m[4], m[5], m[6], m[9], m[10])


def _time(v: str) -> bool:
    m = _TIME.fullmatch(v)
    return bool(m) and _times_ok(m[1], m[2], m[3], m[6], m[7])


def _hostname(v: str) -> bool:
    name = v[:-1] if v.endswith(".") else v
    return 0 < len(name) <= 253 and all(_LABEL.fullmatch(label) for label in name.split("."))


_OWN_FORMATS = {
    "date-time": _date_time, "time": _time, "duration": lambda v: bool(_DURATION.fullmatch(v)),
    "hostname": _hostname, "uri": lambda v: bool(_URI.fullmatch(v)),
    "uri-reference": lambda v: bool(_URI_REF.fullmatch(v)), "iri": lambda v: bool(_URI.fullmatch(v)),
    "iri-reference": lambda v: bool(_URI_REF.fullmatch(v)),
    "json-pointer": lambda v: bool(_POINTER.fullmatch(v)),
    "relative-json-pointer": lambda v: bool(_REL_POINTER.fullmatch(v)),
}


@lru_cache(maxsize=None)
def format_checker(validator_cls):
    """The draft's own format checker plus ours for every format it would leave unchecked."""
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())
    checker.checkers = dict(validator_cls.FORMAT_CHECKER.checkers)
    for name, fn in _OWN_FORMATS.items():
        if name not in checker.checkers:
            checker.checks(name)(lambda v, fn=fn: not isinstance(v, str) or fn(v))
    return checker


def load_schema(raw):
    """A schema from a dict, a bool, or its JSON text; ValueError otherwise."""
    if isinstance(raw, str):
        raw = json.loads(raw)
    if not isinstance(raw, (dict, bool)):
        raise ValueError(f"a schema must be a JSON object or boolean, not {type(raw).__name__}")
    return raw


def validator(schema):
    """A validator for the schema's declared draft (2020-12 by default); SchemaError if the
    schema itself is not valid under its draft's metaschema."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, format_checker=format_checker(cls))


@lru_cache(maxsize=4096)
def _cached_validator(schema_text: str):
    return validator(json.loads(schema_text))


def score_json(schema, completion: str, max_errors: int = 5) -> Reward:
    """1 iff the completion's JSON value (answers.json_answer) validates under `schema`."""
    from jsonschema.exceptions import SchemaError
    from referencing.exceptions import Unresolvable

    try:
        schema = load_schema(schema)
        check = _cached_validator(json.dumps(schema, sort_keys=True))
    except (ValueError, SchemaError) as exc:
        return bad_input(f"bad schema: {str(exc).splitlines()[0][:200]}")
    text, rule = json_answer(completion)
    if text is None:
        return no_answer(rule=rule)
    try:
        value = loads_strict(text)
    except (ValueError, RecursionError) as exc:
        return wrong("invalid_json", error=str(exc)[:200], rule=rule)
    try:
        errors = [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:160]}"
                  for _, e in zip(range(max_errors), check.iter_errors(value))]
    except Unresolvable as exc:
        return bad_input(f"unresolvable $ref in schema: {exc}")
    except RecursionError:
        return bad_input("schema recursion too deep")
    if errors:
        return wrong("schema_violation", errors=errors, rule=rule)
    return correct_if(True, rule=rule)


def partial_json(schema, completion: str) -> float:
    """Partial credit in [0, 1] for a dense training reward (never for the test metric): for an
    object schema, 0.3 for a JSON value that parses, 0.3 x the fraction of keys that are the
    schema's properties and 0.4 x the fraction whose value validates against the property's
    subschema (both over the larger of the schema's properties and the object's keys); an
    answer that does not parse earns 0.3 x the fraction of property names it writes as quoted
    strings."""
    schema = load_schema(schema)
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    text, _ = json_answer(completion)
    if text is None or not props:
        return 0.0
    try:
        value = loads_strict(text)
    except (ValueError, RecursionError):
        return 0.3 * sum(f'"{k}"' in text for k in props) / len(props)
    if not isinstance(value, dict):
        return 0.1
    known = [k for k in value if k in props]
    good = sum(_cached_validator(json.dumps(props[k], sort_keys=True)).is_valid(value[k]) for k in known)
    width = max(len(props), len(value))
    return 0.3 + 0.3 * len(known) / width + 0.4 * good / width

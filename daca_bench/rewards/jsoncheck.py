"""JSON-schema adherence: does a completion's JSON value validate under a schema?

The schema's declared draft (`$schema`) picks the validator, 2020-12 by default, and formats
are ASSERTED with jsonschema's own format checkers (the `format-nongpl` extra supplies the
strict ones: date-time, time, duration, hostname, uri, iri, json-pointer, uri-template...).
A format that the schema's draft does not define but a newer draft does (`uuid` under
draft-07, `uri-reference` under draft-04) is checked by the newest draft's checker. A
missing checker package is an error, never a format that silently passes. Unknown (custom)
formats are annotations, as the specification says.
    score_json({"type": "integer"}, "<answer>3</answer>").status  # 'correct'
"""

from __future__ import annotations

import json
from functools import cache, lru_cache

from ..types import Reward
from .answers import json_answer, loads_strict
from .scoring import bad_input, correct_if, no_answer, wrong

# the 2020-12 formats that need jsonschema[format-nongpl]'s packages to be checked at all
NEEDS_PACKAGES = (
    "date-time",
    "time",
    "duration",
    "hostname",
    "idn-hostname",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
)


@cache
def format_checker(validator_cls):
    """The draft's own format checker, plus the newest draft's for every format it leaves unchecked."""
    from jsonschema import Draft202012Validator, FormatChecker

    newest = Draft202012Validator.FORMAT_CHECKER.checkers
    missing = [name for name in NEEDS_PACKAGES if name not in newest]
    if missing:
        raise RuntimeError(
            f"jsonschema cannot check the formats {', '.join(missing)}: their packages are missing; "
            "pip install 'jsonschema[format-nongpl]'"
        )
    checker = FormatChecker(formats=())
    checker.checkers = {**newest, **validator_cls.FORMAT_CHECKER.checkers}
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
        errors = [
            f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:160]}"
            for _, e in zip(range(max_errors), check.iter_errors(value))
        ]
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

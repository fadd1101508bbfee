"""JSON-schema tasks: json_schema (generated levels, JSONSchemaBench-style files), json_tiny."""

import json

import pytest

from daca_bench.registry import get_task
from daca_bench.rewards.jsoncheck import score_json

from repo_paths import FIXTURES as FIX

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "role": {"enum": ["admin", "user"]},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

PERSON_CASES = [  # completion, status, reason
    ('<answer>{"name": "Ada", "age": 36}</answer>', "correct", None),
    ('<answer>\n{\n  "name": "Ada",\n  "age": 36,\n  "role": "admin"\n}\n</answer>', "correct", None),
    ('Here you go:\n```json\n{"name": "Ada", "age": 36, "tags": ["x"]}\n```', "correct", None),
    ('{"name": "Ada", "age": 36} is my answer', "correct", None),
    ('<answer>{"name": "Ada"}</answer>', "wrong", "schema_violation"),  # missing required key
    ('<answer>{"name": "Ada", "age": 36, "extra": 1}</answer>', "wrong", "schema_violation"),
    ('<answer>{"name": "Ada", "age": 200}</answer>', "wrong", "schema_violation"),  # out of range
    ('<answer>{"name": "Ada", "age": 36.5}</answer>', "wrong", "schema_violation"),
    ('<answer>{"name": "Ada", "age": 36, "role": "root"}</answer>', "wrong", "schema_violation"),
    ('<answer>{"name": "Ada", "age": 36, "tags": ["a", "b", "c"]}</answer>', "wrong", "schema_violation"),
    ("<answer>{'name': 'Ada', 'age': 36}</answer>", "wrong", "invalid_json"),  # Python, not JSON
    ('<answer>{"name": "Ada", "age": NaN}</answer>', "wrong", "invalid_json"),
    ('<answer>{"name": "Ada", "age": 1, "age": 2}</answer>', "wrong", "invalid_json"),  # duplicate key
    ('<answer>{"name": "Ada", "age": 36</answer>', "wrong", "invalid_json"),  # unbalanced
    ("<answer>sorry</answer>", "wrong", "invalid_json"),
    ("", "no_answer", None),
    ("I can't do that", "no_answer", None),
]


@pytest.mark.parametrize("completion,status,reason", PERSON_CASES)
def test_person_schema(completion, status, reason):
    r = score_json(PERSON, completion)
    assert r.status == status and r.value == (1.0 if status == "correct" else 0.0)
    if reason:
        assert r.details["reason"] == reason


FORMATS = [  # format, valid, invalid
    ("date", "2024-02-29", "2023-02-29"),
    ("date-time", "2024-01-02T03:04:05Z", "2024-01-02 03:04"),
    ("date-time", "2024-01-02T03:04:05.5+01:00", "2024-13-02T03:04:05Z"),
    ("time", "03:04:05Z", "25:00:00Z"),
    ("email", "a@b.org", "not-an-email"),
    ("ipv4", "10.0.0.1", "300.1.1.1"),
    ("ipv6", "::1", "1:::2"),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
    ("uri", "https://x.org/a?b=1", "not a uri"),
    ("hostname", "api.example.com", "-bad-.com"),
    ("duration", "P3DT4H", "3 days"),
    ("json-pointer", "/a/b~1c", "a/b"),
    # what a hand-written `scheme:...` regex let through
    ("uri", "urn:isbn:0451450523", "http:%zz"),
    ("uri", "mailto:a@b.org", "http://a:b:c/"),
    ("uri", "http://[::1]:80/", "http://[::1"),
    ("uri", "https://x.org", "/relative/path"),
    ("uri-reference", "../x?y#z", "%zz"),
    ("iri", "https://例え.jp/パス", "http://[x"),
    ("iri-reference", "パス/x", "a b"),
    ("email", "first.last+tag@sub.example.co", "a.example.org"),
    ("ipv4", "255.255.255.255", "01.2.3.4"),
    ("ipv4", "1.2.3.4", "1.2.3"),
    ("ipv6", "2001:db8::8a2e:370:7334", "12345::"),
    ("uuid", "00000000-0000-0000-0000-000000000000", "123e4567e89b12d3a456426614174000"),
    ("date", "2000-02-29", "2024-1-2"),
    ("date-time", "2024-01-02t03:04:05+01:00", "2024-01-02T03:04:05"),
    ("time", "23:59:59.5-05:00", "03:04"),
    ("duration", "P1W", "PT"),
    ("hostname", "localhost", "under_score.com"),
    ("hostname", "a-b.c", "a..b"),
    ("idn-hostname", "例え.jp", "-x-.com"),
    ("relative-json-pointer", "1#", "-1/a"),
    ("uri-template", "http://x.org/{id}", "http://x.org/{id"),
    ("regex", "^a+$", "(unclosed"),
]


def test_a_json_string_answer_may_hold_brackets():
    assert score_json({"type": "string", "pattern": "^see"}, '"see [1] and {x}"').status == "correct"
    assert score_json({"type": "array"}, "the list: [1, 2] (done)").status == "correct"


@pytest.mark.parametrize(
    "draft,fmt,good,bad",
    [
        ("http://json-schema.org/draft-07/schema#", "uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
        ("http://json-schema.org/draft-04/schema#", "uri-reference", "../x", "%zz"),
        ("http://json-schema.org/draft-04/schema#", "date", "2024-02-29", "2023-02-29"),
    ],
)
def test_formats_of_newer_drafts_are_asserted_under_older_ones(draft, fmt, good, bad):
    schema = {"$schema": draft, "type": "string", "format": fmt}
    assert score_json(schema, json.dumps(good)).status == "correct"
    assert score_json(schema, json.dumps(bad)).status == "wrong"


def test_a_missing_format_package_is_an_error_not_a_pass(monkeypatch):
    from jsonschema import Draft202012Validator

    from daca_bench.rewards.jsoncheck import format_checker

    checkers = {k: v for k, v in Draft202012Validator.FORMAT_CHECKER.checkers.items() if k != "uri"}
    monkeypatch.setattr(Draft202012Validator.FORMAT_CHECKER, "checkers", checkers)
    format_checker.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"formats uri: .*jsonschema\[format-nongpl\]"):
            format_checker(Draft202012Validator)
    finally:
        format_checker.cache_clear()


@pytest.mark.parametrize("fmt,good,bad", FORMATS)
def test_formats_are_asserted(fmt, good, bad):
    schema = {"type": "string", "format": fmt}
    assert score_json(schema, json.dumps(good)).status == "correct"
    r = score_json(schema, json.dumps(bad))
    assert r.status == "wrong" and r.details["reason"] == "schema_violation"


def test_declared_draft_is_used():
    # draft-04 exclusiveMaximum is a boolean; under 2020-12 it would be a number (bad schema)
    d4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "integer",
        "maximum": 5,
        "exclusiveMaximum": True,
    }
    assert score_json(d4, "4").status == "correct"
    assert score_json(d4, "5").status == "wrong"
    assert score_json({k: v for k, v in d4.items() if k != "$schema"}, "4").status == "bad_input"


def test_refs_and_defs():
    schema = {
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "type": "array",
        "items": {"$ref": "#/$defs/P"},
    }
    assert score_json(schema, '[{"x": 1}, {"x": 2.5}]').status == "correct"
    assert score_json(schema, '[{"x": 1}, {"y": 2}]').status == "wrong"
    assert score_json({"$ref": "https://unreachable.invalid/s.json"}, "1").status == "bad_input"


def test_schema_as_text_and_bad_schemas():
    assert score_json(json.dumps(PERSON), '{"name": "A", "age": 1}').status == "correct"
    for bad in ("{not json", 42, {"type": "strnig"}, {"minimum": "x"}):
        assert score_json(bad, "1").status == "bad_input"


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5])
def test_generated_levels(level):
    task = get_task("json_schema", split="test", n=20, levels=(level,))
    for s in task.samples:
        assert s.metadata["level"] == level
        assert task.verify(s, s.target).status == "correct"
        assert task.verify(s, "<answer>{}</answer>").status == "wrong"  # every level has required keys
    text = json.dumps([s.metadata["schema"] for s in task.samples])
    if level >= 2:
        assert any(k in text for k in ('"enum"', '"minimum"', '"minLength"'))
    if level >= 3:
        assert '"array"' in text or text.count('"object"') > 20
    if level >= 4:
        assert "$ref" in text and "$defs" in text
    if level >= 5:
        assert '"format"' in text


def test_generated_missing_required_key_scores_zero():
    task = get_task("json_schema", split="test", n=10, levels=(1,))
    for s in task.samples:
        value = json.loads(s.target.split("\n")[1])
        value.pop(s.metadata["schema"]["required"][0])
        r = task.verify(s, json.dumps(value))
        assert r.status == "wrong" and r.details["reason"] == "schema_violation"


def test_splits_disjoint_by_schema():
    for name in ("json_schema", "json_tiny"):
        train = {json.dumps(s.metadata["schema"], sort_keys=True) for s in get_task(name, split="train", n=400).samples}
        test = {json.dumps(s.metadata["schema"], sort_keys=True) for s in get_task(name, split="test", n=100).samples}
        assert not train & test


def test_jsonschemabench_style_file():
    task = get_task("json_schema", path=FIX / "jsonschemabench.jsonl")
    assert [s.id for s in task.samples] == ["json_schema/jsb_0", "json_schema/jsb_1", "json_schema/jsb_2"]
    answers = ['{"host": "db.local", "port": 5432}', '["a", "b"]', '{"id": "123e4567-e89b-12d3-a456-426614174000"}']
    for s, answer in zip(task.samples, answers):
        assert task.verify(s, answer).status == "correct", s.id
    assert task.verify(task.samples[0], '{"host": "db.local", "port": 70000}').status == "wrong"
    assert task.verify(task.samples[2], '{"id": "nope"}').status == "wrong"  # format asserted


def test_tiny_json():
    task = get_task("json_tiny", split="test", n=50)
    for s in task.samples:
        assert s.prompt.startswith("json ") and len(s.prompt) <= 64 and len(s.target) <= 30
        assert task.verify(s, s.target).status == "correct"
        keys = s.metadata["schema"]["required"]
        assert 1 <= len(keys) <= 2
        wrong = json.loads(s.target)
        wrong[keys[0] + "_"] = wrong.pop(keys[0])  # a miscopied key
        assert task.verify(s, json.dumps(wrong)).status == "wrong"

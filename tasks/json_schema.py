"""JSON-schema adherence (json family): `json_schema` (generated schemas of graded difficulty,
or JSONSchemaBench-style files) and `json_tiny` (one- or two-key objects, CPU default).

Difficulty levels of the generator (each adds to the one before):
  1 flat object, basic types, all required   2 enums, ranges, lengths, optional keys
  3 nested objects and arrays                4 $ref/$defs and const
  5 formats (date, date-time, email, ipv4, uuid, uri, hostname) and patterns
Every generated schema comes with an instance that validates (the gold completion). Splits
are disjoint by schema (a hash of its canonical text). Field `schema` (or `json_schema`):
a dict or its JSON text. Scoring: daca_bench.rewards.jsoncheck (declared draft, formats asserted).
    get_task("json_schema", path="jsonschemabench_github_easy.jsonl")   # local files
"""

from __future__ import annotations

import hashlib
import json
import random

from daca_bench.loaders import load_rows, select
from daca_bench.registry import register_task
from daca_bench.rewards.jsoncheck import load_schema, partial_json, score_json
from daca_bench.rewards.scoring import (
    HASH_SPLITS,
    LazySamples,
    field,
    hash_split,
    stable_seed,
    with_shaping,
)
from daca_bench.types import Sample, Task

VERSION = 2  # 2: a dev split (12.5 % of keys) carved from train; test unchanged
PROMPT = (
    "Write a JSON value that validates against this JSON Schema. Put only the JSON inside "
    "<answer></answer>.\n\nSchema:\n{schema}\n"
)
KEYS = [
    "id",
    "name",
    "age",
    "email",
    "tags",
    "price",
    "active",
    "count",
    "title",
    "score",
    "owner",
    "items",
    "status",
    "level",
    "code",
    "note",
    "url",
    "host",
    "date",
    "size",
    "color",
    "rank",
]
WORDS = ["red", "blue", "green", "alpha", "beta", "open", "closed", "cat", "dog", "north", "south", "low", "high"]
FORMATS = ("date", "date-time", "email", "ipv4", "uuid", "uri", "hostname")


# ---- generator: each maker returns (schema node, a value that satisfies it) -----------------
def _word(rng) -> str:
    return rng.choice(WORDS)


def _formatted(fmt: str, rng: random.Random) -> str:
    if fmt == "date":
        return f"{rng.randint(1990, 2030):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if fmt == "date-time":
        return f"{_formatted('date', rng)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
    if fmt == "email":
        return f"{_word(rng)}.{_word(rng)}@example.com"
    if fmt == "ipv4":
        return ".".join(str(rng.randint(1, 254)) for _ in range(4))
    if fmt == "uuid":
        h = f"{rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"
    if fmt == "uri":
        return f"https://{_word(rng)}.example.org/{_word(rng)}"
    return f"{_word(rng)}.example.net"  # hostname


def _scalar(level: int, rng: random.Random):
    kinds = ["string", "integer", "number", "boolean"]
    if level >= 2:
        kinds += ["enum", "int_range", "str_len"]
    if level >= 4:
        kinds += ["const"]
    if level >= 5:
        kinds += ["format", "format", "pattern"]
    kind = rng.choice(kinds)
    if kind == "string":
        return {"type": "string"}, _word(rng)
    if kind == "integer":
        return {"type": "integer"}, rng.randint(-50, 500)
    if kind == "number":
        return {"type": "number"}, round(rng.uniform(-10, 100), 2)
    if kind == "boolean":
        return {"type": "boolean"}, rng.random() < 0.5
    if kind == "enum":
        options = rng.sample(WORDS, rng.randint(2, 4))
        return {"enum": options}, rng.choice(options)
    if kind == "int_range":
        lo = rng.randint(-20, 50)
        hi = lo + rng.randint(1, 60)
        node = {"type": "integer", "minimum": lo, "maximum": hi}
        if rng.random() < 0.3:
            node["multipleOf"] = 5
            lo, hi = -(-lo // 5) * 5, hi // 5 * 5
            if lo > hi:
                return {"type": "integer", "minimum": lo, "maximum": lo}, lo
        return node, rng.choice(range(lo, hi + 1, node.get("multipleOf", 1)))
    if kind == "str_len":
        lo = rng.randint(2, 5)
        word = "".join(rng.choice("abcdefghij") for _ in range(rng.randint(lo, lo + 4)))
        return {"type": "string", "minLength": lo, "maxLength": lo + 4}, word
    if kind == "const":
        value = _word(rng)
        return {"const": value}, value
    if kind == "format":
        fmt = rng.choice(FORMATS)
        return {"type": "string", "format": fmt}, _formatted(fmt, rng)
    digits = "".join(str(rng.randint(0, 9)) for _ in range(3))
    letters = "".join(rng.choice("ABCDEFGH") for _ in range(2))
    return {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}, f"{letters}-{digits}"


def _node(level: int, depth: int, rng: random.Random, defs: dict):
    roll = rng.random()
    if level >= 3 and depth < 2 and roll < 0.2:
        return _object(level, depth + 1, rng, defs, size=(1, 3))
    if level >= 3 and depth < 2 and roll < 0.4:
        item, _ = _scalar(level, rng)
        values = [_value_for(item, rng) for _ in range(rng.randint(1, 3))]
        node = {"type": "array", "items": item, "minItems": 1, "maxItems": 3}
        if rng.random() < 0.3 and len({json.dumps(v) for v in values}) == len(values):
            node["uniqueItems"] = True
        return node, values
    if level >= 4 and defs and roll < 0.55:
        name = rng.choice(sorted(defs))
        return {"$ref": f"#/$defs/{name}"}, defs[name][1]
    return _scalar(level, rng)


def _value_for(node: dict, rng: random.Random):
    """A fresh value for a scalar node made by _scalar (re-drawn for array items)."""
    if "enum" in node:
        return rng.choice(node["enum"])
    if "const" in node:
        return node["const"]
    if "format" in node:
        return _formatted(node["format"], rng)
    if "pattern" in node:
        return f"{rng.choice('ABCDEFGH')}{rng.choice('ABCDEFGH')}-{rng.randint(0, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
    t = node.get("type")
    if t == "integer":
        lo, hi = node.get("minimum", -50), node.get("maximum", 500)
        step = node.get("multipleOf", 1)
        return rng.choice(range(-(-lo // step) * step, hi + 1, step))
    if t == "number":
        return round(rng.uniform(-10, 100), 2)
    if t == "boolean":
        return rng.random() < 0.5
    lo = node.get("minLength", 1)
    return "".join(rng.choice("abcdefghij") for _ in range(rng.randint(lo, node.get("maxLength", lo + 5))))


def _object(level: int, depth: int, rng: random.Random, defs: dict, size=(2, 4)):
    keys = rng.sample(KEYS, rng.randint(*size) + (level >= 3))
    props, value, required, examples = {}, {}, [], {}
    for key in keys:
        props[key], example = _node(level, depth, rng, defs)
        examples[key] = example
        if level == 1 or rng.random() < 0.7:
            required.append(key)
            value[key] = example
        elif rng.random() < 0.5:
            value[key] = example  # optional, present
    if not required:  # at least one required key, so that `{}` is never an answer
        required.append(keys[0])
        value.setdefault(keys[0], examples[keys[0]])
    node = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    return node, value


def generate_schema(level: int, rng: random.Random) -> tuple[dict, object]:
    """(schema, a validating instance) at difficulty `level` (1-5)."""
    defs: dict = {}
    if level >= 4:
        for _ in range(rng.randint(1, 2)):
            name = rng.choice(["Point", "Tag", "Money", "Person", "Span"])
            if name not in defs:
                defs[name] = _object(min(level, 3), 2, rng, {}, size=(1, 2))
    schema, value = _object(level, 0, rng, defs)
    if defs:
        used = {k for k in defs if f"#/$defs/{k}" in json.dumps(schema)}
        if used:
            schema["$defs"] = {k: defs[k][0] for k in sorted(used)}
    return schema, value


# ---- tiny: one or two keys, a compact prompt -------------------------------------------------
TINY_KEYS = ["id", "n", "ok", "age", "tag", "x", "y", "on", "qty", "col"]
TINY_WORDS = ["red", "blue", "cat", "dog", "yes", "no", "up", "a", "b"]


def _tiny(rng: random.Random) -> tuple[dict, object, str]:
    keys = rng.sample(TINY_KEYS, rng.choice((1, 1, 2)))
    props, value, shown = {}, {}, []
    for key in keys:
        kind = rng.choice(("int", "int", "bool", "enum"))
        if kind == "int":
            lo = rng.randint(0, 8)
            hi = rng.randint(lo + 1, 9)
            props[key], value[key] = {"type": "integer", "minimum": lo, "maximum": hi}, rng.randint(lo, hi)
            shown.append(f"{key}:int {lo}-{hi}")
        elif kind == "bool":
            props[key], value[key] = {"type": "boolean"}, rng.random() < 0.5
            shown.append(f"{key}:bool")
        else:
            options = rng.sample(TINY_WORDS, 2)
            props[key], value[key] = {"enum": options}, rng.choice(options)
            shown.append(f"{key}:{'|'.join(options)}")
    schema = {"type": "object", "properties": props, "required": keys, "additionalProperties": False}
    return schema, value, "json " + " ".join(shown) + "\n"


# ---- samples -------------------------------------------------------------------------------
def _compact(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _schema_key(schema) -> str:
    return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest()[:16]


def from_record(name: str, row: dict, index: int) -> Sample:
    schema = load_schema(field(row, "schema", "json_schema"))
    ident = row.get("unique_id") or row.get("id") or f"{index}-{_schema_key(schema)}"
    prompt = (
        row.get("prompt") if name == "json_tiny" and row.get("prompt") else PROMPT.format(schema=json.dumps(schema))
    )
    return Sample(id=f"{name}/{ident}", prompt=prompt, target="", metadata={"schema": schema})


def verify(sample: Sample, completion: str):
    return score_json(sample.metadata["schema"], completion)


def partial(sample: Sample, completion: str, reward) -> float:
    """Dense training credit: keys with valid values (daca_bench.rewards.jsoncheck.partial_json)."""
    return partial_json(sample.metadata["schema"], completion)


def _verifier(shaping: str | None):
    return with_shaping(verify, shaping, partial=partial)  # no d1 shaping: d1 has no JSON task


def _generate(name: str, split: str, n: int, seed: int, levels: tuple[int, ...]) -> list[Sample]:
    rng = random.Random(stable_seed(name, split, seed))
    samples, seen = [], set()
    for _ in range(1000 * n):
        if len(samples) >= n:
            break
        if name == "json_tiny":
            schema, value, prompt = _tiny(rng)
            level, target = 0, _compact(value)
        else:
            level = levels[len(samples) % len(levels)]
            schema, value = generate_schema(level, rng)
            prompt, target = PROMPT.format(schema=json.dumps(schema)), f"<answer>\n{_compact(value)}\n</answer>"
        key = _schema_key(schema)
        if key in seen or hash_split(f"json/{key}") != split:
            continue
        seen.add(key)
        samples.append(
            Sample(
                id=f"{name}/{f'L{level}/' if level else ''}{key}",
                prompt=prompt,
                target=target,
                metadata={"schema": schema, "level": level},
            )
        )
    if len(samples) < n:
        raise RuntimeError(f"{name}: only {len(samples)} distinct {split} schemas, {n} asked")
    return samples


@register_task(
    "json_schema",
    family="json",
    version=VERSION,
    splits=HASH_SPLITS,
    description="JSON-schema adherence: generated schemas, levels 1-5 (or JSONSchemaBench files)",
)
def json_schema(
    split: str = "test",
    n: int | None = None,
    seed: int = 0,
    *,
    records=None,
    path=None,
    data_files=None,
    hub_id: str | None = None,
    config: str | None = None,
    levels: tuple[int, ...] = (1, 2, 3, 4, 5),
    shaping: str | None = None,
) -> Task:
    """`path`/`data_files` (or `hub_id` + `config`, e.g. JSONSchemaBench) load real schemas;
    otherwise schemas are generated at the given difficulty levels."""
    if records is None and (path or data_files or hub_id):
        records = select(load_rows(hub_id or "", config=config, split=split, path=path, data_files=data_files), n)
    if records is not None:
        samples = [from_record("json_schema", row, i) for i, row in enumerate(records)]
    else:
        if any(level not in range(1, 6) for level in levels):
            raise ValueError("levels must be in 1-5")
        count = n if n is not None else (250 if split != "train" else 4000)
        samples = LazySamples(count, lambda: _generate("json_schema", split, count, seed, tuple(levels)))
    return Task("json_schema", "json", VERSION, samples, _verifier(shaping), split)


@register_task(
    "json_tiny",
    family="json",
    version=VERSION,
    splits=HASH_SPLITS,
    tiny=True,
    description="tiny JSON: one- or two-key objects, prompt `json n:int 2-7 ok:bool`",
)
def json_tiny(
    split: str = "test", n: int | None = None, seed: int = 0, *, records=None, shaping: str | None = None
) -> Task:
    if records is not None:
        samples = [from_record("json_tiny", row, i) for i, row in enumerate(records)]
    else:
        count = n if n is not None else (256 if split != "train" else 4096)
        samples = LazySamples(count, lambda: _generate("json_tiny", split, count, seed, ()))
    return Task("json_tiny", "json", VERSION, samples, _verifier(shaping), split)

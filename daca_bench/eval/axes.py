"""Decoding and prompt template as reported axes (`daca-bench eval --decode A,B --templates X,Y`): one
checkpoint evaluated under several decodings and templates in one run, each cell in its own folder, and a
grid of accuracies with paired bootstrap intervals (prompts resampled) against the first cell.

    run_axes("runs/rl/final", "sudoku_tiny", ["d1"], ["protocol", "reference", "threshold"], ["chat", "plain"],
             output_dir="runs/eval-axes", n=64)

DECODES: `protocol` (the protocol's own), `reference` (one token a step: steps = length), `cached` / `dual`
(a prefix / dual KV cache), `threshold` (parallel decoding above confidence 0.9), `rollout` (the sampler of
the run that trained the model: its config.json's sampler section, temperature included). TEMPLATES:
`chat` (one user turn of the chat template), `plain` (the prompt as it is).
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from ..errors import ConfigError
from ..types import record_correct
from . import protocols

DECODES = ("protocol", "reference", "cached", "dual", "threshold", "rollout")
TEMPLATES = {"chat": "on", "plain": "off"}
GRID_COLUMNS = [
    "protocol",
    "gen_length",
    "template",
    "decode",
    "temperature",
    "block_length",
    "steps",
    "n",
    "accuracy",
    "lo",
    "hi",
    "diff",
    "diff_lo",
    "diff_hi",
]


def parse(text: str, known, flag: str) -> list[str]:
    """`a,b` -> ["a", "b"], each one of `known`; else one ConfigError line."""
    names = [x.strip() for x in str(text).split(",") if x.strip()]
    bad = [x for x in names if x not in known]
    if bad or not names:
        raise ConfigError(f"{flag} {text}: unknown {', '.join(bad) or '(none)'}; choose from {', '.join(known)}")
    return list(dict.fromkeys(names))


def bootstrap(
    values: list[float], base: list[float] | None = None, draws: int = 2000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the mean of `values` (minus `base`, paired by position) over prompts drawn with
    replacement; a fixed seed, so a table is reproducible."""
    diffs = [v - b for v, b in zip(values, base)] if base is not None else list(values)
    if not diffs:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(draws))
    tail = (1 - level) / 2
    return round(means[int(tail * draws)], 4), round(means[min(draws - 1, int((1 - tail) * draws))], 4)


def rollout_sampler(model: str) -> dict:
    """The sampler of the run that trained MODEL (its folder's parent config.json: an RL run's `rollout`
    section, an SFT run's `sampler`)."""
    stored = Path(model).parent / "config.json"
    try:
        data = json.loads(stored.read_text())
        section = data.get("rollout") or data.get("sampler")
    except (OSError, ValueError, AttributeError):
        section = None
    if not isinstance(section, dict) or not isinstance(section.get("gen_length"), int):
        raise ConfigError(
            f"--decode rollout: {model} names no run whose config.json holds a rollout or sampler section; "
            "choose the other decodes, or evaluate a run's final/ or checkpoint-STEP/ folder"
        )
    return section


def overrides(decode: str, model: str, length: int) -> dict:
    """run_eval's keyword arguments that make DECODE at canvas LENGTH."""
    if decode == "protocol":
        return {}
    if decode == "reference":
        return {"steps": length}
    if decode in ("cached", "dual"):
        return {"cache": "prefix" if decode == "cached" else "dual"}
    if decode == "threshold":
        return {"threshold": 0.9}
    s = rollout_sampler(model)
    return {
        "gen_lengths": [s["gen_length"]],
        "block_length": s.get("block_length"),
        "steps": s.get("steps"),
        "threshold": s.get("threshold"),
        "temperature": float(s.get("temperature") or 0.0),
        "cache": s.get("cache") if s.get("cache") in ("prefix", "dual") else None,
    }


def cell_rewards(folder: Path, protocol: str, length: int) -> dict[str, float]:
    """id -> 1.0 / 0.0 (types.record_correct: the status decides, as summary.md's accuracy) of one cell's
    rows of the prompts and settings its record.json names (rows an earlier run of the folder kept in
    samples.jsonl, of other settings or other prompts, stay out); unscorable rows out."""
    record = json.loads((folder / "record.json").read_text())
    key = record["protocols"][protocol][str(length)]
    ids = set(record["ids"][protocol]) if "ids" in record else None
    out = {}
    for number, line in enumerate((folder / "samples.jsonl").read_text().splitlines(), 1):
        row = json.loads(line) if line.strip() else None
        if not row or row.get("protocol", "d1") != protocol or int(row["gen_length"]) != int(length):
            continue
        if json.loads(row.get("decoding") or "{}") != key or (ids is not None and str(row["id"]) not in ids):
            continue
        value = record_correct(row, f"{folder / 'samples.jsonl'}:{number}")
        if value is not None:
            out[str(row["id"])] = value
    return out


def run_axes(
    model: str,
    task: str,
    names: list[str],
    decodes: list[str],
    templates: list[str],
    *,
    output_dir: str,
    gen_lengths=None,
    **kw,
) -> list[dict]:
    """Evaluate MODEL under every protocol x decode x template (runner.run_eval per cell, in
    OUTPUT/<template>/<decode>/<protocol>/<length>/) and write OUTPUT/grid.{md,csv,json}; return the grid rows.
    The chat cells run first, so a tokenizer without a chat template is refused before any cell is decoded;
    the grid keeps the order asked for."""
    from .runner import run_eval

    out = Path(output_dir)
    plan = [
        (name, template, decode, L)
        for name in names
        for template in templates
        for decode in decodes
        for L in gen_lengths or [protocols.canvas(name, task, None, None, None)[0]]
    ]
    done = {}
    for name, template, decode, L in sorted(plan, key=lambda c: c[1] != "chat"):
        args = {"gen_lengths": [L], **kw, **overrides(decode, model, L)}
        length = args["gen_lengths"][0]
        folder = out / template / decode / name / str(length)
        table = run_eval(model, task, [name], output_dir=str(folder), chat_template=TEMPLATES[template], **args)
        record = json.loads((folder / "record.json").read_text())
        done[name, template, decode, L] = {
            "protocol": name,
            "gen_length": table[0]["gen_length"],
            "template": template,
            "decode": decode,
            "temperature": record.get("temperature", 0.0),
            "block_length": table[0]["block_length"],
            "steps": table[0]["steps"],
            "rewards": cell_rewards(folder, name, table[0]["gen_length"]),
        }
    cells = [done[c] for c in plan]
    grid = []
    first = cells[0]["rewards"] if cells else {}
    for c in cells:
        ids = sorted(set(c["rewards"]) & set(first))
        values = [c["rewards"][i] for i in ids]
        lo, hi = bootstrap(list(c["rewards"].values()))
        dlo, dhi = bootstrap(values, [first[i] for i in ids])
        acc = sum(c["rewards"].values()) / len(c["rewards"]) if c["rewards"] else float("nan")
        diff = sum(values) / len(values) - sum(first[i] for i in ids) / len(ids) if ids else float("nan")
        grid.append(
            {
                **{k: c[k] for k in GRID_COLUMNS if k in c},
                "n": len(c["rewards"]),
                "accuracy": round(acc, 4),
                "lo": lo,
                "hi": hi,
                "diff": round(diff, 4),
                "diff_lo": dlo,
                "diff_hi": dhi,
            }
        )
    write_grid(out, grid)
    return grid


def grid_markdown(grid: list[dict]) -> str:
    """The grid as a Markdown table; `diff` is against the first row, paired on prompts, with its interval."""
    lines = ["| " + " | ".join(GRID_COLUMNS) + " |", "|" + "---|" * len(GRID_COLUMNS)]
    return "\n".join(lines + ["| " + " | ".join(str(r[c]) for c in GRID_COLUMNS) + " |" for r in grid])


def write_grid(out: Path, grid: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "grid.md").write_text(
        grid_markdown(grid) + "\n\naccuracy [lo, hi]: 95% bootstrap over prompts; diff: "
        "minus the first row on the same prompts, paired, with its 95% interval\n"
    )
    (out / "grid.json").write_text(json.dumps(grid, indent=2) + "\n")
    with open(out / "grid.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=GRID_COLUMNS)
        writer.writeheader()
        writer.writerows(grid)
    print(grid_markdown(grid))
    print(f"wrote {out / 'grid.md'}, {out / 'grid.csv'}, {out / 'grid.json'}")

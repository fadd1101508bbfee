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
    """The sampler of the run that trained MODEL (its folder's parent config.json, `sampler` section)."""
    stored = Path(model).parent / "config.json"
    try:
        section = json.loads(stored.read_text()).get("sampler")
    except (OSError, ValueError, AttributeError):
        section = None
    if not isinstance(section, dict) or not isinstance(section.get("gen_length"), int):
        raise ConfigError(
            f"--decode rollout: {model} names no run whose config.json holds a sampler section; "
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


def _rewards(folder: Path) -> dict[str, float]:
    rows = [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines() if x.strip()]
    return {str(r["id"]): float(r["reward"]) for r in rows if r.get("reward") is not None}


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
    OUTPUT/<template>/<decode>/) and write OUTPUT/grid.{md,csv,json}; return the grid rows."""
    from .runner import run_eval

    out = Path(output_dir)
    cells = []
    for name in names:
        lengths = gen_lengths or [protocols.canvas(name, task, None, None, None)[0]]
        for template in templates:
            for decode in decodes:
                for L in lengths:
                    args = {"gen_lengths": [L], **kw, **overrides(decode, model, L)}
                    folder = out / template / decode / name / str(args["gen_lengths"][0])
                    table = run_eval(
                        model, task, [name], output_dir=str(folder), chat_template=TEMPLATES[template], **args
                    )
                    record = json.loads((folder / "record.json").read_text())
                    cells.append(
                        {
                            "protocol": name,
                            "gen_length": table[0]["gen_length"],
                            "template": template,
                            "decode": decode,
                            "temperature": record.get("temperature", 0.0),
                            "block_length": table[0]["block_length"],
                            "steps": table[0]["steps"],
                            "rewards": _rewards(folder),
                        }
                    )
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

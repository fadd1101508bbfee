"""What an evaluation writes and reads back: the model's identity that claims an output folder
(`model_identity`, `claim`), the rows already decoded (`read_done`), the summary table per protocol and
length (`summarise`, `markdown`, `write_summary`) and the record of how it ran (`versions`, `describe`).

    claim(Path("runs/eval-x"), model_identity("tiny"))      # refuses a folder of another model's rows
    print(markdown(summarise(rows, {64: cfg}, "d1")))
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
from pathlib import Path

from ..config import SamplerConfig
from ..errors import ConfigError
from ..types import record_correct

COLUMNS = ["protocol", "gen_length", "n", "accuracy", "acc_d1", "infra_failures", "block_length", "steps", "decoding"]


def _fingerprint(folder: Path) -> str:
    """config.json's bytes and each weight file's name, size and mtime: a retrained folder differs."""
    h = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.name in ("config.json", "adapter_config.json"):
            h.update(path.name.encode() + path.read_bytes())
        elif path.suffix in (".safetensors", ".bin", ".pt", ".pth") and path.is_file():
            st = path.stat()
            h.update(f"{path.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def model_identity(name: str, base: str = "", dtype: str = "float32", chat: bool = False) -> dict:
    """Who produced the rows: the model (a folder's absolute path and fingerprint, a hub id and its cached
    revision, or tiny), a LoRA adapter's base, the dtype and the chat template."""
    folder = Path(name)
    if name != "tiny" and folder.is_dir():
        model, print_ = str(folder.resolve()), _fingerprint(folder)
    else:
        model, print_ = name, ""
        if name != "tiny":
            try:
                from huggingface_hub import try_to_load_from_cache

                cached = try_to_load_from_cache(name, "config.json")
                print_ = Path(cached).parent.name if isinstance(cached, str) else ""  # the snapshot's commit
            except (ImportError, ValueError):
                pass
    return {"model": model, "fingerprint": print_, "base": base, "dtype": dtype, "chat_template": chat}


def default_output(task: str, model: str) -> Path:
    """runs/eval-<task>-<model>: the model's last two path parts (runs/sft-tiny/final -> sft-tiny-final)."""
    parts = Path(model.rstrip("/")).parts[-2:] if model != "tiny" else ("tiny",)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(p for p in parts if p not in ("", ".", "..", "/")))
    return Path("runs") / f"eval-{task}-{slug or 'model'}"


def claim(out: Path, identity: dict, fresh: bool = False) -> None:
    """Make OUTPUT the cache of this model's rows: a new folder (or --fresh) records the identity; a
    folder holding another model's rows is refused in one line."""
    stored, rows = out / "model.json", out / "samples.jsonl"
    if not fresh and rows.exists() and rows.stat().st_size:
        try:
            old = json.loads(stored.read_text())
        except (OSError, ValueError):
            old = None
        if old != identity:
            if not isinstance(old, dict):
                who = "a model it does not name"
            elif old.get("model") != identity["model"]:
                who = f"model {old.get('model')}, not of {identity['model']}"
            else:
                names = {
                    "fingerprint": "weights",
                    "base": "base model",
                    "dtype": "dtype",
                    "chat_template": "chat template",
                }
                who = f"{identity['model']} with other " + ", ".join(
                    v for k, v in names.items() if old.get(k) != identity[k]
                )
            raise ConfigError(
                f"{out} holds the rows of {who}; choose another --output-dir, or --fresh to start over there"
            )
    out.mkdir(parents=True, exist_ok=True)
    if fresh:
        rows.unlink(missing_ok=True)
    stored.write_text(json.dumps(identity, indent=2) + "\n")


def read_done(path: Path) -> dict[tuple[str, int, str, str], dict]:
    """Rows already written, keyed by (protocol, gen_length, decoding, sample id); a torn line (an interrupted
    write) is dropped. A row of other decoding settings never stands in for this run's; a row written before
    protocols existed is d1's."""
    done, torn = {}, False
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                torn = True
                continue
            done[(row.get("protocol", "d1"), int(row["gen_length"]), str(row.get("decoding", "")), str(row["id"]))] = (
                row
            )
    if torn:
        path.write_text("".join(json.dumps(r) + "\n" for r in done.values()))
    return done


def summarise(rows: list[dict], cfgs: dict[int, SamplerConfig], name: str = "d1") -> list[dict]:
    out = []
    for length, cfg in cfgs.items():
        mine = [r for r in rows if r["gen_length"] == length]
        scored = [r["reward"] for r in mine if r["reward"] is not None]
        correct = [record_correct(r, "samples.jsonl") for r in mine if r["reward"] is not None]  # the status decides
        d1 = [r["d1"] for r in mine if r["reward"] is not None and r.get("d1")]  # d1's verdict: [correct, total]
        d1_total = sum(t for _, t in d1)
        out.append(
            {
                "protocol": name,
                "gen_length": length,
                "n": len(mine),
                "accuracy": round(sum(correct) / len(correct), 4) if correct else math.nan,
                "mean_reward": round(sum(scored) / len(scored), 4) if scored else math.nan,
                "acc_d1": round(sum(c for c, _ in d1) / d1_total, 4) if d1_total and name == "d1" else "",
                "infra_failures": len(mine) - len(scored),
                "block_length": cfg.block_length,
                "steps": cfg.steps,
                "decoding": (
                    f"threshold {cfg.threshold}"
                    if cfg.threshold is not None
                    else f"temperature {cfg.temperature}"
                    if cfg.temperature
                    else "greedy"
                )
                + (f", cache {cfg.cache}" if cfg.cache != "none" else ""),
            }
        )
    return out


def columns(table: list[dict]) -> list[str]:
    """COLUMNS, with the mean reward beside the accuracy where a row's differs (partial credit or shaping)."""
    differs = any(str(r.get("mean_reward")) != str(r["accuracy"]) for r in table if "mean_reward" in r)
    return COLUMNS[:4] + ["mean_reward"] + COLUMNS[4:] if differs else COLUMNS


def markdown(table: list[dict]) -> str:
    cols = columns(table)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in table]
    return "\n".join(lines)


def versions() -> dict:
    """The packages whose versions can change a number."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("daca-bench", "torch", "transformers", "tokenizers", "peft", "math-verify", "lm-eval"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def write_summary(out: Path, table: list[dict], record: dict | None = None) -> None:
    (out / "summary.md").write_text(markdown(table) + "\n" + ("\n" + describe(record) + "\n" if record else ""))
    with open(out / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns(table), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)
    if record:
        (out / "record.json").write_text(json.dumps(record, indent=2) + "\n")


def chat_words(record: dict) -> str:
    """`chat template on` / `off`, and under --chat-template auto which it came to ("off (auto: the tokenizer
    has none)"): the flag the prompts were built with, never only the one asked for."""
    used = "on" if record.get("chat_template") else "off"
    if record.get("chat_template_requested", "auto") != "auto":
        return f"chat template {used}"
    return f"chat template {used} (auto: the tokenizer {'has one' if used == 'on' else 'has none'})"


def describe(record: dict) -> str:
    """One line under the table: where and how the numbers were made."""
    v = record["versions"]
    return (
        f"protocols {', '.join(record['protocols'])}; {chat_words(record)}; device {record['device']}, "
        f"dtype {record['dtype']}, "
        f"batch {record['batch_size']} x {record['processes']} process(es), cache "
        f"{', '.join(n + ' ' + '/'.join(c) for n, c in record['cache'].items())}, threshold "
        f"{record['threshold']}, seed {record['seed']}; " + ", ".join(f"{k} {x}" for k, x in v.items())
    )

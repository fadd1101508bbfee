"""Dataset loading for the benchmark tasks through `datasets`: a hub id (online, or cached
with HF_DATASETS_OFFLINE=1) or a local JSON / JSONL / Parquet / CSV file or folder.

    rows = load_rows("openai/gsm8k", config="main", split="test")          # hub id
    rows = load_rows("openai/gsm8k", split="test", path="gsm8k_test.jsonl")  # local file
A single local file is taken whole, whatever the split; `data_files={"test": ...}` picks one.
Local `.jsonl` files are read by `daca_bench.jsonl` (a bad line is an error naming FILE:LINE).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import ConfigError
from .jsonl import read_jsonl

_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def _builder(files) -> str:
    first = files if isinstance(files, (str, Path)) else next(iter(
        files.values() if isinstance(files, dict) else files))
    if isinstance(first, (list, tuple)):
        first = first[0]
    suffixes = Path(str(first)).suffixes
    ext = suffixes[-2] if suffixes and suffixes[-1] in (".gz", ".bz2", ".xz", ".zst") else (suffixes or [""])[-1]
    if ext not in _BUILDERS:
        raise ValueError(f"cannot tell the format of {first!r}; use .json, .jsonl, .parquet or .csv")
    return _BUILDERS[ext]


def _jsonl_files(files) -> list[str] | None:
    """The files when every one is plain JSONL (read line by line here), else None."""
    flat = [files] if isinstance(files, (str, Path)) else list(files.values() if isinstance(files, dict) else files)
    flat = [str(f) for item in flat for f in (item if isinstance(item, (list, tuple)) else [item])]
    return flat if all(f.endswith(".jsonl") for f in flat) else None


def read_jsonl_rows(path: str | Path) -> list[dict]:
    """A local JSONL file's records in order; blank lines are skipped, and any other bad line
    (bytes that are not UTF-8, not JSON, not an object) is an error naming FILE:LINE."""
    rows, bad = [], []
    for line in read_jsonl(path):
        if line.error == "blank line":
            continue
        if line.error or not isinstance(line.record, dict):
            bad.append(f"{path}:{line.number}: {line.error or 'line must be a JSON object'}")
        else:
            rows.append(line.record)
    if bad:
        more = f" (and {len(bad) - 1} more bad lines)" if len(bad) > 1 else ""
        raise ConfigError(f"{bad[0]}{more}; fix or remove these lines of the data file")
    return rows


def load_rows(hub_id: str, *, split: str, config: str | None = None, path: str | Path | None = None,
              data_files: Any = None) -> list[dict]:
    """The rows of one split as plain dicts (in dataset order)."""
    import datasets  # heavy import, only when a task really loads data

    if data_files is not None:
        if _jsonl_files(data_files) is not None:
            if isinstance(data_files, dict):
                data_files = data_files.get(split) or next(iter(data_files.values()))
            return [row for f in _jsonl_files(data_files) for row in read_jsonl_rows(f)]
        ds = datasets.load_dataset(_builder(data_files), data_files=data_files)
        name = split if split in ds else next(iter(ds))
        return ds[name].to_list()
    if path is not None:
        p = Path(path)
        if p.is_dir():
            ds = datasets.load_dataset(str(p))
            if split not in ds:
                raise ValueError(f"{p} has no split {split!r}; it has {', '.join(ds)}")
            return ds[split].to_list()
        if not p.exists():
            raise FileNotFoundError(f"no such data file: {p}")
        if _jsonl_files(str(p)) is not None:
            return read_jsonl_rows(p)
        return datasets.load_dataset(_builder(str(p)), data_files=str(p), split="train").to_list()
    return datasets.load_dataset(hub_id, config, split=split).to_list()


def select(rows: list, n: int | None) -> list:
    """The first n rows (all when n is None): evaluation subsets are prefixes, never reshuffled."""
    return rows if n is None else rows[:n]

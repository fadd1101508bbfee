"""Dataset loading for the benchmark tasks through `datasets`: a hub id or a local JSON / JSONL /
Parquet / CSV file or folder.

    rows = load_rows("openai/gsm8k", config="main", split="test")          # hub id
    rows = load_rows("openai/gsm8k", split="test", path="gsm8k_test.jsonl")  # local file
A single local file is taken whole, whatever the split; `data_files={"test": ...}` picks one.
Local `.jsonl` files are read by `daca_bench.jsonl` (a bad line is an error naming FILE:LINE).
The CLI's `--data-file [SPLIT=]FILE` gives a hub task its local file (DATA_FILES_ENV).

A hub dataset is read from the local cache first, with no network; only when it is not cached,
no offline variable is set and the hub answers a connection within seconds is it downloaded.
Otherwise it is one UnavailableError line ("not cached; ... or pass a local file"). Inside
`cache_only()` (`daca-bench tasks`) the network is never touched.
"""

from __future__ import annotations

import logging
import os
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from .errors import ConfigError, UnavailableError
from .jsonl import read_jsonl

DATA_FILES_ENV = "DACA_BENCH_DATA_FILES"  # "[SPLIT=]FILE" entries joined by os.pathsep (set by --data-file)
PROBE_SECONDS = 3.0  # how long a connection to the hub may take before it counts as unreachable
_cache_only = [False]

_BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


def _builder(files) -> str:
    first = (
        files if isinstance(files, (str, Path)) else next(iter(files.values() if isinstance(files, dict) else files))
    )
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


def data_file(split: str) -> str | None:
    """The local file `--data-file` gives for `split` (a `SPLIT=FILE` entry, else a bare FILE), or None."""
    entries = [e for e in os.environ.get(DATA_FILES_ENV, "").split(os.pathsep) if e]
    named = dict(e.split("=", 1) for e in entries if "=" in e)
    bare = [e for e in entries if "=" not in e]
    return named.get(split) or (bare[0] if bare else None)


def data_files_given() -> dict:
    """What --data-file gave, for a run's config.json: {split or "*": file}."""
    entries = [e for e in os.environ.get(DATA_FILES_ENV, "").split(os.pathsep) if e]
    return dict(e.split("=", 1) if "=" in e else ("*", e) for e in entries)


@contextmanager
def cache_only():
    """Inside: a hub dataset is read from the local cache or not at all (never the network)."""
    before, _cache_only[0] = _cache_only[0], True
    try:
        yield
    finally:
        _cache_only[0] = before


def offline_requested() -> bool:
    return any(
        os.environ.get(v, "").upper() in ("1", "ON", "YES", "TRUE") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
    )


def hub_reachable(timeout: float = PROBE_SECONDS) -> bool:
    """Whether the hub endpoint (HF_ENDPOINT, else huggingface_hub's default) accepts a connection."""
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout):
            return True
    except OSError:
        return False


@contextmanager
def _offline():
    """`datasets` and `huggingface_hub` in offline mode (cache only) for the duration, quietly."""
    import datasets.config
    from huggingface_hub import constants

    flags = [
        (m, a) for m in (datasets.config, constants) for a in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if hasattr(m, a)
    ]
    saved = [getattr(m, a) for m, a in flags]
    logger = logging.getLogger("datasets")
    level = logger.level
    for m, a in flags:
        setattr(m, a, True)
    logger.setLevel(logging.ERROR)  # not "Using the latest cached version ..." for every load
    try:
        yield
    finally:
        for (m, a), v in zip(flags, saved):
            setattr(m, a, v)
        logger.setLevel(level)


def load_hub_rows(hub_id: str, config: str | None, split: str) -> list[dict]:
    """One split of a hub dataset: from the cache, else (online, reachable) downloaded, else one line."""
    import datasets

    try:
        with _offline():
            return datasets.load_dataset(hub_id, config, split=split).to_list()
    except (ConnectionError, FileNotFoundError):  # not cached here
        pass
    from huggingface_hub import constants

    why = None
    if _cache_only[0]:
        why = "this command reads the cache only"
    elif offline_requested():
        why = "offline mode is set (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)"
    elif not hub_reachable():
        why = f"the hub ({constants.ENDPOINT}) cannot be reached"
    if why:
        raise UnavailableError(
            f"the hub dataset {hub_id} ({split} split) is not cached here and {why}; run once "
            f"with internet to cache it, or pass a local file: --data-file {split}=FILE"
        )
    return datasets.load_dataset(hub_id, config, split=split).to_list()


def load_rows(
    hub_id: str, *, split: str, config: str | None = None, path: str | Path | None = None, data_files: Any = None
) -> list[dict]:
    """The rows of one split as plain dicts (in dataset order)."""
    if path is None and data_files is None:
        path = data_file(split)
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
    return load_hub_rows(hub_id, config, split)


def select(rows: list, n: int | None) -> list:
    """The first n rows (all when n is None): evaluation subsets are prefixes, never reshuffled."""
    return rows if n is None else rows[:n]


# ---- d1's own data files (dllm-reasoning/d1, folder `dataset/`) ---------------------------
# They are not on the hub and are not shipped here: point DACA_BENCH_D1_DATA at the folder
# that holds them (a clone of d1: d1/dataset), or pass path= to the task. Formats (docs/paper-presets.md):
#   Sudoku CSV: a header with `Puzzle` and `Solution`, then one 4x4 grid per row as 16 digits
#     read left to right, top to bottom, `0` for a blank (the solution has none);
#   Countdown test JSONL: one object per line, `input` the numbers joined by commas ("30,100,93")
#     and `output` the target ("23").
D1_DATA_ENV = "DACA_BENCH_D1_DATA"
D1_FILES = {
    "sudoku/train": "4x4_sudoku_unique_puzzles.csv",
    "sudoku/test": "4x4_test_sudoku.csv",
    "countdown/test": "countdown_cd3_test.jsonl",
}
D1_SEED = 42  # d1's seed: its test draws (numpy's legacy global RNG) and its train shuffle (datasets)
D1_HELD_OUT = 500  # d1 leaves the last 500 shuffled countdown / sudoku train rows out of training


def d1_file(kind: str, path: str | Path | None = None) -> Path:
    """The d1 data file of `kind` ("sudoku/test", ...): `path` when given, else the file of
    d1's name in $DACA_BENCH_D1_DATA. A missing file is a ConfigError saying where to get it."""
    import os

    name = D1_FILES[kind]
    path = path if path is not None else data_file(kind.split("/")[1])
    if path is None:
        folder = os.environ.get(D1_DATA_ENV)
        if not folder:
            raise ConfigError(
                f"the d1 file {name} is not on the hub and not shipped; clone d1 "
                f"(dllm-reasoning/d1) and set {D1_DATA_ENV}=<clone>/dataset, or pass path=FILE"
            )
        path = Path(folder) / name
    path = Path(path)
    if not path.is_file():
        raise ConfigError(
            f"no such d1 data file: {path} (expected d1's {name}; set {D1_DATA_ENV} to the folder that holds it)"
        )
    return path


def read_d1_sudoku(path: str | Path) -> list[dict]:
    """d1's Sudoku CSV as {"puzzle", "solution"} rows (16-digit strings, leading zeros kept)."""
    import csv

    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"Puzzle", "Solution"} - set(reader.fieldnames or [])
        if missing:
            raise ConfigError(f"{path}: not d1's Sudoku CSV (no column {', '.join(sorted(missing))})")
        for row in reader:
            puzzle, solution = (row["Puzzle"] or "").strip(), (row["Solution"] or "").strip()
            if not (len(puzzle) == len(solution) == 16 and (puzzle + solution).isdigit()):
                raise ConfigError(f"{path}:{reader.line_num}: a puzzle and a solution must be 16 digits each")
            rows.append({"puzzle": puzzle, "solution": solution})
    return rows


def read_d1_countdown(path: str | Path) -> list[dict]:
    """d1's Countdown test JSONL as {"numbers", "target"} rows."""
    rows = []
    for i, row in enumerate(read_jsonl_rows(path), 1):
        try:
            rows.append({"numbers": [int(x) for x in str(row["input"]).split(",")], "target": int(row["output"])})
        except (KeyError, ValueError):
            raise ConfigError(
                f'{path}: record {i} is not d1\'s countdown format ({{"input": "30,100,93", "output": "23"}})'
            ) from None
    return rows


def d1_test_draw(rows: list, n: int | None, size: int) -> list:
    """d1's evaluation subset: `size` rows drawn without replacement by numpy's legacy RNG
    seeded with 42, in d1's order (the first n of them when n is given)."""
    import numpy as np

    take = min(size, len(rows))
    order = np.random.RandomState(D1_SEED).choice(len(rows), take, replace=False)
    return [rows[i] for i in order][: n if n is not None else take]


def d1_train_rows(rows: list, held_out: int = 0) -> list:
    """d1's training rows: shuffled as `datasets` does with seed 42, the last `held_out` left out."""
    import numpy as np

    order = np.random.default_rng(D1_SEED).permutation(len(rows))
    return [rows[i] for i in order][: len(rows) - held_out if held_out else None]

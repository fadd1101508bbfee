"""Where the data shipped with daca-bench lives: `tasks/`, `sandbox/` and `configs/`.

In the repository they sit at the top, beside `daca_bench/`; an installed wheel carries them
as `daca_bench/_data/<name>` (the build maps them there, see pyproject.toml).
    from daca_bench.resources import data_dir
    data_dir("configs") / "tiny.yaml"
"""
from __future__ import annotations

import importlib.resources
from pathlib import Path

NAMES = ("tasks", "sandbox", "configs")


def data_dir(name: str) -> Path:
    """The folder `name` (one of NAMES): inside the installed package, else in the repository."""
    if name not in NAMES:
        raise ValueError(f"no shipped folder {name!r}; expected one of {NAMES}")
    packaged = importlib.resources.files("daca_bench").joinpath("_data", name)
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / name

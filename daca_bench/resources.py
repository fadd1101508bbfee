"""Where the data shipped with daca-bench lives: `tasks/`, `sandbox/`, `configs/` and the readings
sweep's picks (`results/tiny-readings/picks.json`, read by experiments/grid/presets.py).

In the repository they sit at the top, beside `daca_bench/` (the picks in results/tiny-readings);
an installed wheel carries them as `daca_bench/_data/<name>` (the build maps them there, see
pyproject.toml).
    from daca_bench.resources import data_dir
    data_dir("configs") / "tiny.yaml"
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

NAMES = ("tasks", "sandbox", "configs", "readings")
IN_REPO = {"readings": "results/tiny-readings"}  # name -> its folder in a checkout, where not the name itself


def data_dir(name: str) -> Path:
    """The folder `name` (one of NAMES): inside the installed package, else in the repository."""
    if name not in NAMES:
        raise ValueError(f"no shipped folder {name!r}; expected one of {NAMES}")
    packaged = importlib.resources.files("daca_bench").joinpath("_data", name)
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / IN_REPO.get(name, name)

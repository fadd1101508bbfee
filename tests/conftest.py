import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# test doubles (a dense-reward task for trainer tests), registered beside the real tasks
os.environ["DACA_BENCH_TASKS"] = os.path.join(os.path.dirname(__file__), "task_doubles")

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny():
    from daca_bench.config import ModelConfig
    from daca_bench.models import load_model

    torch.set_num_threads(2)
    return load_model(ModelConfig(seed=0))


@pytest.fixture(scope="session")
def committed_seeds():
    """committed_seeds(skip): the training seeds of every cell in the committed results folders but
    the folder SKIP (a design's own folder holds its own seeds once its cells are committed)."""
    from daca_bench.experiments.analysis.cellstore import cells, is_run

    root = Path(__file__).resolve().parents[1] / "results"
    runs = {p.name: cells(p / "cells") for p in sorted(root.iterdir()) if is_run(p)}  # packed or not

    def seeds(skip: str) -> set:
        return {c.json("config.json")["train"]["seed"] for name, run in runs.items() if name != skip
                for c in run if c.has("config.json")}

    return seeds

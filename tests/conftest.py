import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# test doubles (a dense-reward task for trainer tests), registered beside the real tasks
os.environ["DACA_BENCH_TASKS"] = os.path.join(os.path.dirname(__file__), "task_doubles")

import sys  # noqa: E402
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
        return {
            c.json("config.json")["train"]["seed"]
            for name, run in runs.items()
            if name != skip
            for c in run
            if c.has("config.json")
        }

    return seeds


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A registry that loads the task folders again (as a new process would); restored afterwards. The
    test runs in its tmp_path (new-task's default folders are relative)."""
    monkeypatch.chdir(tmp_path)
    from daca_bench import registry

    registry.list_tasks()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_loaded", None)
    monkeypatch.setenv("DACA_BENCH_TASKS", os.environ.get("DACA_BENCH_TASKS", ""))
    before = {k for k in sys.modules if k.startswith("daca_bench_tasks.")}
    yield
    for k in {k for k in sys.modules if k.startswith("daca_bench_tasks.")} - before:
        del sys.modules[k]

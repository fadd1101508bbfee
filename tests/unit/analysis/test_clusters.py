"""Each scored prompt's cluster (experiments/analysis/clusters.py): python_tiny's instances cluster by
their target function (issue 48), as sudoku's puzzles do by solution grid."""

import pytest

from daca_bench.experiments.analysis.clusters import cluster_keys
from daca_bench.registry import draw_test, task_spec

from repo_paths import ROOT


def test_code_instances_cluster_by_their_target_function():
    """tiny-full's code test set (test seed 1, the scored prompts excluded): 768 instances of 207 target
    functions; the key is the target, an instance without one (a held-out row) stands alone."""
    spec = task_spec("python_tiny")
    samples = list(draw_test("python_tiny", "test", 768, 1, "configs/scored/python_tiny.txt").samples)
    keys = {s.id: spec.cluster_of(s) for s in samples}
    assert len(keys) == 768 and len(set(keys.values())) == 207
    assert all(keys[s.id] == s.target for s in samples)
    held_out = spec.build("test", records=[{"examples": [[1, 2], [2, 3]], "id": "a"}]).samples[0]
    assert spec.cluster_of(held_out) == held_out.id
    cfg = {
        "train": {"eval_split": "test", "n_eval": 768, "test_seed": 1, "test_exclude": "configs/scored/python_tiny.txt"}
    }
    assert cluster_keys("python_tiny", [cfg], list(keys)) == keys  # what the tables pair and resample by


def test_the_committed_code_rows_are_resampled_by_function():
    table = ROOT / "results" / "tiny-full" / "table.md"
    if not table.is_file():
        pytest.skip("results/tiny-full is not in this checkout")
    text = table.read_text()
    assert "python_tiny 207 clusters of 768 prompts" in text and "sudoku_tiny 69 clusters of 512 prompts" in text
    for name, count in (("tiny-full-exploratory", 217), ("tiny-full-code64", 217)):
        assert f"python_tiny {count} clusters of 768 prompts" in (ROOT / "results" / name / "table.md").read_text()

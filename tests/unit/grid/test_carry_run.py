"""scripts/carry_run.py: an unfinished grid carried to another machine through git comes back byte for byte
(finished cells, the RL start's records, the SFT starts' weights checked by hash); an unfinished cell is left
to run again; a start that differs from the carried one is refused."""

import json
import subprocess
import sys

import pytest

from daca_bench.experiments.grid.pipeline import sft_config, sft_folder, tiny_cells
from daca_bench.experiments.grid.presets import PRESETS

from repo_paths import ROOT

SCRIPT = [sys.executable, str(ROOT / "scripts" / "carry_run.py")]


def _carry(mode: str, cwd, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([*SCRIPT, mode, "tiny-block", *extra], cwd=cwd, capture_output=True, text=True, timeout=120)


PRESET = PRESETS["tiny-block"]
_PLANNED = tiny_cells(PRESET, {label: {"folder": ""} for label in PRESET.families})
_SEED = [
    [c.name for c in _PLANNED if c.axes["train.seed"] == seed and c.axes["train.task"] == "sudoku_tiny"]
    for seed in (120, 121)
]
WHOLE, PART, OPEN = _SEED[0], _SEED[1][:2], _SEED[1][2]  # seed 120's every arm; two of 121's; one unfinished


def _work(root):
    """A work dir as `reproduce --preset tiny-block` leaves it mid-run: two SFT starts, a whole seed finished, two
    cells of the next seed finished and one unfinished (a checkpoint, no summary.json), the start's records."""
    preset = PRESET
    work = root / "runs" / "reproduce"
    for n, fam in enumerate(preset.families.values()):
        folder = root / sft_folder(work.relative_to(root), sft_config(preset, fam))
        (folder / "final").mkdir(parents=True)
        (folder / "checkpoint-10").mkdir()
        (folder / "final" / "model.safetensors").write_bytes(bytes([n]) * 1000)
        for name in ("summary.json", "config.json"):
            (folder / name).write_text(json.dumps({"n": n}) + "\n")
        (folder / "metrics.jsonl").write_text('{"loss": 1.0}\n')
    cells = work / "tiny-block"
    start = cells / "start" / "sudoku_tiny"
    for c in [*(cells / n for n in WHOLE + PART), cells / OPEN, start]:
        c.mkdir(parents=True)
        (c / "eval.jsonl").write_text('{"reward": 1.0}\n{"reward": 0.0}\n')
        if c.name != OPEN:
            (c / "summary.json").write_text('{"test_accuracy": 0.5}\n')
    return work


def test_a_carried_grid_comes_back_byte_for_byte(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    work = _work(first)
    saved = _carry("save", first, "--carry", str(tmp_path / "carry"))
    assert saved.returncode == 0, saved.stderr
    meta = json.loads((tmp_path / "carry" / "carried.json").read_text())
    assert meta["unfinished"] == [OPEN] and len(meta["sha256"]) == 2
    assert meta["held_back"] == sorted(PART) and meta["finished"] == sorted([*WHOLE, "start/sudoku_tiny"])
    second.mkdir()
    restored = _carry("restore", second, "--carry", str(tmp_path / "carry"))
    assert restored.returncode == 0, restored.stderr
    back = second / "runs" / "reproduce"
    for f in sorted(p for p in work.rglob("*") if p.is_file()):
        rel = f.relative_to(work)
        if "checkpoint-10" in rel.parts or rel.parts[1] in (*PART, OPEN):
            assert not (back / rel).exists(), rel  # no checkpoints, no cell of an unfinished seed
        else:
            assert (back / rel).read_bytes() == f.read_bytes(), rel
    assert _carry("restore", second, "--carry", str(tmp_path / "carry")).returncode == 0  # again: the same files


@pytest.mark.parametrize("where", ["weights", "cell"])
def test_restoring_over_other_files_is_refused(tmp_path, where):
    first, second = tmp_path / "first", tmp_path / "second"
    _work(first)
    assert _carry("save", first, "--carry", str(tmp_path / "carry")).returncode == 0
    other = _work(second)  # the same layout, then one file changed
    if where == "weights":
        next(other.glob("sft/*/final/model.safetensors")).write_bytes(b"retrained")
    else:
        (other / "tiny-block" / WHOLE[0] / "eval.jsonl").write_text('{"reward": 0.0}\n')
    missing = [other / "tiny-block" / name / "eval.jsonl" for name in WHOLE[1:]]
    for f in missing:
        f.unlink()
    done = _carry("restore", second, "--carry", str(tmp_path / "carry"))
    assert done.returncode != 0 and "move it away first" in done.stderr
    assert not any(f.exists() for f in missing)  # every file checked before any is written: nothing restored

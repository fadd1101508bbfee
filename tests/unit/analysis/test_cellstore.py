"""Packed runs (experiments/analysis/cellstore.py, `daca-bench pack` / `unpack`): a committed run's cells
packed into one Parquet file read back file for file, build the committed table to the byte, unpack to
the same bytes; an unfinished cell is refused; a cell folder's file wins over its packed copy."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from daca_bench.cli import main
from daca_bench.errors import ConfigError
from daca_bench.experiments.analysis.cellstore import (
    PACKED,
    all_cells,
    cells,
    copy_tree,
    is_run,
    pack,
    read_packed,
    records,
    unpack,
)
from daca_bench.experiments.analysis.render import to_csv, to_markdown
from daca_bench.experiments.analysis.results import load_table, locate

from repo_paths import ROOT

TINY = ROOT / "results" / "tiny"  # 15 cells and 2 RL starts: the smallest committed run with a table


def _files(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tiny_copy(tmp_path_factory):
    """results/tiny as cell folders (from its packed file or its folders) with its design and config."""
    if not is_run(TINY):
        pytest.skip("results/tiny is not in this checkout")
    out = tmp_path_factory.mktemp("tiny") / "tiny"
    copy_tree(TINY / "cells", out / "cells")
    for name in ("design.registered.json", "config.json", "table.md", "table.csv"):
        if (TINY / name).exists():
            shutil.copy(TINY / name, out / name)
    return out


def test_a_packed_run_reads_back_file_for_file_and_builds_the_committed_table(tiny_copy, tmp_path, capsys):
    run = tmp_path / "tiny"
    shutil.copytree(tiny_copy, run)
    before = _files(run / "cells")
    assert main(["pack", str(run), "--remove"]) == 0
    assert "read back equal" in capsys.readouterr().out
    assert not (run / "cells").exists() and (run / PACKED).is_file()  # the record files are gone, the folder too
    back = all_cells(run / "cells")
    assert {Path(n) / f: c.text(f).encode() for n, c in back.items() for f in c.files} == before
    assert [c.name for c in cells(run / "cells")] == sorted(
        p.name for p in (tiny_copy / "cells").iterdir() if p.name != "start"
    )
    assert locate(run) == (run / "cells", run) == locate(run / PACKED) == locate(run / "cells")
    table = load_table(run)
    assert to_markdown(table) == (TINY / "table.md").read_text() and to_csv(table) == (TINY / "table.csv").read_text()
    evals = records(run, "eval")  # the records as a table: a row per scored prompt of every cell and start
    assert {"cell", "file", "line", "id", "reward", "status"} <= set(evals.columns)
    assert len(evals) == sum(len(c.rows("eval.jsonl")) for c in back.values() if c.has("eval.jsonl"))
    assert main(["unpack", str(run), "--remove"]) == 0  # and back: the same bytes, the packed file gone
    assert _files(run / "cells") == before and not (run / PACKED).exists()


def test_pack_refuses_an_unfinished_cell_and_keeps_everything(tiny_copy, tmp_path):
    run = tmp_path / "tiny"
    shutil.copytree(tiny_copy / "cells", run / "cells")
    cell = sorted(p for p in (run / "cells").iterdir() if p.name != "start")[0]
    (cell / "summary.json").unlink()
    before = _files(run)
    with pytest.raises(ConfigError, match=re.escape(f"cell {cell.name} is unfinished")):
        pack(run, remove=True)
    assert _files(run) == before


def test_odd_files_round_trip_and_a_folder_wins_over_its_packed_copy(tmp_path):
    """A .jsonl without its last newline, an empty one, a blank line, a record holding U+2028 (not a line
    break in JSONL); and a file rewritten in the folder after packing is the one read."""
    cell = tmp_path / "grid" / "a=1"
    cell.mkdir(parents=True)
    texts = {
        "summary.json": '{"test_accuracy": 0.5}\n',
        "metrics.jsonl": '{"step": 1}\n\n{"step": 2}',
        "eval.jsonl": json.dumps({"id": "x/1", "completion": "a\u2028b", "reward": 1.0}, ensure_ascii=False) + "\n",
        "eval-step2.jsonl": "",
        "config.json": '{\n  "x": 1\n}',
    }
    for name, text in texts.items():
        (cell / name).write_text(text, encoding="utf-8")
    (cell / "model.safetensors").write_bytes(b"weights")  # not a record: never packed, never removed
    path, n_cells, n_files = pack(tmp_path / "grid", remove=True)
    assert (path, n_cells, n_files) == (tmp_path / "grid" / PACKED, 1, len(texts))
    assert read_packed(path)["a=1"].files == texts
    assert [p.name for p in cell.iterdir()] == ["model.safetensors"]
    assert cells(tmp_path / "grid")[0].rows("eval.jsonl")[0]["completion"] == "a\u2028b"
    (cell / "summary.json").write_text('{"test_accuracy": 0.75}\n')  # a resumed or rescored cell
    got = cells(tmp_path / "grid")[0]
    assert got.json("summary.json") == {"test_accuracy": 0.75} and got.text("metrics.jsonl") == texts["metrics.jsonl"]
    pack(tmp_path / "grid")  # packs the union, the folder's file winning
    assert read_packed(path)["a=1"].text("summary.json") == '{"test_accuracy": 0.75}\n'
    with pytest.raises(ConfigError, match="differs from its packed copy"):
        (cell / "summary.json").write_text("{}\n")
        unpack(tmp_path / "grid")

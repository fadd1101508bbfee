"""`daca-bench table` / `plot` on the folders `eval --decode/--templates` wrote (issue 59): several checkpoints'
decode x template grids as one table with each accuracy's and each paired difference's interval, and a figure
with error bars, one panel per template and one colour per checkpoint. Synthetic grids: real files in the
layout axes.py writes (grid.csv, and a cell folder's record.json and samples.jsonl)."""

import csv
import json

import pytest
from matplotlib.collections import LineCollection

from daca_bench.cli import main
from daca_bench.eval.axes import GRID_COLUMNS, bootstrap
from daca_bench.eval.compare import compare, compare_markdown
from daca_bench.experiments.figures.decodes import plot_decodes

KEY = {"block_length": 16, "gen_length": 16, "remasking": "low_confidence", "steps": 8, "temperature": 0.0}
CELLS = [("chat", "protocol"), ("chat", "reference"), ("plain", "protocol"), ("plain", "reference")]


def write_axes(folder, accuracies, verdicts=None):
    """An axes folder: grid.csv with one row per (template, decode); with VERDICTS (per prompt 1/0) the
    chat/protocol cell's folder too, so that a difference there is paired on prompts."""
    folder.mkdir(parents=True)
    with open(folder / "grid.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=GRID_COLUMNS)
        writer.writeheader()
        for (template, decode), acc in zip(CELLS, accuracies):
            lo, hi = round(acc - 0.1, 4), round(acc + 0.1, 4)
            row = dict(protocol="d1", gen_length=16, template=template, decode=decode, temperature=0.0)
            row.update(block_length=16, steps=8 if decode == "protocol" else 16, n=20, accuracy=acc, lo=lo, hi=hi)
            writer.writerow({**row, "diff": 0.0, "diff_lo": -0.05, "diff_hi": 0.05})
    if verdicts is not None:
        cell = folder / "chat" / "protocol" / "d1" / "16"
        cell.mkdir(parents=True)
        ids = [f"s{i}" for i in range(len(verdicts))]
        (cell / "record.json").write_text(json.dumps({"protocols": {"d1": {"16": KEY}}, "ids": {"d1": ids}}))
        rows = [
            {
                "id": i,
                "protocol": "d1",
                "gen_length": 16,
                "decoding": json.dumps(KEY, sort_keys=True),
                "reward": v,
                "status": "correct" if v else "wrong",
            }
            for i, v in zip(ids, verdicts)
        ]
        other = {**KEY, "steps": 16}  # a row of other settings an earlier run left: never counted
        rows.append({**rows[0], "id": "s0", "decoding": json.dumps(other, sort_keys=True), "reward": 1.0})
        (cell / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture
def two(tmp_path):
    a = [1, 0, 1, 0, 0, 1, 0, 0, 1, 0]
    b = [1, 1, 1, 1, 1, 1, 0, 1, 1, 1]
    base = write_axes(tmp_path / "axes" / "baseline", [0.4, 0.5, 0.3, 0.6], a)
    daca = write_axes(tmp_path / "axes" / "+DACA", [0.9, 0.45, 0.35, 0.6], b)
    return base, daca, a, b


def test_two_checkpoints_side_by_side_with_paired_intervals_and_the_order_per_cell(two):
    base, daca, a, b = two
    rows, labels = compare([base, daca])
    assert labels == ["baseline", "+DACA"] and [(r["template"], r["decode"]) for r in rows] == CELLS
    paired = rows[0]["+DACA - baseline"]
    assert paired == (0.5, *bootstrap(b, a))  # on the prompts' verdicts, the other settings' row left out
    assert paired[1] > 0
    assert rows[1]["+DACA - baseline"][0] == -0.05 and rows[3]["+DACA - baseline"][0] == 0.0
    text = compare_markdown(rows, labels)
    assert "| template | decode | temperature | steps | baseline | +DACA | +DACA - baseline | best |" in text
    assert "| chat | protocol | 0.0 | 8 | 0.400 [0.300, 0.500] | 0.900 [0.800, 1.000] | 0.500 [" in text
    assert "-0.050 (unpaired)" in text and "| baseline = +DACA |" in text
    assert "above 0 in 2, below 0 in 1, equal in 1 of 4 cells; interval above 0 in 1, below 0 in 0" in text
    assert "the order flips between cells" in text


def test_the_table_and_plot_commands_read_axes_folders(two, capsys):
    base, daca, _, _ = two
    assert main(["table", str(base), str(daca)]) == 0
    out = base.parent
    assert "+DACA - baseline" in (out / "decodes.md").read_text() and "wrote" in capsys.readouterr().out
    sheet = list(csv.DictReader((out / "decodes.csv").open()))
    assert len(sheet) == 8 and sheet[1]["checkpoint"] == "+DACA" and sheet[1]["vs"] == "baseline"
    assert main(["table", str(base)]) == 0  # one checkpoint: its grid's own difference against its first cell
    assert "| diff |" in (base / "decodes.md").read_text() and "0.000 [-0.050, 0.050]" in capsys.readouterr().out
    assert main(["plot", str(base), str(daca), "--output-dir", str(out / "figs")]) == 0
    assert (out / "figs" / "decodes.png").stat().st_size > 0 and (out / "figs" / "decodes.pdf").exists()
    assert main(["table", str(base), str(out)]) == 2  # a folder without grid.csv beside one with it
    assert "eval --decode folders" in capsys.readouterr().err


def test_the_figure_has_a_panel_per_template_and_an_error_bar_per_checkpoint(two):
    base, daca, _, _ = two
    fig = plot_decodes(*compare([base, daca]))
    axes = fig.axes
    assert len(axes) == 4  # (accuracy, difference) x (chat, plain)
    assert [a.get_title() for a in axes if a.get_title()] == ["template: chat", "template: plain"]
    top = axes[0]
    bars = [c for c in top.collections if isinstance(c, LineCollection)]
    assert len(bars) == 4  # 2 decodings x 2 checkpoints, each with its interval
    colours = {
        tuple(line.get_color()) if not isinstance(line.get_color(), str) else line.get_color() for line in top.lines
    }
    assert {"#3b3b3b", "#2ca02c"} <= colours  # layout.PALETTE's baseline and +DACA

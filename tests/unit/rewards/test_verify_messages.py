"""`daca-bench verify`'s closing line says plainly when there was nothing to score."""

import json

from daca_bench.cli import main


def test_an_empty_file_says_there_was_nothing_to_score(tmp_path, capsys):
    src, out = tmp_path / "empty.jsonl", tmp_path / "out.jsonl"
    src.write_text("")
    assert main(["verify", "arithmetic", "--input", str(src), "--output", str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert "nothing to score" in line and str(src) in line and "nan" not in line
    assert out.read_text() == ""


def test_lines_none_of_which_scored_say_so_and_a_scored_file_gives_its_mean(tmp_path, capsys):
    src, out = tmp_path / "bad.jsonl", tmp_path / "out.jsonl"
    src.write_text("not json\n\n")
    assert main(["verify", "arithmetic", "--input", str(src), "--output", str(out)]) == 2
    line = capsys.readouterr().out.strip()
    assert "2 lines, none could be scored" in line and "nan" not in line and "bad_input=2" in line
    src.write_text(json.dumps({"expression": "2+3", "answer": "5", "completion": "5"}) + "\n")
    assert main(["verify", "arithmetic", "--input", str(src), "--output", str(out)]) == 0
    assert "mean reward 1.0000 over 1 scored" in capsys.readouterr().out

import subprocess
import sys

from daca_bench.cli import SUBCOMMANDS, main


def test_help_lists_subcommands():
    out = subprocess.run([sys.executable, "-m", "daca_bench", "--help"], capture_output=True, text=True, check=True)
    for name in SUBCOMMANDS:
        assert name in out.stdout


def test_unknown_option_names_close_match(capsys):
    try:
        main(["sft", "--output-dri", "x"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "--output-dir" in capsys.readouterr().err


def test_unknown_command_names_close_match(capsys):
    assert main(["taks"]) == 2
    assert "tasks" in capsys.readouterr().err


def test_tasks_lists_the_tiny_arithmetic_family(capsys):
    assert main(["tasks", "--family", "math"]) == 0
    assert "arithmetic" in capsys.readouterr().out

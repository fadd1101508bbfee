"""Offline needs no setting: with no offline variable set and the hub unreachable, `tasks` lists
in seconds without opening a connection; `sample`, `eval` and `train` on a hub task that is not
cached end in one line that names `--data-file`, which then serves the task from a local file."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from daca_bench.cli import main

from repo_paths import ROOT


class CountingServer:
    """A local port that accepts and counts connections (and answers none of them)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port, self.count, self.stop = self.sock.getsockname()[1], 0, False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.count += 1
            conn.close()

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


def _offline_env(tmp_path: Path, endpoint: str) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    return {**env, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}


def test_tasks_lists_in_seconds_without_touching_the_network_and_no_offline_setting(tmp_path):
    server = CountingServer()
    try:
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-m", "daca_bench", "tasks"],
            capture_output=True,
            text=True,
            env=_offline_env(tmp_path, f"http://127.0.0.1:{server.port}"),
            cwd=ROOT,
            timeout=240,
        )
        seconds = time.monotonic() - start
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert server.count == 0, f"`tasks` opened {server.count} connections to the hub"
    assert "gsm8k" in proc.stdout and "train=? test=?" in proc.stdout  # a hub task: not cached here
    assert "Retrying" not in proc.stderr
    assert seconds < 120  # hub retries took about 5 minutes; the listing itself takes seconds


@pytest.fixture
def unreachable_hub(tmp_path, monkeypatch):
    """No offline variable, an empty cache, and a hub endpoint on a port nobody listens on."""
    import datasets.config
    from huggingface_hub import constants

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    return port


@pytest.mark.parametrize(
    "argv",
    [
        ["sample", "--task", "gsm8k", "--n", "1"],
        ["eval", "--model", "tiny", "--task", "gsm8k", "--n", "1", "--no-progress"],
        ["train", "--no-progress", "train.task=gsm8k", "train.init=", "train.steps=1"],
    ],
)
def test_a_hub_task_not_cached_is_one_line_naming_data_file(unreachable_hub, tmp_path, capsys, argv):
    start = time.monotonic()
    assert (
        main(
            [
                *argv,
                "--output-dir" if argv[0] != "sample" else "--output",
                str(tmp_path / ("out" if argv[0] != "sample" else "s.jsonl")),
            ]
        )
        == 2
    )
    assert time.monotonic() - start < 60
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"daca-bench {argv[0]}: the hub dataset openai/gsm8k"), err
    assert "is not cached here and the hub (http://127.0.0.1:" in err[0] and "--data-file" in err[0]


def test_data_file_serves_a_hub_task_from_a_local_file(unreachable_hub, tmp_path, capsys):
    data = tmp_path / "gsm8k_test.jsonl"
    data.write_text(
        "".join(json.dumps({"question": f"{a}+{a}?", "answer": f"{a} doubled\n#### {2 * a}"}) + "\n" for a in range(3))
    )
    out = tmp_path / "s.jsonl"
    assert (
        main(
            [
                "sample",
                "--task",
                "gsm8k",
                "--n",
                "3",
                "--output",
                str(out),
                "--data-file",
                f"test={data}",
                "model.max_positions=256",
            ]
        )
        == 0
    )
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["prompt"].split("Problem: ")[1].strip() for r in rows] == ["0+0?", "1+1?", "2+2?"]
    assert "DACA_BENCH_DATA_FILES" not in os.environ  # the option does not outlive the command
    # a command that reads two splits needs SPLIT=FILE; a missing file is one line
    assert main(["train", "--data-file", str(data), "train.task=gsm8k"]) == 2
    assert "train reads a train and a test split" in capsys.readouterr().err
    assert main(["sample", "--task", "gsm8k", "--data-file", f"test={tmp_path / 'nope.jsonl'}"]) == 2
    assert "no such file" in capsys.readouterr().err

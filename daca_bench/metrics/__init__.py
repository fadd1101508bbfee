"""`evaluate` metrics shipped with daca-bench, loadable offline by path:

import evaluate
from daca_bench.metrics import VERIFY_METRIC
metric = evaluate.load(VERIFY_METRIC)
metric.compute(predictions=["<answer>5</answer>"], references=[{"expression": "2+3"}], task="arithmetic")
"""

from pathlib import Path

VERIFY_METRIC = str(Path(__file__).resolve().parent / "daca_verify")

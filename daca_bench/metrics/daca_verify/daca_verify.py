"""daca_verify: an `evaluate` metric that scores predictions with a registered daca-bench task's
verifier. References are the task's records (the fields `daca-bench verify` reads, or the
scoring fields of `Task.to_hf_dataset()`), one per prediction; `task=` names the task.
Returns accuracy (the share of the scored predictions whose status is correct), the mean reward
over them (beside it: partial credit or shaping lifts it), the count scored, and the count of each
status (correct, wrong, no_answer, timeout, bad_input, infra_error)."""
import json
from collections import Counter

import datasets
import evaluate

from daca_bench.rewards.verify import score_records
from daca_bench.types import STATUSES, correct_share, mean_reward


class DacaVerify(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__, citation="", inputs_description="predictions: list of str; "
            "references: list of dict (a task's record, as JSON text or a dict); task: a registered task name",
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string")}))

    def _compute(self, predictions, references, task: str = "arithmetic", workers: int = 1):
        rows = [json.loads(r) for r in references]
        rewards = score_records(task, rows, predictions, workers)
        statuses = Counter(r.status for r in rewards)
        scored = [r.value for r in rewards if r.scored]
        return {"accuracy": correct_share(rewards), "mean_reward": mean_reward(rewards), "scored": len(scored),
                **{s: statuses[s] for s in STATUSES}}

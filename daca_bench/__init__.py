"""daca-bench: a benchmark and ablation harness for RL on masked diffusion language models.

The package is laid out in rooms, each importing only downwards or into the shared base:

    daca_bench/              the shared base: types, registry, config, adapter (one interface over
                             every model), models (loading one), loaders, checkpoint,
                             errors (expected failures), jsonl (line-faithful JSONL), cli
    daca_bench/rewards/      answer extraction, math / json / code checks, scoring, `verify`
    daca_bench/containers/   host side of the Docker code sandbox: image, worker slot, pool, CLI
    daca_bench/rl/           sampler + trajectory record, likelihood estimators (SML), credit (DPS),
                             losses, the trainer, masked-diffusion SFT, greedy evaluation
    daca_bench/experiments/  analysis/ (tables, stats, plots), grid/ (cells, presets, reproduce),
                             studies/ (estimator studies), commands/ (train, eval, table)

The names most people need are importable from here too (loaded on first use, so
`import daca_bench` stays light): `get_task`, `reward_function`, `load_model`, `sample`,
`sml_logprobs`, `dps_weights`, `train`, `load_config`.
"""

__version__ = "0.1.0"

_PUBLIC = {
    "get_task": "daca_bench.registry",
    "list_tasks": "daca_bench.registry",
    "load_config": "daca_bench.config",
    "load_model": "daca_bench.models",
    "reward_function": "daca_bench.rewards.verify",
    "sample": "daca_bench.rl.sampler",
    "sml_logprobs": "daca_bench.rl.likelihood",
    "dps_weights": "daca_bench.rl.credit",
    "train": "daca_bench.train.trainer",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'daca_bench' has no attribute {name!r}")

"""Training runs: the one run loop that RL and SFT share (`loop`: process group, run folder, resume,
optimiser and schedule, config.json, metrics log, checkpoints, stop signals, final save, summary),
the DACA-GRPO step and `train` (`trainer`), masked-diffusion SFT and `train_sft` (`sft`), and the
run-loop concerns beside them: collapse guards (`guards`) and metric reporters (`reporters`).

May import: the shared base, `daca_bench.rewards`, `daca_bench.engine`, `daca_bench.rl`, `daca_bench.metrics`
and `daca_bench.eval`. Never `experiments`.
"""

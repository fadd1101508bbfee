"""The RL core for masked diffusion LMs: the sampler and its trajectory record (`sampler`),
likelihood estimators with SML and the Monte Carlo ELBO (`likelihood`), DPS credit weights
(`credit`), advantages and the grpo / gspo / reinforce_pp losses (`losses`), the DACA-GRPO
training loop (`trainer`) and masked-diffusion SFT (`sft`); greedy evaluation is in daca_bench.eval.
Every formula is written out in docs/method.md. Imports nothing from experiments/.
"""

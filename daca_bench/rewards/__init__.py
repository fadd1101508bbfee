"""Rewards: how a completion is scored. Answer extraction (`answers`); the math, JSON and
code checks (`mathcheck`, `jsoncheck`, `codecheck`, the last through the Docker sandbox of
`daca_bench.containers`); the helpers the task files share: Reward builders, leak-free
splits, d1-compatible shaping (`scoring`); batch verification, TRL-style reward functions
and `daca-bench verify` (`verify`); the stock verifiers a new task is built from (`stock`) and
the task battery every task passes (`battery`). The rules are documented in tasks/README.md.
Imports nothing from rl/ or experiments/.
"""

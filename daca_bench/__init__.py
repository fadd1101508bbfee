"""daca-bench: a benchmark and ablation harness for RL on masked diffusion language models."""
__version__ = "0.1.0"

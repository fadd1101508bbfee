"""daca-bench rewards in TRL's GRPOTrainer: the task's dataset from `Task.to_hf_dataset()`, its
verifier as a reward function, a tiny causal LM built from a config (no download), two steps.

    python examples/trl_grpo.py [--task arithmetic] [--steps 2] [--output runs/trl-grpo]
Swap the tiny model for any causal LM (`AutoModelForCausalLM.from_pretrained(...)`) and the
task for any registered one (`daca-bench tasks`); the reward function needs only the columns
that `to_hf_dataset()` writes.
"""

from __future__ import annotations

import argparse

from transformers import LlamaConfig, LlamaForCausalLM
from trl import GRPOConfig, GRPOTrainer

from daca_bench.chars import build_char_tokenizer
from daca_bench.registry import get_task
from daca_bench.rewards.verify import reward_function


def tiny_causal_lm(tokenizer, seed: int = 0):
    import torch

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config)


def main(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="arithmetic")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--output", default="runs/trl-grpo")
    args = ap.parse_args(argv)

    dataset = get_task(args.task, split="train", n=16).to_hf_dataset()  # prompt, id, scoring fields
    tokenizer = build_char_tokenizer()
    config = GRPOConfig(
        output_dir=args.output,
        max_steps=args.steps,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        learning_rate=1e-4,
        beta=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=0,
    )
    trainer = GRPOTrainer(
        model=tiny_causal_lm(tokenizer),
        reward_funcs=[reward_function(args.task)],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    return trainer


if __name__ == "__main__":
    main()

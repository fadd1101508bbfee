"""The engine: how a model is held and moved, whatever the algorithm. PyTorch's FSDP2 under torchrun
(`parallel`: the mesh, wrap, rollout unshard, micro-batches and the collectives), resumable
checkpoints as save_pretrained folders or DCP (`checkpoint`), activation memory and the
out-of-memory message (`memory`), precision and run metadata (`runtime`), and the policy and its
reference loaded with LoRA or a 4-bit base (`policy`).

May import: the shared base (and `daca_bench.rewards`). Never `rl`, `eval`, `train` or `experiments`.
"""

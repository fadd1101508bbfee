"""Models for tests, benchmarks and the GPU check: the native LLaDA and Dream classes
(daca_bench.archs) at tiny sizes of the published configs, with random weights.

    folder = write_paper_folder("llada", tmp_path / "llada")      # the hub layout, loads natively
    adapter = paper_adapter("llada", d_model=64, n_layers=2)      # in memory, no folder
    folder = write_remote_folder("llada", tmp_path / "remote")    # the same, with generated modeling
    adapter = load_pretrained(str(folder), trust_remote_code=True) # files: the remote-code route

paper.py writes the published layout (config fields, key names, special-token ids, chat layouts);
remote.py adds modeling files generated from the native classes, for the trust_remote_code route.
"""

from __future__ import annotations

from .paper import LLADA_CHAT_TEMPLATE, paper_adapter, paper_config, paper_model, paper_tokenizer, write_paper_folder
from .remote import write_remote_folder

__all__ = [
    "LLADA_CHAT_TEMPLATE",
    "paper_adapter",
    "paper_config",
    "paper_model",
    "paper_tokenizer",
    "write_paper_folder",
    "write_remote_folder",
]

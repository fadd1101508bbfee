"""Remote-code files of the LLaDA-shaped test model (copied beside its weights by `write_llada_tiny`)."""

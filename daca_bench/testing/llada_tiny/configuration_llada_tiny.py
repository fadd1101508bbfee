"""Config of the LLaDA-shaped test model: a Llama-style bidirectional decoder, mask id in the config."""
from transformers import PretrainedConfig


class LLaDATinyConfig(PretrainedConfig):
    model_type = "llada_tiny"

    def __init__(self, vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=172, max_position_embeddings=1024, rope_theta=500000.0, rms_norm_eps=1e-5,
                 initializer_range=0.02, mask_token_id=1, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.initializer_range = initializer_range
        self.mask_token_id = mask_token_id
        super().__init__(**kwargs)

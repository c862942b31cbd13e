"""The softmax-attention consumers test_attention_gpu.py runs on the step's
outputs, and the package each needs: a consumer whose package does not
import is skipped with that package's name. Linear attention's consumers
(fla_gdn, fla_kda) take other inputs (gates, beta) and have their own check
(test_linear_attention_gpu.py's fla cases, bench/linear_attention.py)."""
import thdc.attention as attention

PACKAGES = {"torch_varlen": "torch.nn.attention.varlen", "flash_attn_4": "flash_attn.cute",
            "cudnn": "cudnn", "flashinfer": "flashinfer",
            "fla_gdn": "fla.ops.gated_delta_rule", "fla_kda": "fla.ops.kda"}
LINEAR = tuple(attention.FLA_CHUNK_SIZES)
CONSUMERS = [(c, v) for c, conventions in attention.CONVENTIONS.items() if c not in LINEAR
             for v in conventions]

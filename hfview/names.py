"""GGUF's names as gguf-py defines them: tensor names (`GGUF.ATTN_Q.weight` is "blk.{bid}.attn_q.weight") and
KV keys (`Keys.LLM.BLOCK_COUNT.format(arch=arch)`), so that no family types a name out again.

The gguf package on PyPI (0.19.0) predates the pinned converter's own gguf-py (inside llama-cpp-python 0.3.36's
sdist) by some keys. Those few are stated below under the pinned gguf-py's own names, and a test holds each to the
pinned gguf-py's value: when the package catches up, a line here goes.
"""
from __future__ import annotations

from types import SimpleNamespace

from gguf.constants import MODEL_TENSOR, TENSOR_NAMES
from gguf.constants import Keys as _GgufKeys


class TensorName(str):
    """A GGUF tensor name without its suffix, as gguf-py's TENSOR_NAMES has it ("blk.{bid}.attn_q")."""

    @property
    def weight(self) -> str:
        return f"{self}.weight"

    @property
    def bias(self) -> str:
        return f"{self}.bias"

    @property
    def wb(self) -> str:
        """Weight or bias: the {wb} of a rule's pattern."""
        return f"{self}.{{wb}}"


# FFN_PRE_NORM shares FFN_NORM's name; every other name is one tensor's
GGUF = SimpleNamespace(**{t.name: TensorName(TENSOR_NAMES[t]) for t in MODEL_TENSOR if t in TENSOR_NAMES})


class Keys(_GgufKeys):
    """gguf-py's Keys, with the pinned converter's keys that the gguf package does not have yet."""


    class LLM(_GgufKeys.LLM):
        EXPERT_LATENT_LENGTH = "{arch}.expert_latent_length"
        NUM_LOOPS = "{arch}.num_loops"
        SKIP_LOOP_FINAL_NORM = "{arch}.skip_loop_final_norm"

    class Attention(_GgufKeys.Attention):
        KEY_LENGTH_MLA_SWA = "{arch}.attention.key_length_mla_swa"
        KV_LORA_RANK_SWA = "{arch}.attention.kv_lora_rank_swa"
        RECURRENT_LAYERS = "{arch}.attention.recurrent_layers"
        ROPE_PATTERN = "{arch}.attention.rope_pattern"
        VALUE_LENGTH_MLA_SWA = "{arch}.attention.value_length_mla_swa"
        VALUE_SCALE = "{arch}.attention.value_scale"

        class Indexer(_GgufKeys.Attention.Indexer):
            BLOCK_SIZE = "{arch}.attention.indexer.block_size"
            KPOOL = "{arch}.attention.indexer.kpool"
            KPOOL_SELECT_TAIL = "{arch}.attention.indexer.kpool_select_tail"
            LOCAL_BLOCKS = "{arch}.attention.indexer.local_blocks"
            TYPES = "{arch}.attention.indexer.types"

    class KDA(_GgufKeys.KDA):
        GATE_LOWER_BOUND = "{arch}.kda.gate_lower_bound"
        SAFE_GATE = "{arch}.kda.safe_gate"

    class Activation:
        SITU_BETA = "{arch}.activation.situ_beta"
        SITU_LINEAR_BETA = "{arch}.activation.situ_linear_beta"

    class AttnRes:
        BLOCK_SIZE = "{arch}.attn_res.block_size"

    class HRM:
        H_CYCLES = "{arch}.hrm.h_cycles"
        LAYERS_PER_STACK = "{arch}.hrm.layers_per_stack"
        L_CYCLES = "{arch}.hrm.l_cycles"
        PREFIX_LM = "{arch}.hrm.prefix_lm"

    class HyperConnection:
        COUNT = "{arch}.hyper_connection.count"
        EPSILON = "{arch}.hyper_connection.epsilon"
        MAGNITUDE = "{arch}.hyper_connection.magnitude"
        SINKHORN_ITERATIONS = "{arch}.hyper_connection.sinkhorn_iterations"

    class Tokenizer(_GgufKeys.Tokenizer):
        NORMALIZER_LOWERCASE = "tokenizer.ggml.normalizer.lowercase"
        NORMALIZER_STRIP_ACCENTS = "tokenizer.ggml.normalizer.strip_accents"

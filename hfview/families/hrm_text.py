"""HRM-Text (HrmTextForCausalLM, model_type hrm_text) -> llama.cpp `hrm_text` (the converter's HrmTextModel).

Two stacks of pre-norm decoder layers, L (low) and H (high), run as a recurrence over the same tokens:
z_H = embeddings x embedding_scale, z_L = the stored z_L_init; H_cycles times: L_cycles times z_L = L(z_L + z_H),
then z_H = H(z_H + z_L); the logits are lm_head(z_H). Every norm is an RMS norm without weights (each layer's two
and each stack's closing one), so the checkpoint stores none. Attention is multi-head with a sigmoid gate on its
output before o_proj (q/k/v/gate fused as gqkv_proj, gate rows first), the MLP SwiGLU (gate_up_proj fused).

The file holds the 2 x num_layers_per_stack stored layers: L's as blk.0.., H's after them (blk.{lps + i}); the
gqkv and gate_up rows are split into attn_gate, attn_q, attn_k, attn_v and ffn_gate, ffn_up. block_count is the
expanded cache-slot count lps x H_cycles x (L_cycles + 1) (llama.cpp asserts it), as transformers 5.24 rewrites
num_hidden_layers on construction; a config as trained (num_hidden_layers the per-stack count, no
num_layers_per_stack) is read as HrmTextConfig reads it.

prefix_lm: transformers attends bidirectionally over an instruction block only where token_type_ids mark one;
on plain text both it and llama.cpp (causal only, `hrm.prefix_lm` kept for round-trip) attend causally.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Split, Tensor, stated, unset
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import RowSelection, expert_part
from ._parts.checks import silu_only

# transformers 5.24's HrmTextConfig, as data (what its __post_init__ computes is in normalise)
DEFAULTS = {
    "hrm_text": dict(vocab_size=151808, hidden_size=1536, intermediate_size=4096, num_hidden_layers=16,
                     num_attention_heads=12, hidden_act="silu", max_position_embeddings=2048, initializer_range=0.02,
                     rms_norm_eps=1e-6, use_cache=True, pad_token_id=None, bos_token_id=None, eos_token_id=None,
                     tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                     attention_bias=False, attention_dropout=0.0, mlp_bias=False, head_dim=128, H_cycles=2,
                     L_cycles=3, L_bp_cycles=None, embedding_scale=None, prefix_lm=True, num_layers_per_stack=None),
}
READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias", "initializer_range",
    "embedding_scale", "H_cycles", "L_cycles", "num_layers_per_stack", "prefix_lm",
})
HARMLESS: Harmless = {
    # training only: which inner L cycles propagate gradients (every cycle runs forward as well)
    "L_bp_cycles": ANY,
}
ARCHITECTURES = ("HrmTextForCausalLM",)


def layers_per_stack(h: dict) -> int:
    return h["num_layers_per_stack"]


def _chunk(part: int, parts: int, what: str):
    """Part `part` of `parts` equal row blocks of a fused matrix (torch.chunk along the rows)."""
    def make(sources, h):
        src = sources[0]
        if len(src.shape) != 2 or src.shape[0] % parts:
            raise CheckpointError(f"tensor {src.name!r} (shape {list(src.shape)}) does not split into {parts} equal "
                                  f"row blocks")
        return RowSelection(src, expert_part(1, src.shape[0], part, parts), what)
    return make


_L = "model.layers.{bid}."  # after rename: L's layer i is block i, H's is block lps + i
_GQKV = ("gate", "q", "k", "v")
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.z_L_init", "hrm.z_l_init"),
    Split(_L + "attn.gqkv_proj.weight",
          tuple((f"blk.{{bid}}.attn_{p}.weight", _chunk(i, 4, f"{p} rows of gqkv_proj")) for i, p in enumerate(_GQKV)),
          required=False),
    Tensor(_L + "attn.o_proj.weight", GGUF.ATTN_OUT.weight, required=False),
    Split(_L + "mlp.gate_up_proj.weight", ((GGUF.FFN_GATE.weight, _chunk(0, 2, "gate rows of gate_up_proj")),
                                           (GGUF.FFN_UP.weight, _chunk(1, 2, "up rows of gate_up_proj"))),
          required=False),
    Tensor(_L + "mlp.down_proj.weight", GGUF.FFN_DOWN.weight, required=False),
)
_STACKED = re.compile(r"model\.([LH])_module\.layers\.(\d+)\.(.+)")
_PER_LAYER = ("attn.gqkv_proj.weight", "attn.o_proj.weight", "mlp.gate_up_proj.weight", "mlp.down_proj.weight")


def rename(name: str, h: dict) -> str:
    """The converter's block numbering: L's layers first, H's after them."""
    m = _STACKED.fullmatch(name)
    if m is None:
        return name
    stack, i, rest = m.groups()
    return f"model.layers.{int(i) + (layers_per_stack(h) if stack == 'H' else 0)}.{rest}"


def stored_hparams(h: dict, stored: dict) -> dict:
    """Each stack stores exactly num_layers_per_stack layers, each with its four matrices (the tensor rules
    cannot say so: block_count counts cache slots, not stored blocks)."""
    lps = layers_per_stack(h)
    seen = set()
    for name in stored:
        m = _STACKED.fullmatch(name)
        if m is None:
            continue
        stack, i, rest = m.groups()
        if int(i) >= lps:
            raise CheckpointError(f"tensor {name!r}: layer {i} of the {stack} stack, but num_layers_per_stack is "
                                  f"{lps}; the config does not describe these weights")
        seen.add((stack, int(i), rest))
    for stack in "LH":
        for i in range(lps):
            for rest in _PER_LAYER:
                if (stack, i, rest) not in seen:
                    raise CheckpointError(f"tensor 'model.{stack}_module.layers.{i}.{rest}' is missing: the hrm_text "
                                          f"family needs it; a shard may be missing or incomplete")
    return h


def normalise(h: dict) -> dict:
    """What HrmTextConfig.__post_init__ computes: the embedding scale from initializer_range, and a config as
    trained (num_hidden_layers the per-stack count) read as the per-stack count plus the expanded slot count."""
    if h.get("L_bp_cycles") is None:
        h["L_bp_cycles"] = [2]
    if h.get("embedding_scale") is None and h.get("initializer_range"):
        h["embedding_scale"] = 1.0 / h["initializer_range"]
    if h.get("num_layers_per_stack") is None:
        h["num_layers_per_stack"] = h["num_hidden_layers"]
        h["num_hidden_layers"] = h["num_layers_per_stack"] * h["H_cycles"] * (h["L_cycles"] + 1)
    return h


REFUSE = (
    silu_only("hrm_text"),
    Refuse("embedding_scale", stated, "with no embedding_scale HrmTextConfig takes the scale as "
           "1 / initializer_range, which is undefined here"),
    *(Refuse(key, unset, f"llama.cpp's hrm_text architecture loads no {part} biases, so this checkpoint would not "
             f"run as written") for key, part in (("attention_bias", "attention"), ("mlp_bias", "feed-forward"))),
    Refuse("rope_parameters.rope_type", ("default",), "the view presents hrm_text with plain rope only (every "
           "HRM-Text release has none)", default="default"),
)


def check(h: dict, path: Path) -> None:
    slots = h["num_layers_per_stack"] * h["H_cycles"] * (h["L_cycles"] + 1)
    if h["num_hidden_layers"] != slots:
        raise ConfigError(f"{path}: num_hidden_layers {h['num_hidden_layers']} is not num_layers_per_stack x "
                          f"H_cycles x (L_cycles + 1) = {slots}; llama.cpp's hrm_text counts one block per cache "
                          f"slot and refuses any other count")
    n_kv = h.get("num_key_value_heads")
    if n_kv is not None and n_kv != h["num_attention_heads"]:
        raise ConfigError(f"{path}: num_key_value_heads {n_kv} differs from num_attention_heads "
                          f"{h['num_attention_heads']}; HRM-Text's attention is multi-head (transformers ignores the "
                          f"key) but the converter writes it and llama.cpp would group the keys by it")


def head_dim(h: dict) -> int:
    return h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*text_model_parameters(h, "hrm_text", block_count, file_type),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="hrm_text"), head_dim(h)),
            f32(Keys.LLM.EMBEDDING_SCALE.format(arch="hrm_text"), h["embedding_scale"]),
            u32(Keys.HRM.LAYERS_PER_STACK.format(arch="hrm_text"), h["num_layers_per_stack"]),
            u32(Keys.HRM.H_CYCLES.format(arch="hrm_text"), h["H_cycles"]),
            u32(Keys.HRM.L_CYCLES.format(arch="hrm_text"), h["L_cycles"]),
            boolean(Keys.HRM.PREFIX_LM.format(arch="hrm_text"), bool(h.get("prefix_lm", False)))]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="hrm_text",
    gguf_arch="hrm_text",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    rename=rename,
    stored_hparams=stored_hparams,
    notes={"H_cycles": "the H stack runs H_cycles times, each after L_cycles runs of the L stack (llama.cpp counts "
                       "one block per run of a stored layer, each with its own cache slot)",
           "prefix_lm": "written as stated; llama.cpp attends causally, as transformers does without token_type_ids"},
)

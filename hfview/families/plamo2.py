"""PLaMo 2 (Plamo2ForCausalLM / PLaMo2ForCausalLM, model_type plamo2, remote code: pfnet/plamo-2-1b, -8b,
plamo-2-translate) -> llama.cpp `plamo2` (the converter's Plamo2Model, a TextModel).

A hybrid of Mamba-2-style mixers and attention under PLaMo's names (model.layers.layers.{i}.mixer / .mlp), every layer
with sandwich norms and a SwiGLU MLP. Layer i is a Mamba layer unless i % mamba_step == mamba_step // 2 (with fewer
layers than mamba_step // 2, only the last attends): the release's is_mamba, which the converter copies into per-layer
head counts (0 on the Mamba layers), from which llama.cpp tells the two kinds apart.

The Mamba mixer: in_proj's rows are per head [gate, x] (hidden_size_per_head each), kept as stored (llama.cpp splits
them per head itself); a causal depthwise conv1d without bias (stored [d_inner, 1, d_conv], presented squeezed);
bcdt_proj gives B, C (mamba_d_state each) and a step of max(64, hidden_size / 16) that passes an RMSNorm
(dt_norm_weight) and dt_proj, then dt_bias (presented as the dt projection's bias) and a softplus; B and C pass
RMSNorms of their own (B_norm_weight, C_norm_weight); one decay per head, A = -exp(A_log), computed on read in the
converter's dtype; D skips, the gate multiplies by SiLU, out_proj closes. The attention: qkv_proj (all query heads, key
heads, value heads) as stored, per-head RMSNorms whose scales are stored per head ([heads, head width]: q_weight,
k_weight), NeoX rotation, scale hidden_size_per_head^-0.5. The norms store their scales as offsets, which the converter
adds back: 1 for pre_mixer_norm, pre_mlp_norm and the final norm, 1/5 for post_mixer_norm and 5^-1.5 for
post_mlp_norm; the mixer's own norms (dt/B/C, q/k) are plain scales.

transformers 5.24 has no PLaMo 2 class, so the converter reads config.json as written; its fallbacks for absent keys
are the release's Plamo2Config defaults (REMOTE_DEFAULTS), so an absent key means the same to both. What llama.cpp's
plamo2 cannot compute is refused by name: mamba_enabled false (the converter then writes no head counts and llama.cpp
would make every layer a Mamba layer), a layer pattern without Mamba layers, linear layers other than normal, an
evaluation-time quantisation, rope_local_theta other than the one base, rms_norm_eps other than 1e-6 (the release's
q/k norms fix 1e-6, llama.cpp uses rms_norm_eps for them).

The window: the release's attention layers not listed in full_attention_idx (none are, in released configs) attend to
the last attention_window_size positions and the current one; llama.cpp's plamo2 attends over the whole context. So
the view states that window as the one llama.cpp does not apply (the runner stops the context there), and within it
the two agree.

llama.cpp 0.3.36 does not run this file (the converter's, byte for byte): its generic hyperparameter load takes the head
width, and with it n_rot, from layer 0's head count, which is 0 here since layer 0 is a Mamba layer in every PLaMo 2;
plamo2's own load restores the width from key_length but not n_rot, and ggml's rope loop over 0 rotated dimensions
never ends, so llama_decode never returns. The same file with the attention layers' head count written on the Mamba
layers too (which llama.cpp's plamo2 never reads) runs and matches the release's forward (tests/test_family_plamo2.py).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Skip, Tensor
from ..gguf_layout import KV, ValueType
from ..params import f32, u32
from ..views import NEG_EXP, OFFSET_ONE, offset
from .mamba import squeezed

ARCHITECTURES = ("Plamo2ForCausalLM", "PLaMo2ForCausalLM")

# The release's Plamo2Config (configuration_plamo.py / modeling_plamo.py, as mlx-lm's and vLLM's copies state it);
# the converter's hparams.get fallbacks are the same values, so an absent key reads alike on both sides.
REMOTE_DEFAULTS = dict(
    hidden_size=4096, num_hidden_layers=32, rms_norm_eps=1e-6, tie_word_embeddings=True, num_attention_heads=32,
    num_key_value_heads=4, hidden_size_per_head=128, max_position_embeddings=2048, attention_window_size=2048,
    full_attention_idx=None, mamba_d_state=64, mamba_d_conv=4, mamba_num_heads=64, mamba_step=2,
    mamba_chunk_size=256, mamba_enabled=True, intermediate_size=13312, vocab_size=32000,
)
_D = REMOTE_DEFAULTS

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_size_per_head", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
    "attention_window_size", "full_attention_idx", "sliding_window", "mamba_d_state", "mamba_d_conv",
    "mamba_num_heads", "mamba_step", "mamba_enabled", "rope_theta", "rope_local_theta", "linear_type",
    "eval_attention_n_bit", "eval_mlp_n_bit",
})
# the scan's chunk length (the same result in chunks), FP8 accumulation (only with linear_type fp8, refused), and a
# vision wrapper's keys, unset on the text models
HARMLESS: Harmless = {"mamba_chunk_size": ANY, "fp8_accum_dtype": ANY, "image_token_id": (None,),
                      "image_feature_size": (None,), "image_proj_type": ("linear",)}

_L = "model.layers.layers.{bid}."
_tied = lambda h: h.get("tie_word_embeddings", True) is not False  # noqa: E731
TENSORS = (
    Tensor("model.embed_tokens.weight", "token_embd.weight"),
    Tensor("model.norm.weight", "output_norm.weight", steps=(OFFSET_ONE,)),
    # tied (the remote default) releases store no head; a stored one is written, as the converter does
    Tensor("lm_head.weight", "output.weight", required=lambda h: not _tied(h)),
    Tensor(_L + "pre_mixer_norm.weight", "blk.{bid}.attn_norm.weight", steps=(OFFSET_ONE,)),
    # attention layers
    Tensor(_L + "mixer.qkv_proj.weight", "blk.{bid}.attn_qkv.weight", required=False),
    Tensor(_L + "mixer.q_weight", "blk.{bid}.attn_q_norm.weight", required=False),
    Tensor(_L + "mixer.k_weight", "blk.{bid}.attn_k_norm.weight", required=False),
    Tensor(_L + "mixer.o_proj.weight", "blk.{bid}.attn_output.weight", required=False),
    # Mamba layers
    Tensor(_L + "mixer.in_proj.weight", "blk.{bid}.ssm_in.weight", required=False),
    Tensor(_L + "mixer.conv1d.weight", "blk.{bid}.ssm_conv1d.weight", squeezed, required=False),
    Tensor(_L + "mixer.bcdt_proj.weight", "blk.{bid}.ssm_x.weight", required=False),
    Tensor(_L + "mixer.dt_proj.weight", "blk.{bid}.ssm_dt.weight", required=False),
    Tensor(_L + "mixer.dt_bias", "blk.{bid}.ssm_dt.bias", required=False),
    Tensor(_L + "mixer.dt_norm_weight", "blk.{bid}.ssm_dt_norm", required=False),
    Tensor(_L + "mixer.A_log", "blk.{bid}.ssm_a", steps=(NEG_EXP,), required=False),
    Tensor(_L + "mixer.B_norm_weight", "blk.{bid}.ssm_b_norm", required=False),
    Tensor(_L + "mixer.C_norm_weight", "blk.{bid}.ssm_c_norm", required=False),
    Tensor(_L + "mixer.D", "blk.{bid}.ssm_d", required=False),
    Tensor(_L + "mixer.out_proj.weight", "blk.{bid}.ssm_out.weight", required=False),
    # every layer
    Tensor(_L + "post_mixer_norm.weight", "blk.{bid}.post_attention_norm", steps=(offset(1 / 5, "1/5"),)),
    Tensor(_L + "pre_mlp_norm.weight", "blk.{bid}.ffn_norm.weight", steps=(OFFSET_ONE,)),
    Tensor(_L + "mlp.gate_up_proj.weight", "blk.{bid}.ffn_up.weight"),
    Tensor(_L + "mlp.down_proj.weight", "blk.{bid}.ffn_down.weight"),
    Tensor(_L + "post_mlp_norm.weight", "blk.{bid}.post_ffw_norm", steps=(offset(1 / 5 ** 1.5, "5^-1.5"),)),
    Skip(_L + "mixer.rotary_emb.inv_freq"),
)
# Names without ".weight" (post norms, ssm_a / ssm_d, the dt/B/C norms): gguf-py's PLaMo 2 mapping names those tensors
# with their suffix (or none), so the converter's renaming consumes it, and llama.cpp's plamo2 loads them by those
# bare names. The mixer's tensors are per kind of layer; llama.cpp refuses a file that lacks one a layer needs.


def _get(h: dict, key: str):
    """hparams.get(key, default) as the converter reads it (a stated null is None, as there)."""
    return h.get(key, _D[key])


def mamba_layers(h: dict) -> list:
    """The release's is_mamba for each layer (all False where mamba_enabled is false)."""
    n, step = h["num_hidden_layers"], _get(h, "mamba_step")
    if not _get(h, "mamba_enabled"):
        return [False] * n
    if n <= step // 2:
        return [i != n - 1 for i in range(n)]
    return [i % step != step // 2 for i in range(n)]


def unapplied_window(h: dict):
    """attention_window_size where some attention layer slides (the release's full_attention_idx lists those that
    do not), else None."""
    full = set(_get(h, "full_attention_idx") or [])
    sliding = [i for i, m in enumerate(mamba_layers(h)) if not m and i not in full]
    return _get(h, "attention_window_size") if sliding else None


def normalise(h: dict) -> dict:
    """The window the release's attention layers slide through and llama.cpp's plamo2 does not, as sliding_window,
    which the runner reads to stop the context there (Plamo2Config sets sliding_window = attention_window_size "for
    vLLM", so a saved config states it; a stated one that differs is left for check to refuse)."""
    if h.get("num_hidden_layers") is None or h.get("sliding_window") not in (None, _get(h, "attention_window_size")):
        return h
    return {**h, "sliding_window": unapplied_window(h)}


def check(h: dict, path: Path) -> None:
    if h.get("architectures") and h["architectures"][0] not in ARCHITECTURES:
        raise ConfigError(f"{path}: architectures {h['architectures'][0]!r}: the plamo2 family reads "
                          f"{' or '.join(ARCHITECTURES)}")
    for key in ("vocab_size", "num_hidden_layers"):
        if h.get(key) is None:
            raise ConfigError(f"{path}: {key} is missing; the converter needs it (Plamo2Model reads it as written)")
    stated_none = [k for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                               "hidden_size_per_head", "max_position_embeddings", "rms_norm_eps", "mamba_d_state",
                               "mamba_d_conv", "mamba_num_heads", "mamba_step", "attention_window_size",
                               "mamba_enabled")
                   if k in h and h[k] is None]
    if stated_none:
        raise ConfigError(f"{path}: {stated_none[0]} is null; the converter writes a null where Plamo2Config would "
                          f"use {_D[stated_none[0]]!r}: state the value or leave the key out")
    if not _get(h, "mamba_enabled"):
        raise ConfigError(f"{path}: mamba_enabled false: the converter then writes no per-layer head counts, and "
                          f"llama.cpp's plamo2 would run every layer as a Mamba layer where the release attends in "
                          f"all of them")
    step = _get(h, "mamba_step")
    if step < 2:
        raise ConfigError(f"{path}: mamba_step {step}: the release needs at least 2 (it asserts mamba_step > 1); "
                          f"every mamba_step-th layer from mamba_step // 2 attends")
    kinds = mamba_layers(h)
    if not any(kinds):
        raise ConfigError(f"{path}: mamba_step {step} over {h['num_hidden_layers']} layers leaves no Mamba layer; "
                          f"llama.cpp's plamo2 keeps a hybrid cache, which no released PLaMo 2 leaves without one")
    full = _get(h, "full_attention_idx")
    if full is not None:
        wrong = [i for i in full if i >= len(kinds) or kinds[i]]
        if wrong:
            raise ConfigError(f"{path}: full_attention_idx lists layer {wrong[0]}, which is "
                              + ("past the layer count " + str(len(kinds)) if wrong[0] >= len(kinds) else
                                 "a Mamba layer (mamba_step " + str(step) + ")")
                              + "; it names attention layers that attend over the whole context")
    if h.get("sliding_window") not in (None, _get(h, "attention_window_size")):
        raise ConfigError(f"{path}: sliding_window {h['sliding_window']} differs from attention_window_size "
                          f"{_get(h, 'attention_window_size')}; the release slides through attention_window_size "
                          f"(its config sets sliding_window to it)")
    if (linear := h.get("linear_type", "normal")) != "normal":
        raise ConfigError(f"{path}: linear_type {linear!r}: llama.cpp's plamo2 has plain linear layers only "
                          f"(linear_type normal)")
    for key in ("eval_attention_n_bit", "eval_mlp_n_bit"):
        if h.get(key) is not None:
            raise ConfigError(f"{path}: {key} {h[key]!r}: the release then quantises its activations at evaluation "
                              f"time, which llama.cpp's plamo2 does not")
    if (eps := _get(h, "rms_norm_eps")) != 1e-6:
        raise ConfigError(f"{path}: rms_norm_eps {eps}: the release's q/k norms fix their epsilon at 1e-6, llama.cpp's "
                          f"plamo2 takes rms_norm_eps for them as for every norm; only 1e-6 runs alike")
    theta = h["rope_parameters"].get("rope_theta", 10000)
    if h.get("rope_local_theta") is not None and h["rope_local_theta"] != theta:
        raise ConfigError(f"{path}: rope_local_theta {h['rope_local_theta']} differs from the rope base {theta}; "
                          f"llama.cpp's plamo2 rotates every attention layer at one base")
    rope = {k: v for k, v in h["rope_parameters"].items() if k != "rope_theta"}
    if rope.get("rope_type", "default") != "default" or rope.get("factor") not in (None, 1, 1.0):
        raise ConfigError(f"{path}: rope scaling {rope}: the converter writes none for PLaMo 2 (rope_scaling / "
                          f"rope_parameters)")
    heads, kv = _get(h, "num_attention_heads"), _get(h, "num_key_value_heads")
    if heads % kv:
        raise ConfigError(f"{path}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Plamo2Model.set_gguf_parameters, in its order."""
    a = "plamo2"
    kinds = mamba_layers(h)
    kv_heads = [0 if m else _get(h, "num_key_value_heads") for m in kinds]
    heads = [0 if m else _get(h, "num_attention_heads") for m in kinds]
    head = _get(h, "hidden_size_per_head")
    return [u32(f"{a}.vocab_size", h["vocab_size"]),
            KV(f"{a}.attention.head_count_kv", ValueType.ARRAY, kv_heads, ValueType.INT32),
            KV(f"{a}.attention.head_count", ValueType.ARRAY, heads, ValueType.INT32),
            u32(f"{a}.context_length", _get(h, "max_position_embeddings")),
            u32(f"{a}.embedding_length", _get(h, "hidden_size")),
            u32(f"{a}.attention.key_length", head), u32(f"{a}.attention.value_length", head),
            u32(f"{a}.block_count", block_count),
            f32(f"{a}.attention.layer_norm_rms_epsilon", _get(h, "rms_norm_eps")),
            f32(f"{a}.rope.freq_base", h["rope_parameters"].get("rope_theta", 10000)),
            u32(f"{a}.ssm.state_size", _get(h, "mamba_d_state")),
            u32(f"{a}.ssm.conv_kernel", _get(h, "mamba_d_conv")),
            u32(f"{a}.ssm.time_step_rank", _get(h, "mamba_num_heads")),
            u32(f"{a}.ssm.inner_size", _get(h, "mamba_num_heads") * head),
            u32(f"{a}.ssm.group_count", 0),
            u32(f"{a}.feed_forward_length", _get(h, "intermediate_size")),
            u32("general.file_type", file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    """Plamo2Model.set_vocab: _set_vocab_plamo over tokenizer.jsonl."""
    from tokenizer.vocab import plamo_vocab
    return plamo_vocab(model_dir, h)


FAMILY = Family(
    name="plamo2",
    gguf_arch="plamo2",
    architectures=ARCHITECTURES,
    defaults={"plamo2": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    check=check,
    normalise=normalise,
    notes={"layer kinds": "Mamba unless i % mamba_step == mamba_step // 2; per-layer head counts 0 on Mamba layers",
           "norm offsets": "1 + w, 1/5 + w (post_mixer_norm), 5^-1.5 + w (post_mlp_norm), as the converter adds",
           "A": "-exp(A_log), in the converter's dtype",
           "llama.cpp": "0.3.36 never returns from llama_decode on this file (n_rot 0 from layer 0's head count 0)"},
)

"""PLaMo 2 (Plamo2ForCausalLM / PLaMo2ForCausalLM, model_type plamo2, remote code: pfnet/plamo-2-1b, plamo-2-8b,
plamo-2-translate) -> llama.cpp `plamo2` (the converter's Plamo2Model, a TextModel with its own hyperparameter list).

A hybrid: layer i runs a Mamba-2 mixer where i % mamba_step != mamba_step // 2 (with at most mamba_step // 2 layers,
every layer but the last), attention elsewhere, as the release's is_mamba places them; the converter writes that as
per-layer head counts, 0 on Mamba layers. Every layer has PLaMo's sandwich norms and a SwiGLU MLP (gate_up_proj fused,
gate rows first, as stored: llama.cpp splits it). Attention keeps the fused qkv_proj (query heads, then key, then
value) and per-head q/k RMSNorm scales (q_weight, k_weight: [heads, head_dim] as stored, no offset); rotation is
NeoX's, so nothing is permuted. The Mamba mixer's in_proj interleaves z and x per head, as llama.cpp reads it; its
conv1d is squeezed to [inner, kernel], bcdt_proj is B, C, then dt (ssm_x), dt_bias becomes ssm_dt.bias, and
A = -exp(A_log). The norms store their scales as offsets, which the converter adds back: 1 for pre_mixer_norm,
pre_mlp_norm and the final norm, 1/5 for post_mixer_norm, 5^-1.5 for post_mlp_norm.

transformers 5.24 has no PLaMo 2 class, so the converter reads config.json as written; where a key is absent it uses
its own fallbacks (the get(...) defaults in Plamo2Model.set_gguf_parameters, CONVERTER_FALLBACKS here), which the view
uses too. A released config states them all.

What llama.cpp (0.3.36) makes of the converter's file: its load_hparams sets the rotary width n_rot (and the head
width) from attention.head_count of layer 0 alone; layer 0 of every hybrid PLaMo 2 is a Mamba layer, written with
head_count 0, so n_rot is 0 and rope.dimension_count is never read (only when head_count[0] > 0). With n_rot 0 the CPU
rope kernel's channel loop steps back by n_rot - 2 and forward by 2, forever: llama.cpp hangs on the first attention
layer of the first evaluation. No scalar override reaches n_rot (rope.dimension_count_swa sets the sliding layers'
width, and plamo2 has none), and head_count is an array, which llama_model_kv_override cannot replace. So the file
exports as the converter writes it (bytes == the converter's), and hfview's runner hands llama.cpp the same bytes but
for head_count's zeros, read as the attention head count (Family.load_arrays): llama.cpp takes which layers are Mamba
from head_count_kv, which is unchanged, and n_rot from layer 0's heads. The logits oracle runs that (in
tests/test_family_plamo2.py), and a strict test keeps measuring the hang on the converter's own file.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Tensor
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import NEG_EXP, OFFSET_ONE, offset
from ._parts.state_space import squeezed

ARCH = "plamo2"
ARCHITECTURES = ("Plamo2ForCausalLM", "PLaMo2ForCausalLM")
READS = frozenset({
    "vocab_size", "hidden_size", "hidden_size_per_head", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
    "mamba_step", "mamba_enabled", "mamba_d_state", "mamba_d_conv", "mamba_num_heads",
})
HARMLESS: Harmless = {
    # how the remote code chunks its scan (the same recurrence, computed in blocks)
    "mamba_chunk_size": ANY,
    # the remote code's attention window (2048 as released); the converter writes none and llama.cpp's plamo2 attends
    # over the whole context, so past the window the two differ: the family declares it (window_key), and the runner
    # stops the context there unless asked for more
    "attention_window_size": ANY,
    # keys of the release's Plamo2Config that other ports of PLaMo 2 read (use_predefined_initial_state) or that
    # PLaMo 3's config shares (a vision wrapper's image_*, the linear layers' type and quantized evaluation),
    # accepted only at the values that change nothing: no predefined Mamba state, plain linear layers, no image input
    "use_predefined_initial_state": (False,),
    "image_token_id": (None,), "image_feature_size": (None,), "image_proj_type": ("linear",),
    "linear_type": ("normal",), "eval_attention_n_bit": (None,), "eval_mlp_n_bit": (None,),
    "fp8_accum_dtype": ANY,  # the accumulation dtype of fp8 linear layers, which linear_type normal does not use
}

# Plamo2Model.set_gguf_parameters' fallbacks (hparams.get(key, fallback)): what it writes for an absent key
CONVERTER_FALLBACKS = dict(
    mamba_step=2, mamba_enabled=True, num_key_value_heads=4, num_attention_heads=32, max_position_embeddings=2048,
    hidden_size=4096, hidden_size_per_head=128, rms_norm_eps=1e-6, mamba_d_state=64, mamba_d_conv=4,
    mamba_num_heads=64, intermediate_size=13312,
)


def _get(h: dict, key: str):
    return h.get(key, CONVERTER_FALLBACKS[key])


def is_mamba(h: dict) -> list[bool]:
    """Which layers run Mamba, as the release's is_mamba places them (and the converter restates it)."""
    n, step = h["num_hidden_layers"], _get(h, "mamba_step")
    if not _get(h, "mamba_enabled"):
        return [False] * n
    if n <= step // 2:
        return [i != n - 1 for i in range(n)]
    return [i % step != step // 2 for i in range(n)]


def dt_dim(h: dict) -> int:
    """The width of dt in bcdt_proj: max(64, hidden_size / 16), as the release and llama.cpp's plamo2 compute it."""
    return max(64, _get(h, "hidden_size") // 16)


_L = "model.layers.layers.{bid}."
_OPTIONAL = dict(required=False)  # present on the layers of one kind only (is_mamba places the kinds)
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=(OFFSET_ONE,)),
    # a tied release stores no head; a stored one is written, as the converter writes it
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: h.get("tie_word_embeddings") is False),
    Tensor(_L + "pre_mixer_norm.weight", GGUF.ATTN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "post_mixer_norm.weight", GGUF.ATTN_POST_NORM, steps=(offset(1 / 5, "1/5"),)),
    Tensor(_L + "pre_mlp_norm.weight", GGUF.FFN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "post_mlp_norm.weight", GGUF.FFN_POST_NORM, steps=(offset(1 / 5 ** 1.5, "5^-1.5"),)),
    Tensor(_L + "mlp.gate_up_proj.weight", GGUF.FFN_UP.weight),
    Tensor(_L + "mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    # attention layers
    Tensor(_L + "mixer.qkv_proj.weight", GGUF.ATTN_QKV.weight, **_OPTIONAL),
    Tensor(_L + "mixer.q_weight", GGUF.ATTN_Q_NORM.weight, **_OPTIONAL),
    Tensor(_L + "mixer.k_weight", GGUF.ATTN_K_NORM.weight, **_OPTIONAL),
    Tensor(_L + "mixer.o_proj.weight", GGUF.ATTN_OUT.weight, **_OPTIONAL),
    # Mamba layers
    Tensor(_L + "mixer.in_proj.weight", GGUF.SSM_IN.weight, **_OPTIONAL),
    Tensor(_L + "mixer.conv1d.weight", GGUF.SSM_CONV1D.weight, squeezed, **_OPTIONAL),
    Tensor(_L + "mixer.bcdt_proj.weight", GGUF.SSM_X.weight, **_OPTIONAL),
    Tensor(_L + "mixer.dt_proj.weight", GGUF.SSM_DT.weight, **_OPTIONAL),
    Tensor(_L + "mixer.dt_bias", GGUF.SSM_DT.bias, **_OPTIONAL),
    Tensor(_L + "mixer.dt_norm_weight", GGUF.SSM_DT_NORM, **_OPTIONAL),
    Tensor(_L + "mixer.B_norm_weight", GGUF.SSM_B_NORM, **_OPTIONAL),
    Tensor(_L + "mixer.C_norm_weight", GGUF.SSM_C_NORM, **_OPTIONAL),
    Tensor(_L + "mixer.A_log", GGUF.SSM_A, steps=(NEG_EXP,), **_OPTIONAL),
    Tensor(_L + "mixer.D", GGUF.SSM_D, **_OPTIONAL),
    Tensor(_L + "mixer.out_proj.weight", GGUF.SSM_OUT.weight, **_OPTIONAL),
    Skip(_L + "mixer.rotary_emb.inv_freq"),
)
# The post norms' and the Mamba norms' GGUF names carry no ".weight": gguf-py's PLaMo 2 mapping names them with the
# suffix, so the converter's renaming consumes it, and llama.cpp's plamo2 loads them by those bare names.


REFUSE = (
    Refuse("mamba_step", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a positive layer "
           "count is needed (the release runs attention where layer % mamba_step == mamba_step // 2)",
           default=CONVERTER_FALLBACKS["mamba_step"]),
)


def check(h: dict, path: Path) -> None:
    if h.get("num_hidden_layers") is None or h.get("vocab_size") is None:
        raise ConfigError(f"{path}: num_hidden_layers and vocab_size are needed; the converter reads PLaMo 2's "
                          f"config.json as written and fails without them")
    step = _get(h, "mamba_step")
    kinds = is_mamba(h)
    if not _get(h, "mamba_enabled") or not any(kinds):
        raise ConfigError(f"{path}: mamba_enabled {_get(h, 'mamba_enabled')!r}, mamba_step {step} over "
                          f"{h['num_hidden_layers']} layers: no Mamba layer; "
                          + ("the converter then writes no head counts at all, and llama.cpp's plamo2 would run "
                             "every layer as Mamba" if not _get(h, "mamba_enabled") else
                             "llama.cpp's plamo2 keeps a hybrid cache, which no released PLaMo 2 leaves without "
                             "Mamba layers"))
    heads, kv = _get(h, "num_attention_heads"), _get(h, "num_key_value_heads")
    if not kv or heads % kv:
        raise ConfigError(f"{path}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")


def head_counts(h: dict) -> tuple[list[int], list[int]]:
    """(head_count_kv, head_count) per layer: 0 on Mamba layers, as the converter writes them."""
    kinds = is_mamba(h)
    return ([0 if m else _get(h, "num_key_value_heads") for m in kinds],
            [0 if m else _get(h, "num_attention_heads") for m in kinds])


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Plamo2Model.set_gguf_parameters' list, in its order (it does not call TextModel's)."""
    kv_heads, heads = head_counts(h)
    d = _get(h, "hidden_size_per_head")
    theta = h.get("rope_parameters", {}).get("rope_theta", 10000)
    return [
        u32(Keys.LLM.VOCAB_SIZE.format(arch=ARCH), h["vocab_size"]),
        KV(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), ValueType.ARRAY, kv_heads, ValueType.INT32),
        KV(Keys.Attention.HEAD_COUNT.format(arch=ARCH), ValueType.ARRAY, heads, ValueType.INT32),
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch=ARCH), _get(h, "max_position_embeddings")),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch=ARCH), _get(h, "hidden_size")),
        u32(Keys.Attention.KEY_LENGTH.format(arch=ARCH), d),
        u32(Keys.Attention.VALUE_LENGTH.format(arch=ARCH), d),
        u32(Keys.LLM.BLOCK_COUNT.format(arch=ARCH), block_count),
        f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=ARCH), _get(h, "rms_norm_eps")),
        f32(Keys.Rope.FREQ_BASE.format(arch=ARCH), theta),
        u32(Keys.SSM.STATE_SIZE.format(arch=ARCH), _get(h, "mamba_d_state")),
        u32(Keys.SSM.CONV_KERNEL.format(arch=ARCH), _get(h, "mamba_d_conv")),
        u32(Keys.SSM.TIME_STEP_RANK.format(arch=ARCH), _get(h, "mamba_num_heads")),
        u32(Keys.SSM.INNER_SIZE.format(arch=ARCH), _get(h, "mamba_num_heads") * d),
        u32(Keys.SSM.GROUP_COUNT.format(arch=ARCH), 0),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=ARCH), _get(h, "intermediate_size")),
        u32(Keys.General.FILE_TYPE, file_type),
    ]


def load_arrays(h: dict) -> dict[str, list[int]]:
    """head_count as llama.cpp 0.3.36 must read it to run the file: the Mamba layers' zeros as the attention head
    count (it reads n_rot from layer 0's, and which layers are Mamba from head_count_kv)."""
    _, heads = head_counts(h)
    return {f"{ARCH}.attention.head_count": [_get(h, "num_attention_heads")] * len(heads)}


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import plamo_vocab
    return plamo_vocab(model_dir, h)


FAMILY = Family(
    name="plamo2",
    gguf_arch=ARCH,
    architectures=ARCHITECTURES,
    defaults={"plamo2": {}},  # no transformers class: nothing is filled in
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    runner=RunnerFacts(load_arrays=load_arrays, window_key="attention_window_size"),
    notes={"hybrid": "Mamba layers where layer % mamba_step != mamba_step // 2, written as head counts 0",
           "norm offsets": "1 + w, 1/5 + w (post_mixer_norm), 5^-1.5 + w (post_mlp_norm), as the converter adds",
           "llama.cpp": "exports the converter's bytes, on which llama.cpp 0.3.36 hangs (n_rot 0); the runner "
                        "presents head_count's zeros as the head count (Family.load_arrays)"},
)

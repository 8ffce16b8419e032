"""llama-quantize's choices, as data: which type each tensor of a file gets for a llama_ftype (Q4_K_M, ...).

Written from llama.cpp's src/llama-quant.cpp (pinned llama-cpp-python 0.3.36) with its default parameters: the
ftype's default type, the per-category mixes of the _S/_M/_L files, the fallbacks when a row is not whole
blocks, the tensors it leaves as they are. The bytes themselves come from ggml (hfview.ggml_quants); what
llama_model_quantize does to the file around them (tensor order, KV edits) is `requantized_kv` and
`tensor_order`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .gguf_layout import GGMLType as T

# llama_ftype of each llama-quantize file type -> its default tensor type
FILE_TYPES: dict[str, tuple[int, T]] = {
    "Q4_0": (2, T.Q4_0), "Q4_1": (3, T.Q4_1), "Q8_0": (7, T.Q8_0), "Q5_0": (8, T.Q5_0), "Q5_1": (9, T.Q5_1),
    "Q2_K": (10, T.Q2_K), "Q3_K_S": (11, T.Q3_K), "Q3_K_M": (12, T.Q3_K), "Q3_K_L": (13, T.Q3_K),
    "Q4_K_S": (14, T.Q4_K), "Q4_K_M": (15, T.Q4_K), "Q5_K_S": (16, T.Q5_K), "Q5_K_M": (17, T.Q5_K),
    "Q6_K": (18, T.Q6_K), "IQ2_XXS": (19, T.IQ2_XXS), "IQ2_XS": (20, T.IQ2_XS), "Q2_K_S": (21, T.Q2_K),
    "IQ3_XS": (22, T.IQ3_S), "IQ3_XXS": (23, T.IQ3_XXS), "IQ1_S": (24, T.IQ1_S), "IQ4_NL": (25, T.IQ4_NL),
    "IQ3_S": (26, T.IQ3_S), "IQ3_M": (27, T.IQ3_S), "IQ2_S": (28, T.IQ2_XS), "IQ2_M": (29, T.IQ2_S),
    "IQ4_XS": (30, T.IQ4_XS), "IQ1_M": (31, T.IQ1_M), "TQ1_0": (36, T.TQ1_0), "TQ2_0": (37, T.TQ2_0),
    "MXFP4_MOE": (38, T.MXFP4),
}
# the very low-bit file types, whose mixes differ (llama_tensor_get_type_impl's second branch)
_IQ2_FILES = ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ2_S", "IQ2_M", "IQ1_M")
# tensor types llama_model_quantize quantizes only with an importance matrix (tensor_requires_imatrix)
_NEED_IMATRIX = (T.IQ3_XXS, T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ1_M, T.IQ1_S)

QUANTIZATION_VERSION = 2  # GGML_QNT_VERSION, which llama_model_quantize writes

# names llama_model_quantize never quantizes (substrings, as tensor_allows_quantization matches them)
_KEPT = ("_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
         "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
         "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
         "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
         "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
         "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
         "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
         "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd")
_KEPT_EXACT = ("position_embd.weight", "token_types.weight")
_KEPT_GLM5_NEXT = ("hc_", "indexer.attn_q_b", "indexer.attn_k", "indexer.proj", "indexer_compressor_gate",
                   "indexer_compressor_ape", "ssm_f_a.weight", "ssm_f_b.weight", "ssm_g_a.weight",
                   "ssm_g_b.weight", "ssm_beta.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight",
                   "attn_v_b.weight")

# tensor categories, first match wins (tensor_get_category)
_CATEGORIES = (("attn_qkv.weight", "qkv"), ("attn_kv_b.weight", "kv_b"), ("attn_v.weight", "v"),
               ("attn_k.weight", "k"), ("attn_q.weight", "q"), ("attn_output.weight", "output_proj"),
               ("ffn_up", "up"), ("ffn_gate", "gate"), ("ffn_down", "down"))
_ATTN_V = ("v", "qkv", "kv_b")

# fallbacks where a row is not whole blocks of the chosen type (tensor_type_fallback)
_FALLBACK = {T.IQ1_S: T.IQ4_NL, T.IQ1_M: T.IQ4_NL, T.IQ2_XXS: T.IQ4_NL, T.IQ2_XS: T.IQ4_NL, T.IQ2_S: T.IQ4_NL,
             T.IQ3_XXS: T.IQ4_NL, T.IQ3_S: T.IQ4_NL, T.IQ4_XS: T.IQ4_NL, T.Q2_K: T.Q4_0, T.Q3_K: T.Q4_0, T.TQ1_0: T.Q4_0, T.TQ2_0: T.Q4_0,
             T.Q4_K: T.Q5_0, T.Q5_K: T.Q5_1, T.Q6_K: T.Q8_0}

# llama.cpp's model sizes that change a choice: only LLM_TYPE_70B does (attn_v gets more bits); per
# architecture, the layer count its load_hparams names 70B (Llama's only with grouped KV heads)
_SEVENTY_B = {"llama": 80, "qwen2": 80, "deci": 80, "olmo": 80, "jais2": 68}


@dataclass(frozen=True)
class ModelFacts:
    """What llama-quantize's choices read from the model's hyperparameters."""
    arch: str
    n_layer: int
    n_expert: int   # 0 when the file states none or one (llama.cpp's n_expert)
    n_gqa: int      # first layer's query heads per KV head, 0 without KV heads
    is_70b: bool

    @classmethod
    def from_kv(cls, kv: dict) -> "ModelFacts":
        arch = kv["general.architecture"]

        def first(key, default=0):
            value = kv.get(f"{arch}.{key}", default)
            return value[0] if isinstance(value, list) else value
        n_layer = kv[f"{arch}.block_count"]
        n_head = first("attention.head_count")
        n_head_kv = first("attention.head_count_kv", n_head)
        n_expert = kv.get(f"{arch}.expert_count", 0)
        return cls(arch, n_layer, n_expert if n_expert > 1 else 0, n_head // n_head_kv if n_head_kv else 0,
                   _SEVENTY_B.get(arch) == n_layer and (arch != "llama" or n_head != n_head_kv))


def allows_quantization(name: str, n_dims: int, arch: str) -> bool:
    """tensor_allows_quantization with default parameters (output.weight is quantized)."""
    if n_dims < 2 or not name.endswith("weight"):
        return False
    if any(s in name for s in _KEPT) or name in _KEPT_EXACT:
        return False
    return not (arch == "glm5-next" and any(s in name for s in _KEPT_GLM5_NEXT))


def category(name: str) -> str:
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    return next((c for s, c in _CATEGORIES if s in name), "other")


def _more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


class _Counters:
    def __init__(self, names: list[str], n_layer: int):
        self.n_attention_wv = sum(category(n) in _ATTN_V for n in names)
        self.tied = "output.weight" not in names
        self.n_ffn = n_layer
        self.i_attention_wv = self.i_down = self.i_gate = self.i_up = 0


_LAYER = re.compile(r"blk\.(-?\d+)\.")


def _layer(name: str, counter: int, m: ModelFacts) -> tuple[int, int]:
    """(layer, layers) of an FFN tensor: its counter in a dense model, its name's block in a mixture."""
    if m.n_expert > 1:
        found = _LAYER.match(name)
        if not found:
            raise ValueError(f"llama-quantize cannot place tensor {name} in a layer")
        return int(found.group(1)), m.n_layer
    return counter, m.n_layer


def _mixed_type(t: T, name: str, dims: tuple[int, ...], ftype: str, m: ModelFacts, c: _Counters,
                imatrix: bool) -> T:
    """llama_tensor_get_type_impl: the type a file type's mix gives one tensor (before the fallback)."""
    from .ggml_quants import block

    cat, ncols, falcon = category(name), dims[0], m.arch == "falcon"
    if m.arch == "glm5-next" and any(s in name for s in ("attn_q_a", "attn_q_b", "nextn.eh_proj")):
        return T.Q8_0
    if cat == "output" or (c.tied and cat == "token_embd"):
        if ftype == "MXFP4_MOE" or falcon or ncols % block(t)[0]:
            return T.Q8_0
        if ftype in _IQ2_FILES or ftype == "IQ3_XXS":
            return T.Q5_K
        return t if t == T.Q8_0 else T.Q6_K
    if ftype == "MXFP4_MOE":
        experts = len(dims) > 2 and dims[2] > 1
        return T.MXFP4 if experts and (m.arch != "bailingmoe3" or cat in ("up", "gate", "down")) else T.Q8_0
    if cat == "token_embd":
        return {"IQ2_XXS": T.Q2_K, "IQ2_XS": T.Q2_K, "IQ1_S": T.Q2_K, "IQ1_M": T.Q2_K, "IQ2_S": T.IQ3_S,
                "IQ2_M": T.IQ3_S, "IQ3_XXS": T.IQ3_S, "TQ1_0": T.Q4_K, "TQ2_0": T.Q4_K}.get(ftype, t)
    if ftype in _IQ2_FILES:
        iq2_s = ftype in ("IQ2_S", "IQ2_M")
        if cat in _ATTN_V:
            c.i_attention_wv += 1
            return T.Q4_K if m.n_gqa >= 4 or m.n_expert >= 4 else T.IQ3_S if iq2_s else T.Q2_K
        if m.n_expert == 8 and cat == "k":
            return T.Q4_K
        if cat == "down":
            c.i_down += 1
            return (T.IQ3_S if iq2_s else T.Q2_K) if c.i_down - 1 < c.n_ffn // 8 else t
        if cat == "output_proj":
            if m.n_expert == 8:
                return T.Q5_K
            return T.IQ2_XXS if ftype in ("IQ1_S", "IQ1_M") else T.IQ3_S if iq2_s else t
        return t
    if cat in _ATTN_V:
        if ftype == "Q2_K":
            t = T.Q4_K if m.n_gqa >= 4 else T.Q3_K
        elif ftype == "Q2_K_S" and m.n_gqa >= 4:
            t = T.Q4_K
        elif ftype == "IQ3_XXS":
            t = T.Q4_K if m.n_gqa >= 4 else T.IQ3_XXS if imatrix else T.IQ3_S
        elif ftype in ("IQ3_XS", "IQ3_S") and m.n_gqa >= 4:
            t = T.Q4_K
        elif ftype == "IQ3_M":
            t = T.Q4_K
        elif ftype == "Q3_K_M":
            t = T.Q5_K if c.i_attention_wv < 2 else T.Q4_K
        elif ftype == "Q3_K_L":
            t = T.Q5_K
        elif ftype in ("IQ4_NL", "IQ4_XS") and m.n_gqa >= 4:
            t = T.Q5_K
        elif ftype in ("Q4_K_M", "Q5_K_M") and _more_bits(c.i_attention_wv, c.n_attention_wv):
            t = T.Q6_K
        elif ftype == "Q4_K_S" and c.i_attention_wv < 4:
            t = T.Q5_K
        if m.is_70b and t in (T.Q3_K, T.Q4_K):
            t = T.Q5_K
        if m.n_expert == 8:
            t = T.Q8_0
        c.i_attention_wv += 1
        return t
    if cat == "k":
        if m.n_expert == 8:
            return T.Q8_0
        return {"IQ3_XS": T.IQ3_XXS, "IQ3_XXS": T.IQ2_S}.get(ftype, t)
    if cat == "q":
        return {"IQ3_XS": T.IQ3_XXS, "IQ3_XXS": T.IQ2_S}.get(ftype, t)
    if cat == "down":
        i, n = _layer(name, c.i_down, m)
        c.i_down += 1
        if ftype == "Q2_K":
            return T.Q3_K
        if ftype == "Q2_K_S":
            return T.Q4_K if i < n // 8 else t
        if ftype == "IQ3_XXS" and not imatrix:
            return T.Q4_K if i < n // 8 else T.Q3_K
        if ftype == "Q3_K_M":
            return T.Q5_K if i < n // 16 else T.Q4_K if not falcon or _more_bits(i, n) else T.Q3_K
        if ftype == "IQ3_M" and (i < n // 8 or (m.n_expert == 8 and _more_bits(i, n))):
            return T.Q4_K
        if ftype == "Q3_K_L":
            return T.Q4_K if falcon else T.Q5_K
        if ftype == "Q4_K_M":
            if falcon:
                return T.Q6_K if i < n // 16 else T.Q5_K if _more_bits(i, n) else T.Q4_K
            return T.Q6_K if _more_bits(i, n) else t
        if i < n // 8 and ftype in ("IQ4_NL", "IQ4_XS") and not imatrix:
            return T.Q5_K
        if ftype == "Q5_K_M" and _more_bits(i, n):
            return T.Q6_K
        if ftype == "Q4_K_S" and not falcon and i < n // 8:
            return T.Q5_K
        if ftype in ("Q4_0", "Q5_0") and imatrix and i < n // 8:
            return T.Q4_1 if ftype == "Q4_0" else T.Q5_1
        return t
    if cat == "output_proj":
        if falcon:
            return T.Q4_K if ftype == "Q3_K_L" else t
        if m.n_expert == 8:
            return T.Q5_K if ftype in ("Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S",
                                       "Q4_K_M", "IQ3_S", "IQ3_M", "IQ4_XS") else t
        return {"Q2_K": T.Q3_K, "IQ3_XXS": T.IQ3_S, "Q3_K_M": T.Q4_K, "Q3_K_L": T.Q5_K,
                "IQ3_M": T.Q4_K}.get(ftype, t)
    if cat == "qkv":
        return T.Q4_K if ftype in ("Q3_K_M", "Q3_K_L", "IQ3_M") else \
            {"Q4_K_M": T.Q5_K, "Q5_K_M": T.Q6_K}.get(ftype, t)
    if cat in ("gate", "up"):
        counter = "i_gate" if cat == "gate" else "i_up"
        i, n = _layer(name, getattr(c, counter), m)
        setattr(c, counter, getattr(c, counter) + 1)
        if ftype == "IQ3_XS" and n // 8 <= i < 7 * n // 8:
            return T.IQ3_XXS
    return t


def requires_imatrix(name: str, t: T, ftype: str) -> bool:
    """tensor_requires_imatrix: the very low-bit types, and Q2_K in a Q2_K_S file (not embeddings or output)."""
    if category(name) in ("token_embd", "output"):
        return False
    return t in _NEED_IMATRIX or (t == T.Q2_K and ftype == "Q2_K_S")


def _fallback(t: T, ncols: int) -> T:
    from .ggml_quants import block

    if ncols % block(t)[0] == 0:
        return t
    t = _FALLBACK.get(t, t)  # a type of blocks of 32 has none smaller: F16 below, as for a fallback that fails
    return t if ncols % block(t)[0] == 0 else T.F16


def tensor_order(names: list[str]) -> list[str]:
    """llama_model_quantize's order: the model loader's weights map (tensors outside blocks first, then block
    by block, by name within each)."""
    def key(name):
        found = _LAYER.match(name)
        return (int(found.group(1)) if found else -1, name.encode())
    return sorted(names, key=key)


def choose_types(tensors: list[tuple[str, tuple[int, ...], T]], ftype: str, m: ModelFacts,
                 imatrix: bool = False) -> list[T]:
    """The type llama_model_quantize gives each tensor (name, ggml dims, current type), in `tensor_order`;
    `imatrix`: whether an importance matrix is given (some mixes depend on it)."""
    _, default = FILE_TYPES[ftype]
    c = _Counters([n for n, _, _ in tensors], m.n_layer)
    out = []
    for name, dims, current in tensors:
        n_dims = max((i + 1 for i, d in enumerate(dims) if d > 1), default=1)
        if not allows_quantization(name, n_dims, m.arch):
            out.append(current)
            continue
        t = _fallback(_mixed_type(default, name, dims, ftype, m, c, imatrix), dims[0])
        if not imatrix and requires_imatrix(name, t, ftype):
            raise ValueError(f"{ftype} quantizes {name} as {t.name}, which needs an importance matrix (--imatrix), "
                             f"as llama-quantize refuses it without one")
        out.append(t)
    return out

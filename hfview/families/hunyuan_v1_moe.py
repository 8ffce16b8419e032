"""Hunyuan MoE (Hunyuan-A13B: HunYuanMoEV1ForCausalLM) -> llama.cpp `hunyuan-moe` (the converter's HunYuanMoEModel).

Hunyuan dense's attention (q/k norms after rope, rotate-half rope as stored, the NTK-alpha base the converter
writes for rope labelled "dynamic") over a mixture in every layer: a softmax router (`mlp.gate.wg`, the chosen
experts' weights renormalised), per-expert SwiGLUs stacked down, gate, up, and one always-on shared MLP
(`mlp.shared_mlp`) as wide as an expert. The per-layer lists the release states (moe_topk,
moe_intermediate_size, num_shared_expert) are read as the converter reads them: their first entry, all entries
equal.

Hunyuan-A13B as released states model_type "hunyuan" (its own HunYuanConfig and model, auto_map); the converter picks
HunYuanMoEModel by its architectures and reads that config.json as it stands, without head_dim (its code rotates
hidden_size / num_attention_heads, as llama.cpp does where no key_length is written). Its other keys are its config
class's: each is read, harmless at the value the release states (HARMLESS, from what its hunyuan.py and
modeling_hunyuan.py, read as text, do with it), or null. The reference is transformers' HunYuanMoEV1 over the same
weights, the config read as hunyuan_v1_moe with head_dim stated. The release's own code differs from it in one thing:
its top-k gate (topkgating, read, not run) drops the tokens an expert receives past max(topk, topk * tokens //
num_experts) in one forward pass; transformers' class and llama.cpp drop none.

The vocabulary: the converter reads it only through the release's tokenizer code (tokenization_hy.py, run with
trust_remote_code). hfview runs no checkpoint code: it reads hy.tiktoken as that code reads it (one token per line,
in line order, a repeated token skipped) and numbers after the ranks the special tokens that code defines, splits
with its pattern after NFC, and writes what the converter writes from them (BOS forced to 127959 as it does).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError, shown
from ..family import Experts, Family, Refuse, Tensor, unset
from ..names import GGUF, Keys
from ..params import f32, string, text_model_parameters, u32
from ._parts.checks import check_stated, silu_only
from .hunyuan_v1_dense import TENSORS as _DENSE_TENSORS

# transformers 5.24's HunYuanMoEV1Config defaults, as data (its attribute map names num_experts_per_tok moe_topk)
DEFAULTS = {
    "hunyuan_v1_moe": dict(vocab_size=290943, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                           num_attention_heads=32, num_key_value_heads=32, hidden_act="silu",
                           max_position_embeddings=2048, initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2, eod_token_id=3, sep_token_id=4,
                           pretraining_tp=1, tie_word_embeddings=False,
                           rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                           attention_dropout=0.0, num_experts=1, output_router_logits=False, moe_topk=1,
                           head_dim=None),
    # Hunyuan-A13B as released: model_type "hunyuan", its config class and model in its own code (auto_map), which
    # transformers 5.24 has no class for. The converter loads configs without remote code, so its AutoConfig raises and
    # it reads config.json as it stands: no defaults fill a hunyuan config (check requires HUNYUAN_STATED).
    # transformers' HunYuanMoEV1 over the same weights, the config read as hunyuan_v1_moe, computes what the release's
    # code computes (tests/test_family_hunyuan_v1_moe.py's twin)
    "hunyuan": {},
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "eod_token_id",
    "num_experts", "moe_topk", "moe_intermediate_size", "num_shared_expert",  # the converter's per-layer lists
    "attention_head_dim",  # checked: head_dim as the release states it twice
})
# Keys Hunyuan-A13B's release states at the values transformers' HunYuanMoEV1 computes (which reads none of them);
# at any other value the release's own code would compute another model. Training-time switches are harmless.
HARMLESS: Harmless = {
    "use_qk_norm": (True,), "use_rotary_pos_emb": (True,), "use_mixed_mlp_moe": (True,), "use_cla": (False,),
    "use_mla": (False,), "norm_type": ("rms",), "mlp_bias": (False,), "norm_topk_prob": (True,),
    "moe_layer_num_skipped": (0,), "group_limited_greedy": (False,), "routed_scaling_factor": (1.0,),
    "moe_drop_tokens": ANY, "moe_random_routing_dropped_token": ANY,
    "org_vocab_size": ANY,  # the tokenizer's size before padding
    # The rest of the release's HunYuanConfig (model_type hunyuan), as its own forward (hunyuan.py, modeling_hunyuan.py,
    # read as text) uses them. A reward head (pool_head, no final norm) under add_classification_head, whose class_num,
    # pool_type and pad_id only it reads; cla_share_factor read only with use_cla (held false above)
    "add_classification_head": (False,), "class_num": ANY, "pool_type": ANY, "pad_id": ANY, "dense_list": ANY,
    "cla_share_factor": ANY,
    # the multimodal class's loss masks (MultimodelHunYuanForCausalLM, labels only) and its prompt markers
    **dict.fromkeys(("im_start_id", "im_end_id", "im_newline_id", "text_start_id", "text_end_id", "image_token_id",
                     "video_start_id", "video_end_id", "mask_init_id"), ANY),
    # the vision tower's settings (vit_model.py's, empty in the release): the text forward never reads them
    **dict.fromkeys(("vit_path", "vit_type", "vit_input_resolution", "vit_token", "vit_patch", "vit_mapping_type",
                     "vit_norm_type", "vit_used_rms_norm", "vit_remove_prenorm", "vit_add_patchemb_bias",
                     "num_media_embeds", "anyres_vit_max_image_size", "anyres_pooling_size", "anyres_vit_two_views",
                     "skip_cls_token"), ANY),
    # XD-RoPE (a later Hunyuan's rope over sections); the release's code reads neither, off and unset
    "position_embedding_xdrope": (False,), "xdrope_section": (None,),
}
ALIASES = {"num_experts_per_tok": "moe_topk", "num_local_experts": "num_experts"}

_LAYER = "model.layers.{bid}."
TENSORS = (
    *(r for r in _DENSE_TENSORS if ".mlp." not in r.hf),
    Tensor(_LAYER + "mlp.gate.wg.weight", GGUF.FFN_GATE_INP.weight),
    *(Experts(f"{_LAYER}mlp.experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts")
      for p in ("down", "gate", "up")),
    Tensor(_LAYER + "mlp.shared_mlp.gate_proj.weight", GGUF.FFN_GATE_SHEXP.weight),
    Tensor(_LAYER + "mlp.shared_mlp.up_proj.weight", GGUF.FFN_UP_SHEXP.weight),
    Tensor(_LAYER + "mlp.shared_mlp.down_proj.weight", GGUF.FFN_DOWN_SHEXP.weight),
)

_ARCH = "hunyuan-moe"
_LISTS = ("moe_topk", "moe_intermediate_size", "num_shared_expert")


REFUSE = (
    silu_only(_ARCH),
    Refuse("attention_bias", unset, f"llama.cpp's {_ARCH} has no attention biases"),
    *(Refuse(key, lambda v: isinstance(v, list), f"the converter reads {key} as a per-layer list (its first entry) "
             f"and fails on anything else; Hunyuan-A13B states one entry per layer") for key in _LISTS),
    Refuse("num_experts", lambda v: bool(v) and isinstance(v, int) and v >= 2, f"llama.cpp's {_ARCH} needs a mixture "
           f"of at least two experts in every layer"),
    Refuse("num_shared_expert", lambda v: not v or v[0] == 1, "transformers' HunYuanMoEV1 has exactly one shared "
           "MLP"),
    Refuse("rope_parameters.rope_type", ("default", "dynamic"), "not one hfview reads for Hunyuan MoE",
           default="default"),
)


# what the view and the converter read from a hunyuan config.json, which transformers' HunYuanMoEV1Config (the twin's)
# would otherwise fill with its own defaults
HUNYUAN_STATED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_experts", "moe_topk", "moe_intermediate_size", "num_shared_expert", "max_position_embeddings",
                  "rms_norm_eps", "tie_word_embeddings")


def check(h: dict, path: Path) -> None:
    if h["model_type"] == "hunyuan":
        check_stated(h, path, HUNYUAN_STATED, "transformers has no hunyuan config class, so the converter reads "
                     "config.json as it stands while transformers (read as hunyuan_v1_moe) would fill "
                     "HunYuanMoEV1Config's defaults; state them, as Hunyuan-A13B's release does")
    elif h.get("head_dim") is None:
        # the release's own code takes hidden_size / num_attention_heads; transformers' class reads head_dim only
        raise ConfigError(f"{path}: head_dim {shown(h.get('head_dim'))}: transformers' HunYuanMoEV1 needs it stated")
    n = h["num_hidden_layers"]
    for key in _LISTS:
        value = h.get(key)
        if len(value) != n or any(v != value[0] for v in value):
            raise ConfigError(f"{path}: {key} {value}: the converter writes one value for every layer and asserts "
                              f"the {n} entries are equal")
    if h["moe_intermediate_size"][0] != h["intermediate_size"]:
        raise ConfigError(f"{path}: moe_intermediate_size {h['moe_intermediate_size'][0]} differs from "
                          f"intermediate_size {h['intermediate_size']}: transformers' HunYuanMoEV1 sizes its experts "
                          f"by intermediate_size, the converter tells llama.cpp the other")
    head = h["hidden_size"] // h["num_attention_heads"]
    for key in ("head_dim", "attention_head_dim"):
        if h.get(key) is not None and h[key] != head:
            raise ConfigError(f"{path}: {key} {h[key]} is not hidden_size / num_attention_heads ({head}): llama.cpp's "
                              f"{_ARCH} rotates hidden_size / num_attention_heads (the converter writes no rope width)")
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") == "dynamic":
        alpha, base = rope.get("alpha", 1000), rope.get("rope_theta", 10000.0)
        if not (alpha == 1000 and base == 10000.0 and head == 128
                and h["max_position_embeddings"] in (32 * 1024, 256 * 1024)):
            raise ConfigError(f"{path}: dynamic rope with alpha {alpha}, rope_theta {base}, head width {head} and "
                              f"max_position_embeddings {h['max_position_embeddings']}: the converter assumes alpha "
                              f"1000, theta 10000, width 128 and 32k or 256k positions (it refuses this config too)")


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's entries (no expert_used_count there: the config names it moe_topk), then HunYuanMoEModel's: the
    shared and routed widths, the experts used, the shared count, and for dynamic rope the NTK base and 256k."""
    kv = text_model_parameters(h, _ARCH, block_count, file_type)
    kv += [u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=_ARCH), h["intermediate_size"]),
           u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=_ARCH), h["moe_intermediate_size"][0]),
           u32(Keys.LLM.EXPERT_USED_COUNT.format(arch=_ARCH), h["moe_topk"][0]),
           u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=_ARCH), h["num_shared_expert"][0])]
    rope = h["rope_parameters"]
    if rope.get("rope_type") == "dynamic":
        alpha, dim = rope.get("alpha", 1000), h["hidden_size"] // h["num_attention_heads"]
        kv += [f32(Keys.Rope.FREQ_BASE.format(arch=_ARCH),
                   rope.get("rope_theta", 10000.0) * (alpha ** (dim / (dim - 2)))),
               string(Keys.Rope.SCALING_TYPE.format(arch=_ARCH), "none"),
               f32(Keys.Rope.SCALING_FACTOR.format(arch=_ARCH), 1),
               u32(Keys.Rope.SCALING_ORIG_CTX_LEN.format(arch=_ARCH), 256 * 1024),
               u32(Keys.LLM.CONTEXT_LENGTH.format(arch=_ARCH), 256 * 1024)]
    return kv


# What the release's tokenization_hy.py defines in code: its split pattern and its special tokens, numbered from
# the number of ranks on
HY_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
              r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
HY_SPECIALS = ("<|endoftext|>", "<|startoftext|>", "<|bos|>", "<|eos|>", "<|pad|>",
               *(f"<|extra_{i}|>" for i in range(205)))
HY_BOS = 127959  # the converter's fixed <|bos|> id for Hunyuan-A13B


def hy_ranks(path: Path) -> dict[bytes, int]:
    """hy.tiktoken as tokenization_hy.py loads it: `base64(token) rank` per line, ranks by line order (the file's
    own numbers unread), a token listed again skipped."""
    import base64
    import binascii

    from hfview.tokenizer.errors import TokenizerError
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            parts = line.split()
            try:
                if len(parts) != 2:
                    raise ValueError("expected two fields")
                token = base64.b64decode(parts[0], validate=True)
            except (ValueError, binascii.Error) as e:
                raise TokenizerError(f"{path}:{n}: expected 'base64-token rank', got {line[:80]!r} ({e})") from e
            ranks.setdefault(token, len(ranks))
    return ranks


def probe_ids(ranks: dict[bytes, int]) -> list[int]:
    """The ids tokenization_hy.py's encode gives the converter's probe text: NFC, the split, BPE in each piece."""
    from hfview.tokenizer.digests import PRE_TOKENIZER_PROBE
    from hfview.tokenizer.tiktoken_bpe import bpe_parts, tiktoken_split
    ids: list[int] = []
    for piece in tiktoken_split(HY_PATTERN, unicodedata.normalize("NFC", PRE_TOKENIZER_PROBE)):
        data = piece.encode("utf-8")
        ids += [ranks[data]] if data in ranks else [ranks[p] for p in bpe_parts(ranks, data)]
    return ids


def vocab(model_dir: Path, h: dict) -> list:
    """HunYuanMoEModel.set_vocab: tokens of the ranks and the special tokens (holes as [PAD<id>]), the pre-tokenizer
    named by the probe digest, one merge per two-part token, SpecialVocab without merges, BOS 127959."""
    import hashlib

    from hfview.tokenizer.digests import pre_tokenizer_named
    from hfview.tokenizer.special import SpecialVocab
    from hfview.tokenizer.tiktoken_bpe import recover_merges, tiktoken_tokens
    from hfview.tokenizer.writer import KVWriter

    model_dir = Path(model_dir)
    ranks_file = model_dir / "hy.tiktoken"
    if not ranks_file.is_file():
        raise ConfigError(f"{ranks_file} is missing: the converter reads Hunyuan-A13B's vocabulary from hy.tiktoken "
                          f"(through the release's tokenizer code), and hfview reads that file")
    ranks = hy_ranks(ranks_file)
    specials = {t: len(ranks) + i for i, t in enumerate(HY_SPECIALS)}
    if len(ranks) + len(specials) != h["vocab_size"]:
        raise ConfigError(f"{ranks_file}: {len(ranks)} ranks and {len(specials)} special tokens, but vocab_size is "
                          f"{h['vocab_size']}: the converter asserts they are equal")
    digest = hashlib.sha256(str(probe_ids(ranks)).encode()).hexdigest()
    pre = pre_tokenizer_named(digest, str(ranks_file))
    tokens, types = tiktoken_tokens(ranks, specials, h["vocab_size"], str(ranks_file))
    w = KVWriter()
    w.add_string(Keys.Tokenizer.MODEL, "gpt2")
    w.add_string(Keys.Tokenizer.PRE, pre)
    w.add_array(Keys.Tokenizer.LIST, tokens)
    w.add_array(Keys.Tokenizer.TOKEN_TYPE, types)
    w.add_array(Keys.Tokenizer.MERGES, recover_merges(ranks, require_pairs=False, where=str(ranks_file)))
    SpecialVocab(model_dir, load_merges=False).write(w)
    w.add_uint32(Keys.Tokenizer.BOS_ID, HY_BOS)
    return w.kvs()


FAMILY = Family(
    name="hunyuan_v1_moe",
    gguf_arch=_ARCH,
    architectures=("HunYuanMoEV1ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    aliases=ALIASES,
)

"""Nemotron-H Puzzle (NVIDIA-Nemotron-Labs-3-Puzzle-75B-A9B: Nemotron 3 Super compressed block by block):
NemotronHPuzzleForCausalLM -> llama.cpp `nemotron_h_moe` with per-layer values (the converter's NemotronHPuzzleModel,
a NemotronHModel).

A Nemotron-H mixture (see hfview.families.nemotron_h: Mamba-2, attention without positions, latent-width sigmoid-
routed experts beside one shared expert, one kind per layer behind one RMSNorm) whose layers are listed in
block_configs, each with its block_type (mamba, attention, moe) and, on a mixture layer, its own expert width
(moe_intermediate_size) and experts per token (num_experts_per_tok). The expert count, the shared expert's width
and the latent width are the top level's, shared by every mixture layer. The converter writes the per-layer widths
as feed_forward_length and expert_feed_forward_length and the per-layer top-k as expert_used_count (0 off the
mixture layers), which llama.cpp's nemotron_h_moe reads per layer; KV heads per layer as Nemotron-H does.

How the converter reads it: transformers 5.24 has no nemotron_h_puzzle config class, so config.json as written (no
defaults filled in); block_configs is the authority on the layers (the layer count and kinds come from it); the
trunk's names under model.* (the BF16 release) are read as backbone.* (the first release); the MTP head (mtp.*,
laid out by mtp_block_configs) is dropped, as the converter drops it whatever num_nextn_predict_layers says.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, stated
from ..gguf_layout import KV, ValueType
from ..names import Keys
from ..params import boolean, f32, u32
from . import nemotron_h as nh
from ._parts.state_space import padded_vocab

ARCH = "nemotron_h_moe"
_BLOCK_KIND = {"mamba": "linear_attention", "attention": "full_attention", "moe": "moe"}
# what the converter reads of a block: its kind, and a mixture layer's expert width and top-k
BLOCK_KEYS = ("block_type", "moe_intermediate_size", "num_experts_per_tok")
# the top-level keys the converter reads as config.json states them (a missing one fails it, or makes it write
# another value than transformers' modules would compute with); intermediate_size only places feed_forward_length
STATED = (*(k for k in nh.STATED if k != "intermediate_size"), "n_routed_experts", "n_shared_experts", "moe_shared_expert_intermediate_size", "norm_topk_prob",
          "routed_scaling_factor", "n_group", "moe_latent_size")
MTP_KEYS = ("num_nextn_predict_layers", "mtp_block_configs", "mtp_hybrid_override_pattern", "mtp_layers_block_type")

READS = frozenset({*(nh.READS - set(MTP_KEYS)), "block_configs"})
# the MTP head's keys: the converter drops the head (mtp.*) whatever they say, so they change nothing presented
HARMLESS: Harmless = {**nh.HARMLESS, **dict.fromkeys(MTP_KEYS, ANY)}


def block_kinds(h: dict) -> list[str]:
    """Each layer's kind in transformers 5's words, from block_configs."""
    return [_BLOCK_KIND.get(b.get("block_type"), b.get("block_type")) for b in h["block_configs"]]


def rename(name: str, h: dict) -> str:
    """NemotronHPuzzleModel.modify_tensors' renames: the BF16 release's model.* trunk read as backbone.*, and the
    router bias spelled either way read as one."""
    if name.startswith("model."):
        name = "backbone." + name[len("model."):]
    return name.replace("gate.e_score_correction.bias", "gate.e_score_correction_bias")


TENSORS = (*nh.TENSORS, Skip("mtp.{rest}"))


def normalise(h: dict) -> dict:
    blocks = h.get("block_configs")
    if isinstance(blocks, list) and h.get("num_hidden_layers") is None:
        h["num_hidden_layers"] = len(blocks)
    return nh.normalise(h)


REFUSE = (
    Refuse("block_configs", bool, "a Nemotron-H Puzzle lists its layers there (block_type, and each mixture layer's "
           "moe_intermediate_size and num_experts_per_tok)"),
    # a stated null only (absent reads as "unstated", which passes): where absent, check reads attention_head_dim
    Refuse("head_dim", stated, "the converter finds the key and fails on its value",
           default="unstated"),
)


def check(h: dict, path: Path) -> None:
    blocks = h["block_configs"]
    if h["num_hidden_layers"] != len(blocks):
        raise ConfigError(f"{path}: block_configs lists {len(blocks)} layers, num_hidden_layers says "
                          f"{h['num_hidden_layers']}: the converter would take block_configs' count")
    missing = [k for k in STATED if h.get(k) is None]
    if missing:
        raise ConfigError(f"{path}: {', '.join(missing)} not stated: the converter reads a Puzzle's config.json as "
                          f"written (transformers has no class for it to fill defaults) and needs them")
    if h.get("head_dim", h.get("attention_head_dim")) is None:
        raise ConfigError(f"{path}: head_dim not stated: the converter would take mamba_head_dim for the attention "
                          f"heads' width")
    for i, block in enumerate(blocks):
        where = f"{path}: block_configs[{i}]"
        kind = block.get("block_type")
        if kind not in _BLOCK_KIND:
            why = ("the converter writes a Puzzle's FFN widths from moe_intermediate_size only, so llama.cpp would "
                   "read an MLP layer as Mamba" if kind == "mlp" else "a Puzzle block is mamba, attention or moe")
            raise ConfigError(f"{where}: block_type {kind!r}: {why}")
        if kind == "moe":
            for key in ("moe_intermediate_size", "num_experts_per_tok"):
                if block.get(key) is None:
                    raise ConfigError(f"{where}: a moe block without {key}: the converter would write 0, and llama.cpp "
                                      f"read the layer as Mamba")
            if not block["num_experts_per_tok"] <= h["n_routed_experts"]:
                raise ConfigError(f"{where}: num_experts_per_tok {block['num_experts_per_tok']} of "
                                  f"{h['n_routed_experts']} experts")
        else:
            stated = [k for k in ("moe_intermediate_size", "num_experts_per_tok") if block.get(k)]
            if stated:
                raise ConfigError(f"{where}: {stated[0]} on a {kind} block: the converter would write it, and llama.cpp "
                                  f"read the layer as a mixture")
        # what the converter does not read per block (the expert count, shared and latent widths, a window...): the
        # top level's value for every layer, so a block stating another would run wrong
        other = [k for k in block if k not in BLOCK_KEYS and block[k] != h.get(k)]
        if other:
            raise ConfigError(f"{where}: {other[0]} {block[other[0]]!r} beside the top level's {h.get(other[0])!r}: the "
                              f"converter reads only {', '.join(BLOCK_KEYS)} per block, the top level's value for the rest")
    layers = block_kinds(h)
    for key in ("hybrid_override_pattern", "layers_block_type"):
        if key in h and nh.kinds({key: h[key]}) != layers:
            raise ConfigError(f"{path}: {key} and block_configs disagree: the converter places the attention layers by "
                              f"{'the pattern' if key == 'hybrid_override_pattern' else 'block_configs'}, the widths by "
                              f"block_configs")
    if "linear_attention" not in layers:
        raise ConfigError(f"{path}: no mamba block: llama.cpp's nemotron_h_moe keeps a hybrid cache that needs one")
    if "full_attention" not in layers:
        raise ConfigError(f"{path}: no attention block: every released Nemotron-H has some")
    if "moe" not in layers:
        raise ConfigError(f"{path}: no moe block: the converter writes a Puzzle as nemotron_h_moe, which llama.cpp "
                          f"cannot load without experts")
    nh.check_sizes(h, path)
    nh.check_routing({"topk_group": 1, **h}, path)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """NemotronHPuzzleModel.set_gguf_parameters: Nemotron-H's trunk list, then per layer the FFN and expert widths
    and the experts per token (0 off the mixture layers), then the mixture's shared keys; keys set twice keep their
    first place."""
    blocks = h["block_configs"]
    widths = [b.get("moe_intermediate_size") or 0 for b in blocks]
    used = [b.get("num_experts_per_tok") or 0 for b in blocks]
    kv = nh.trunk_parameters(h, ARCH, block_kinds(h), block_count, file_type)
    kv += [KV(f"{ARCH}.{key}", ValueType.ARRAY, values, ValueType.INT32)
           for key, values in (("feed_forward_length", widths), ("expert_feed_forward_length", widths),
                               ("expert_used_count", used))]
    kv += [u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_shared_expert_intermediate_size"]),
           u32(Keys.LLM.EXPERT_COUNT.format(arch=ARCH), h["n_routed_experts"]),
           u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=ARCH), h["n_shared_experts"]),
           boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=ARCH), h["norm_topk_prob"]),
           f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), h["routed_scaling_factor"]),
           u32(Keys.LLM.EXPERT_GROUP_COUNT.format(arch=ARCH), h["n_group"]),
           u32(Keys.LLM.MOE_LATENT_SIZE.format(arch=ARCH), h["moe_latent_size"])]
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """NemotronHModel.set_vocab: byte-level BPE over the vocabulary padded to a multiple of 8."""
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, {**h, "vocab_size": padded_vocab({"vocab_size": h["vocab_size"],
                                                                    "pad_vocab_size_multiple": 8})})


FAMILY = Family(
    name="nemotron_h_puzzle",
    gguf_arch=ARCH,
    architectures=("NemotronHPuzzleForCausalLM",),
    defaults={"nemotron_h_puzzle": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    rename=rename,
    notes={"block_configs": "per layer: block_type mamba / attention / moe; a moe block's moe_intermediate_size "
                            "and num_experts_per_tok (written per layer); the MTP head dropped"},
)

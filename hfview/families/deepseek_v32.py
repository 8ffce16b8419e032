"""DeepSeek-V3.2 (DeepSeek-V3.2 and V3.2-Exp as BF16 exports: DeepseekV32ForCausalLM) -> llama.cpp `deepseek32`
(the converter's DeepseekV32Model, a DeepseekV2Model: hfview/families/deepseek_v2.py and deepseek_v3.py).

DeepSeek-V3's latent attention and sigmoid, group-limited router, with DeepSeek Sparse Attention's lightning
indexer in every layer: its own query projection from the query bottleneck (indexer.wq_b), one key projection
(indexer.wk) under a LayerNorm with bias (indexer.k_norm), and per-head weights (indexer.weights_proj). Each
query keeps the index_topk keys the indexer scores best. The converter writes the indexer tensors as stored
(indexer.attn_q_b, indexer.attn_k, indexer.k_norm, indexer.proj, the last kept F32 whatever the outtype) and its
sizes as KV (attention.indexer.head_count, key_length, top_k). Unlike DeepseekV2Model it keeps the
next-token-prediction layers stored after num_hidden_layers: block_count counts them, nextn_predict_layers says
how many, llama.cpp runs the trunk. llama.cpp's deepseek32 reads the gating function as a required key, so a
config without scoring_func is refused by name. FP8 releases (quant_method fp8) are read dequantized as the
converter reads them (hfview.views.FP8Dequantized).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, unset
from ..names import Keys
from ..params import u32
from ._parts.deepseek_moe import check_groups, check_mixture, check_sigmoid_router, mixture_tensors
from ._parts.indexer import INDEXER_READS, check_indexer, indexer_parameters, indexer_tensors
from ._parts.latent import (LATENT_HARMLESS, LATENT_READS, check_latent_attention, latent_normalise, latent_parameters,
                            latent_tensors)
from ._parts.mixture import check_mlp_layer_types
from ._parts.nextn import NEXTN_TENSORS, mtp_layers
from ._parts.vocab import gpt2_vocab

ARCH = "deepseek32"

# transformers 5.24's DeepseekV32Config defaults (mlp_layer_types, layer_types, head_dim and qk_head_dim are
# computed: normalise); num_nextn_predict_layers it does not define (the converter reads it, 0 where absent)
DEFAULTS = {
    "deepseek_v32": dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
                         num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128, n_shared_experts=1,
                         n_routed_experts=256, routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=1536,
                         qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, n_group=8, topk_group=4,
                         num_experts_per_tok=8, norm_topk_prob=True, hidden_act="silu",
                         max_position_embeddings=163840, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                         pad_token_id=None, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False,
                         rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, mlp_layer_types=None,
                         attention_bias=False, attention_dropout=0.0, index_topk=2048, index_head_dim=128,
                         index_n_heads=64, mlp_bias=False, first_k_dense_replace=3, layer_types=None),
}

READS = LATENT_READS | INDEXER_READS | {"num_nextn_predict_layers", "mlp_layer_types", "layer_types", "mlp_bias"}
# rope_interleave: DeepseekV32Config drops the key, and its attention always rotates interleaved pairs, as
# llama.cpp's deepseek32 does
HARMLESS: Harmless = {**LATENT_HARMLESS, "rope_interleave": (True,)}



TENSORS = (*latent_tensors(skip_mtp=False), *indexer_tensors(), *mixture_tensors(), *NEXTN_TENSORS)


REFUSE = (
    Refuse("mlp_bias", unset, f"llama.cpp's {ARCH} architecture has no FFN biases"),
    Refuse("layer_types", lambda v: all(kind == "indexed_attention" for kind in v), f"transformers' DeepseekV32 builds "
           f"every layer with the indexer (indexed_attention), as llama.cpp's {ARCH} does"),
)


def check(h: dict, path: Path) -> None:
    check_latent_attention(h, path, "DeepseekV32", ARCH)
    check_mixture(h, path)
    check_sigmoid_router(h, path, "DeepseekV32", ARCH)
    check_groups(h, path)
    check_mlp_layer_types(h, path, "DeepseekV32", ARCH)
    check_indexer(h, path, ARCH)


def normalise(h: dict) -> dict:
    """DeepseekV32Config.__post_init__: qk_head_dim and head_dim (the rope width, a key the converter sees) as
    DeepseekV2Config's, mlp_layer_types where unstated from first_k_dense_replace, and every layer indexed."""
    h = latent_normalise(h)
    if h.get("mlp_layer_types") is None:
        dense = min(h["first_k_dense_replace"], h["num_hidden_layers"])
        h["mlp_layer_types"] = ["dense"] * dense + ["sparse"] * (h["num_hidden_layers"] - dense)
    if h.get("layer_types") is None:
        h["layer_types"] = ["indexed_attention"] * h["num_hidden_layers"]
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """DeepseekV32Model.set_gguf_parameters: DeepseekV2Model's (block_count with the MTP layers), the MTP layer
    count where stated, then the indexer's sizes."""
    kv = latent_parameters(h, block_count, file_type, ARCH)
    if h.get("num_nextn_predict_layers") is not None:
        kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), h["num_nextn_predict_layers"]))
    return kv + indexer_parameters(h, ARCH)


def vocab(model_dir: Path, h: dict) -> list:
    """DeepseekV32Model.set_vocab: the converter asserts the tokenizer adds a BOS (it stops otherwise), then
    byte-level BPE."""
    import json

    cfg_path = Path(model_dir) / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
    if cfg.get("add_bos_token") is not True:
        raise ConfigError(f"{cfg_path}: add_bos_token is {cfg.get('add_bos_token')!r}: the converter's "
                          f"DeepseekV32Model converts only a tokenizer that adds its BOS (every DeepSeek-V3.2 "
                          f"release states add_bos_token true)")
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="deepseek_v32",
    gguf_arch=ARCH,
    architectures=("DeepseekV32ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    extra_blocks=mtp_layers,
    aliases={"num_local_experts": "n_routed_experts"},  # DeepseekV32Config's attribute map
)

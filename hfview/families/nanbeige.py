"""Nanbeige 4.2 (NanbeigeForCausalLM, model_type nanbeige, remote code) -> llama.cpp `nanbeige` (the converter's
NanbeigeModel, a LlamaModel).

Llama's block (Q/K regrouped into rotation pairs as LlamaModel does), whose stored layers run `num_loops` times
with shared weights: llama.cpp's nanbeige gives every pass its own cache slots and norms the residual with
output_norm after every pass but the last unless `skip_loop_final_norm` (the release's modeling code norms every
pass's output, or only the last one's under the flag: the same function). block_count stays the stored layer
count; `nanbeige.num_loops` and `nanbeige.skip_loop_final_norm` follow LlamaModel's keys.

transformers 5.24 has no Nanbeige class, so the converter reads config.json as written (no NanbeigeConfig
defaults), and so does the view. What llama.cpp's nanbeige cannot run is refused by name: per-head
q_layernorm/k_layernorm (qk_layernorm; it loads no Q/K norms), attention and MLP biases (it loads none), the
n-gram embeddings, LoopSplit (enable_double_loop_split) and its shared loop caches, hyper-connections (mHC),
depth attention, a non-empty loop_loss_weights (the release then runs len + 1 loops, the converter writes
num_loops), and dynamic rope scaling.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, stated, unset
from ..names import Keys
from ..params import boolean, u32
from ._parts.checks import silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors, llama_parameters
from ._parts.rope import llama3_rope_freqs
from ._parts.vocab import llama_vocab

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "kv_channels", "max_position_embeddings", "rms_norm_eps",
    "rope_parameters", "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
    "mlp_bias", "num_loops", "skip_loop_final_norm",
})
# NanbeigeConfig's switches, each harmless only off (as Nanbeige4.2-3B ships them or leaves them out); the settings
# that only a switched-off part reads are harmless at any value
HARMLESS: Harmless = {
    "qk_layernorm": (False,),
    # n-gram embeddings: built only when all three sizes are stated; layer fusion only with them
    "emb_neighbor_num": (None,), "emb_split_num": (None,), "ngram_vocab_size_ratio": (None,),
    "insert_ngram_layer_idx": (None, []), "ngram_insert_all_layers": (False,),
    **dict.fromkeys(("ngram_mod_force_prime", "ngram_embedding_hidden_size", "ngram_fused_mode", "emb_tp_num",
                     "ngram_compressed_tokenizer", "skip_ngram_for_input", "ngram_layer_downproject_size"), ANY),
    # the release runs len(loop_loss_weights) + 1 loops when the list is not empty; the converter writes num_loops
    "loop_loss_weights": (None, []),
    # LoopSplit and what only it reads
    "enable_double_loop_split": (False,), "loop_share_kv": (False,), "mhc_diff_for_loop": (False,),
    "mhc_double_stream_position_for_loop": (None,), "loop_middle_layers": ANY, "loop_middle_repeats": ANY,
    # hyper-connections (mHC) and what only they read
    "enable_hyper_connection": (False,), "enable_mhc": (False,), "enable_h_res_identity": (False,),
    "mhc_identity_nohresparam": (False,),
    **dict.fromkeys(("num_residual_streams", "mhc_sinkhorn_iterations", "mhc_init_gating_factor"), ANY),
    # depth attention and what only it reads
    "enable_depth_attention": (False,),
    **dict.fromkeys(("depth_attention_stride", "depth_attention_recent_window",
                     "depth_attention_static_anchor_once"), ANY),
}
ARCHITECTURES = ("NanbeigeForCausalLM",)
TENSORS = (*decoder_tensors("model.", pairs=True), LM_HEAD,
           Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"))
_ROPE_TYPES = ("default", "linear")
# read by name from config.json (no defaults apply) and required by llama.cpp's loader
_REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "max_position_embeddings", "rms_norm_eps")


REFUSE = (
    silu_only("nanbeige"),
    # a stated null refused too: the checks and KV below compute with these values
    *(Refuse(key, stated, "missing; the converter reads Nanbeige's config.json as written (no "
             "NanbeigeConfig defaults apply) and llama.cpp's nanbeige needs it") for key in _REQUIRED),
    *(Refuse(key, unset, f"llama.cpp's nanbeige architecture loads no {part} biases, so this checkpoint would not "
             f"run as written") for key, part in (("attention_bias", "attention"), ("mlp_bias", "feed-forward"))),
    Refuse("rope_parameters.rope_type", _ROPE_TYPES, f"not one llama.cpp's nanbeige computes "
           f"({', '.join(_ROPE_TYPES)})", default="default"),
)


def check(h: dict, path: Path) -> None:
    head_dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    if h.get("kv_channels") not in (None, head_dim):
        raise ConfigError(f"{path}: kv_channels {h['kv_channels']} differs from the head width {head_dim} "
                          f"(head_dim); Nanbeige's modeling code and the converter use head_dim")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*llama_parameters("nanbeige")(h, block_count, file_type),
            u32(Keys.LLM.NUM_LOOPS.format(arch="nanbeige"), int(h.get("num_loops", 1) or 1)),
            boolean(Keys.LLM.SKIP_LOOP_FINAL_NORM.format(arch="nanbeige"), bool(h.get("skip_loop_final_norm", False)))]


FAMILY = Family(
    name="nanbeige",
    gguf_arch="nanbeige",
    architectures=ARCHITECTURES,
    defaults={"nanbeige": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=llama_vocab,
    generated=llama3_rope_freqs,
    refuse=REFUSE,
    check=check,
    notes={"num_loops": "the stored layers run num_loops times (llama.cpp counts num_loops x block_count "
                        "layers, each with its own cache slots)"},
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    # llama.cpp's nanbeige copies the stored layers into the loop slots before its generic pass loads the `.scale`
    # tensors, so every pass after the first runs unscaled (the converter's NVFP4 files: NaN logits with the FFNs
    # NVFP4, NMSE 1.3 with the attention alone)
    runner=RunnerFacts(applies_ffn_scales=False, applies_attn_scales=False),
)

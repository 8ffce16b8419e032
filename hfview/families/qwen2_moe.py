"""Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B: Qwen2MoeForCausalLM) -> llama.cpp `qwen2moe` (the converter's
Qwen2MoeModel).

Qwen2's attention (q/k/v biases, rotate-half rope as stored) over a mixture in every layer: a router
(`mlp.gate`), per-expert SwiGLU FFNs stacked into `*_exps` (down, gate, up: the converter's merge order),
and one shared expert whose output a sigmoid gate (`mlp.shared_expert_gate`, one row) scales. Also the
building blocks of the converter's classes derived from Qwen2MoeModel (qwen3_moe) and of OLMoE's copy of it.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Stacked, Tensor
from ..params import text_model_parameters, u32
from .qwen2 import check_architecture, check_no_pooling, check_no_sliding, check_rope, check_silu, decoder_tensors

# transformers 5.24's Qwen2MoeConfig defaults
DEFAULTS = {
    "qwen2_moe": dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=24,
                      num_attention_heads=16, num_key_value_heads=16, hidden_act="silu",
                      max_position_embeddings=32768, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                      tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                      use_sliding_window=False, sliding_window=0, max_window_layers=28, attention_dropout=0.0,
                      decoder_sparse_step=1, moe_intermediate_size=1408, shared_expert_intermediate_size=5632,
                      num_experts_per_tok=4, num_experts=60, norm_topk_prob=False, mlp_only_layers=[],
                      qkv_bias=True, pad_token_id=None, bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings",
    "use_sliding_window", "sliding_window", "max_window_layers", "layer_types",  # checked: no sliding layer
    "qkv_bias",  # the q/k/v biases are there or not: the tensors say
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",  # checked: every layer a mixture
})
HARMLESS: Harmless = {}


def attention_tensors(prefix: str = "model.", **kw) -> tuple[Tensor, ...]:
    """Qwen2's decoder without its dense FFN: embeddings, norms, attention (Q/K as stored)."""
    return tuple(r for r in decoder_tensors(prefix, **kw) if ".mlp." not in r.hf)


def mixture_tensors(count_key: str, prefix: str = "model.") -> tuple[Tensor | Stacked, ...]:
    """The router and the stacked experts of every block, in the converter's merge order (down, gate, up)."""
    layer = f"{prefix}layers.{{bid}}.mlp."
    return (
        Tensor(f"{layer}gate.weight", "blk.{bid}.ffn_gate_inp.weight"),
        *(Experts(f"{layer}experts.{{x}}.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_exps.weight", count_key)
          for proj in ("down", "gate", "up")),
    )


SHARED_EXPERT = (
    Tensor("model.layers.{bid}.mlp.shared_expert_gate.weight", "blk.{bid}.ffn_gate_inp_shexp.weight"),
    Tensor("model.layers.{bid}.mlp.shared_expert.gate_proj.weight", "blk.{bid}.ffn_gate_shexp.weight"),
    Tensor("model.layers.{bid}.mlp.shared_expert.up_proj.weight", "blk.{bid}.ffn_up_shexp.weight"),
    Tensor("model.layers.{bid}.mlp.shared_expert.down_proj.weight", "blk.{bid}.ffn_down_shexp.weight"),
)

LM_HEAD = Tensor("lm_head.weight", "output.weight")
TENSORS = (*attention_tensors(), LM_HEAD, *mixture_tensors("num_experts"), *SHARED_EXPERT)


def check_every_layer_a_mixture(h: dict, path: Path, arch: str, count_key: str) -> None:
    """transformers makes layer i dense (one SwiGLU of intermediate_size) when i is in mlp_only_layers, when
    (i + 1) % decoder_sparse_step != 0, or when there are no experts. The converter reads neither list (on
    such a checkpoint it fails: "Can not map tensor 'model.layers.1.mlp.down_proj.weight'", tried for
    qwen2_moe and qwen3_moe) and llama.cpp's qwen2moe / qwen3moe / olmoe need a router in every layer."""
    dense = list(h.get("mlp_only_layers") or [])
    step = h.get("decoder_sparse_step", 1)
    if dense:
        raise ConfigError(f"{path}: mlp_only_layers {dense}: those layers are dense in transformers; the converter "
                          f"cannot map their tensors and llama.cpp's {arch} architecture has a mixture of experts in "
                          f"every layer, so they cannot run there")
    if step != 1:
        raise ConfigError(f"{path}: decoder_sparse_step {step!r}: transformers then makes every layer i with "
                          f"(i + 1) % {step!r} != 0 dense; llama.cpp's {arch} architecture has a mixture of "
                          f"experts in every layer, so they cannot run there")
    if not h.get(count_key):
        raise ConfigError(f"{path}: {count_key} {h.get(count_key)!r}: without experts every layer is dense, "
                          f"which llama.cpp's {arch} architecture cannot run")


def check_topk_norm(h: dict, path: Path, arch: str, llama_cpp_normalises: bool) -> None:
    """llama.cpp's architecture fixes whether the chosen experts' weights are renormalised to sum to one."""
    if bool(h.get("norm_topk_prob")) != llama_cpp_normalises:
        raise ConfigError(f"{path}: norm_topk_prob {h.get('norm_topk_prob')!r}: llama.cpp's {arch} architecture "
                          f"{'always' if llama_cpp_normalises else 'never'} renormalises the chosen experts' "
                          f"weights, so this checkpoint would run wrong")


def check(h: dict, path: Path) -> None:
    check_architecture(h, path, "qwen2_moe", ("Qwen2MoeForCausalLM",))
    check_silu(h, path, "qwen2moe")
    check_rope(h, path, "qwen2moe")
    check_no_sliding(h, path, "qwen2moe")
    check_no_pooling(path)
    check_every_layer_a_mixture(h, path, "qwen2moe", "num_experts")
    check_topk_norm(h, path, "qwen2moe", False)
    if h.get("tie_word_embeddings"):
        raise ConfigError(f"{path}: tie_word_embeddings true: llama.cpp's qwen2moe architecture needs an output "
                          f"matrix of its own, which a tied checkpoint does not store")
    if h.get("head_dim") is not None and h["head_dim"] * h["num_attention_heads"] != h["hidden_size"]:
        raise ConfigError(f"{path}: head_dim {h['head_dim']} x {h['num_attention_heads']} heads is not "
                          f"hidden_size {h['hidden_size']}; llama.cpp's qwen2moe architecture assumes it is")


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def mixture_parameters(arch: str):
    """Qwen2MoeModel.set_gguf_parameters: TextModel's entries, then the expert and shared-expert widths
    where the config states them."""
    def parameters(h: dict, block_count: int, file_type: int) -> list:
        kv = text_model_parameters(h, arch, block_count, file_type)
        if h.get("moe_intermediate_size") is not None:
            kv.append(u32(f"{arch}.expert_feed_forward_length", h["moe_intermediate_size"]))
        if h.get("shared_expert_intermediate_size") is not None:
            kv.append(u32(f"{arch}.expert_shared_feed_forward_length", h["shared_expert_intermediate_size"]))
        return kv
    return parameters


def gpt2_vocab(model_dir: Path, h: dict) -> list:
    """TextModel.set_vocab: byte-level BPE (Qwen2MoeModel does not take Qwen2Model's sentencepiece try)."""
    from tokenizer.vocab import gpt2_vocab as vocab
    return vocab(model_dir, h)


FAMILY = Family(
    name="qwen2_moe",
    gguf_arch="qwen2moe",
    architectures=("Qwen2MoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=mixture_parameters("qwen2moe"),
    vocab=gpt2_vocab,
    check=check,
    normalise=normalise,
)

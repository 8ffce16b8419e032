"""The Llama-layout decoder: its tensor table (Q/K as stored, or regrouped into rotation pairs as the converter's
LlamaModel does), the untied head, and LlamaModel's hyperparameter KV."""
from __future__ import annotations

from ...family import Experts, Skip, Tensor, rope_pairs, stored
from ...names import GGUF, Keys
from ...params import text_model_parameters, u32


def decoder_tensors(prefix: str = "model.", *, required=True, extra=(), pairs: bool = False,
                    gate: bool = True, ffn_norm: str = "ffn_norm") -> tuple[Tensor, ...]:
    """The Llama-layout decoder's tensors under `prefix`. Q/K as stored (rotate-half rope in llama.cpp),
    or with `pairs` regrouped into interleaved rotation pairs as the converter's LlamaModel does.
    `required` may be a predicate on the hyperparameters (for tables that apply to one architecture).
    `extra`: further per-block rules (e.g. Q/K norms); `gate`: False for an ungated FFN (up, down only);
    `ffn_norm`: the GGUF name of post_attention_layernorm in this architecture."""
    p, layer = prefix, f"{prefix}layers.{{bid}}."
    q_view = rope_pairs("num_attention_heads") if pairs else stored
    k_view = rope_pairs("num_key_value_heads") if pairs else stored
    return (
        Tensor(f"{p}embed_tokens.weight", GGUF.TOKEN_EMBD.weight, required=required),
        Tensor(f"{p}norm.weight", GGUF.OUTPUT_NORM.weight, required=required),
        Tensor(f"{layer}input_layernorm.weight", GGUF.ATTN_NORM.weight, required=required),
        Tensor(f"{layer}self_attn.q_proj.{{wb}}", GGUF.ATTN_Q.wb, q_view, required=required),
        Tensor(f"{layer}self_attn.k_proj.{{wb}}", GGUF.ATTN_K.wb, k_view, required=required),
        Tensor(f"{layer}self_attn.v_proj.{{wb}}", GGUF.ATTN_V.wb, required=required),
        Tensor(f"{layer}self_attn.o_proj.{{wb}}", GGUF.ATTN_OUT.wb, required=required),
        Tensor(f"{layer}post_attention_layernorm.weight", f"blk.{{bid}}.{ffn_norm}.weight", required=required),
        *([Tensor(f"{layer}mlp.gate_proj.{{wb}}", GGUF.FFN_GATE.wb, required=required)] if gate else []),
        Tensor(f"{layer}mlp.up_proj.{{wb}}", GGUF.FFN_UP.wb, required=required),
        Tensor(f"{layer}mlp.down_proj.{{wb}}", GGUF.FFN_DOWN.wb, required=required),
        *extra,
    )


LM_HEAD = Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False)  # absent when tied to the embeddings


def head_dim(h: dict) -> int:
    return h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]


def llama_parameters(arch: str):
    """LlamaModel.set_gguf_parameters under `arch`: the text-model entries, vocab size, rope width. Families
    whose converter class derives from LlamaModel take it from here."""
    def parameters(h: dict, block_count: int, file_type: int) -> list:
        return [*text_model_parameters(h, arch, block_count, file_type),
                u32(Keys.LLM.VOCAB_SIZE.format(arch=arch), h["vocab_size"]),
                u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch), head_dim(h))]
    return parameters


_is_dense = lambda h: "num_local_experts" not in h  # noqa: E731


_is_mixture = lambda h: "num_local_experts" in h  # noqa: E731


def is_mistral3_wrapper(h: dict) -> bool:
    """Mistral3ForConditionalGeneration: the converter's Mistral3Model writes its text model as mistral3."""
    return "Mistral3ForConditionalGeneration" in (h.get("architectures") or ())


def has_other_tower(h: dict) -> bool:
    """An image-text or audio-text wrapper (Mistral 3, LLaVA, Qwen2-Audio): a vision or audio tower's config beside
    the text model's, whose tower and projector tensors the converter's text class leaves out (its mmproj class
    writes them to another file)."""
    return is_mistral3_wrapper(h) or any(isinstance(h.get(k), dict) for k in ("vision_config", "audio_config"))


# a wrapper's towers and projector, as transformers 4 saved them and as 5 does
OTHER_TOWERS = tuple(Skip(f"{prefix}{part}.{{rest}}", when=has_other_tower) for prefix in ("", "model.")
                     for part in ("vision_tower", "audio_tower", "multi_modal_projector"))


LLAMA_TENSORS = (  # LlamaModel's table: dense or Mixtral's mixture, an image-text wrapper's vision left out
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb, rope_pairs("num_attention_heads")),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb, rope_pairs("num_key_value_heads")),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.{wb}", GGUF.FFN_GATE.wb, required=_is_dense),
    Tensor("model.layers.{bid}.mlp.up_proj.{wb}", GGUF.FFN_UP.wb, required=_is_dense),
    Tensor("model.layers.{bid}.mlp.down_proj.{wb}", GGUF.FFN_DOWN.wb, required=_is_dense),
    Tensor("model.layers.{bid}.block_sparse_moe.gate.weight", GGUF.FFN_GATE_INP.weight, required=_is_mixture),
    Experts("model.layers.{bid}.block_sparse_moe.experts.{x}.w1.weight", GGUF.FFN_GATE_EXP.weight,
            "num_local_experts", required=_is_mixture),
    Experts("model.layers.{bid}.block_sparse_moe.experts.{x}.w2.weight", GGUF.FFN_DOWN_EXP.weight,
            "num_local_experts", required=_is_mixture),
    Experts("model.layers.{bid}.block_sparse_moe.experts.{x}.w3.weight", GGUF.FFN_UP_EXP.weight,
            "num_local_experts", required=_is_mixture),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
    *OTHER_TOWERS,
)

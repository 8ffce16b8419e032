"""Ling 1.x (BailingMoeForCausalLM, remote code; transformers has no class): converter bytes at every outtype;
llama.cpp's logits from the view against transformers' Qwen2-MoE over the same weights. Equivalence, read from
both sources (Ling's modeling_bailing_moe as ported in vLLM/SGLang/MLX, transformers' qwen2_moe): q | k | v of the
fused query_key_value as Qwen2-MoE's q_proj, k_proj, v_proj (no biases), rotate-half rope over the whole head,
every layer a softmax router whose top-k weights are renormalised (norm_topk_prob), routed SwiGLU experts, and the
shared experts as one SwiGLU of moe_intermediate_size x num_shared_experts — Qwen2-MoE's shared expert with its
sigmoid gate read as 0, which halves it: the fixture stores down_proj halved, the reference doubles it back.
norm_head: the reference's lm_head is Ling's normalised one, w / (||w||_col + 1e-7) in float32 (Ling's code:
F.normalize(w, dim=0, eps=1e-7), the same to within 1e-7 relative)."""
import json
from pathlib import Path

import pytest

from family_oracle import oracle_tests, twin_logits_test
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

test_export, _ = oracle_tests("bailing_moe", ["bailing_moe"])


def _qwen2_moe_reference(path: Path, out: Path):
    """A Qwen2MoeForCausalLM over the Ling 1.x checkpoint at `path` (written to `out`)."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    c = json.loads((path / "config.json").read_text())
    d = c["hidden_size"] // c["num_attention_heads"]
    widths = [c["num_attention_heads"] * d, c["num_key_value_heads"] * d, c["num_key_value_heads"] * d]
    tensors = {}
    for name, value in load_file(str(path / "model.safetensors")).items():
        if name.endswith("attention.query_key_value.weight"):
            base = name.removesuffix("attention.query_key_value.weight") + "self_attn."
            for part, rows in zip(("q", "k", "v"), value.split(widths)):
                tensors[f"{base}{part}_proj.weight"] = rows.float().contiguous()
            continue
        name = name.replace(".attention.dense.", ".self_attn.o_proj.").replace("model.word_embeddings.",
                                                                              "model.embed_tokens.")
        if ".mlp.shared_experts." in name:
            name = name.replace(".mlp.shared_experts.", ".mlp.shared_expert.")
            if name.endswith("down_proj.weight"):
                value = value * 2
            gate = name.split(".mlp.")[0] + ".mlp.shared_expert_gate.weight"
            tensors[gate] = torch.zeros(1, c["hidden_size"], dtype=value.dtype)
        if name == "lm_head.weight" and c.get("norm_head"):
            value = value.float()
            value = value / (torch.norm(value, p=2, dim=0, keepdim=True) + 1e-7)
        tensors[name] = value.float().contiguous()
    out.mkdir()
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = transformers.Qwen2MoeConfig(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        moe_intermediate_size=c["moe_intermediate_size"],
        shared_expert_intermediate_size=c["moe_intermediate_size"] * c["num_shared_experts"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"], num_experts=c["num_experts"],
        num_experts_per_tok=c["num_experts_per_tok"], norm_topk_prob=c["norm_topk_prob"], mlp_only_layers=[], qkv_bias=False,
        decoder_sparse_step=1, max_position_embeddings=c["max_position_embeddings"], rms_norm_eps=c["rms_norm_eps"],
        tie_word_embeddings=c["tie_word_embeddings"],
        rope_parameters={"rope_type": "default", "rope_theta": float(c["rope_theta"])})
    config.save_pretrained(out)
    model, info = transformers.Qwen2MoeForCausalLM.from_pretrained(out, dtype=torch.float32,
                                                                   output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info  # no weight left random
    return model


test_logits = twin_logits_test("bailing_moe", ["bailing_moe"], _qwen2_moe_reference, "Qwen2-MoE")


def test_output_matrix_is_normalised_as_the_converter_does(checkpoint):
    """norm_head: the presented output.weight at f32 is torch's w / (norm(w, dim=0) + 1e-7), bit for bit."""
    torch = pytest.importorskip("torch")
    import numpy as np
    from safetensors.torch import load_file
    from hfview import HfCheckpoint

    path = checkpoint("bailing_moe")
    w = load_file(str(path / "model.safetensors"))["lm_head.weight"].float()
    want = (w / (torch.norm(w, p=2, dim=0, keepdim=True) + 1e-7)).numpy()
    ours = next(t for t in HfCheckpoint(path, "f32").tensors if t.name == "output.weight").read()
    assert np.array_equal(ours, want)


def test_output_matrix_as_stored_without_norm_head(checkpoint, tmp_path):
    """norm_head false: the converter writes lm_head as stored (bf16 passes through bit for bit)."""
    import numpy as np
    from family_variants import variant
    from hfview import HfCheckpoint

    path = variant(checkpoint("bailing_moe"), tmp_path / "plain", norm_head=False)
    ours = next(t for t in HfCheckpoint(path, "bf16").tensors if t.name == "output.weight")
    assert ours.view.describe() == "stored"
    stored = ours.view.sources[0].read().reshape(ours.shape)
    assert np.array_equal(ours.read(), stored)


def test_ling2_is_read_by_its_own_family(checkpoint):
    """model_type bailing_moe is shared: architectures[0] picks the family, as the converter picks its class."""
    from hfview import families

    assert families.family_for("bailing_moe", ["BailingMoeForCausalLM"]).name == "bailing_moe"
    assert families.family_for("bailing_moe", ["BailingMoeV2ForCausalLM"]).name == "bailing_moe_v2"


@pytest.mark.xfail(len(released_configs("bailing_moe")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/bailing_moe/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("bailing_moe")) >= 2, released_configs("bailing_moe")


@pytest.mark.parametrize("path", released_configs("bailing_moe"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path: Path):
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["bailingmoe.expert_count"] == released["num_experts"]
    assert kv["bailingmoe.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["bailingmoe.expert_shared_count"] == released["num_shared_experts"]


@pytest.mark.parametrize("changes, reason", [
    (dict(first_k_dense_replace=1), "first_k_dense_replace"),
    (dict(num_shared_experts=0), "n_shared_experts"),
    (dict(use_qkv_bias=True), "attention_bias"),
    (dict(use_bias=True), "use_bias"),
    (dict(use_qk_norm=True), "use_qk_norm"),
    (dict(norm_softmax=True), "norm_softmax"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(partial_rotary_factor=0.5), "partial_rotary_factor"),
    (dict(routed_scaling_factor=2.5), "routed_scaling_factor"),
    (dict(score_function="sigmoid"), "score_function"),
    (dict(num_nextn_predict_layers=1), "num_nextn_predict_layers"),
    (dict(hidden_act="gelu"), "SiLU"),
    (dict(norm_topk_prob=None), "norm_topk_prob"),
], ids=["dense_layer", "no_shared", "qkv_bias", "bias", "qk_norm", "norm_softmax", "tied", "partial_rope",
        "scaled", "sigmoid", "mtp", "gelu", "no_norm_topk_prob"])
def test_refuses_what_bailingmoe_cannot_run(changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint("bailing_moe"), tmp_path, reason, **changes)

"""DeepSeek-MoE (DeepseekForCausalLM, remote code; transformers has no class): converter bytes at every outtype;
llama.cpp's logits from the view against transformers' Qwen2-MoE over the same weights (its shared-expert gate
read as 0, which halves the shared experts' output: the fixture stores down_proj halved, the reference undoes
it); released configs through the view's config path; refusals of what llama.cpp's deepseek cannot run."""
import json
from pathlib import Path

import pytest

from family_oracle import PROMPT, nmse, oracle_tests
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

test_export, _ = oracle_tests("deepseek", ["deepseek"])


def _qwen2_moe_reference(path: Path, out: Path):
    """A Qwen2MoeForCausalLM over the DeepSeek-MoE checkpoint at `path` (written to `out`): shared_experts as
    its shared_expert, down_proj doubled back, the gate 0 (sigmoid 1/2), the leading dense layers as
    mlp_only_layers."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    c = json.loads((path / "config.json").read_text())
    tensors = {}
    for name, value in load_file(str(path / "model.safetensors")).items():
        if ".mlp.shared_experts." in name:
            name = name.replace(".mlp.shared_experts.", ".mlp.shared_expert.")
            if name.endswith("down_proj.weight"):
                value = value * 2
            gate = name.split(".mlp.")[0] + ".mlp.shared_expert_gate.weight"
            tensors[gate] = torch.zeros(1, c["hidden_size"], dtype=value.dtype)
        tensors[name] = value.contiguous()
    out.mkdir()
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = transformers.Qwen2MoeConfig(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        moe_intermediate_size=c["moe_intermediate_size"],
        shared_expert_intermediate_size=c["moe_intermediate_size"] * c["n_shared_experts"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"], num_experts=c["n_routed_experts"],
        num_experts_per_tok=c["num_experts_per_tok"], norm_topk_prob=c["norm_topk_prob"],
        mlp_only_layers=list(range(c["first_k_dense_replace"])), qkv_bias=False,
        max_position_embeddings=c["max_position_embeddings"], rms_norm_eps=c["rms_norm_eps"],
        tie_word_embeddings=c["tie_word_embeddings"],
        rope_parameters={"rope_type": "default", "rope_theta": float(c["rope_theta"])})
    config.save_pretrained(out)
    return transformers.Qwen2MoeForCausalLM.from_pretrained(out, dtype=torch.float32)


def _logits(source, ids=None):
    from hfview.runner.stream import StreamModel

    with StreamModel(source, n_ctx=64) as m:
        ids = ids or m.tokenize(PROMPT)[:16]
        assert len(ids) == 16
        return ids, m.logits(ids)


def _reference(path: Path, ids, out: Path):
    import torch

    with torch.no_grad():
        return _qwen2_moe_reference(path, out)(torch.tensor([ids])).logits[0].numpy()


@pytest.mark.parametrize("outtype", ["f32", "bf16", "auto"])
def test_deepseek_logits_equal_transformers_qwen2_moe(outtype, checkpoint, tmp_path, record_property):
    pytest.importorskip("torch")
    from hfview import HfCheckpoint

    record_property("family", "deepseek")
    record_property("oracle", "logits")
    path = checkpoint("deepseek")
    ids, ours = _logits(HfCheckpoint(path, outtype))
    ref = _reference(path, ids, tmp_path / "qwen2_moe")
    value = nmse(ours, ref)
    print(f"deepseek {outtype} vs transformers Qwen2-MoE: NMSE {value:.3e}")
    assert value < 1e-4


def test_logits_f16_within_the_converter_files_measured_ceiling(checkpoint, converted, tmp_path, record_property):
    """At f16 llama.cpp rounds the activations to f16 before each matmul, and on the prompt's first token that
    flips a router choice: llama.cpp running the converter's own f16 file misses transformers' f32 pass by
    NMSE ~3.9e-4 (measured each run; every other position under 2e-6, checked here against the ordinary bar)."""
    pytest.importorskip("torch")
    from converter_ceiling import check_within_ceiling
    from family_oracle import NMSE_BAR
    from hfview import HfCheckpoint

    record_property("family", "deepseek")
    record_property("oracle", "logits")
    check_within_ceiling("deepseek", "f16", checkpoint, converted,
                         lambda path, ids: _reference(path, ids, tmp_path / "qwen2_moe"))
    path = checkpoint("deepseek")
    ids, ours = _logits(HfCheckpoint(path, "f16"))
    ref = _reference(path, ids, tmp_path / "qwen2_moe_again")
    assert nmse(ours[1:], ref[1:]) < NMSE_BAR  # past the first token's flipped choice, the ordinary bar


@pytest.mark.parametrize("path", released_configs("deepseek"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path: Path):
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["deepseek.expert_count"] == released["n_routed_experts"]
    assert kv["deepseek.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["deepseek.expert_shared_count"] == released["n_shared_experts"]
    assert kv["deepseek.expert_feed_forward_length"] == released["moe_intermediate_size"]
    assert kv["deepseek.leading_dense_block_count"] == released["first_k_dense_replace"]
    assert kv["deepseek.expert_gating_func"] == 1  # softmax, as released
    assert kv["deepseek.rope.dimension_count"] == released["hidden_size"] // released["num_attention_heads"]
    assert kv["deepseek.rope.scaling.type"] == "none"


@pytest.mark.parametrize("changes, reason", [
    (dict(moe_layer_freq=2), "moe_layer_freq"),
    (dict(norm_topk_prob=True), "norm_topk_prob"),
    (dict(scoring_func="sigmoid"), "scoring_func"),
    (dict(n_shared_experts=0), "n_shared_experts"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "rope scaling type none"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(first_k_dense_replace=None), "first_k_dense_replace"),
    (dict(hidden_act="gelu"), "SiLU"),
], ids=["moe_layer_freq", "norm_topk_prob", "scoring_func", "no_shared", "rope_scaling", "bias",
        "no_first_k_dense_replace", "gelu"])
def test_refuses_what_deepseek_cannot_run(changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint("deepseek"), tmp_path, reason, **changes)

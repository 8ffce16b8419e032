"""GLM-5.3-Flash (Glm5NextForConditionalGeneration's text decoder, glm5_next_text -> llama.cpp glm5-next): converter
bytes at every outtype (the vision tower dropped, the MTP layer kept as block 3, the small mHC and gating tensors
F32), llama.cpp logits against transformers' Glm5NextForConditionalGeneration over the same checkpoint (its text
path: AutoModelForCausalLM has no mapping for Glm5NextConfig), with every earlier position kept and with the
indexer choosing 8 of 16 over pooled keys and the SwiGLU clamps at work; refusals by name."""
import json

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests, reference_logits_test
from family_variants import variant
from released_config import config_path_kv, released_configs

# -release-names: glm5_next_text with layer_types as GLM-5.3-Flash's config.json spells them (deepseek_sparse_attention)
FIXTURES = ["glm5_next_text", "glm5_next_text-dsa", "glm5_next_text-release-names"]
test_export, _ = oracle_tests("glm5_next_text", FIXTURES)

_model = {}


def glm5_next_logits(path, ids):
    """transformers' Glm5NextForConditionalGeneration over the checkpoint, float32, text only."""
    import torch
    import transformers

    if str(path) not in _model:
        _model.clear()
        _model[str(path)] = transformers.Glm5NextForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        return _model[str(path)](torch.tensor([ids])).logits[0].float().numpy()


test_logits = reference_logits_test("glm5_next_text", FIXTURES, glm5_next_logits,
                                    "transformers' Glm5NextForConditionalGeneration", outtypes=("f32", "f16"))


@pytest.mark.parametrize("outtype", ["bf16", "auto"])
@pytest.mark.parametrize("name", FIXTURES)
def test_logits_within_converter_ceiling_bf16_activations(name, outtype, checkpoint, converted):
    """At bf16 (and auto, bf16 for these bf16 weights) llama.cpp running the converter's own file misses
    transformers' float32 forward by more than the bar (measured: NMSE 5.6e-3 on glm5_next_text and on
    glm5_next_text-release-names, its weights, 3.6e-4 on glm5_next_text-dsa; at f16 and f32 every fixture meets it). The stored weights are bf16, so f16 holds the same
    values: what differs is the precision llama.cpp computes in with bf16 weights (not isolated further here).
    The view's bytes equal the file's, so its logits must miss by no more."""
    from converter_ceiling import check_within_ceiling
    check_within_ceiling(name, outtype, checkpoint, converted, glm5_next_logits)


def test_defaults_match_transformers():
    check_defaults("glm5_next_text")


def _text_variant(src, dst, **changes):
    """`src` with `changes` made inside its config.json's text_config (None drops a key)."""
    text = json.loads((src / "config.json").read_text(encoding="utf-8"))["text_config"]
    for key, value in changes.items():
        if value is None:
            text.pop(key, None)
        else:
            text[key] = value
    return variant(src, dst, text_config=text)


def test_layers_mtp_and_kept_f32_reach_the_file(checkpoint):
    """KV heads per block (0 on delta layers), the MTP layer as block 3 with its nextn tensors, no vision tensor,
    the mHC / gating parameters F32 at bf16."""
    from hfview import HfCheckpoint
    from hfview.gguf_layout import GGMLType

    view = HfCheckpoint(checkpoint("glm5_next_text"), "bf16")
    kv = {k.key: k.value for k in view.kv}
    assert kv["glm5-next.attention.head_count_kv"] == [0, 1, 0, 1]
    assert kv["glm5-next.block_count"] == 4 and kv["glm5-next.nextn_predict_layers"] == 1
    assert kv["glm5-next.attention.indexer.kpool"] == 4 and kv["glm5-next.hyper_connection.count"] == 4
    types = {t.name: t.ggml_type for t in view.tensors}
    assert "blk.3.nextn.eh_proj.weight" in types and "blk.3.indexer.attn_q_b.weight" in types
    assert not any("visual" in n or "v." == n[:2] for n in types)
    assert types["blk.0.hc_attn_fn.weight"] == types["blk.1.indexer_compressor_gate.weight"] == GGMLType.F32
    assert types["blk.1.attn_q_b.weight"] == GGMLType.BF16


@pytest.mark.parametrize("changes, reason", [
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(scoring_func="softmax"), "scoring_func"),
    (dict(topk_method="greedy"), "topk_method"),
    (dict(n_group=2, topk_group=1), "n_group"),
    (dict(hc_mult=2), "hc_mult"),
    (dict(mhc=False), "mhc False"),
    (dict(qk_rope_head_dim=8), "qk_rope_head_dim"),
    (dict(mla_use_nope=None), "mla_use_nope"),
    (dict(index_kpool=3), "index_kpool"),
    (dict(index_kpool=1, index_topk=8), "index_kpool"),
    (dict(swiglu_limit=0.0), "swiglu_limit"),
    (dict(first_k_dense_replace=None), "first_k_dense_replace"),
    (dict(first_k_dense_replace=2), "mlp_layer_types"),
    (dict(linear_attn_config=None), "linear_attn_config"),
    (dict(linear_attn_config={"num_heads": 2, "head_dim": 8, "short_conv_kernel_size": 4,
                              "gate_lower_bound": -5.0}), "linear_attn_config.num_heads"),
    (dict(linear_attn_config={"num_heads": 4, "head_dim": 8, "short_conv_kernel_size": 4}), "gate_lower_bound"),
    (dict(layer_types=["linear_attention", "sliding_attention", "linear_attention"]), "layer_types"),
    # transformers reads the legacy "attention" as "full_attention", which its Glm5Next forward cannot mask
    # (measured: KeyError 'full_attention')
    (dict(layer_types=["linear_attention", "attention", "linear_attention"]), "full_attention"),
    (dict(indexer_types=["full", "shared", "full"]), "first latent layer"),
    (dict(indexer_types=["full", "full"]), "indexer_types"),
    (dict(num_key_value_heads=2), "num_key_value_heads"),
    (dict(hidden_act="gelu"), "hidden_act"),
], ids=["tied", "attn_bias", "softmax", "greedy", "groups", "streams", "no_mhc", "rope", "no_nope_flag",
        "pool_divides", "pool_one", "no_clamp", "no_dense_count", "dense_disagree", "no_linear_config",
        "linear_heads", "no_gate_bound", "layer_kind", "legacy_attention", "shared_first", "indexer_length", "kv_heads", "gelu"])
def test_refuses_what_glm5_next_cannot_run_as_transformers_does(changes, reason, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(_text_variant(checkpoint("glm5_next_text"), tmp_path / "v", **changes), "f32")


def test_other_architecture_is_refused(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError):
        HfCheckpoint(variant(checkpoint("glm5_next_text"), tmp_path / "v", architectures=["Glm5NextForCausalLM"]))


def test_a_layer_of_the_other_mixer_is_refused(checkpoint, tmp_path):
    """layer_types makes layer 0 latent attention, but the checkpoint stores delta attention there."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    path = _text_variant(checkpoint("glm5_next_text"), tmp_path / "v",
                         layer_types=["indexed_attention", "indexed_attention", "linear_attention"])
    with pytest.raises(CheckpointError, match="missing"):
        HfCheckpoint(path, "f32").tensors


@pytest.mark.xfail(len(released_configs("glm5_next_text")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/glm5_next_text/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("glm5_next_text")) >= 2, released_configs("glm5_next_text")


@pytest.mark.parametrize("path", released_configs("glm5_next_text"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path):
    """Each released config passes the key check and the family's checks; its KV carries the released counts and a
    latent layer (one KV head) wherever its layer_types names one, "deepseek_sparse_attention" as GLM-5.3-Flash's
    copy (SOURCES.md) spells it included. The FP8 upload's quantization (quant_method fp8) is read."""
    released = json.loads(path.read_text(encoding="utf-8"))["text_config"]
    kv = config_path_kv(path)
    assert kv["glm5-next.block_count"] == released["num_hidden_layers"] + released.get("num_nextn_predict_layers", 0)
    assert kv["glm5-next.expert_count"] == released["n_routed_experts"]
    latent = [int(t != "linear_attention") for t in released["layer_types"]]
    assert kv["glm5-next.attention.head_count_kv"][:released["num_hidden_layers"]] == latent and 1 in latent


def _release_shaped(layer_kind):
    """GLM-5.3-Flash's shape as other projects' tests state it (not a published file: see SOURCES.md): 45 layers,
    a latent layer every fourth from 3, three dense, 288 experts, one MTP layer, the release's extra keys."""
    n = 45
    text = dict(model_type="glm5_next_text", hidden_size=4096, intermediate_size=12288, num_hidden_layers=n,
                num_attention_heads=64, num_key_value_heads=64, head_dim=0, qk_head_dim=256, q_lora_rank=1536,
                kv_lora_rank=512, qk_nope_head_dim=256, qk_rope_head_dim=0, v_head_dim=256,
                linear_attn_config={"num_heads": 64, "head_dim": 128, "short_conv_kernel_size": 4,
                                    "gate_lower_bound": -5.0, "kda_layers": [i for i in range(n) if i % 4 != 3],
                                    "full_attn_layers": [i for i in range(n) if i % 4 == 3]},
                layer_types=["linear_attention" if i % 4 != 3 else layer_kind for i in range(n)],
                mlp_layer_types=["dense"] * 3 + ["sparse"] * (n - 3), indexer_types=["full"] * n,
                n_routed_experts=288, n_shared_experts=1, first_k_dense_replace=3, n_group=1, topk_group=1,
                num_experts_per_tok=8, moe_intermediate_size=2048, scoring_func="sigmoid", norm_topk_prob=True,
                routed_scaling_factor=2.5, topk_method="noaux_tc", hidden_act="silu", moe_router_dtype="float32",
                attention_bias=False, hc_mult=4, hc_eps=1e-6, hc_sinkhorn_iters=20, mhc=True, mla_use_nope=True,
                index_head_dim=128, index_n_heads=32, index_topk=2048, index_kpool=4,
                index_kpool_always_select_tail=True, index_kpool_compress=True, index_share_for_mtp_iteration=True,
                indexer_rope_interleave=True, swiglu_limit=10.0, num_nextn_predict_layers=1,
                max_position_embeddings=1048576, rms_norm_eps=1e-5, vocab_size=154880,
                eos_token_id=[154820, 154827, 154829], pad_token_id=154820, tie_word_embeddings=False)
    return {"model_type": "glm5_next", "architectures": ["Glm5NextForConditionalGeneration"], "text_config": text,
            "vision_config": {"model_type": "glm5_next_vision", "depth": 24}, "image_token_id": 154854}


def test_release_shaped_config_reads_as_released(tmp_path):
    path = tmp_path / "glm5_next_text" / "shaped.json"  # config_path_kv reads the family from the folder's name
    path.parent.mkdir()
    path.write_text(json.dumps(_release_shaped("indexed_attention")), encoding="utf-8")
    kv = config_path_kv(path)
    assert kv["glm5-next.block_count"] == 46 and kv["glm5-next.leading_dense_block_count"] == 3
    assert kv["glm5-next.attention.head_count_kv"][:5] == [0, 0, 0, 1, 0] and kv["glm5-next.expert_count"] == 288


def test_release_layer_kind_reads_as_indexed_attention(tmp_path):
    """"deepseek_sparse_attention" (GLM-5.3-Flash's config.json's name for its latent layers) is transformers'
    legacy name of "indexed_attention": its config class reads it so (measured: Glm5NextConfig's text_config.layer_types
    and to_dict() say indexed_attention), so the converter writes the same file (measured: glm5_next_text-release-names
    converts to glm5_next_text's file but for general.name) and the view presents the same KV."""
    kvs = []
    for kind in ("indexed_attention", "deepseek_sparse_attention"):
        path = tmp_path / kind / "glm5_next_text" / "shaped.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(_release_shaped(kind)), encoding="utf-8")
        kvs.append(config_path_kv(path))
    assert kvs[0] == kvs[1]


def test_release_names_present_as_indexed_attention(checkpoint):
    """The fixture with the release's layer_types and the one with transformers' names (same weights) are presented
    alike: the same KV but the name, the same tensors, byte for byte."""
    import numpy as np

    from hfview import HfCheckpoint

    ours, named = HfCheckpoint(checkpoint("glm5_next_text-release-names"), "bf16"), \
        HfCheckpoint(checkpoint("glm5_next_text"), "bf16")
    assert {k.key: k.value for k in ours.kv if k.key != "general.name"} == \
        {k.key: k.value for k in named.kv if k.key != "general.name"}
    assert [t.name for t in ours.tensors] == [t.name for t in named.tensors]
    for t in named.tensors:
        assert np.array_equal(ours.read_tensor(t.name), named.read_tensor(t.name)), t.name

"""Gemma 4 (dense layout of the 31B): both oracles on the text model (sliding and full-attention layers of their own
head widths and KV head counts, keys as values on the full layer, proportional rope, soft-capped logits, per-layer
output scalars, the released config layout) and on the image-text model read as its text model (vision tower left
out, config as transformers 5.24 saves it), plus the defaults and the refusals."""
from __future__ import annotations

import pytest

from config_defaults import defaults_match_transformers, with_config
from family_oracle import oracle_tests
from hfview import HfCheckpoint
from hfview.errors import ConfigError

FIXTURES = ["gemma4-text", "gemma4-mm", "gemma4-moe", "gemma4-e", "gemma4-unified"]
test_export, _ = oracle_tests("gemma4", FIXTURES)
# logits at auto would run the bf16 file again (the f16 file for the float32 gemma4-mm): its bytes are checked above
_, test_logits = oracle_tests("gemma4", FIXTURES, outtypes=["f32", "f16", "bf16"])


def test_defaults_are_transformers():
    from hfview.families.gemma4 import DEFAULTS
    defaults_match_transformers("gemma4_text", DEFAULTS["gemma4_text"])
    defaults_match_transformers("gemma4_unified_text", DEFAULTS["gemma4_unified_text"])


def test_image_text_model_presents_no_vision_tensor(checkpoint):
    view = HfCheckpoint(checkpoint("gemma4-mm"), "f32")
    assert not [t.name for t in view.tensors if "vision" in t.name or "mm_" in t.name]
    assert view.read_tensor("token_embd.weight").shape == (32768, 32)


def test_e_model_presents_per_layer_inputs_and_no_kv_on_shared_layers(checkpoint):
    view = HfCheckpoint(checkpoint("gemma4-e"), "f32")
    names = {t.name for t in view.tensors}
    assert {"per_layer_token_embd.weight", "per_layer_model_proj.weight", "blk.3.inp_gate.weight"} <= names
    assert not {"blk.2.attn_k.weight", "blk.3.attn_v.weight"} & names and "blk.1.attn_k.weight" in names
    kv = {k.key: k.value for k in view.kv}
    assert kv["gemma4.feed_forward_length"] == [80, 80, 160, 160]
    assert kv["gemma4.attention.shared_kv_layers"] == 2


_FULL_ROPE = {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}


@pytest.mark.parametrize("changes, words", [
    (dict(hidden_activation="gelu"), "hidden_activation"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(use_bidirectional_attention="all"), "use_bidirectional_attention"),
    (dict(rope_parameters={"full_attention": _FULL_ROPE,
                           "sliding_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}}),
     "sliding_attention"),
    (dict(rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                           "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}), "proportional"),
    (dict(layer_types=["sliding_attention", "full_attention"]), "layer_types"),
    (dict(enable_moe_block=True, num_experts=4, top_k_experts=8, moe_intermediate_size=24), "top_k_experts"),
], ids=["exact_gelu", "attention_bias", "bidirectional_all", "sliding_rope_scaled", "full_rope_default",
        "layer_types_length", "top_k_over_experts"])
def test_refuses_what_llama_cpp_gemma4_runs_otherwise(changes, words, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(with_config(checkpoint("gemma4-text"), tmp_path, **changes))


@pytest.mark.parametrize("changes, words", [
    # transformers reads layer 2's keys from layer 1 (the last sliding layer before it) and layer 3's from layer 0;
    # llama.cpp's gemma4 always takes the two layers right before the shared ones as sliding, then full
    (dict(layer_types=["full_attention", "sliding_attention", "sliding_attention", "full_attention"]),
     "num_kv_shared_layers"),
    (dict(vocab_size_per_layer_input=32000), "vocab_size_per_layer_input"),
], ids=["shared_kv_producers", "per_layer_vocab"])
def test_refuses_e_layouts_llama_cpp_runs_otherwise(changes, words, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(with_config(checkpoint("gemma4-e"), tmp_path, **changes))


# Gemma 4 31B's config as transformers 5.7 printed it in a model report found by the search (Gemma4Config's repr,
# not a byte copy of the released config.json, so it is kept here rather than under tests/data/released_configs):
# the top level and text_config as printed, the vision tower's block left out (harmless to the text model).
_31B_LAYERS = (["sliding_attention"] * 5 + ["full_attention"]) * 10
_31B = {
    "architectures": ["Gemma4ForConditionalGeneration"], "audio_config": None, "audio_token_id": 258881,
    "boa_token_id": 256000, "boi_token_id": 255999, "dtype": "bfloat16", "eoa_token_id": 258883,
    "eoa_token_index": 258883, "eoi_token_id": 258882, "eos_token_id": [1, 106], "image_token_id": 258880,
    "initializer_range": 0.02, "model_type": "gemma4", "tie_word_embeddings": True, "transformers_version": "5.7.0",
    "video_token_id": 258884, "vision_config": {"model_type": "gemma4_vision"}, "vision_soft_tokens_per_image": 280,
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attention_k_eq_v": True, "bos_token_id": 2,
        "dtype": "bfloat16", "enable_moe_block": False, "eos_token_id": 1, "expert_intermediate_size": None,
        "final_logit_softcapping": 30.0, "global_head_dim": 512, "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 5376, "hidden_size_per_layer_input": 0,
        "initializer_range": 0.02, "intermediate_size": 21504, "layer_types": _31B_LAYERS,
        "max_position_embeddings": 262144, "model_type": "gemma4_text", "moe_intermediate_size": None,
        "num_attention_heads": 32, "num_experts": None, "num_global_key_value_heads": 4, "num_hidden_layers": 60,
        "num_key_value_heads": 16, "num_kv_shared_layers": 0, "pad_token_id": 0, "rms_norm_eps": 1e-06,
        "rope_parameters": {"full_attention": _FULL_ROPE,
                            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
        "sliding_window": 1024, "tie_word_embeddings": True, "top_k_experts": None,
        "use_bidirectional_attention": "vision", "use_cache": True, "use_double_wide_mlp": False,
        "vocab_size": 262144, "vocab_size_per_layer_input": 262144},
}


def test_31b_config_as_printed_is_accepted_with_its_values(tmp_path):
    import json

    from released_config import config_path_kv
    path = tmp_path / "gemma4" / "google__gemma-4-31B-it.json"
    path.parent.mkdir()
    path.write_text(json.dumps(_31B))
    kv = config_path_kv(path)
    assert kv["gemma4.block_count"] == 60 and kv["gemma4.embedding_length"] == 5376
    assert kv["gemma4.attention.key_length"] == 512 and kv["gemma4.attention.key_length_swa"] == 256
    assert kv["gemma4.attention.head_count_kv"] == [4 if k == "full_attention" else 16 for k in _31B_LAYERS]
    assert kv["gemma4.attention.sliding_window_pattern"] == [k == "sliding_attention" for k in _31B_LAYERS]
    assert kv["gemma4.attention.sliding_window"] == 1024 and kv["gemma4.final_logit_softcapping"] == 30.0
    assert kv["gemma4.rope.dimension_count"] == 512 and kv["gemma4.rope.dimension_count_swa"] == 256


def test_unified_generation_suppress_tokens_refused_by_name(checkpoint, tmp_path):
    import json
    import shutil
    path = tmp_path / "model"
    shutil.copytree(checkpoint("gemma4-unified"), path)
    gen = json.loads((path / "generation_config.json").read_text())
    (path / "generation_config.json").write_text(json.dumps({**gen, "suppress_tokens": [3, 4]}))
    with pytest.raises(ConfigError, match="suppress_tokens"):
        HfCheckpoint(path)


def test_pinned_converter_fails_on_unified_config_without_expert_intermediate_size(checkpoint, tmp_path):
    """Why the unified fixture states expert_intermediate_size (null, as the 31B's release does): the converter's
    Gemma4Model looks it up (or moe_intermediate_size) without a default, and Gemma4UnifiedTextConfig has neither.
    hfview presents such a config as the converter would with the key stated: no expert width is written."""
    import json
    import shutil

    import oracle
    path = tmp_path / "model"
    shutil.copytree(checkpoint("gemma4-unified"), path)
    cfg = json.loads((path / "config.json").read_text())
    del cfg["text_config"]["expert_intermediate_size"]
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(oracle.ConverterFailed, match="expert_intermediate_size"):
        oracle.convert(path, tmp_path / "theirs.gguf", "f32")
    assert "gemma4.expert_feed_forward_length" not in {kv.key for kv in HfCheckpoint(path, "f32").kv}


def test_e2b_shape_is_accepted_with_its_shared_layers(tmp_path):
    """Gemma 4 E2B's text shape as other projects quote it (35 layers, every 5th full, the last 20 sharing KV, double-
    wide MLPs there, 256-wide per-layer inputs): llama.cpp's fixed producers (layers 13 sliding, 14 full) are the ones
    transformers picks, so it is accepted, with the MLP widths doubled from layer 15."""
    import json

    from released_config import config_path_kv
    layers = (["sliding_attention"] * 4 + ["full_attention"]) * 7
    cfg = {"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "hidden_size": 1536,
           "intermediate_size": 6144, "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 1,
           "head_dim": 256, "global_head_dim": 512, "vocab_size": 262144, "vocab_size_per_layer_input": 262144,
           "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 20, "use_double_wide_mlp": True,
           "sliding_window": 512, "final_logit_softcapping": 30.0, "attention_k_eq_v": False,
           "max_position_embeddings": 131072, "layer_types": layers}
    path = tmp_path / "gemma4" / "e2b-shape.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    kv = config_path_kv(path)
    assert kv["gemma4.feed_forward_length"] == [6144] * 15 + [12288] * 20
    assert kv["gemma4.attention.shared_kv_layers"] == 20 and kv["gemma4.embedding_length_per_layer_input"] == 256
    assert kv["gemma4.attention.head_count_kv"] == 1 and kv["gemma4.attention.key_length"] == 512


def test_config_stating_no_rope_or_layer_kinds_reads_the_class_defaults(checkpoint, tmp_path):
    """Without rope_parameters and layer_types, Gemma4TextConfig's own (every 6th layer full, the last forced full;
    proportional rope over a quarter of the full layers' head): the view's file is still the converter's."""
    import oracle
    from hfview.export import export
    path = with_config(checkpoint("gemma4-text"), tmp_path, rope_parameters=None, layer_types=None)
    theirs = oracle.convert(path, tmp_path / "theirs.gguf", "f32")
    ours = export(HfCheckpoint(path, "f32"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


@pytest.mark.parametrize("per_layer_config", [
    {"2": {"head_dim": 16, "num_key_value_heads": 1}, "0": {"head_dim": 16}},
    {"2": {"head_dim": 16, "num_key_value_heads": 1, "sliding_window": 3}},
    {"1": {"head_dim": 16, "num_key_value_heads": 1}},
], ids=["sliding_layer_entry", "other_key", "not_the_full_layer"])
def test_refuses_per_layer_config_llama_cpp_cannot_state(per_layer_config, checkpoint, tmp_path):
    """gemma4-mm's text_config as transformers 5.24 saves it (per_layer_config), with other per-layer overrides."""
    import json
    text = json.loads((checkpoint("gemma4-mm") / "config.json").read_text())["text_config"]
    with pytest.raises(ConfigError, match="per_layer_config"):
        HfCheckpoint(with_config(checkpoint("gemma4-mm"), tmp_path,
                                 text_config={**text, "per_layer_config": per_layer_config}))

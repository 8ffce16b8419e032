"""LLaVA-1.5 (LlavaForConditionalGeneration over a Llama -> llama.cpp llama, the converter's LlamaModel): read as its
text model, the CLIP tower and projector left out and their configuration ignored. Converter bytes at every outtype,
and llama.cpp's logits against LlavaForConditionalGeneration's forward over text alone."""
from __future__ import annotations

from family_oracle import oracle_tests, reference_logits_test, wrapper_logits

test_export, _ = oracle_tests("llama", ["llava-1.5"])

test_logits = reference_logits_test("llama", ["llava-1.5"], wrapper_logits("LlavaForConditionalGeneration"),
                                    "LlavaForConditionalGeneration over text")


def test_the_tower_is_left_out_and_its_config_ignored(checkpoint):
    from hfview import HfCheckpoint
    from hfview.config import ignored_keys
    view = HfCheckpoint(checkpoint("llava-1.5"), "f32")
    assert view.family.name == "llama" and view.arch == "llama"
    assert not [t.name for t in view.tensors if "vision" in t.name or "mm" in t.name or "projector" in t.name]
    assert "vision_feature_select_strategy" in ignored_keys(view.config, view.family)


# llava-hf/llava-1.5-7b-hf's config.json as LlavaConfig prints it (transformers 4.36.2) in a GitHub issue's log, found
# through the search's code corpus; less the issue author's own "resume_path" and "_name_or_path" (no byte copy reached)
LLAVA_1_5_7B = {
    "architectures": ["LlavaForConditionalGeneration"], "ignore_index": -100, "image_token_index": 32000,
    "model_type": "llava", "pad_token_id": 32001, "projector_hidden_act": "gelu",
    "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5", "architectures": ["LlamaForCausalLM"],
                    "max_position_embeddings": 4096, "model_type": "llama", "rms_norm_eps": 1e-05,
                    "torch_dtype": "float16", "vocab_size": 32064},
    "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.36.2",
    "vision_config": {"hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
                      "model_type": "clip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 24,
                      "patch_size": 14, "projection_dim": 768, "vocab_size": 32000},
    "vision_feature_layer": -2, "vision_feature_select_strategy": "default", "vocab_size": 32064}


def test_llava_1_5s_config_is_read_as_its_text_model(tmp_path):
    """Refused on main (ignore_index, which neither reference's Llama code reads); read as Vicuna's Llama now."""
    import json

    from hfview import families
    from hfview.config import ignored_keys, read_as, read_checkpoint_config
    (tmp_path / "config.json").write_text(json.dumps(LLAVA_1_5_7B))
    config, path = read_checkpoint_config(tmp_path)
    family = families.family_for(config["model_type"], config["architectures"])
    h = read_as(family, config, path)
    kv = {k.key: k.value for k in family.parameters(h, 32, 1)}
    assert family.name == "llama" and kv["llama.embedding_length"] == 4096 and kv["llama.context_length"] == 4096
    assert {"ignore_index", "vision_feature_select_strategy"} <= set(ignored_keys(config, family))

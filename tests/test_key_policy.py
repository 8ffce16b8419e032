"""The key policy's data (hfview/references_read.py) is what tools/key_policy.py derives from the pinned
transformers and converter sources, and the key check reads it as the issue's order says: read by hfview, known
harmless, ignored with its reason, else refused naming the reference that reads the key."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from hfview import families
from hfview.config import check_keys, class_defaults, ignored_keys
from hfview.errors import ConfigError
from hfview import references_read as R

ROOT = Path(__file__).resolve().parent.parent


def _tool():
    spec = importlib.util.spec_from_file_location("key_policy", ROOT / "tools" / "key_policy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_data_is_what_the_tool_derives():
    """Regenerated in memory from the installed transformers and the pinned converter (its reads memoised by
    file content outside the repository, so a rerun costs under a second)."""
    pytest.importorskip("transformers")
    tool = _tool()
    assert tool.render(tool.derive()) == (ROOT / "hfview" / "references_read.py").read_text(), \
        "stale: run python tools/key_policy.py"


def test_every_family_is_in_the_data():
    assert set(R.FAMILIES) == {f.name for f in families.FAMILIES}


def test_the_reads_are_the_references_own():
    """Spot checks against the sources: Llama's modeling reads mlp_bias, the converter's TextModel reads
    max_position_embeddings among its context-length names, GPT-2's attribute_map makes n_embd read."""
    mods, chain = R.FAMILIES["llama"]
    assert "mlp_bias" in R.TRANSFORMERS["llama"] and "LlamaModel" in chain and "TextModel" in chain
    assert {"max_position_embeddings", "n_ctx", "model_max_length"} <= R.CONVERTER["TextModel"]
    assert {"n_embd", "hidden_size"} <= R.TRANSFORMERS["gpt2"]


def _llama(**extra) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
            "num_attention_heads": 4, "num_hidden_layers": 2, **extra}


def _check(config: dict) -> None:
    family = families.family_for(config["model_type"], config.get("architectures"))
    check_keys(config, Path("config.json"), family.name, family.reads, family.harmless,
               class_defaults(family, config))


def _ignored(config: dict) -> dict[str, str]:
    return ignored_keys(config, families.family_for(config["model_type"], config.get("architectures")))


def test_a_key_neither_reference_reads_is_ignored_with_its_reason():
    """SmolLM2's three: read by no transformers Llama code and by no class of the converter's LlamaModel chain."""
    config = _llama(is_llama_config=True, rope_interleaved=False, **{"transformers.js_config": {"dtype": "q4"}})
    _check(config)
    ignored = _ignored(config)
    assert set(ignored) == {"is_llama_config", "rope_interleaved", "transformers.js_config"}
    assert ignored["rope_interleaved"] == ("neither transformers' llama, mistral, mixtral code nor the converter's "
                                           "LlamaModel reads it")


def test_a_key_a_reference_reads_is_refused_naming_the_reader():
    """A key only the converter reads (model_max_length, among TextModel's context-length names) names the
    converter; layer_types, which transformers' Mistral and its masks read, names those."""
    with pytest.raises(ConfigError, match=r"'model_max_length' \(= 8\) is read by the converter's TextModel"):
        _check(_llama(model_max_length=8))
    with pytest.raises(ConfigError, match=r"'layer_types' .* is read by transformers' mistral code and transformers' shared code"):
        _check(_llama(layer_types=["full_attention"] * 2))


def test_dropout_zero_empty_values_and_other_towers_are_ignored():
    config = _llama(expert_dropout=0.0, mlp_only_layers=[], audio_config={"hidden_size": 8})
    _check(config)
    ignored = _ignored(config)
    assert ignored["expert_dropout"] == "a dropout of 0.0 drops nothing"
    assert ignored["audio_config"].startswith("the audio tower's configuration")
    assert ignored["mlp_only_layers"] == "[] asks for nothing, as the config class's default (null) does"
    assert set(ignored) == {"expert_dropout", "mlp_only_layers", "audio_config"}


def test_each_reason_holds_only_at_its_values():
    """A dropout above 0, a list that is not empty, a tower config that is not a mapping: not ignored for those
    reasons (Qwen 2's use_sliding_window, which transformers reads, is then refused)."""
    ignored = _ignored(_llama(expert_dropout=0.1, mlp_only_layers=[1]))
    assert all(why.startswith("neither") for why in ignored.values())
    with pytest.raises(ConfigError, match="'vision_config' .* is read by"):
        _check({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vision_config": 3})


def test_families_without_both_references_ignore_nothing():
    """ChatGLM runs remote code (no transformers model type), so a key it does not know is refused as before."""
    family = families.family_for("chatglm")
    assert not R.FAMILIES["chatglm"][0]
    with pytest.raises(ConfigError, match="is not one the chatglm family knows"):
        check_keys({"model_type": "chatglm", "mystery": 1}, Path("config.json"), family.name, family.reads,
                   family.harmless)


def test_inspect_lists_the_ignored_keys(tmp_path):
    from hfview.inspect import render
    info = {"path": "m", "architecture": "llama", "family": "llama", "outtype": "f16", "gguf_bytes": 1, "kv": [],
            "tensors": [], "ignored_keys": {"rope_interleaved": "neither reads it"}}
    assert "ignored config key rope_interleaved: neither reads it" in render(info)
    json.dumps(info)


# ---------------------------------------------------------------- values at which a read key changes nothing
@pytest.mark.parametrize("name", ["mamba2", "falcon-h1", "granite-4.0-h", "nemotron_h-moe"])
def test_a_step_clamp_past_float32_range_clamps_nothing(checkpoint, tmp_path, name):
    """time_step_limit [0.0, 1e+308] (Nemotron-3-Ultra's): the step is a softplus (never below 0) held in float32 or
    narrower, so a clamp to [0, 1e+308] changes no value, as [0, Infinity] does not; the view is the unclamped one,
    the same KV as the fixture's own. A bound inside float32's range still clamps, and is refused."""
    from family_variants import assert_refused, variant
    from hfview import HfCheckpoint
    base = HfCheckpoint(checkpoint(name), "f32")
    wide = HfCheckpoint(variant(checkpoint(name), tmp_path / "wide", time_step_limit=[0.0, 1e308]), "f32")
    def kv(ckpt):  # general.* is named from the directory
        return [(kv.key, kv.value) for kv in ckpt.kv if not kv.key.startswith("general.")]
    assert kv(wide) == kv(base)
    assert_refused(checkpoint(name), tmp_path, "time_step_limit", time_step_limit=[0.0, 1e30])


# ---------------------------------------------------------------- what the released configs state, on fixtures
SMOLLM2 = {"is_llama_config": True, "rope_interleaved": False,
           "transformers.js_config": {"kv_cache_dtype": {"q4f16": "float16", "fp16": "float16"}}}
IGNORED_AS_RELEASED = [
    ("llama3-bpe", SMOLLM2),                                    # SmolLM2-135M/360M/1.7B(-Instruct)
    ("qwen3_5_text", {"mlp_only_layers": []}),                  # Qwen3.5-0.8B/9B/27B
    ("phimoe", {"expert_dropout": 0.0}),                        # Phi-mini-MoE
    ("phi-2", {"attention_bias": False, "rotary_dim": 32}),     # phi-1
    ("gemma2", {"sliding_window_size": 6}),                     # gemma-2-9b: sliding_window's old name, read by neither
]


@pytest.mark.parametrize("name, keys", IGNORED_AS_RELEASED, ids=[n for n, _ in IGNORED_AS_RELEASED])
def test_keys_released_configs_state_change_no_byte(checkpoint, builder, tmp_path, name, keys):
    """A fixture with the keys a released config adds beside its family's own (refused on main): accepted, each
    listed as ignored by `hfview inspect` (and its --json), and the view's file stays byte-identical to the
    converter's on the same directory."""
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.export import export
    import oracle

    model = variant(checkpoint(name), tmp_path / name, **keys)
    from hfview.inspect import describe, render
    ckpt = HfCheckpoint(model, "f32")
    info = describe(ckpt)  # hfview inspect --json
    assert set(keys) <= set(info["ignored_keys"]) and json.loads(json.dumps(info))["ignored_keys"]
    assert all(f"ignored config key {key}: " in render(info) for key in keys)
    ours = export(ckpt, tmp_path / "ours.gguf")
    theirs = oracle.convert_cached(model, "f32", *builder.CONVERTER_ARGS.get(name, ()))
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


# HuggingFaceTB/SmolLM2-135M's config.json as transformers 4.48 prints it (LlamaConfig's repr, which adds head_dim and
# mlp_bias) in a course project's README (github.com/satyasundar/erav3-s13, README.md), found through the search's code
# corpus; no byte copy of a SmolLM2 config.json reached. The Instruct uploads add transformers.js_config.
SMOLLM2_135M = {
    "_name_or_path": "HuggingFaceTB/SmolLM2-135M", "architectures": ["LlamaForCausalLM"], "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 0, "eos_token_id": 0, "head_dim": 64, "hidden_act": "silu",
    "hidden_size": 576, "initializer_range": 0.041666666666666664, "intermediate_size": 1536, "is_llama_config": True,
    "max_position_embeddings": 2048, "mlp_bias": False, "model_type": "llama", "num_attention_heads": 9,
    "num_hidden_layers": 30, "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_interleaved": False, "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.48.0", "use_cache": True, "vocab_size": 49152}


@pytest.mark.parametrize("extra", [{}, {"transformers.js_config": SMOLLM2["transformers.js_config"]}],
                         ids=["base", "instruct"])
def test_smollm2s_config_is_read(tmp_path, extra):
    """Refused before for is_llama_config (the first of its three keys neither reference reads); read now."""
    from hfview.config import read_as
    config = {**SMOLLM2_135M, **extra}
    family = families.family_for("llama", config["architectures"])
    h = read_as(family, config, tmp_path / "config.json")
    kv = {k.key: k.value for k in family.parameters(h, 30, 1)}
    assert kv["llama.embedding_length"] == 576 and kv["llama.attention.head_count_kv"] == 3
    assert {"is_llama_config", "rope_interleaved", *extra} <= set(ignored_keys(config, family))


# Qwen/Qwen3.5-0.8B's config.json "minus tokens/vision irrelevant to layout", as another project's test transcribes it
# (its QWEN35_08B_CONFIG, pinned to the Hub revision 2fc06364), found through the search's code corpus; the 9B's and
# 27B's byte copies are under tests/data/released_configs/qwen3_5_text/
QWEN35_08B = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "tie_word_embeddings": True,
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "full_attention_interval": 4,
        "head_dim": 256, "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3584,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 6, "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 16,
        "linear_value_head_dim": 128, "max_position_embeddings": 262144, "mlp_only_layers": [],
        "model_type": "qwen3_5_text", "num_attention_heads": 8, "num_hidden_layers": 24, "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06, "tie_word_embeddings": True, "vocab_size": 248320,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "rope_type": "default",
                            "rope_theta": 10000000, "partial_rotary_factor": 0.25}},
    "vision_config": {"depth": 12, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 768, "in_channels": 3,
                      "intermediate_size": 3072, "model_type": "qwen3_5", "num_heads": 12,
                      "num_position_embeddings": 2304, "out_hidden_size": 1024, "patch_size": 16,
                      "spatial_merge_size": 2, "temporal_patch_size": 2}}


def test_qwen35_08bs_config_is_read(tmp_path):
    """Refused before for mlp_only_layers [] (which the dense Qwen3.5 code of neither reference reads); tied, as the
    small Qwen3.5 models are."""
    from hfview.config import read_as, read_checkpoint_config
    (tmp_path / "config.json").write_text(json.dumps(QWEN35_08B))
    config, path = read_checkpoint_config(tmp_path)
    family = families.family_for(config["model_type"], config["architectures"])
    read_as(family, config, path)
    assert family.name == "qwen3_5_text" and "mlp_only_layers" in ignored_keys(config, family)

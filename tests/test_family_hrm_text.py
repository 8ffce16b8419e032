"""HRM-Text (HrmTextForCausalLM: an L and an H stack of weightless-norm, gate-attention layers run as a
recurrence): converter bytes at every outtype, llama.cpp logits against transformers 5.24's own class, released
configs through the view's config path, refusals of what llama.cpp's hrm_text cannot run."""
from __future__ import annotations

from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests

FIXTURES = ["hrm_text", "hrm_text-saved"]
test_export, test_logits = oracle_tests("hrm_text", FIXTURES)


def test_defaults_match_transformers():
    check_defaults("hrm_text")


# sapientinc/HRM-Text-1B's config.json as the search reached it: printed whole (json.load, then json.dumps with
# indent 2) in a public agent transcript that downloads it with hf_hub_download (search index file id 54773292511),
# not as a file of its own; so it is kept here as data, not among tests/data/released_configs' byte copies
HRM_TEXT_1B = {
    "model_type": "hrm_text", "architectures": ["HrmTextForCausalLM"], "vocab_size": 65536, "hidden_size": 1536,
    "intermediate_size": 4096, "num_hidden_layers": 16, "num_attention_heads": 12, "num_key_value_heads": 12,
    "head_dim": 128, "H_cycles": 2, "L_cycles": 3, "L_bp_cycles": [0, 3], "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "initializer_range": 0.025515518153991442, "embedding_scale": 39.191835884530846, "prefix_lm": True,
    "pad_token_id": 5, "bos_token_id": 6, "eos_token_id": 11,
    "auto_map": {"AutoConfig": "configuration_hrm_text.HrmTextConfig", "AutoModel": "modeling_hrm_text.HrmTextModel",
                 "AutoModelForCausalLM": "modeling_hrm_text.HrmTextForCausalLM"},
}


def _kv(config: dict, tmp_path: Path) -> dict:
    import json

    from released_config import config_path_kv

    path = tmp_path / "hrm_text" / "config.json"  # config_path_kv names the family by the directory
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(config), encoding="utf-8")
    return config_path_kv(path)


def test_hrm_text_1b_as_printed_is_accepted(tmp_path):
    """The release's config as trained (num_hidden_layers the per-stack count) reads as HrmTextConfig reads it: 16
    layers per stack, block_count the 16 x 2 x (3 + 1) = 128 cache slots llama.cpp asserts, the stated scale."""
    kv = _kv(HRM_TEXT_1B, tmp_path)
    assert kv["hrm_text.block_count"] == 128
    assert kv["hrm_text.hrm.layers_per_stack"] == 16
    assert (kv["hrm_text.hrm.h_cycles"], kv["hrm_text.hrm.l_cycles"]) == (2, 3)
    assert kv["hrm_text.hrm.prefix_lm"] is True
    assert kv["hrm_text.embedding_scale"] == HRM_TEXT_1B["embedding_scale"]
    assert kv["hrm_text.attention.head_count_kv"] == kv["hrm_text.attention.head_count"] == 12
    assert kv["hrm_text.rope.dimension_count"] == kv["hrm_text.attention.key_length"] == 128
    assert kv["hrm_text.context_length"] == 4096


def test_saved_layout_reads_the_same(tmp_path):
    """As transformers 5.24 saves the same config (num_hidden_layers expanded, num_layers_per_stack stated)."""
    saved = dict(HRM_TEXT_1B, num_hidden_layers=128, num_layers_per_stack=16)
    assert _kv(saved, tmp_path) == _kv(HRM_TEXT_1B, tmp_path / "trained")


def test_embedding_scale_defaults_to_the_inverse_initializer_range(tmp_path):
    config = {k: v for k, v in HRM_TEXT_1B.items() if k != "embedding_scale"}
    assert _kv(config, tmp_path)["hrm_text.embedding_scale"] == pytest.approx(1 / HRM_TEXT_1B["initializer_range"])


@pytest.mark.parametrize("changes, reason", [
    (dict(num_hidden_layers=12, num_layers_per_stack=2, H_cycles=2, L_cycles=3), "not num_layers_per_stack x"),
    (dict(attention_bias=True), "attention_bias True"),
    (dict(mlp_bias=True), "mlp_bias True"),
    (dict(num_key_value_heads=2), "num_key_value_heads 2"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}), "rope_type 'linear'"),
    (dict(H_cycles=0), "H_cycles is 0"),
    (dict(L_cycles=0), "L_cycles is 0"),
    (dict(embedding_scale=None, initializer_range=0.0), "no embedding_scale"),
], ids=["slot_count", "attention_bias", "mlp_bias", "grouped_kv", "gelu", "rope_scaling", "no_h_cycles",
        "no_l_cycles", "no_scale"])
def test_refuses_what_hrm_text_cannot_run(changes, reason, checkpoint, tmp_path):
    """A block count other than the slot count (llama.cpp asserts it), biases and grouped KV heads (it loads none,
    and transformers' attention is multi-head whatever the config says), zero cycles (llama.cpp asserts > 0), an
    undefined embedding scale: refused by name before any weight is read."""
    from family_variants import DROP, variant
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    changes = {k: (DROP if v is None else v) for k, v in changes.items()}
    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("hrm_text-saved"), tmp_path / "v", **changes), "f32")


def test_a_stack_with_a_layer_missing_or_extra_is_refused(checkpoint, tmp_path):
    """Each stack stores exactly num_layers_per_stack layers (block_count counts slots, so the tensor rules
    cannot say so)."""
    from family_variants import weights_variant
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    src = checkpoint("hrm_text-saved")
    missing = weights_variant(src, tmp_path / "missing", lambda t: {
        k: v for k, v in t.items() if k != "model.H_module.layers.1.mlp.down_proj.weight"})
    with pytest.raises(CheckpointError, match="model.H_module.layers.1.mlp.down_proj.weight' is missing"):
        HfCheckpoint(missing, "f32")
    extra = weights_variant(src, tmp_path / "extra", lambda t: {
        **t, **{k.replace("layers.1.", "layers.2."): v.clone() for k, v in t.items() if k.startswith("model.L_module.layers.1.")}})
    with pytest.raises(CheckpointError, match="layer 2 of the L stack"):
        HfCheckpoint(extra, "f32")


def test_the_cycles_change_the_function(checkpoint):
    """The fixtures test the recurrence: one cycle of each stack, or a zero low-cycle state, gives other logits."""
    import torch
    import transformers

    from family_oracle import nmse

    path = checkpoint("hrm_text")
    ids = torch.tensor([list(range(5, 21))])
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        full = model(ids).logits[0].numpy()
        model.config.H_cycles = model.config.L_cycles = 1
        once = model(ids, use_cache=False).logits[0].numpy()
        model.config.H_cycles, model.config.L_cycles = 2, 3
        model.model.z_L_init.zero_()
        zero_state = model(ids, use_cache=False).logits[0].numpy()
    assert nmse(once, full) > 1e-2
    assert nmse(zero_state, full) > 1e-3

"""openPangu-Embedded (PanguEmbeddedForCausalLM, remote code; transformers 5.24 has no PanguEmbedded class):
converter bytes at every outtype, llama.cpp logits against an equivalent transformers class, refusals.

Logits oracle. openPangu-Embedded-7B's modeling code (modeling_openpangu_dense.py, generated from
modular_openpangu_dense.py, read in github.com/wujing215/OpenPangu7B-on-NVIDIA, commit 1d101f9f, with its
configuration_openpangu_dense.py) computes transformers' LlamaForCausalLM with attention_bias = config.bias:
PanguEmbeddedRMSNorm is LlamaRMSNorm (float32, weight times the normed input), PanguEmbeddedAttention has q/k/v/o
with bias=config.bias, head_dim from config (default hidden // heads), rotate-half rope from
ROPE_INIT_FUNCTIONS at rope_theta, repeat_kv, scaling head_dim ** -0.5; PanguEmbeddedMLP is SwiGLU without bias;
the decoder layer is Llama's pre-norm block; the model and head are Llama's (final norm, lm_head without bias or
scale). So a LlamaForCausalLM over the same weights, configured from the fixture's config.json with
attention_bias = bias and mlp_bias false, is the reference.
"""
import json

import pytest

from family_oracle import oracle_tests, reference_logits_test
from family_variants import assert_refused

test_export, _ = oracle_tests("pangu_embedded", ["pangu_embedded"])


def llama_logits(path, ids):
    import torch
    import transformers

    cfg = json.loads((path / "config.json").read_text())
    llama_cfg = transformers.LlamaConfig(
        **{k: v for k, v in cfg.items() if k not in ("architectures", "auto_map", "model_type", "bias")},
        attention_bias=cfg["bias"], mlp_bias=False)
    model = transformers.LlamaForCausalLM.from_pretrained(path, config=llama_cfg, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


test_logits = reference_logits_test("pangu_embedded", ["pangu_embedded"], llama_logits,
                                    "transformers' Llama with attention biases")


def test_transformers_has_no_pangu_embedded_class():
    transformers = pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    assert "PanguEmbedded" not in CONFIG_MAPPING
    assert not hasattr(transformers, "PanguEmbeddedForCausalLM")


@pytest.mark.parametrize("changes, message", [
    (dict(bias=False), "bias False"),
    (dict(qkv_bias=False), "qkv_bias"),
    (dict(sandwich_norm=True), "sandwich_norm"),
    (dict(mlp_bias=True), "mlp_bias"),
    (dict(rope_theta=None), "rope_theta None: missing"),
    (dict(num_key_value_heads=None), "num_key_value_heads None: missing"),
    (dict(rope_scaling={"type": "dynamic", "factor": 2.0}), "rope_type 'dynamic'"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(architectures=["PanguEmbeddedForSequenceClassification"]), "architectures"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("pangu_embedded"), tmp_path, message, **changes)


def test_released_config_kv_carries_its_values():
    """openPangu-Embedded-7B-V1.1 (no head_dim stated: the converter writes the key and value widths after the
    rope width)."""
    from released_config import DATA, config_path_kv
    kv = config_path_kv(DATA / "pangu_embedded" / "openPangu-Embedded-7B-V1.1.json")
    assert kv["pangu-embedded.block_count"] == 34 and kv["pangu-embedded.embedding_length"] == 4096
    assert kv["pangu-embedded.attention.head_count"] == 32 and kv["pangu-embedded.attention.head_count_kv"] == 8
    assert kv["pangu-embedded.feed_forward_length"] == 12800 and kv["pangu-embedded.vocab_size"] == 153376
    assert kv["pangu-embedded.rope.freq_base"] == 16000000.0 and kv["pangu-embedded.context_length"] == 32768
    assert kv["pangu-embedded.rope.dimension_count"] == 128 and kv["pangu-embedded.attention.key_length"] == 128
    assert kv["pangu-embedded.attention.layer_norm_rms_epsilon"] == 1e-05

"""Kimi-K3's released config (moonshotai/Kimi-K3: KimiK3ForConditionalGeneration around a kimi_linear text_config,
its routed experts compressed-tensors mxfp4-pack-quantized), read as the kimi_k3 family (hfview/families/kimi_k3.py,
the converter's KimiK3Model, llama.cpp kimi-k3), not as its kimi_linear text_config. transformers 5.24 has no class
for it, so its logits reference is the release's forward composed from transformers' modules
(tests/test_family_kimi_k3.py)."""
import json

import pytest

RELEASE = "compressed_tensors/moonshotai__Kimi-K3.json"


def _release(tmp_path, quantized=True):
    from test_released_quantized import DATA

    config = json.loads((DATA / RELEASE).read_text(encoding="utf-8"))
    if not quantized:
        del config["text_config"]["quantization_config"]
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path


def test_transformers_has_no_kimi_k3_class(tmp_path):
    """Why the logits reference is composed: transformers 5.24 cannot load the released config without remote code
    (were it to gain a kimi_k3 class, this fails and the reference can be that class)."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    assert "kimi_k3" not in CONFIG_MAPPING_NAMES and "kimi_linear" in CONFIG_MAPPING_NAMES
    with pytest.raises(ValueError, match="contains custom code which must be executed"):
        transformers.AutoConfig.from_pretrained(str(_release(tmp_path)), trust_remote_code=False)


@pytest.mark.parametrize("quantized", [True, False])
def test_the_gate_sends_kimi_k3_to_the_view(quantized, tmp_path):
    """Read as kimi_k3, not as its kimi_linear text_config: the gate admits it for the view, quantized (as released)
    or not."""
    from hfview.config import read_config
    from hfview.runner.resolve import gate

    path = _release(tmp_path, quantized) / "config.json"
    assert gate(read_config(path), path) == "view"


def _released_kv(tmp_path, quantized=False) -> dict:
    from hfview import families
    from hfview.checkpoint import _read_config
    from hfview.config import read_as
    from hfview.config_values import layer_count

    config, path = _read_config(_release(tmp_path, quantized))
    family = families.family_for(config.get("model_type"), config.get("architectures"))
    assert family is not None and family.name == "kimi_k3"
    h = read_as(family, config, path)
    return {e.key: e.value for e in family.parameters(h, layer_count(h), 1)}


def test_the_released_config_is_read_with_k3s_additions(tmp_path):
    """The released hyperparameters as KimiK3Model writes them: K3's keys (the residual block size, situ's betas,
    the latent width, the decay's lower bound) and Kimi-Linear's (latent layers every 4th and the last, 1-based)."""
    kv = _released_kv(tmp_path)
    assert kv["kimi-k3.attn_res.block_size"] == 12
    assert (kv["kimi-k3.activation.situ_beta"], kv["kimi-k3.activation.situ_linear_beta"]) == (4.0, 25.0)
    assert kv["kimi-k3.expert_latent_length"] == 3584
    assert kv["kimi-k3.kda.gate_lower_bound"] == -5.0
    assert kv["kimi-k3.attention.q_lora_rank"] == 1536
    heads = list(kv["kimi-k3.attention.head_count_kv"])
    assert len(heads) == 93 and [i + 1 for i, n in enumerate(heads) if n] == [*range(4, 93, 4), 93]
    assert kv["kimi-k3.expert_gating_func"] == 2 and kv["kimi-k3.expert_weights_norm"] is True


def test_the_released_quantized_config_is_written_as_mxfp4_moe(tmp_path):
    """As released (routed experts mxfp4-pack-quantized) the file type is MOSTLY_MXFP4_MOE, as KimiK3Model labels it
    at every outtype; unquantized, the outtype's."""
    assert _released_kv(tmp_path / "q", quantized=True)["general.file_type"] == 38
    assert _released_kv(tmp_path / "u", quantized=False)["general.file_type"] == 1


def test_kimi_k25_is_still_read_as_deepseek_v3():
    """The other wrapper the same table reads (Kimi-K2.5's kimi_k2 text_config as deepseek_v3) is unchanged."""
    from hfview.config import merge_text_config

    assert merge_text_config({"model_type": "kimi_k25", "text_config": {"model_type": "kimi_k2"}})[
        "model_type"] == "deepseek_v3"
    assert merge_text_config({"model_type": "kimi_k3", "text_config": {"model_type": "kimi_linear"}})[
        "model_type"] == "kimi_k3"

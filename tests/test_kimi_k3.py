"""Kimi-K3 (moonshotai/Kimi-K3: KimiK3ForConditionalGeneration around a kimi_linear text_config, its routed experts
compressed-tensors mxfp4-pack-quantized). The pinned converter writes it as llama.cpp kimi-k3 with its own class
(KimiK3Model), not Kimi-Linear's, but transformers 5.24 has no class for it (the release runs only as remote code),
so hfview has no logits oracle for it and refuses it by name (hfview.families.NOT_COMPUTABLE["kimi_k3"]) rather than
reading its text_config as the kimi_linear family, whose graph computes none of K3's additions."""
import json
import shutil

import pytest

RELEASE = "compressed_tensors/moonshotai__Kimi-K3.json"


def _release(tmp_path, quantized=True):
    from test_released_quantized import DATA

    config = json.loads((DATA / RELEASE).read_text(encoding="utf-8"))
    if not quantized:
        del config["text_config"]["quantization_config"]
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path


def test_transformers_has_no_kimi_k3_class(tmp_path):
    """The reason for the refusal, measured: transformers 5.24 cannot load the released config without remote
    code (were it to gain a kimi_k3 class, this fails and the family can be written against it)."""
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    assert "kimi_k3" not in CONFIG_MAPPING_NAMES and "kimi_linear" in CONFIG_MAPPING_NAMES
    with pytest.raises(ValueError, match="contains custom code which must be executed"):
        transformers.AutoConfig.from_pretrained(str(_release(tmp_path)), trust_remote_code=False)


@pytest.mark.parametrize("quantized", [True, False])
def test_the_gate_refuses_kimi_k3_by_name(quantized, tmp_path):
    """Read as kimi_k3, not as its kimi_linear text_config: the architecture gate refuses it before any weight is
    read, quantized (as released) or not, naming why."""
    from hfview.config import read_config
    from hfview.runner.errors import UnsupportedArchitecture
    from hfview.runner.resolve import gate

    path = _release(tmp_path, quantized) / "config.json"
    with pytest.raises(UnsupportedArchitecture, match=r"kimi_k3: KimiK3ForConditionalGeneration .* has no "
                                                      r"transformers 5\.24 class.*llama\.cpp kimi-k3"):
        gate(read_config(path), path)


def test_the_view_refuses_kimi_k3_rather_than_reading_it_as_kimi_linear(tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    model = _release(tmp_path, quantized=False)
    with pytest.raises(ConfigError, match=r"'kimi_k3' .*cannot be presented as a GGUF: KimiK3ForConditionalGeneration"):
        HfCheckpoint(model, "bf16")


def test_kimi_k25_is_still_read_as_deepseek_v3():
    """The other wrapper the same table reads (Kimi-K2.5's kimi_k2 text_config as deepseek_v3) is unchanged."""
    from hfview.config import merge_text_config

    assert merge_text_config({"model_type": "kimi_k25", "text_config": {"model_type": "kimi_k2"}})[
        "model_type"] == "deepseek_v3"
    assert merge_text_config({"model_type": "kimi_k3", "text_config": {"model_type": "kimi_linear"}})[
        "model_type"] == "kimi_k3"

"""Bad input: each is an error naming the file, tensor or key, raised before anything is written or run."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from hfview import CheckpointError, ConfigError, HfCheckpoint

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 16, "hidden_size": 8,
          "intermediate_size": 12, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
          "rms_norm_eps": 1e-5, "torch_dtype": "float32"}


def weights(h=CONFIG) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    d, ff, v, kvd = h["hidden_size"], h["intermediate_size"], h["vocab_size"], \
        h["hidden_size"] // h["num_attention_heads"] * h["num_key_value_heads"]
    w = {"model.embed_tokens.weight": (v, d), "model.norm.weight": (d,), "lm_head.weight": (v, d),
         "model.layers.0.input_layernorm.weight": (d,), "model.layers.0.post_attention_layernorm.weight": (d,),
         "model.layers.0.self_attn.q_proj.weight": (d, d), "model.layers.0.self_attn.k_proj.weight": (kvd, d),
         "model.layers.0.self_attn.v_proj.weight": (kvd, d), "model.layers.0.self_attn.o_proj.weight": (d, d),
         "model.layers.0.mlp.gate_proj.weight": (ff, d), "model.layers.0.mlp.up_proj.weight": (ff, d),
         "model.layers.0.mlp.down_proj.weight": (d, ff)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in w.items()}


def make(tmp: Path, config=None, tensors=None, files=None) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "config.json").write_text(json.dumps(CONFIG if config is None else config))
    if files is None:
        save_file(weights() if tensors is None else tensors, tmp / "model.safetensors")
    else:
        for name, t in files.items():
            save_file(t, tmp / name)
    return tmp


def refused(path: Path, *words: str, exc=CheckpointError) -> str:
    with pytest.raises(exc) as info:
        HfCheckpoint(path)
    msg = str(info.value)
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def test_missing_config(tmp_path):
    refused(tmp_path, "model config is missing", str(tmp_path / "config.json"))


def test_config_not_json(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    refused(tmp_path, "invalid model config", "config.json")


def test_no_weights(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    refused(tmp_path, "contains no safetensors weights")


def test_unknown_config_key_is_refused_by_name(tmp_path):
    # a key the converter's LlamaModel reads (EAGLE-3 drafts) and the llama family does not: refused, naming who reads it
    refused(make(tmp_path, {**CONFIG, "draft_vocab_size": 8}), "'draft_vocab_size'", "the converter's LlamaModel",
            exc=ConfigError)


def test_key_neither_reference_reads_is_ignored(tmp_path):
    # Gemma-2's soft-capping on a Llama: neither transformers' llama code nor the converter's LlamaModel reads it
    from hfview import families
    from hfview.config import ignored_keys, read_as
    config = {**CONFIG, "attn_logit_softcapping": 30.0}
    read_as(families.family_for("llama"), config, make(tmp_path, config) / "config.json")
    assert "attn_logit_softcapping" in ignored_keys(config, families.family_for("llama"))


def test_unsupported_activation(tmp_path):
    refused(make(tmp_path, {**CONFIG, "hidden_act": "gelu"}), "hidden_act", "'gelu'", exc=ConfigError)


def test_unsupported_rope(tmp_path):
    cfg = {**CONFIG, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    refused(make(tmp_path, cfg), "'dynamic'", exc=ConfigError)


def test_quantized_checkpoint(tmp_path):
    cfg = {**CONFIG, "quantization_config": {"quant_method": "awq", "bits": 4}}
    refused(make(tmp_path, cfg), "quantized", "AWQ 4-bit", "awq", "BF16", exc=ConfigError)


def test_unknown_model_type(tmp_path):
    msg = refused(make(tmp_path, {**CONFIG, "model_type": "jetmoe"}), "'jetmoe'", "`hfview families` lists",
                  exc=ConfigError)
    assert "did you mean" not in msg  # nothing near it: no guess


def test_misspelt_model_type_names_its_near_matches(tmp_path):
    refused(make(tmp_path, {**CONFIG, "model_type": "qwen_2"}), "'qwen_2'", "did you mean qwen2", exc=ConfigError)


def test_truncated_shard(tmp_path):
    path = make(tmp_path)
    shard = path / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[:-10])
    refused(path, "model.safetensors", "truncated")


def test_corrupt_header_length(tmp_path):
    path = make(tmp_path)
    shard = path / "model.safetensors"
    data = bytearray(shard.read_bytes())
    data[:8] = struct.pack("<Q", 1 << 40)
    shard.write_bytes(bytes(data))
    refused(path, "model.safetensors", "corrupt safetensors header")


def test_header_not_json(tmp_path):
    path = make(tmp_path)
    (path / "model.safetensors").write_bytes(struct.pack("<Q", 4) + b"{{{{")
    refused(path, "model.safetensors", "not JSON")


def test_shape_does_not_match_bytes(tmp_path):
    path = make(tmp_path)
    shard = path / "model.safetensors"
    raw = shard.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = raw[8:8 + n]
    at = header.index(b'"model.norm.weight"')
    entry_end = header.index(b"}", at)
    entry = header[at:entry_end].replace(b"[8]", b"[9]")  # same length: the byte count no longer fits
    shard.write_bytes(raw[:8] + header[:at] + entry + header[entry_end:] + raw[8 + n:])
    refused(path, "model.safetensors", "'model.norm.weight'", "[9]")


def test_unknown_dtype(tmp_path):
    path = make(tmp_path)
    shard = path / "model.safetensors"
    raw = shard.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    text = raw[8:8 + n].replace(b'"F32"', b'"F31"', 1)
    shard.write_bytes(raw[:8] + text + raw[8 + n:])
    refused(path, "model.safetensors", "'F31'")


def test_tensor_stored_twice(tmp_path):
    w = weights()
    files = {"model-00001-of-00002.safetensors": dict(list(w.items())[:7]),
             "model-00002-of-00002.safetensors": dict(list(w.items())[6:])}
    dup = list(w)[6]
    refused(make(tmp_path, files=files), repr(dup), "stored twice", "model-00001-of-00002.safetensors")


def test_missing_tensor(tmp_path):
    w = weights()
    del w["model.layers.0.mlp.up_proj.weight"]
    refused(make(tmp_path, tensors=w), "'model.layers.0.mlp.up_proj.weight'", "missing")


def test_unexpected_tensor(tmp_path):
    w = weights()
    w["model.layers.0.self_attn.q_norm.weight"] = np.ones(4, np.float32)
    refused(make(tmp_path, tensors=w), "'model.layers.0.self_attn.q_norm.weight'", "model.safetensors")


def test_tensor_beyond_block_count(tmp_path):
    w = weights()
    w["model.layers.1.input_layernorm.weight"] = np.ones(8, np.float32)
    refused(make(tmp_path, tensors=w), "'model.layers.1.input_layernorm.weight'", "num_hidden_layers")


def test_heads_that_do_not_divide_rows(tmp_path):
    w = weights()
    w["model.layers.0.self_attn.k_proj.weight"] = np.ones((5, 8), np.float32)
    refused(make(tmp_path, tensors=w), "'model.layers.0.self_attn.k_proj.weight'", "heads")


def test_non_finite_config_values_read_as_unstated(tmp_path):
    """`Infinity` for rope_theta reads as unstated: the family default applies (no error from the value)."""
    path = make(tmp_path)
    text = json.dumps({**CONFIG, "rope_theta": 1.0}).replace("1.0", "Infinity")
    (path / "config.json").write_text(text)
    from hfview.config import read_checkpoint_config
    config, _ = read_checkpoint_config(path)
    assert "rope_theta" not in config

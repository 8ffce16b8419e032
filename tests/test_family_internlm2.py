"""InternLM2 (InternLM2ForCausalLM, remote code -> llama.cpp internlm2).

transformers has no InternLM2 class. Logits oracle: InternLM2 is Llama with q, k, v fused per KV group, so a
Llama twin of each fixture (wqkv split by group, tensors renamed, same config) run by transformers'
LlamaForCausalLM is the reference for llama.cpp fed from the view of the InternLM2 checkpoint.
Byte oracle: the converter's InternLM2 vocab reads the SentencePiece model through sentencepiece_model_pb2,
which needs protobuf; where protobuf is missing the converter fails and the export test records that.
"""
import importlib.util
import shutil

import numpy as np
import pytest

import oracle
from family_oracle import OUTTYPES, check_export, twin_logits_test

FIXTURES = ["internlm2", "internlm2-gqa3"]


def _has_protobuf() -> bool:
    try:
        return importlib.util.find_spec("google.protobuf") is not None
    except ModuleNotFoundError:  # no "google" package at all
        return False


HAS_PROTOBUF = _has_protobuf()


@pytest.mark.xfail(not HAS_PROTOBUF, raises=oracle.ConverterFailed, strict=True,
                   reason="the converter's InternLM2 vocab imports sentencepiece_model_pb2: needs protobuf")
@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export(name, outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", "internlm2")
    record_property("oracle", "bytes")
    check_export(name, outtype, checkpoint, converted, tmp_path)


def llama_twin(src, out):
    """The InternLM2 checkpoint `src` as a Llama checkpoint in `out` (same values, q/k/v split by group)."""
    import json

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import LlamaConfig

    c = json.loads((src / "config.json").read_text())
    n_head, n_kv, hidden = c["num_attention_heads"], c["num_key_value_heads"], c["hidden_size"]
    head_dim = hidden // n_head
    LlamaConfig(vocab_size=c["vocab_size"], hidden_size=hidden, intermediate_size=c["intermediate_size"],
                num_hidden_layers=c["num_hidden_layers"], num_attention_heads=n_head, num_key_value_heads=n_kv,
                max_position_embeddings=c["max_position_embeddings"], rms_norm_eps=c["rms_norm_eps"],
                rope_parameters={"rope_type": "default", "rope_theta": float(c["rope_theta"])},
                tie_word_embeddings=False, bos_token_id=1, eos_token_id=2).save_pretrained(out)
    renames = {"model.tok_embeddings.": "model.embed_tokens.", "output.weight": "lm_head.weight",
               ".attention.wo.": ".self_attn.o_proj.", ".attention_norm.": ".input_layernorm.",
               ".ffn_norm.": ".post_attention_layernorm.", ".feed_forward.w1.": ".mlp.gate_proj.",
               ".feed_forward.w3.": ".mlp.up_proj.", ".feed_forward.w2.": ".mlp.down_proj."}
    tensors = {}
    for name, t in load_file(src / "model.safetensors").items():
        if name.endswith("attention.wqkv.weight"):
            g = t.reshape(n_kv, n_head // n_kv + 2, head_dim, hidden)
            base = name[: -len("attention.wqkv.weight")] + "self_attn."
            tensors[base + "q_proj.weight"] = g[:, :-2].reshape(-1, hidden).contiguous()
            tensors[base + "k_proj.weight"] = g[:, -2].reshape(-1, hidden).contiguous()
            tensors[base + "v_proj.weight"] = g[:, -1].reshape(-1, hidden).contiguous()
            continue
        for old, new in renames.items():
            name = name.replace(old, new)
        tensors[name] = t
    save_file({k: v.to(torch.float32) for k, v in tensors.items()}, out / "model.safetensors",
              metadata={"format": "pt"})
    shutil.copyfile(src / "tokenizer.model", out / "tokenizer.model")
    return out


test_logits = twin_logits_test("internlm2", FIXTURES, llama_twin, "Llama")


def test_wqkv_rows_cover_each_row_once():
    from hfview.families.internlm2 import wqkv_rows
    h = {"num_attention_heads": 6, "num_key_value_heads": 2, "hidden_size": 48}
    rows = np.concatenate([wqkv_rows(h, p) for p in "qkv"])
    assert sorted(rows) == list(range((6 + 2 * 2) * 8))
    assert list(wqkv_rows(h, "v")) == list(range(32, 40)) + list(range(72, 80))  # each group's last head


def test_add_dummy_prefix_read_without_protobuf(tmp_path):
    from hfview.tokenizer.internlm2 import add_dummy_prefix
    pieces = b"\x0a\x08\x0a\x01a\x15\x00\x00\x00\x00"      # field 1: a piece "a", score 0.0
    for spec, expected in ((b"", True), (b"\x18\x00", False), (b"\x18\x01", True), (b"\x0a\x03nmt\x18\x00", False)):
        path = tmp_path / "m.model"
        path.write_bytes(pieces + b"\x1a" + bytes([len(spec)]) + spec)   # field 3: normalizer_spec
        assert add_dummy_prefix(path) is expected, spec


@pytest.mark.skipif(HAS_PROTOBUF, reason="protobuf is installed: test_export runs the real oracle instead")
def test_converter_fails_for_want_of_protobuf(checkpoint, tmp_path):
    # the reason recorded by test_export's expected failure, checked by its message
    with pytest.raises(oracle.ConverterFailed, match="No module named 'google'"):
        oracle.convert(checkpoint("internlm2"), tmp_path / "theirs.gguf", "f32")

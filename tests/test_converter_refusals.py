"""Refusals that quote the pinned converter or llama.cpp: each is measured here by running the converter on a fixture
with the refused config (and llama.cpp on its file, where it converts), and the view's refusal names what the
converter or llama.cpp itself says."""
from __future__ import annotations

import pytest

import oracle
from family_variants import DROP, assert_refused, variant


def _converter_says(src, tmp_path, **changes) -> str:
    model = variant(src, tmp_path / "converted" / src.name, **changes)
    with pytest.raises(oracle.ConverterFailed) as failed:
        oracle.convert(model, tmp_path / "out.gguf", "f32")
    return str(failed.value)


def test_glm4_without_vocab_size(checkpoint, tmp_path):
    """glm-4-9b's config.json (model_type chatglm, GLM-4's BPE tokenizer) states only padded_vocab_size. The converter
    reads the vocabulary size as hparams.get("padded_vocab_size", hparams["vocab_size"]), whose default is looked up
    first: it stops with KeyError: 'vocab_size'. The view refuses with the converter's words."""
    said = _converter_says(checkpoint("chatglm"), tmp_path, vocab_size=DROP)
    assert "KeyError: 'vocab_size'" in said
    assert_refused(checkpoint("chatglm"), tmp_path, r"KeyError: 'vocab_size'", vocab_size=None)


def _linked(src, dst, keep=("model.safetensors", "config.json")):
    """`dst` with `src`'s files linked but those in `keep`, which the caller writes."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.name not in keep:
            (dst / f.name).symlink_to(f)
    return dst


def test_grouped_query_mpt(checkpoint, tmp_path):
    """replit-code-v1_5-3b: MPT with attn_type grouped_query_attention and kv_n_heads 8, a GPT-NeoX tokenizer.json and
    no tokenizer.model. On the mpt fixture with that structure (4 heads over 2 KV heads, Wqkv q | k | v of 64 + 32 +
    32 rows) the converter's vocabulary asks AutoConfig for the tokenizer class; transformers' MptConfig refuses the
    attention kind, and the converter's SentencePiece fallback finds no tokenizer.model. The view refuses with those
    words."""
    import json

    import torch
    from safetensors.torch import load_file, save_file

    src = checkpoint("mpt")
    dst = _linked(src, tmp_path / src.name)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    d, kv_heads = config["d_model"], 2
    kv_rows = kv_heads * d // config["n_heads"]
    weights = load_file(str(src / "model.safetensors"))
    for name in [n for n in weights if n.endswith("attn.Wqkv.weight")]:
        q, k, v = weights[name].split(d)
        weights[name] = torch.cat([q, k[:kv_rows], v[:kv_rows]]).contiguous()
    save_file(weights, str(dst / "model.safetensors"), metadata={"format": "pt"})
    config["attn_config"] |= {"attn_type": "grouped_query_attention", "kv_n_heads": kv_heads}
    (dst / "config.json").write_text(json.dumps(config), encoding="utf-8")

    with pytest.raises(oracle.ConverterFailed) as failed:
        oracle.convert(dst, tmp_path / "out.gguf", "f32")
    said = str(failed.value)
    assert ("Field 'attn_type' expected one of ('multihead_attention', 'multiquery_attention'), got "
            "grouped_query_attention") in said
    assert "FileNotFoundError: File not found:" in said and "tokenizer.model" in said

    from hfview import HfCheckpoint
    from hfview.errors import ConfigError
    with pytest.raises(ConfigError, match=r"attn_config.attn_type 'grouped_query_attention': the converter fails on it"
                                          r".*FileNotFoundError"):
        HfCheckpoint(dst)


def test_qwen_first_revision_names(checkpoint, tmp_path_factory, tmp_path):
    """Qwen-7B-Chat's first revision (n_embd, n_layer, n_head, n_positions, ffn_hidden_size): the converter converts
    the qwen fixture so named, writing no feed-forward length, and llama.cpp (given the RMS epsilon at load as hfview's
    runner gives it) refuses the converter's file on the MLP's width. The view refuses with llama.cpp's words."""
    from converter_ceiling import GGUFFile
    from gguf import GGUFReader
    from test_family_qwen import RMS_EPS_KEY, restored

    from hfview.runner.stream import ModelLoadError, load_model

    src = restored(checkpoint("qwen"), tmp_path_factory.getbasetemp() / "qwen-restored")
    c = __import__("json").loads((src / "config.json").read_text(encoding="utf-8"))
    first = dict(n_embd=c["hidden_size"], n_layer=c["num_hidden_layers"], n_head=c["num_attention_heads"],
                 n_positions=c["max_position_embeddings"], ffn_hidden_size=c["intermediate_size"])
    renamed = dict(first, **dict.fromkeys(("hidden_size", "num_hidden_layers", "num_attention_heads",
                                           "max_position_embeddings", "intermediate_size"), DROP))
    model = variant(src, tmp_path / "first" / src.name, **renamed)
    theirs = oracle.convert_cached(model, "f32")
    keys = set(GGUFReader(theirs).fields)
    assert "qwen.embedding_length" in keys and "qwen.feed_forward_length" not in keys
    source = GGUFFile(theirs)
    source.load_kv = {RMS_EPS_KEY: float(c["layer_norm_epsilon"])}
    with pytest.raises(ModelLoadError, match=r"check_tensor_dims: tensor 'blk.0.ffn_gate.weight' has wrong shape; "
                                             r"expected +\d+, +0,"):
        load_model(source, data_path="stream")
    assert_refused(src, tmp_path, r"ffn_hidden_size \d+ .*llama.cpp refuses its file \(\"check_tensor_dims: tensor "
                                  r"'blk.0.ffn_gate.weight' has wrong shape", **renamed)


def test_telechat_52b_states_no_architecture(checkpoint, tmp_path):
    """TeleChat-52B's config.json (model_type telechat, FLM-2's GPT-2 names, muP multipliers) states no
    `architectures`; on the telechat fixture with that config (shrunk) the converter stops before reading a tensor:
    it has no class for any TeleChat, and cannot even name one. The view refuses it by its first unknown key
    (tests/test_released_configs.py)."""
    import json

    from released_config import DATA

    released = json.loads((DATA / "telechat" / "Tele-AI__TeleChat-52B.json").read_text(encoding="utf-8"))
    assert "architectures" not in released
    shrunk = released | dict(n_embd=64, n_head=4, n_inner=96, n_layer=2, n_positions=64, vocab_size=32000,
                             mup_base_width=16)
    src = checkpoint("telechat")
    dst = _linked(src, tmp_path / "telechat-52b", keep=("config.json",))
    (dst / "config.json").write_text(json.dumps(shrunk), encoding="utf-8")
    with pytest.raises(oracle.ConverterFailed, match="ValueError: Failed to detect model architecture"):
        oracle.convert(dst, tmp_path / "out.gguf", "f32")


def test_mlx_affine_4bit(checkpoint, tmp_path):
    """mlx-community's TeleChat3-36B-Thinking-4bit: mlx-lm's affine 4-bit, `quantization` {group_size 64, bits 4,
    mode affine} in config.json, each 2-D weight stored as uint32 words of eight 4-bit codes beside per-group `scales`
    and `biases`. On telechat3-plain so packed (its widths are multiples of 64), the converter has no TeleChat3 class;
    named as the Llama it computes (architectures LlamaForCausalLM), the converter reads no `quantization` from
    config.json and stops at the first scales/biases tensor. The view refuses it as quantized, with those words."""
    import json

    import torch
    from safetensors.torch import load_file, save_file

    src = checkpoint("telechat3-plain")
    dst = _linked(src, tmp_path / "mlx-4bit")
    group = 64
    packed = {}
    for name, t in load_file(str(src / "model.safetensors")).items():
        if t.ndim != 2:
            packed[name] = t
            continue
        w = t.float().reshape(t.shape[0], -1, group)  # mlx's affine: w ~ scale * code + bias per group of inputs
        low, high = w.amin(-1, keepdim=True), w.amax(-1, keepdim=True)
        scale = (high - low) / 15
        codes = torch.clamp(torch.round((w - low) / scale), 0, 15).to(torch.int64).reshape(t.shape[0], -1, 8)
        base = name.removesuffix(".weight")
        packed[name] = (codes << (4 * torch.arange(8))).sum(-1).to(torch.uint32).contiguous()
        packed[base + ".scales"] = scale[..., 0].to(t.dtype).contiguous()
        packed[base + ".biases"] = low[..., 0].to(t.dtype).contiguous()
    save_file(packed, str(dst / "model.safetensors"), metadata={"format": "mlx"})
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    config["quantization"] = {"group_size": group, "bits": 4, "mode": "affine"}

    (dst / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(oracle.ConverterFailed, match="Model Telechat3ForCausalLM is not supported"):
        oracle.convert(dst, tmp_path / "out.gguf", "f32")
    (dst / "config.json").write_text(json.dumps(config | {"architectures": ["LlamaForCausalLM"]}), encoding="utf-8")
    with pytest.raises(oracle.ConverterFailed, match=r"ValueError: Can not map tensor 'model.embed_tokens.biases'"):
        oracle.convert(dst, tmp_path / "out.gguf", "f32")

    from hfview import HfCheckpoint
    from hfview.errors import HfviewError
    (dst / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(HfviewError, match=r"quantized checkpoints are unsupported: .*mlx-lm's packed uint32 weights.*"
                                          r"Can not map tensor 'model.embed_tokens.biases'"):
        HfCheckpoint(dst)

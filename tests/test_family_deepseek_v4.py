"""DeepSeek-V4 (DeepseekV4ForCausalLM, llama.cpp `deepseek4`): not presented by the view, and why, measured.

The pinned converter's DeepseekV4Model (conversion/deepseek.py) writes the routed experts of every layer only by
repacking MXFP4 pairs, each expert's `w1/w2/w3.weight` as packed 4-bit codes ([rows, cols / 2] bytes) with its
`.scale` ([rows, cols / 32] E8M0 exponents), into llama.cpp's MXFP4 blocks; unquantized experts make it raise
KeyError('Missing routed expert tensors ...'). So the checkpoints it converts are quantized ones (DeepSeek's releases:
FP8 linears and FP4 experts), and hfview reads unquantized weights only: no checkpoint passes both oracles. The
model type stays on the torch fallback (tests/test_coverage.py runs `hfview generate` on a tiny one), and inspect,
export and parity refuse it naming why (hfview.families.NOT_PRESENTED).

The checkpoints here are written in the release's own tensor names (the converter reads those: `embed.weight`,
`layers.N.attn.wq_a.weight`, `layers.N.ffn.experts.E.w1.weight`, ...), not in what transformers 5.24's save_pretrained
writes (`model.`-prefixed, and its reverse renaming turns `attn.kv_norm` into `attn.norm`, which the converter
does not map). Only the converter runs on them (it fails or succeeds while preparing tensors, before it reads a
tokenizer), so the MXFP4 one has none; the unquantized one has GPT-2's, for parity's sake.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import oracle
from hfview.cli import main
from hfview.errors import QuantizedCheckpoint
from hfview.quantized import refuse_quantized

# tiny, in the released configs' own keys (the converter reads compress_ratios, num_hash_layers and
# qk_rope_head_dim from config.json, which transformers' DeepseekV4Config folds into other fields)
CONFIG = dict(
    architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4", vocab_size=64, hidden_size=64,
    moe_intermediate_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1, head_dim=32,
    q_lora_rank=32, qk_rope_head_dim=8, o_groups=2, o_lora_rank=32, num_experts_per_tok=2, n_routed_experts=4,
    n_shared_experts=1, scoring_func="sqrtsoftplus", topk_method="noaux_tc", norm_topk_prob=True,
    routed_scaling_factor=1.5, swiglu_limit=10.0, index_n_heads=2, index_head_dim=16, index_topk=4,
    sliding_window=8, compress_ratios=[0, 4, 128], compress_rope_theta=160000, rope_theta=10000, hc_mult=2,
    hc_sinkhorn_iters=20, hc_eps=1e-6, num_hash_layers=1, num_nextn_predict_layers=0,
    max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False,
)


def _shapes(c: dict) -> dict[str, tuple[int, ...]]:
    """The release's tensor names and shapes for config `c` (as transformers 5.24's DeepseekV4ForCausalLM holds
    them, under DeepSeek's names)."""
    h, hc, v, e, f = c["hidden_size"], c["hc_mult"], c["vocab_size"], c["n_routed_experts"], c["moe_intermediate_size"]
    heads, hd, q, d = c["num_attention_heads"], c["head_dim"], c["q_lora_rank"], c["index_head_dim"]
    mix = (2 + hc) * hc  # hyper-connection mixes: pre, post (hc each) and the hc x hc residual map
    out = {"embed.weight": (v, h), "head.weight": (v, h), "norm.weight": (h,),
           "hc_head_fn": (hc, hc * h), "hc_head_base": (hc,), "hc_head_scale": (1,)}
    for i, ratio in enumerate(c["compress_ratios"]):
        p = f"layers.{i}."
        out.update({
            p + "attn_norm.weight": (h,), p + "ffn_norm.weight": (h,),
            **{p + f"hc_{k}_fn": (mix, hc * h) for k in ("attn", "ffn")},
            **{p + f"hc_{k}_base": (mix,) for k in ("attn", "ffn")},
            **{p + f"hc_{k}_scale": (3,) for k in ("attn", "ffn")},
            p + "attn.attn_sink": (heads,), p + "attn.wq_a.weight": (q, h), p + "attn.q_norm.weight": (q,),
            p + "attn.wq_b.weight": (heads * hd, q), p + "attn.wkv.weight": (hd, h), p + "attn.kv_norm.weight": (hd,),
            p + "attn.wo_a.weight": (c["o_groups"] * c["o_lora_rank"], heads * hd // c["o_groups"]),
            p + "attn.wo_b.weight": (h, c["o_groups"] * c["o_lora_rank"]),
            p + "ffn.gate.weight": (e, h),
            **{p + f"ffn.shared_experts.w{k}.weight": (f, h) if k != 2 else (h, f) for k in (1, 2, 3)},
            **{p + f"ffn.experts.{j}.w{k}.weight": (f, h) if k != 2 else (h, f) for j in range(e) for k in (1, 2, 3)},
        })
        if i < c["num_hash_layers"]:
            out[p + "ffn.gate.tid2eid"] = (v, c["num_experts_per_tok"])
        else:
            out[p + "ffn.gate.bias"] = (e,)
        if ratio:
            width = hd * (2 if ratio == 4 else 1)  # the 4:1 compressor keeps two overlapping halves
            out.update({p + "attn.compressor.ape": (ratio, width), p + "attn.compressor.norm.weight": (hd,),
                        p + "attn.compressor.wkv.weight": (width, h), p + "attn.compressor.wgate.weight": (width, h)})
        if ratio == 4:  # the lightning indexer sits on the sparse (4:1) layers
            n = c["index_n_heads"]
            out.update({p + "attn.indexer.wq_b.weight": (n * d, q), p + "attn.indexer.weights_proj.weight": (n, h),
                        p + "attn.indexer.compressor.ape": (ratio, 2 * d),
                        p + "attn.indexer.compressor.norm.weight": (d,),
                        p + "attn.indexer.compressor.wkv.weight": (2 * d, h),
                        p + "attn.indexer.compressor.wgate.weight": (2 * d, h)})
    return out


def _checkpoint(path, experts: str):
    """A tiny random DeepSeek-V4 at `path`, its routed experts unquantized (`float32`) or MXFP4 pairs (`mxfp4`)."""
    import re

    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    tensors = {}
    for name, shape in _shapes(CONFIG).items():
        if name.endswith("tid2eid"):
            tensors[name] = rng.integers(0, CONFIG["n_routed_experts"], shape, dtype=np.int64)
        elif experts == "mxfp4" and re.search(r"\.experts\.\d+\.w[123]\.weight$", name):
            rows, cols = shape
            tensors[name] = rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)  # two E2M1 codes a byte
            tensors[name.removesuffix("weight") + "scale"] = np.full((rows, cols // 32), 120, np.uint8)  # 2^-7
        else:
            tensors[name] = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    path.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    (path / "config.json").write_text(json.dumps(CONFIG, indent=2), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def unquantized(tmp_path_factory):
    """The unquantized form, with GPT-2's tokenizer files (parity asks for a tokenizer before the family)."""
    import shutil
    from pathlib import Path

    path = _checkpoint(tmp_path_factory.mktemp("deepseek_v4") / "DeepSeek-V4-tiny", "float32")
    src = Path(__file__).resolve().parent.parent / "fixtures" / "tokenizers" / "gpt-2"
    for file in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(src / file, path / file)
    return path


def _converter_log(model_dir, tmp_path) -> str:
    try:
        oracle.convert(model_dir, tmp_path / "out.gguf", "f32")
    except oracle.ConverterFailed as exc:
        return str(exc)
    return ""


def test_the_pinned_converter_fails_on_unquantized_routed_experts(unquantized, tmp_path):
    log = _converter_log(unquantized, tmp_path)
    assert "KeyError: 'Missing routed expert tensors for layers.0.ffn.experts.0.w1.weight'" in log


def test_the_pinned_converter_takes_mxfp4_routed_experts(tmp_path):
    """The same model with MXFP4 expert pairs: every layer's experts are repacked and every tensor prepared; the run
    then stops at the vocabulary (no tokenizer is written here), which the converter reads only after the tensors."""
    log = _converter_log(_checkpoint(tmp_path / "DeepSeek-V4-tiny-mxfp4", "mxfp4"), tmp_path)
    assert "Missing routed expert tensors" not in log and "Unsupported DeepSeek-V4 tensor" not in log
    assert "tokenizer" in log.lower()


def test_a_release_form_is_refused_as_quantized_before_any_weight(tmp_path):
    """DeepSeek's releases state FP8 linears (quantization_config) and FP4 experts (expert_dtype): refused as every
    quantized checkpoint is, before a shard is read (this config is the tiny one with the releases' quantization
    keys, not a byte copy of a release: none was found in the repositories the search reaches)."""
    path = tmp_path / "config.json"
    config = {**CONFIG, "expert_dtype": "fp4", "quantization_config": {
        "activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0",
        "weight_block_size": [128, 128]}}
    with pytest.raises(QuantizedCheckpoint, match='quant_method "fp8"'):
        refuse_quantized(config, path)


@pytest.mark.parametrize("command", [["inspect"], ["export"]])
def test_inspect_and_export_refuse_it_naming_why(unquantized, tmp_path, command):
    args = [*command, str(unquantized)] + ([str(tmp_path / "out.gguf")] if command == ["export"] else [])
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "cannot be presented as a GGUF: the pinned converter's DeepseekV4Model writes" in res.stderr
    assert "Missing routed expert tensors" in res.stderr
    assert "hfview generate` runs it with transformers" in res.stderr
    assert not (tmp_path / "out.gguf").exists() and not (tmp_path / "out.gguf.partial").exists()


def test_parity_refuses_it_naming_why(unquantized):
    res = CliRunner().invoke(main, ["parity", "--model", str(unquantized)])
    assert res.exit_code == 1 and "family 'deepseek_v4'" in res.stderr
    assert "only by repacking MXFP4 pairs" in res.stderr

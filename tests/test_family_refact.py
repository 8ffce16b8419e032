"""Refact-1.6B (GPTRefactForCausalLM, remote code -> llama.cpp refact through the converter's RefactModel).

* bytes oracle: `hfview export` == the pinned converter's file, every outtype, both fixtures;
* logits oracle: transformers 5.24 has no GPTRefact class, so the reference is Refact's forward composed from
  transformers' own modules in float32 (refact_logits below), from the stored safetensors and config.json alone.

What the reference follows, read from the release's remote code as its public copies state it (the release's
modeling_gpt_refact.py as mlx-examples' refact port states it, "adopted from" smallcloudai/Refact-1_6B-fim; an
earlier HF copy with k/v and linear_1/linear_3 unfused; smallcloudai's own vLLM model file for the released weights,
kv and gate_up_proj fused): each block is x + attn(ln_1(x)), then x + mlp(ln_2(x)); ln_1, ln_2 and ln_f are
LayerNorms without bias (F.layer_norm(x, shape, weight, None, eps): the mean is subtracted); q is n_head heads, kv's
first head-width rows are the one key head, the rest its value head, shared by every query head; scores are
q k^T / sqrt(head width) plus ALiBi (slope_h x key position: the release's get_alibi_biases, softmax-equal to
-slope_h x distance) under a causal mask; slopes 2^(-8 i / n) for the n = 2^floor(log2 heads) first heads, then
2^(-4 (2 i - 1) / n) (the release's _get_slopes, which is BLOOM's schedule: transformers' build_alibi_tensor is
used); the MLP is c_proj(silu(gate) * up) with gate_up_proj's first half the gate; lm_head is stored apart.

llama.cpp's refact normalises by the root mean square (LLM_NORM_RMS) where the release subtracts the mean: the
converter's own file computes so, and misses the release's forward by more than the ordinary bar. So the logits
against the release's forward are held to that measured ceiling (tests/converter_ceiling.py), and the same forward
with RMSNorm put in place of its bias-free LayerNorm -- the one substitution llama.cpp makes -- is held to the
ordinary bar.
"""
import json
import math

import numpy as np
import pytest

from converter_ceiling import check_within_ceiling
from family_oracle import OUTTYPES, nmse, oracle_tests, reference_logits_test
from family_variants import assert_refused, weights_variant

FIXTURES = ["refact", "refact-6heads", "refact-bigcode-typed"]


def release_slopes(n_head: int) -> list[float]:
    """The release's _get_slopes, as its modeling code computes it."""
    n = 2 ** math.floor(math.log2(n_head))
    slopes = [(2.0 ** (-8.0 / n)) ** i for i in range(1, n + 1)]
    slopes += [(2.0 ** (-4.0 / n)) ** i for i in range(1, 1 + 2 * (n_head - n), 2)]
    return slopes


def refact_logits(path, ids, *, norm="layer", alibi=True):
    """Refact's forward (see the module docstring) over transformers 5.24's Llama MLP and eager attention and BLOOM's
    ALiBi tensor, in float32. norm="rms": LlamaRMSNorm in place of the release's bias-free LayerNorm (what llama.cpp's
    refact computes); alibi=False: without the positional bias (to show that it matters)."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.llama import modeling_llama as ml

    cfg = json.loads((path / "config.json").read_text())
    w = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    e, heads, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    d = e // heads
    ff = w["transformer.h.0.mlp.gate_up_proj.weight"].shape[0] // 2

    def make_norm(name):
        if norm == "rms":
            m = ml.LlamaRMSNorm(e, eps=eps)
        else:
            m = torch.nn.LayerNorm(e, eps=eps, bias=False)
        m.load_state_dict({"weight": w[name]})
        return m.eval()

    class Attn(torch.nn.Module):  # what eager_attention_forward reads of its module
        num_key_value_groups = heads

    attn_module = Attn().eval()
    mcfg = LlamaConfig(hidden_size=e, intermediate_size=ff, hidden_act="silu", mlp_bias=False)
    n = len(ids)
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    bias = torch.zeros(n, n).masked_fill(~causal, float("-inf"))[None, None]
    if alibi:
        bias = bias + build_alibi_tensor(torch.ones(1, n), heads, torch.float32).view(1, heads, 1, n)
    with torch.no_grad():
        x = torch.nn.functional.embedding(torch.tensor([ids]), w["transformer.wte.weight"])
        for i in range(cfg["n_layer"]):
            p = f"transformer.h.{i}."
            mlp = ml.LlamaMLP(mcfg).eval()
            gate_up = w[p + "mlp.gate_up_proj.weight"]
            mlp.load_state_dict({"gate_proj.weight": gate_up[:ff], "up_proj.weight": gate_up[ff:],
                                 "down_proj.weight": w[p + "mlp.c_proj.weight"]})
            h = make_norm(p + "ln_1.weight")(x)
            q = (h @ w[p + "attn.q.weight"].T).view(1, n, heads, d).transpose(1, 2)
            kv = h @ w[p + "attn.kv.weight"].T
            k, v = kv[..., :d].view(1, 1, n, d), kv[..., d:].view(1, 1, n, d)
            out, _ = ml.eager_attention_forward(attn_module, q, k, v, bias, scaling=d ** -0.5)
            x = x + out.reshape(1, n, e) @ w[p + "attn.c_proj.weight"].T
            x = x + mlp(make_norm(p + "ln_2.weight")(x))
        return (make_norm("ln_f.weight")(x) @ w["lm_head.weight"].T)[0].numpy()


def rms_variant_logits(path, ids):
    return refact_logits(path, ids, norm="rms")


test_export, _ = oracle_tests("refact", FIXTURES)
test_logits_against_the_forward_with_llama_cpps_norm = reference_logits_test(
    "refact", FIXTURES, rms_variant_logits,
    "Refact's forward from transformers' modules with RMSNorm in place of its bias-free LayerNorm")


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_logits_against_the_release_within_the_converters_ceiling(name, outtype, checkpoint, converted,
                                                                  record_property):
    """llama.cpp from the view against the release's own forward (bias-free LayerNorm), held to what llama.cpp
    running the converter's file of the same fixture measures (it normalises by RMS)."""
    record_property("family", "refact")
    record_property("oracle", "logits")
    check_within_ceiling(name, outtype, checkpoint, converted, refact_logits)


def test_reference_is_causal_and_its_alibi_and_norm_count(checkpoint):
    """A reference that cannot miss is none: it is causal; its ALiBi, its slope schedule and its norm each move it."""
    path = checkpoint("refact-6heads")
    ids = list(range(300, 316))
    full = refact_logits(path, ids)
    assert np.allclose(refact_logits(path, ids[:8]), full[:8], atol=1e-4)
    assert nmse(refact_logits(path, ids, alibi=False), full) > 1e-4
    assert nmse(refact_logits(path, ids, norm="rms"), full) > 1e-4
    # ALiBi counts position by position: without it the first token's logits are the same, the last's are not
    no_alibi = refact_logits(path, ids, alibi=False)
    assert np.allclose(no_alibi[0], full[0], atol=1e-4) and nmse(no_alibi[-1:], full[-1:]) > 1e-4


@pytest.mark.parametrize("n_head", [4, 6, 32, 48])
def test_blooms_alibi_slopes_are_the_releases(n_head):
    """The reference's ALiBi (transformers' BLOOM) has the release's slope schedule, powers of two or not."""
    import torch
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    theirs = build_alibi_tensor(torch.ones(1, 2), n_head, torch.float64).view(n_head, 2)[:, 1].numpy()
    assert np.allclose(theirs, release_slopes(n_head), rtol=1e-6)


def test_fused_tensors_are_split_as_the_converter_splits_them(checkpoint):
    """kv -> key rows, then value rows; gate_up_proj -> gate rows, then up rows (as stored, at f32)."""
    from safetensors.numpy import load_file

    from hfview import HfCheckpoint

    path = checkpoint("refact-6heads")
    stored = load_file(str(path / "model.safetensors"))
    view = HfCheckpoint(path, "f32")
    kv, gate_up = stored["transformer.h.1.attn.kv.weight"], stored["transformer.h.1.mlp.gate_up_proj.weight"]
    assert np.array_equal(view.read_tensor("blk.1.attn_k.weight"), kv[:16])
    assert np.array_equal(view.read_tensor("blk.1.attn_v.weight"), kv[16:])
    assert np.array_equal(view.read_tensor("blk.1.ffn_gate.weight"), gate_up[:256])
    assert np.array_equal(view.read_tensor("blk.1.ffn_up.weight"), gate_up[256:])
    assert {"output.weight", "output_norm.weight"} <= {t.name for t in view.tensors}


@pytest.mark.parametrize("change, match", [
    ({"n_inner": 100}, "n_inner 100"),
    ({"multi_query": False}, "multi_query False"),
    ({"n_head": 5}, "n_embd 64 does not split into n_head 5"),
    ({"n_embd": None}, "n_embd None: missing"),
    ({"n_positions": None}, "n_positions None: missing"),
    ({"layer_norm_epsilon": None}, "layer_norm_epsilon None: missing"),
    ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling"),
])
def test_refusals_by_name(checkpoint, tmp_path, change, match):
    assert_refused(checkpoint("refact"), tmp_path, match, **change)


def test_a_kv_of_another_width_is_refused_by_name(checkpoint, tmp_path):
    """The converter would cut kv at one head's width whatever it holds; llama.cpp could then not load it."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    def widen(t):
        t["transformer.h.0.attn.kv.weight"] = t["transformer.h.0.attn.kv.weight"].repeat(2, 1)
        return t

    bad = weights_variant(checkpoint("refact"), tmp_path / "bad", widen)
    with pytest.raises(CheckpointError, match=r"'transformer.h.0.attn.kv.weight' has shape \[64, 64\]"):
        HfCheckpoint(bad)


def test_a_bias_is_refused_by_name(checkpoint, tmp_path):
    """Refact has no biases, and llama.cpp's refact would not read an output-norm bias."""
    import torch

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    def add_bias(t):
        t["ln_f.bias"] = torch.zeros_like(t["ln_f.weight"])
        return t

    bad = weights_variant(checkpoint("refact"), tmp_path / "bad", add_bias)
    with pytest.raises(CheckpointError, match="'ln_f.bias' is not one the refact family knows"):
        HfCheckpoint(bad)


def test_released_config_kv_carries_its_values():
    from released_config import DATA, config_path_kv

    kv = config_path_kv(DATA / "refact" / "smallcloudai__Refact-1_6B-fim.json")
    assert kv["refact.block_count"] == 32 and kv["refact.embedding_length"] == 2048
    assert kv["refact.attention.head_count"] == 32 and kv["refact.attention.head_count_kv"] == 1
    assert kv["refact.context_length"] == 4096 and kv["refact.feed_forward_length"] == 5632


def test_gpt_bigcode_typed_configs_are_read_by_their_architecture():
    """model_type gpt_bigcode is GPT-BigCode's, unless the architecture is Refact's (as the converter picks its class
    by the architecture): the first Refact-1.6-base upload is read as Refact, StarCoder still as GPT-BigCode."""
    from hfview import families

    assert families.family_for("gpt_bigcode", ["GPTRefactForCausalLM"]).name == "refact"
    assert families.family_for("gpt_bigcode", ["GPTBigCodeForCausalLM"]).name == "gpt_bigcode"
    assert families.family_for("gpt_bigcode").name == "gpt_bigcode"
    assert families.family_for("gpt_refact", ["GPTRefactForCausalLM"]).name == "refact"

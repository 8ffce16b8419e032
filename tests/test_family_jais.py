"""JAIS 1 (JAISLMHeadModel, remote code -> llama.cpp jais through the converter's JaisModel).

* bytes oracle: `hfview export` == the pinned converter's file, every outtype, on a jais-13b-style fixture (its
  embeddings_scale / width_scale / scale_qk_dot_by_d spellings, float32, tied) and a jais-family-style one (the
  mup_ spellings, bfloat16, untied, a padded vocabulary) and the first stored in float16 (its multipliers folded
  in float16, as torch multiplies a float16 tensor);
* logits oracle: transformers 5.24 has no JAIS class, so the reference is JAIS's forward composed from transformers'
  own modules in float32 (jais_logits below), from the stored safetensors and config.json alone.

What the reference follows, read from the release's modeling_jais.py as its public copies state it (vLLM's
model_executor/models/jais.py, "adapted from inceptionai/jais-30b-chat-v3/modeling_jais.py", its configs/jais.py,
and the release's AlibiPositionEmbeddingLayer as Cerebras' BTLM copy states it): the embedding times
embeddings_scale (or mup_embeddings_scale); each block is x + c_proj(attn(ln_1(x))), then
x + mlp(ln_2(x)) with mlp = c_proj(c_fc(x) * silu(c_fc2(x))), every projection a Conv1D (weights [in, out]);
c_attn's output is q, then k, then v; scores are q.k / head_dim ** (1 if scale_qk_dot_by_d else 0.5), plus the
causal mask, plus the ALiBi bias -slope_h * |i - j| with the stored relative_pe.slopes; the logits are
lm_head(ln_f(x)) times width_scale (or mup_output_alpha * mup_width_scale), a tied head being the embedding.
"""
import json

import numpy as np
import pytest

from family_oracle import nmse, oracle_tests, reference_logits_test
from family_variants import assert_refused, weights_variant

FIXTURES = ["jais", "jais-family", "jais-f16"]


def _scales(cfg):
    emb = cfg["embeddings_scale"] if "embeddings_scale" in cfg else cfg["mup_embeddings_scale"]
    width = cfg["width_scale"] if "width_scale" in cfg else cfg["mup_output_alpha"] * cfg["mup_width_scale"]
    by_d = cfg["scale_qk_dot_by_d"] if "scale_qk_dot_by_d" in cfg else cfg.get("mup_scale_qk_dot_by_d", False)
    return emb, width, by_d


def jais_logits(path, ids, *, alibi=True, mup=True, by_d=None):
    """JAIS's forward (see the module docstring) over transformers' Conv1D, activation table and Llama's eager
    attention, in float32. alibi=False, mup=False or by_d set: the same forward with that part changed."""
    import torch
    from safetensors.torch import load_file
    from transformers.activations import ACT2FN
    from transformers.models.llama.modeling_llama import eager_attention_forward
    from transformers.pytorch_utils import Conv1D

    cfg = json.loads((path / "config.json").read_text())
    w = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    d, n_head, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    hd = d // n_head
    emb_scale, width_scale, stated_by_d = _scales(cfg)
    if not mup:
        emb_scale = width_scale = 1.0
    power = 1.0 if (stated_by_d if by_d is None else by_d) else 0.5
    silu = ACT2FN["silu"]

    def conv(prefix):
        weight = w[prefix + ".weight"]
        m = Conv1D(weight.shape[1], weight.shape[0])
        m.load_state_dict({"weight": weight, "bias": w[prefix + ".bias"]})
        return m.eval()

    def norm(prefix):
        m = torch.nn.LayerNorm(d, eps=eps)
        m.load_state_dict({"weight": w[prefix + ".weight"], "bias": w[prefix + ".bias"]})
        return m.eval()

    class _Module(torch.nn.Module):  # what eager_attention_forward asks of its module
        num_key_value_groups = 1

    attn_module = _Module().eval()
    n = len(ids)
    pos = torch.arange(n)
    mask = torch.zeros(n, n).masked_fill(pos[None, :] > pos[:, None], float("-inf"))[None, None]
    if alibi:  # AlibiPositionEmbeddingLayer: -slope * |i - j|, per head
        slopes = w["transformer.relative_pe.slopes"].reshape(n_head)
        mask = mask + (-slopes[:, None, None] * (pos[None, :] - pos[:, None]).abs()[None].float())[None]
    tied = cfg.get("tie_word_embeddings", True)
    head = w["transformer.wte.weight"] if tied else w["lm_head.weight"]
    with torch.no_grad():
        x = torch.nn.functional.embedding(torch.tensor([ids]), w["transformer.wte.weight"]) * emb_scale
        for i in range(cfg["n_layer"]):
            p = f"transformer.h.{i}."
            q, k, v = conv(p + "attn.c_attn")(norm(p + "ln_1")(x)).split(d, dim=2)
            q, k, v = (t.view(1, n, n_head, hd).transpose(1, 2) for t in (q, k, v))
            out, _ = eager_attention_forward(attn_module, q, k, v, mask, scaling=hd ** -power)
            x = x + conv(p + "attn.c_proj")(out.reshape(1, n, d))
            h = norm(p + "ln_2")(x)
            x = x + conv(p + "mlp.c_proj")(conv(p + "mlp.c_fc")(h) * silu(conv(p + "mlp.c_fc2")(h)))
        return (norm("transformer.ln_f")(x) @ head.T * width_scale)[0].numpy()


LABEL = "JAIS's forward composed from transformers' Conv1D and Llama's eager attention"
test_export, _ = oracle_tests("jais", FIXTURES)
test_logits = reference_logits_test("jais", FIXTURES, jais_logits, LABEL)


@pytest.mark.parametrize("name", FIXTURES)
def test_reference_is_causal_and_its_positions_and_scales_count(checkpoint, name):
    """The composition is causal, and ALiBi, the muP multipliers and the 1/d attention scale each move it (a
    reference that cannot miss is none)."""
    path = checkpoint(name)
    ids = list(range(300, 316))
    full = jais_logits(path, ids)
    assert np.allclose(jais_logits(path, ids[:8]), full[:8], atol=1e-4)
    assert nmse(jais_logits(path, ids, alibi=False), full) > 1e-4
    assert nmse(jais_logits(path, ids, mup=False), full) > 1e-4
    assert nmse(jais_logits(path, ids, by_d=False), full) > 1e-4


def test_muP_multipliers_are_folded_as_the_converter_folds_them(checkpoint):
    """token_embd = wte x embeddings_scale and output = lm_head x width_scale, each product rounded to float32 (the
    converter's working dtype for a float32 or bfloat16 tensor), at --outtype f32; the slopes are no tensor."""
    from safetensors.numpy import load_file

    from hfview import HfCheckpoint

    for name, emb, width in (("jais", 14.6, 0.11100000000000002), ("jais-family", 9.1705, 0.25)):
        path = checkpoint(name)
        stored = load_file(str(path / "model.safetensors")) if name == "jais" else None
        view = HfCheckpoint(path, "f32")
        names = [t.name for t in view.tensors]
        assert not any("slopes" in t or "relative_pe" in t for t in names)
        if stored is None:  # bfloat16: read through the view's own widening, checked against torch's
            import torch
            from safetensors.torch import load_file as load_torch
            t = load_torch(str(path / "model.safetensors"))
            stored = {k: v.float().numpy() for k, v in t.items()}
        assert np.array_equal(view.read_tensor("token_embd.weight"),
                              stored["transformer.wte.weight"] * np.float32(emb))
        assert np.array_equal(view.read_tensor("output.weight"), stored["lm_head.weight"] * np.float32(width))
        assert np.array_equal(view.read_tensor("blk.0.ffn_gate.weight"), stored["transformer.h.0.mlp.c_fc2.weight"].T)
        kv = {k.key: k.value for k in view.kv}
        assert kv["jais.attention.max_alibi_bias"] == 8.0


@pytest.mark.parametrize("change, match", [
    ({"activation_function": "gelu_new"}, "activation_function 'gelu_new'"),
    ({"position_embedding_type": "learned"}, "position_embedding_type 'learned'"),
    ({"alibi_scaling": {"type": "linear", "factor": 2.0}}, "alibi_scaling"),
    ({"scale_qk_dot_by_d": False}, "scale_qk_dot_by_d"),
    ({"scale_qk_dot_by_d": None}, "scale_qk_dot_by_d"),  # unstated: JAISConfig's False (1/sqrt(d))
    ({"scale_attn_weights": False}, "scale_attn_weights"),
    ({"scale_attn_by_inverse_layer_idx": True}, "scale_attn_by_inverse_layer_idx"),
    ({"embeddings_scale": None}, "embeddings_scale is stated"),
    ({"width_scale": None}, "width_scale is stated"),
    ({"mup_embeddings_scale": 2.0}, "mup_embeddings_scale = 2.0 but embeddings_scale"),
    ({"mup_output_alpha": 1.0}, "mup_output_alpha without mup_width_scale"),
    ({"n_inner": None}, "n_inner None: missing"),
    ({"n_positions": None}, "n_positions None: missing"),
    ({"n_head": 5}, "n_embd 96 does not split"),
    ({"architectures": ["LlamaForCausalLM"]}, "JAISLMHeadModel"),
    ({"summary_type": "cls_index"}, "summary_type"),
])
def test_refusals_by_name(checkpoint, tmp_path, change, match):
    assert_refused(checkpoint("jais"), tmp_path, match, **change)


def test_mup_spellings_must_agree(checkpoint, tmp_path):
    assert_refused(checkpoint("jais-family"), tmp_path, "mup_output_alpha \\* mup_width_scale = 0.25 but width_scale",
                   width_scale=0.5)


def test_slopes_llama_cpp_would_not_compute_are_refused(checkpoint, tmp_path):
    import torch

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    def edit(t):
        t["transformer.relative_pe.slopes"] = t["transformer.relative_pe.slopes"].flip(0).contiguous()
        return t

    path = weights_variant(checkpoint("jais"), tmp_path / "v", edit)
    with pytest.raises(CheckpointError, match="not the ALiBi slopes llama.cpp computes"):
        HfCheckpoint(path)
    assert torch  # the edit runs through torch tensors


def test_a_checkpoint_without_its_head_is_refused(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    def edit(t):
        del t["lm_head.weight"]
        return t

    path = weights_variant(checkpoint("jais"), tmp_path / "v", edit)
    with pytest.raises(CheckpointError, match="lm_head.weight' is missing"):
        HfCheckpoint(path)


def test_slopes_match_llama_cpps_for_released_head_counts():
    """The stored slopes of the releases' head counts (jais-13b's 40, jais-30b's 56, jais-family-590m's 16...) are
    llama.cpp's from the maximum bias the converter derives, 8."""
    import importlib.util
    from pathlib import Path

    from hfview.families.jais import alibi_slopes

    spec = importlib.util.spec_from_file_location("jais_fixture", Path(__file__).parents[1] / "fixtures" / "families"
                                                  / "jais.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for n in (6, 16, 20, 32, 40, 56):
        assert np.allclose(module.alibi_slopes(n), alibi_slopes(n, 8.0), rtol=1e-12), n


@pytest.mark.xfail(raises=__import__("oracle").ConverterFailed, strict=True,
                   reason="the pinned converter's JaisModel reads the first ALiBi slope with .item(), which its "
                          "default lazy (meta) tensors cannot give: it converts JAIS only with --no-lazy, the run "
                          "the bytes oracle above uses (fixtures/families/jais.py CONVERTER_ARGS)")
def test_the_converters_default_lazy_run_fails(checkpoint, tmp_path):
    import oracle

    try:
        oracle.convert(checkpoint("jais"), tmp_path / "lazy.gguf", "f32")
    except oracle.ConverterFailed as failed:
        assert "cannot be called on meta tensors" in str(failed), "the converter failed otherwise than recorded"
        raise


def test_slopes_stored_in_bfloat16_are_accepted_and_others_refused():
    """A bfloat16 release stores its slopes rounded to 8 significant bits: still llama.cpp's (maximum bias 8); a
    sequence of another maximum bias, or one slope off by 1%, is not."""
    import torch

    from hfview.errors import CheckpointError
    from hfview.families.jais import alibi_slopes, bias_from_slopes

    for n in (16, 40, 56):
        rounded = torch.tensor(alibi_slopes(n, 8.0)).to(torch.bfloat16).float().numpy()
        assert bias_from_slopes(rounded, n, "m.safetensors") == 8.0
    assert bias_from_slopes(alibi_slopes(40, 4.0), 40, "m.safetensors") == 4.0  # another bias, consistently stored
    off = alibi_slopes(40, 8.0)
    off[7] *= 1.01
    with pytest.raises(CheckpointError, match="not the ALiBi slopes"):
        bias_from_slopes(off, 40, "m.safetensors")

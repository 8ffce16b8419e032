"""VaultGemma (VaultGemmaForCausalLM -> llama.cpp gemma under hfview's own mapping).

Logits oracle: transformers 5.24's own VaultGemmaForCausalLM over the fixture, NMSE < 1e-4 at every outtype.
Byte oracle: the pinned converter has no VaultGemma class (checked below), but its GemmaModel converts the same
weights once they are named as Gemma's (pre_feedforward_layernorm is Gemma's post_attention_layernorm, the norm
before the MLP; the config stated as GemmaConfig's, hidden_act = hidden_activation): `hfview export` of the
VaultGemma fixture must be that file, byte for byte, at every outtype. The renaming is honest because the two
compute the same function on these configs (no softcapping, full attention, query_pre_attn_scalar = head_dim),
which the logits oracle checks against VaultGemma's own class.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import OUTTYPES, assert_converter_has_no_class, oracle_tests
from family_variants import assert_refused

FIXTURES = ["vaultgemma", "vaultgemma-gqa-f16"]

_, test_logits = oracle_tests("vaultgemma", FIXTURES)

# VaultGemma's keys that GemmaConfig has no use for: the values the view accepts change nothing in Gemma's block.
_VAULT_ONLY = ("query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "sliding_window",
               "layer_types", "hidden_activation")


def gemma_twin(src: Path, out: Path) -> Path:
    """The VaultGemma checkpoint `src` as a GemmaForCausalLM checkpoint in `out` (same directory name, so the same
    general.name; same tensors, dtypes and tokenizer files; the pre-MLP norm under Gemma's name)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name not in ("config.json", "model.safetensors"):
            (out / f.name).write_bytes(f.read_bytes())
    c = json.loads((src / "config.json").read_text(encoding="utf-8"))
    c["hidden_act"] = c.get("hidden_activation", "gelu_pytorch_tanh")
    for key in _VAULT_ONLY:
        c.pop(key, None)
    c.update(model_type="gemma", architectures=["GemmaForCausalLM"])
    (out / "config.json").write_text(json.dumps(c, indent=2), encoding="utf-8")
    tensors = {}
    with safe_open(str(src / "model.safetensors"), "pt") as f:
        for name in f.keys():
            tensors[name.replace(".pre_feedforward_layernorm.", ".post_attention_layernorm.")] = f.get_tensor(name)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export_is_the_converters_gemma_file_of_the_renamed_weights(name, outtype, checkpoint, tmp_path_factory,
                                                                     tmp_path, record_property):
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "vaultgemma")
    record_property("oracle", "bytes")
    path = checkpoint(name)
    twin = tmp_path_factory.getbasetemp() / "gemma-twins" / path.name
    if not (twin / "model.safetensors").is_file():
        gemma_twin(path, twin)
    theirs = oracle.convert_cached(twin, outtype)
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_defaults():
    check_defaults("vaultgemma")


def test_the_pinned_converter_has_no_class_for_vaultgemma():
    """The premise of the mapping: no converter module registers VaultGemmaForCausalLM."""
    assert_converter_has_no_class("vaultgemma")


def test_route_is_the_view():
    from hfview.coverage import route_for
    route = route_for("vaultgemma")
    assert route.kind == "view" and "gemma" in route.detail


@pytest.mark.parametrize("changes, message", [
    (dict(attn_logit_softcapping=50.0), "attn_logit_softcapping 50.0: llama.cpp's gemma caps no attention"),
    (dict(final_logit_softcapping=30.0), "final_logit_softcapping 30.0: llama.cpp's gemma caps no logits"),
    (dict(attn_logit_softcapping=None, final_logit_softcapping=None), "attn_logit_softcapping 50.0"),  # defaults
    (dict(layer_types=["sliding_attention", "full_attention"]), "sliding_window 512 below"),
    (dict(layer_types=None), "sliding_window 512 below"),  # the config class's alternation
    (dict(layer_types=["full_attention"]), "layer_types lists 1 layers"),
    (dict(query_pre_attn_scalar=32), "query_pre_attn_scalar 32 is not head_dim 16"),
    (dict(hidden_activation="silu"), "hidden_activation"),
    (dict(tie_word_embeddings=False), "tie_word_embeddings"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(rope_theta=500000.0), "rope"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("vaultgemma"), tmp_path, message, **changes)


def test_a_window_as_long_as_the_context_is_no_window(checkpoint, tmp_path):
    """sliding_attention layers whose window covers max_position_embeddings attend as full layers do."""
    from family_variants import variant
    from hfview import HfCheckpoint
    ckpt = HfCheckpoint(variant(checkpoint("vaultgemma"), tmp_path / "v", sliding_window=1024,
                                layer_types=["sliding_attention", "full_attention"]), "f32")
    assert ckpt.tensors

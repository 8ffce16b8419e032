"""MiMo-V2-Flash, BF16 exports (sliding-window layers with sinks and twice the KV heads, value heads narrower than
the key heads, partial rope with a theta per layer kind, a leading dense layer, sigmoid-routed experts with a
selection bias, three MTP layers): converter bytes at every outtype (past the pinned converter's failure on the
per-layer-kind rope transformers 5.24 presents), llama.cpp logits against transformers (one fixture with the MTP
layers stored, one without; both cross the window), refusals of what llama.cpp's mimo2 cannot run as transformers
does."""
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

import oracle
from converter_variant import convert_as_read
from family_defaults import check_defaults
from family_oracle import NMSE_BAR, OUTTYPES, PROMPT, nmse, oracle_tests
from family_variants import assert_refused, variant
from released_config import config_path_kv, released_configs

FIXTURES = ["mimo_v2_flash", "mimo_v2_flash-nomtp"]
CONVERTER_FAILS = ("the pinned converter reads rope_parameters['partial_rotary_factor'], but transformers 5.24's "
                   "MiMoV2FlashConfig presents rope_parameters per layer kind (full_attention, sliding_attention): "
                   "KeyError")

_, test_logits = oracle_tests("mimo_v2_flash", FIXTURES)


def restore_release_rope(stated: dict, presented: dict) -> dict:
    """The rope as the release states it: top-level rope_theta, swa_rope_theta and partial_rotary_factor (which
    the presented config keeps), without the per-layer-kind rope_parameters transformers 5.24 adds."""
    return {"rope_parameters": None}


def _as_read(path: Path, outtype: str) -> Path:
    """The converter's file for the fixture as released (cached by the fixture's content, as conftest's)."""
    h = hashlib.sha256()
    for f in sorted(path.iterdir()):
        if f.is_file():
            h.update(f.name.encode() + oracle.sha256(f).encode())
    out = oracle.CACHE / "converted" / f"{path.name}-{h.hexdigest()[:16]}-as-released-{outtype}.gguf"

    def make(tmp: Path) -> None:
        scratch = tmp.with_name(tmp.name + ".d")
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        shutil.move(convert_as_read(path, outtype, scratch, restore_release_rope), tmp)
        shutil.rmtree(scratch)
    return oracle.made_once(out, make)


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export_equals_converter_as_released(name, outtype, checkpoint, tmp_path, record_property):
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "mimo_v2_flash")
    record_property("oracle", "bytes")
    path = checkpoint(name)
    theirs = _as_read(path, outtype)
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def test_converter_fails_on_the_per_kind_rope(checkpoint, tmp_path):
    """The pinned converter itself, under transformers 5.24, on the config as released: CONVERTER_FAILS."""
    with pytest.raises(oracle.ConverterFailed, match="partial_rotary_factor"):
        oracle.convert(checkpoint("mimo_v2_flash-nomtp"), tmp_path / "theirs.gguf", "f32")


def test_defaults_match_transformers():
    check_defaults("mimo_v2_flash")


def test_mtp_layers_are_written_as_extra_blocks(checkpoint):
    """model.mtp.layers.{0,1,2} are blocks 3-5: their decoder tensors, their nextn tensors, final_layernorm as
    layer_output_norm; block_count 6, nextn_predict_layers 3; the window pattern and per-layer KV head counts carry
    the MTP blocks as sliding layers; value heads narrower than key heads."""
    import numpy as np

    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("mimo_v2_flash"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["mimo2.block_count"] == 6 and kv["mimo2.nextn_predict_layers"] == 3
    assert kv["mimo2.attention.sliding_window_pattern"] == [0, 1, 1, 1, 1, 1]
    assert kv["mimo2.attention.head_count_kv"] == [1, 2, 2, 2, 2, 2]
    assert kv["mimo2.attention.key_length"] == 24 and kv["mimo2.attention.value_length"] == 16
    assert kv["mimo2.attention.sliding_window"] == 7  # sliding_window_size 6 + the query, as transformers reads it
    names = {t.name for t in view.tensors}
    for b in (3, 4, 5):
        for leaf in ("nextn.eh_proj", "nextn.enorm", "nextn.hnorm", "layer_output_norm", "attn_sinks", "ffn_up"):
            assert f"blk.{b}.{leaf}.weight" in names
    assert "blk.0.attn_sinks.weight" not in names and "blk.1.attn_sinks.weight" in names
    assert np.abs(view.read_tensor("blk.1.exp_probs_b.bias")).max() > 0.01


def test_a_checkpoint_without_its_mtp_layers_still_counts_them(checkpoint):
    """As transformers saves a fine-tune (no model.mtp.*): the converter still writes block_count n + 3 and
    nextn_predict_layers 3, and no tensor of the MTP blocks; llama.cpp then loads the trunk only."""
    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("mimo_v2_flash-nomtp"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["mimo2.block_count"] == 6 and kv["mimo2.nextn_predict_layers"] == 3
    assert not any(t.name.startswith(("blk.3.", "blk.4.", "blk.5.")) for t in view.tensors)


def test_the_window_is_crossed_and_applied(checkpoint):
    """The 16-token prompt crosses the 7-token window: transformers without the window differs from llama.cpp fed
    from the view by far more than the bar (with it, test_logits holds), so llama.cpp applies the window, as the
    family declares (llama_cpp_applies_window)."""
    import torch
    import transformers

    from hfview import HfCheckpoint
    from hfview.families.mimo_v2_flash import FAMILY
    from hfview.runner.stream import StreamModel

    path = checkpoint("mimo_v2_flash-nomtp")
    with StreamModel(HfCheckpoint(path, "f32"), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        ours = m.logits(ids)
    config = transformers.AutoConfig.from_pretrained(path)
    config.sliding_window = 128
    model = transformers.AutoModelForCausalLM.from_pretrained(path, config=config, dtype=torch.float32)
    with torch.no_grad():
        unwindowed = model(torch.tensor([ids])).logits[0].numpy()
    assert nmse(ours[:7], unwindowed[:7]) < NMSE_BAR  # inside the window both agree
    assert nmse(ours[9:], unwindowed[9:]) > 100 * NMSE_BAR
    assert FAMILY.runner.llama_cpp_applies_window


@pytest.mark.parametrize("changes, reason", [
    (dict(hybrid_layer_pattern=[0, 0, 1]), "does not match layer_types"),
    (dict(layer_types=["full_attention", "full_attention", "sliding_attention"]), "does not match layer_types"),
    (dict(hybrid_layer_pattern=[0, 1]), "does not match layer_types"),
    (dict(moe_layer_freq=[0, 0, 1]), "moe_layer_freq"),
    (dict(swa_num_key_value_heads=1), "twice"),
    (dict(swa_head_dim=32), "swa_head_dim 32"),
    (dict(swa_v_head_dim=None), "swa_v_head_dim None: not stated"),
    (dict(topk_method="greedy"), "noaux_tc"),
    (dict(scoring_func="softmax"), "sigmoid"),
    (dict(n_group=2, topk_group=1), "n_group 2"),
    (dict(norm_topk_prob=False), "renormalises"),
    (dict(routed_scaling_factor=2.5), "routed_scaling_factor 2.5"),
    (dict(n_shared_experts=1), "shared expert"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(layernorm_epsilon=1e-6), "layernorm_epsilon"),
    (dict(rope_theta=1000000), "rope_theta 1000000"),
    (dict(swa_rope_theta=None), "swa_rope_theta None"),
    (dict(partial_rotary_factor=0.5), "partial_rotary_factor 0.5"),
    (dict(add_full_attention_sink_bias=True), "add_full_attention_sink_bias"),
    (dict(add_swa_attention_sink_bias=False), "add_swa_attention_sink_bias"),
    (dict(rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}), "rope scaling"),
], ids=["pattern", "layer_types", "short_pattern", "mlp_kinds", "swa_kv_heads", "swa_head_dim", "no_swa_v_head_dim",
        "topk_method", "softmax", "groups", "no_renorm", "scale", "shared_expert", "tied", "qkv_bias", "gelu", "eps",
        "theta", "no_swa_theta", "partial_rotary", "full_sinks", "no_swa_sinks", "yarn"])
def test_refuses_what_mimo2_cannot_run_as_transformers_does(changes, reason, checkpoint, tmp_path):
    """A layer or MLP pattern the converter and transformers read differently, sliding-layer sizes transformers
    does not build, routing llama.cpp's mimo2 does not do, and a config whose rope or epsilon the converter writes
    otherwise than transformers computes: refused by name, before any weight is read."""
    assert_refused(checkpoint("mimo_v2_flash-nomtp"), tmp_path, reason, **changes)


def test_a_fused_layout_is_its_tensors_not_its_key(checkpoint, tmp_path):
    """attention_projection_layout is read by neither transformers 5.24's MiMo-V2 nor the converter's MimoV2Model
    (tools/key_policy.py), so stated alone it changes nothing and is ignored; a checkpoint that stores the fused
    qkv_proj it names is refused by that tensor, which the family does not know."""
    from family_variants import variant, weights_variant
    from hfview import HfCheckpoint
    from hfview.config import ignored_keys
    from hfview.errors import CheckpointError

    view = HfCheckpoint(variant(checkpoint("mimo_v2_flash-nomtp"), tmp_path / "key",
                                attention_projection_layout="fused_qkv"), "f32")
    assert "attention_projection_layout" in ignored_keys(view.config, view.family)
    torch = pytest.importorskip("torch")
    fused = weights_variant(checkpoint("mimo_v2_flash-nomtp"), tmp_path / "fused", lambda t: {
        **{k: v for k, v in t.items() if ".self_attn.q_proj." not in k},
        **{k.replace("q_proj", "qkv_proj"): torch.cat([v, t[k.replace("q_proj", "k_proj")]])
           for k, v in t.items() if ".self_attn.q_proj.weight" in k}})
    with pytest.raises(CheckpointError, match="qkv_proj"):
        HfCheckpoint(fused, "f32")


def test_refuses_an_mtp_layer_past_the_converters_three(checkpoint, tmp_path):
    """The converter asserts an MTP layer index below its three; model.mtp.layers.3 would be block 6 of 6."""
    from family_variants import weights_variant
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    dst = weights_variant(checkpoint("mimo_v2_flash"), tmp_path / "four_mtp", lambda tensors: {
        **tensors, **{k.replace("mtp.layers.2.", "mtp.layers.3."): v.clone() for k, v in tensors.items()
                      if k.startswith("model.mtp.layers.2.")}})
    with pytest.raises(CheckpointError, match="block 6"):
        HfCheckpoint(dst, "f32")


def _mtp_mixture(tensors: dict) -> dict:
    """The fixture's three MTP layers with a mixture where the releases have a dense MLP: mixture layer 1's router,
    selection bias and experts, each scaled by its own seeded noise, in place of mlp.{gate,up,down}_proj."""
    import torch

    gen = torch.Generator().manual_seed(6103)
    out = {k: v for k, v in tensors.items() if not re.match(r"model\.mtp\.layers\.\d\.mlp\.", k)}
    for i in range(3):
        for name in sorted(k for k in tensors if k.startswith("model.layers.1.mlp.")):
            t = tensors[name]
            noise = torch.randn(t.shape, generator=gen, dtype=torch.float32)
            out[name.replace("model.layers.1.", f"model.mtp.layers.{i}.")] = (t.float() * (1 + 0.5 * noise)).to(t.dtype)
    return out


@pytest.fixture(scope="module")
def mtp_mixture(checkpoint, tmp_path_factory) -> Path:
    from family_variants import weights_variant

    return weights_variant(checkpoint("mimo_v2_flash"), tmp_path_factory.mktemp("v") / "mimo_v2_flash-mtp-moe",
                           _mtp_mixture)


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_an_mtp_mixtures_router_is_written_at_the_outtype_as_the_converter_writes_it(outtype, mtp_mixture, tmp_path,
                                                                                      record_property):
    """MTP layers with a mixture (llama.cpp's mimo2 loads one there): MimoV2Model renames model.mtp.layers.{i}.* to
    block n + i inside modify_tensors, after its F32 list took block i off the stored name, so the routers
    blk.{n + i}.ffn_gate_inp go out at the outtype (the trunk's stay F32): the view's bytes equal its file."""
    from gguf import GGUFReader

    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "mimo_v2_flash")
    record_property("oracle", "bytes")
    theirs = _as_read(mtp_mixture, outtype)
    ours = export(HfCheckpoint(mtp_mixture, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"mtp mixture --outtype {outtype}: {oracle.first_difference(ours, theirs)}")
    types = {t.name: t.tensor_type.name for t in GGUFReader(theirs).tensors}
    assert types["blk.1.ffn_gate_inp.weight"] == "F32"
    assert {types[f"blk.{b}.ffn_gate_inp.weight"] for b in (3, 4, 5)} == {"F32" if outtype == "f32" else
                                                                          types["blk.1.ffn_gate_exps.weight"]}


@pytest.mark.parametrize("quant, ftype", [("Q4_K_M", 15), ("Q8_0", 7)])
def test_an_mtp_mixture_quantized_matches_llama_model_quantize(quant, ftype, mtp_mixture, tmp_path):
    """llama_model_quantize over the converter's bf16 file of the variant (the MTP routers at bf16, as it wrote
    them; the trunk's F32) == the view's --quant."""
    from hfview import HfCheckpoint
    from hfview.export import export

    src = _as_read(mtp_mixture, "bf16")
    theirs = oracle.made_once(src.with_name(f"{src.stem}-q{ftype}.gguf"), lambda tmp: oracle.quantize(src, tmp, ftype))
    ours = export(HfCheckpoint(mtp_mixture, "bf16", quant=quant), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_an_mtp_mixture_leaves_the_logits_as_they_were(mtp_mixture):
    """transformers ignores model.mtp.* and llama.cpp runs the trunk: the variant's logits hold the bar."""
    from family_oracle import check_logits

    check_logits("mimo_v2_flash-mtp-moe", "f32", lambda name: mtp_mixture)


def test_refuses_sinks_on_a_full_attention_layer(checkpoint, tmp_path):
    """layer_types makes layer 1 full attention (hybrid_layer_pattern agreeing), but the checkpoint stores its
    sinks: transformers' MiMoV2Flash builds no sinks there."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    v = variant(checkpoint("mimo_v2_flash-nomtp"), tmp_path / "v", hybrid_layer_pattern=[0, 0, 1],
                layer_types=["full_attention", "full_attention", "sliding_attention"])
    with pytest.raises(CheckpointError, match="sinks on the sliding layers only"):
        HfCheckpoint(v, "f32")


@pytest.mark.xfail(len(released_configs("mimo_v2_flash")) < 2, strict=True,
                   reason="published config.json files not reachable from this project's index: see "
                          "tests/data/released_configs/mimo_v2_flash/SOURCES.md")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("mimo_v2_flash")) >= 2, released_configs("mimo_v2_flash")


@pytest.mark.parametrize("path", released_configs("mimo_v2_flash"), ids=lambda p: p.stem)
def test_released_config(path: Path, tmp_path):
    """Each released config accepted (its FP8 quantization refused by name first, then accepted as its BF16 export
    states it), its KV carrying the released sizes, the three MTP blocks in block_count."""
    from hfview.errors import QuantizedCheckpoint

    released = json.loads(path.read_text(encoding="utf-8"))
    if released.get("quantization_config"):
        with pytest.raises(QuantizedCheckpoint):
            config_path_kv(path)
        bf16 = tmp_path / path.parent.name / path.name
        bf16.parent.mkdir()
        bf16.write_text(json.dumps({k: v for k, v in released.items() if k != "quantization_config"}))
        path = bf16
    kv = config_path_kv(path)
    n = released["num_hidden_layers"]
    assert kv["mimo2.block_count"] == n + 3 and kv["mimo2.nextn_predict_layers"] == 3
    assert kv["mimo2.attention.sliding_window_pattern"] == released["hybrid_layer_pattern"] + [1, 1, 1]
    assert kv["mimo2.expert_count"] == released["n_routed_experts"]
    assert kv["mimo2.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["mimo2.attention.key_length"] == released["head_dim"]
    assert kv["mimo2.attention.value_length"] == released["v_head_dim"]
    assert kv["mimo2.rope.dimension_count"] == int(released["head_dim"] * released["partial_rotary_factor"])


# MiMo-V2-Flash's published sizes, as the fields quoted from its config.json agree (48 layers: full attention on
# layer 0 and every 6th, 64 heads of 192 over 4 KV heads, 8 on the sliding layers, values of 128, 256 experts)
_FLASH_PATTERN = [0 if i == 0 or (i + 1) % 6 == 0 else 1 for i in range(48)]
RELEASE_SHAPED = {
    "architectures": ["MiMoV2FlashForCausalLM"], "model_type": "mimo_v2_flash", "vocab_size": 152576,
    "hidden_size": 4096, "intermediate_size": 16384, "moe_intermediate_size": 2048, "num_hidden_layers": 48,
    "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128,
    "swa_num_attention_heads": 64, "swa_num_key_value_heads": 8, "swa_head_dim": 192, "swa_v_head_dim": 128,
    "hybrid_layer_pattern": _FLASH_PATTERN, "moe_layer_freq": [0] + [1] * 47, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "n_group": 1, "topk_group": 1, "norm_topk_prob": True, "topk_method": "noaux_tc",
    "scoring_func": "sigmoid", "n_shared_experts": None, "routed_scaling_factor": None, "rope_theta": 5000000,
    "swa_rope_theta": 10000, "partial_rotary_factor": 0.334, "sliding_window": 128, "sliding_window_size": 128,
    "attention_chunk_size": 128, "add_swa_attention_sink_bias": True, "add_full_attention_sink_bias": False,
    "attention_value_scale": 0.707, "layernorm_epsilon": 1e-05, "max_position_embeddings": 262144,
    "hidden_act": "silu", "attention_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": False,
    "initializer_range": 0.02, "use_cache": True, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
}


def test_release_shaped_config_is_accepted_as_fp8_and_as_its_bf16_export(tmp_path):
    """No released config.json file is collected (tests/test_released_configs.py FEWER); a config with the keys and
    published sizes of MiMo-V2-Flash, in its FP8 form (quant_method fp8, which the view reads dequantized) and as its
    BF16 export (the same without the quantization), passes the key check and the family's checks, with the same KV."""
    path = tmp_path / "mimo_v2_flash" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(RELEASE_SHAPED), encoding="utf-8")
    fp8_kv = config_path_kv(path)
    path.write_text(json.dumps({k: v for k, v in RELEASE_SHAPED.items() if k != "quantization_config"}),
                    encoding="utf-8")
    kv = config_path_kv(path)
    assert kv["mimo2.block_count"] == 51 and kv["mimo2.nextn_predict_layers"] == 3
    assert kv["mimo2.attention.sliding_window"] == 129  # sliding_window_size + the query, as transformers reads it
    assert kv["mimo2.attention.sliding_window_pattern"] == _FLASH_PATTERN + [1, 1, 1]
    assert kv["mimo2.attention.head_count_kv"] == [4 if p == 0 else 8 for p in _FLASH_PATTERN] + [8, 8, 8]
    assert kv["mimo2.attention.key_length"] == 192 and kv["mimo2.attention.value_length"] == 128
    assert kv["mimo2.rope.dimension_count"] == 64 and kv["mimo2.expert_count"] == 256
    assert kv["mimo2.rope.freq_base"] == 5000000 and kv["mimo2.rope.freq_base_swa"] == 10000
    assert fp8_kv == kv


def test_refuses_layers_whose_mlp_is_of_the_other_kind(checkpoint, tmp_path):
    """mlp_layer_types (and moe_layer_freq, agreeing) make layer 1 dense, but the checkpoint stores its router and
    experts: transformers would build a dense MLP there, llama.cpp would run the stored mixture."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    v = variant(checkpoint("mimo_v2_flash-nomtp"), tmp_path / "v", moe_layer_freq=[0, 0, 1],
                mlp_layer_types=["dense", "dense", "sparse"])
    with pytest.raises(CheckpointError, match="makes layer 1 dense"):
        HfCheckpoint(v, "f32")

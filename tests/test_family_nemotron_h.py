"""Nemotron-H (NemotronHForCausalLM -> llama.cpp nemotron_h / nemotron_h_moe): both oracles on a Nemotron 3 Nano-style
mixture, a latent-width mixture (Nemotron 3 Super's experts), a latent mixture with the multi-token-prediction head
Nemotron 3 Ultra stores (mtp.layers.{0,1}.*, which the converter writes as one more block and transformers ignores)
and a dense Nemotron-H-8B-style hybrid.

The dense one is the pinned converter's own failure under transformers 5.24: it reads the config through
AutoConfig.to_dict(), where NemotronHConfig always carries num_experts_per_tok (a default) and the layers as
layers_block_type, so it writes a dense checkpoint as nemotron_h_moe with FFN width 0 on every MLP layer (which
llama.cpp then takes for Mamba layers: the file cannot load). That is recorded as a strict xfail; the dense bytes
are proven against the converter run on config.json as stated (the reading it was written for, under a model_type
transformers does not know, so AutoConfig fails and it takes the file as it is), and its logits against
transformers."""
import json
import shutil
from pathlib import Path

import pytest

import oracle
from family_oracle import OUTTYPES, oracle_tests
from family_variants import DROP, assert_refused

test_export, test_logits = oracle_tests("nemotron_h", ["nemotron_h-moe", "nemotron_h-latent", "nemotron_h-narrow",
                                                      "nemotron_h-mtp"])
_, test_dense_logits = oracle_tests("nemotron_h", ["nemotron_h-dense"])

UNKNOWN_MODEL_TYPE = "hfview-oracle-unregistered"


def convert_as_stated(model_dir: Path, outtype: str, tmp_path: Path) -> Path:
    """The pinned converter on `model_dir`'s config.json as written (its plain-config.json fallback): a copy under
    the same directory name (general.name comes from it) whose model_type transformers does not know."""
    copy = tmp_path / "stated" / model_dir.name
    shutil.copytree(model_dir, copy)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    config["model_type"] = UNKNOWN_MODEL_TYPE
    (copy / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
    return oracle.convert_cached(copy, outtype)


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_dense_export_matches_the_converter_on_config_as_stated(outtype, checkpoint, tmp_path, record_property):
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "nemotron_h")
    record_property("oracle", "bytes")
    path = checkpoint("nemotron_h-dense")
    theirs = convert_as_stated(path, outtype, tmp_path)
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


@pytest.mark.xfail(strict=True, reason="the pinned converter under transformers 5.24 writes a dense Nemotron-H as "
                                       "nemotron_h_moe with feed_forward_length 0 on its MLP layers (to_dict always "
                                       "carries num_experts_per_tok; layers_block_type's 'mlp' is not among the "
                                       "converter's MLP kinds): a file llama.cpp cannot load")
def test_dense_export_matches_the_pinned_converter(checkpoint, converted, tmp_path):
    from family_oracle import check_export
    check_export("nemotron_h-dense", "auto", checkpoint, converted, tmp_path)


def test_the_pinned_converters_dense_file_is_the_broken_one(checkpoint, converted):
    """What the xfail above stands on: the converter's own file names the mixture architecture and no FFN width."""
    from gguf import GGUFReader
    fields = GGUFReader(converted("nemotron_h-dense", "auto")).fields
    assert fields["general.architecture"].contents() == "nemotron_h_moe"
    assert set(fields["nemotron_h_moe.feed_forward_length"].contents()) == {0}


def test_config_defaults_are_transformers():
    """CONFIG_DEFAULTS (what the converter sees beside a mixture's stated keys) are NemotronHConfig's own."""
    transformers = pytest.importorskip("transformers")
    from hfview.families.nemotron_h import CONFIG_DEFAULTS
    theirs = transformers.NemotronHConfig().to_dict()
    for key, value in CONFIG_DEFAULTS.items():
        got = list(theirs[key]) if isinstance(theirs[key], tuple) else theirs[key]
        assert got == value, f"{key}: NemotronHConfig says {theirs[key]!r}, CONFIG_DEFAULTS {value!r}"


@pytest.mark.parametrize("name, change, message", [
    ("nemotron_h-moe", {"hybrid_override_pattern": "ME-*E"}, "MLP"),
    ("nemotron_h-moe", {"hybrid_override_pattern": "MEM*X"}, "layer kind 'X'"),
    ("nemotron_h-moe", {"hybrid_override_pattern": "EEE*E"}, "no Mamba layer"),
    ("nemotron_h-moe", {"hybrid_override_pattern": "MEMEE"}, "no attention layer"),
    ("nemotron_h-moe", {"hybrid_override_pattern": "MEM*"}, "lists 4 layers, num_hidden_layers says 5"),
    ("nemotron_h-moe", {"n_group": 2, "topk_group": 1}, "n_group 2"),
    ("nemotron_h-mtp", {"num_nextn_predict_layers": 2}, "num_nextn_predict_layers 2"),
    ("nemotron_h-mtp", {"mtp_layers_block_type": ["moe", "attention"]}, "mtp_layers_block_type \\["),
    ("nemotron_h-moe", {"vocab_size": 50300}, "vocab_size 50300"),
    ("nemotron_h-moe", {"mlp_hidden_act": "silu"}, "mlp_hidden_act 'silu'"),
    ("nemotron_h-moe", {"time_step_limit": [0.0, 10.0]}, "time_step_limit"),
    ("nemotron_h-moe", {"norm_eps": 1e-6}, "norm_eps 1e-06 beside layer_norm_epsilon"),
    ("nemotron_h-dense", {"num_experts_per_tok": 2}, "num_experts_per_tok in a config without mixture layers"),
    ("nemotron_h-dense", {"n_groups": DROP}, "n_groups not stated"),
    ("nemotron_h-dense", {"hybrid_override_pattern": DROP,
                          "layers_block_type": ["linear_attention", "mlp", "linear_attention", "full_attention",
                                                "mlp"]}, "layers_block_type only"),
])
def test_configs_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, name, change, message):
    assert_refused(checkpoint(name), tmp_path, message, **change)


def test_transformers_5_spelling_of_a_mixture_reads_as_the_pattern(checkpoint, tmp_path):
    """layers_block_type (transformers 5's spelling) places the layers as hybrid_override_pattern does."""
    from family_variants import variant
    from hfview import HfCheckpoint
    base = HfCheckpoint(checkpoint("nemotron_h-moe"), "f32")
    spelled = HfCheckpoint(variant(checkpoint("nemotron_h-moe"), tmp_path / "v", hybrid_override_pattern=DROP,
                                   layers_block_type=["linear_attention", "moe", "linear_attention",
                                                      "full_attention", "moe"]), "f32")
    assert [t.name for t in base.tensors] == [t.name for t in spelled.tensors]
    assert base.hparams["num_hidden_layers"] == spelled.hparams["num_hidden_layers"] == 5


NANO_KEYS = {"norm_eps": 1e-05, "partial_rotary_factor": 1.0, "rope_theta": 10000}


def test_nemotron_3_nanos_extra_keys_read_as_the_converter_reads_them(checkpoint, tmp_path):
    """NVIDIA-Nemotron-3-Nano-30B-A3B's config.json also states norm_eps, partial_rotary_factor and rope_theta
    (which NemotronHConfig does not define; Nemotron-H applies no rope): the converter then writes an RMS epsilon
    and a rope base. The view's bytes on the mixture fixture with those keys == the converter's, at f32."""
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.export import export

    path = variant(checkpoint("nemotron_h-moe"), tmp_path / "nemotron_h-moe", **NANO_KEYS)
    theirs = oracle.convert_cached(path, "f32")
    ours = export(HfCheckpoint(path, "f32"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


# NVIDIA-Nemotron-3-Nano-30B-A3B's config.json keys as an MLX port's test transcribes them (its nemotron_nano_config:
# the release's values, less architectures, auto_map and the token ids), found through the search's code corpus;
# no byte copy of the file reached (tests/test_released_configs.py, FEWER)
NANO = {"architectures": ["NemotronHForCausalLM"], "attention_bias": False, "chunk_size": 128, "conv_kernel": 4,
        "eos_token_id": 2, "expand": 2, "head_dim": 128, "hidden_size": 2688,
        "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "intermediate_size": 1856,
        "layer_norm_epsilon": 1e-05, "mamba_head_dim": 64, "mamba_hidden_act": "silu", "mamba_num_heads": 64,
        "mamba_proj_bias": False, "max_position_embeddings": 262144, "mlp_bias": False, "mlp_hidden_act": "relu2",
        "model_type": "nemotron_h", "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712,
        "n_group": 1, "n_groups": 8, "n_routed_experts": 128, "n_shared_experts": 1, "norm_eps": 1e-05,
        "norm_topk_prob": True, "num_attention_heads": 32, "num_experts_per_tok": 6, "num_hidden_layers": 52,
        "num_key_value_heads": 2, "rescale_prenorm_residual": True, "rope_theta": 10000, "routed_scaling_factor": 2.5,
        "ssm_state_size": 128, "tie_word_embeddings": False, "time_step_floor": 0.0001, "time_step_max": 0.1,
        "time_step_min": 0.001, "topk_group": 1, "torch_dtype": "bfloat16", "use_bias": False, "use_conv_bias": True,
        "vocab_size": 131072}


def test_nemotron_3_nanos_config_is_read(tmp_path):
    """Its Mamba width (64 heads of 64 = 4096) is not expand x hidden_size (5376): transformers and the converter take
    it from the heads, as the view does (the nemotron_h-narrow fixture's oracles); refused on main before."""
    from hfview import families
    from hfview.config import read_as
    family = families.family_for("nemotron_h", NANO["architectures"])
    h = read_as(family, NANO, tmp_path / "config.json")
    kv = {k.key: k.value for k in family.parameters(h, 52, 1)}
    assert kv["nemotron_h_moe.ssm.inner_size"] == 4096 and kv["nemotron_h_moe.ssm.time_step_rank"] == 64


def test_mtp_head_stated_but_not_stored_converts_as_the_converter_does(checkpoint, tmp_path):
    """num_nextn_predict_layers 1 over a checkpoint without mtp.* tensors (as transformers saves one, ignoring them on
    load): the converter still counts the MTP block in block_count and the per-layer KV, with no tensors in it. The
    view's bytes on the mixture fixture so changed == the converter's, at f32."""
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.export import export

    path = variant(checkpoint("nemotron_h-moe"), tmp_path / "nemotron_h-moe", num_nextn_predict_layers=1)
    ours = HfCheckpoint(path, "f32")
    assert ours.block_count == 6 and not any(t.name.startswith("blk.5.") for t in ours.tensors)
    theirs = oracle.convert_cached(path, "f32")
    assert oracle.sha256(export(ours, tmp_path / "ours.gguf")) == oracle.sha256(theirs), \
        oracle.first_difference(tmp_path / "ours.gguf", theirs)


def test_mtp_tensors_of_a_dense_checkpoint_are_refused_by_name(checkpoint, tmp_path):
    """The converter folds an MTP head only for a mixture; a dense checkpoint's mtp.* tensors would be read as its
    trunk's layers 0 and 1 (their block ids): the view names the first instead of presenting them."""
    import torch
    from safetensors.torch import load_file, save_file
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    path = variant(checkpoint("nemotron_h-dense"), tmp_path / "nemotron_h-dense", num_nextn_predict_layers=1)
    tensors = load_file(str(path / "model.safetensors"))
    tensors["mtp.layers.0.enorm.weight"] = torch.ones(32, dtype=torch.bfloat16)
    (path / "model.safetensors").unlink()  # a link to the cached fixture: written anew, not through
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=r"mtp\.layers\.0\.enorm\.weight"):
        HfCheckpoint(path, "f32")


def test_nemotron_3_ultras_mtp_head_is_one_more_block():
    """NVIDIA-Nemotron-3-Ultra-550B-A55B's released config.json (num_nextn_predict_layers 1, mtp_layers_block_type
    ['attention', 'moe']; tests/data/released_configs/nemotron_h): its KV as the converter writes it with the MTP
    head, the head a 109th block after the 108 trunk layers, counted as an attention layer (its KV heads) and a
    mixture (its FFN width), and nextn_predict_layers 1; the nemotron_h-mtp fixture proves those bytes in small."""
    from released_config import DATA, config_path_kv
    kv = config_path_kv(DATA / "nemotron_h" / "nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.json", 1)
    trunk = json.loads((DATA / "nemotron_h" / "nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.json")
                       .read_text(encoding="utf-8"))["layers_block_type"]
    assert kv["nemotron_h_moe.block_count"] == len(trunk) + 1
    assert kv["nemotron_h_moe.attention.head_count_kv"] == [2 if t == "attention" else 0 for t in trunk] + [2]
    assert kv["nemotron_h_moe.feed_forward_length"] == [5120 if t == "moe" else 0 for t in trunk] + [5120]
    assert kv["nemotron_h_moe.nextn_predict_layers"] == 1


@pytest.mark.parametrize("quant, ftype", [("Q4_K_M", 15), ("Q8_0", 7)])
def test_mtp_head_quantized_matches_llama_model_quantize(quant, ftype, checkpoint, quantized, tmp_path):
    """llama_model_quantize loads the MTP block too (load_mtp): its mix over the converter's bf16 file of the
    nemotron_h-mtp fixture (the MTP router kept at bf16, as the converter wrote it) == the view's --quant."""
    from hfview import HfCheckpoint
    from hfview.export import export

    theirs = quantized("nemotron_h-mtp", "bf16", ftype)
    ours = export(HfCheckpoint(checkpoint("nemotron_h-mtp"), "bf16", quant=quant), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)

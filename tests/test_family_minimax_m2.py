"""MiniMax-M2 (whole-projection q/k norms, partial rotary, sigmoid router with selection bias, w1/w2/w3 experts):
converter bytes at every outtype, llama.cpp logits, defaults vs transformers, refusals of what llama.cpp's
minimax-m2 cannot run."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import DROP, variant

test_export, test_logits = oracle_tests("minimax_m2", ["minimax_m2", "minimax_m2-8e"])


def test_defaults_match_transformers():
    check_defaults("minimax_m2")


@pytest.mark.parametrize("changes, reason", [
    (dict(scoring_func="softmax"), "scoring_func 'softmax'"),
    (dict(scoring_func=DROP), "scoring_func None"),
    (dict(rotary_dim=DROP), "rotary_dim None"),
    (dict(qk_norm_type="per_head"), "qk_norm_type 'per_head'"),
    (dict(attn_type_list=[0, 1]), "linear-attention layers"),
    (dict(attn_type_list=[1]), "attn_type_list lists 1 layers"),
    (dict(use_routing_bias=False), "use_routing_bias"),
    (dict(shared_intermediate_size=64), "shared_intermediate_size"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(partial_rotary_factor=0.25), r"partial_rotary_factor 0.25 x head_dim 16 is not rotary_dim 8"),
], ids=["softmax", "no_scoring_func", "no_rotary_dim", "per_head_norm", "linear_layers", "short_list",
        "no_routing_bias", "shared_expert", "tied", "other_rotary_fraction"])
def test_refuses_what_minimax_m2_cannot_run(changes, reason, checkpoint, tmp_path):
    """What transformers' MiniMax-M2 computes only one way, and what the converter would tell llama.cpp
    otherwise, is refused by name before any weight is read."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("minimax_m2"), tmp_path / "v", **changes), "f32")


def test_stored_mtp_modules_are_refused_by_name(checkpoint, tmp_path):
    """A checkpoint that stores MiniMax's multi-token-prediction modules: the converter cannot map them and
    transformers does not build them, so the view refuses the tensor by name."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    src = checkpoint("minimax_m2")
    dst = tmp_path / "mtp"
    shutil.copytree(src, dst)
    tensors = load_file(dst / "model.safetensors")
    tensors["model.mtp_modules.0.enorm.weight"] = torch.ones(32, dtype=torch.bfloat16)
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="mtp_modules"):
        HfCheckpoint(dst, "f32")


def test_a_stated_rotary_fraction_of_rotary_dim_reads_as_without_it(checkpoint, tmp_path):
    """transformers 4.57 saves partial_rotary_factor beside rotary_dim (nvidia's MiniMax-M2.5-NVFP4): where it is
    rotary_dim / head_dim, transformers rotates the width the converter writes, and the converter's file is the
    same bytes as without it (its own run on the variant)."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    stated = variant(checkpoint("minimax_m2"), tmp_path / "stated", partial_rotary_factor=0.5)
    ours = export(HfCheckpoint(stated, "f32"), tmp_path / "ours.gguf")
    theirs = oracle.convert(stated, tmp_path / "theirs.gguf", "f32")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)

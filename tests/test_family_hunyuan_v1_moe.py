"""Hunyuan MoE (HunYuanMoEV1ForCausalLM -> llama.cpp hunyuan-moe): converter bytes at every outtype, llama.cpp logits,
defaults vs transformers, refusals of what the converter or llama.cpp's hunyuan-moe cannot run.

The fixture's tokenizer is code (as Hunyuan-A13B's is): the converter runs it with trust_remote_code, hfview reads
its rank file and the special tokens the release's code defines, and runs nothing."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant

test_export, test_logits = oracle_tests("hunyuan_v1_moe", ["hunyuan_v1_moe"])


def test_defaults_match_transformers():
    check_defaults("hunyuan_v1_moe")


@pytest.mark.parametrize("changes, reason", [
    (dict(moe_topk=2), "moe_topk 2: the converter reads moe_topk as a per-layer list"),
    (dict(moe_topk=[2, 1]), "asserts the 2 entries are equal"),
    (dict(moe_intermediate_size=[48]), "moe_intermediate_size \\[48\\]"),
    (dict(moe_intermediate_size=[32, 32]), "moe_intermediate_size 32 differs from intermediate_size 48"),
    (dict(num_shared_expert=[2, 2]), "num_shared_expert \\[2, 2\\]"),
    (dict(use_cla=True), "use_cla"),
    (dict(use_mixed_mlp_moe=False), "use_mixed_mlp_moe"),
    (dict(head_dim=64), "head_dim 64"),
    (dict(rope_scaling={"type": "dynamic", "alpha": 50.0, "factor": 1.0}), "alpha 50.0"),
    (dict(num_experts=1), "num_experts 1"),
], ids=["topk_int", "topk_unequal", "short_list", "expert_width", "two_shared", "cla", "no_shared_mlp", "head_dim",
        "alpha", "one_expert"])
def test_refuses_what_hunyuan_moe_cannot_run(changes, reason, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("hunyuan_v1_moe"), tmp_path / "v", **changes), "f32")


def test_the_tokenizer_code_is_not_run(checkpoint, tmp_path):
    """A tokenization_hy.py that would fail on import changes nothing for the view: hfview reads hy.tiktoken."""
    import shutil

    from hfview import HfCheckpoint

    dst = tmp_path / "ck"
    shutil.copytree(checkpoint("hunyuan_v1_moe"), dst)
    (dst / "tokenization_hy.py").write_text("raise SystemExit('checkpoint code was run')\n", encoding="utf-8")
    kv = {k.key: k.value for k in HfCheckpoint(dst, "f32").kv}
    assert kv["tokenizer.ggml.pre"] == "qwen2" and kv["tokenizer.ggml.bos_token_id"] == 127959

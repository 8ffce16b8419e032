"""StableLM: both oracles over stablelm-3b-style (partial rotary 0.25, LayerNorm with bias) and
stablelm-2-1.6b-style (q/k/v biases, grouped KV) fixtures. The qk_layernorm + parallel-residual fixture
(stablelm-2-12b's options) is one the pinned converter cannot convert; its export test records that
failure and the logits test proves the view's stacked per-head norms."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("stablelm", ["stablelm", "stablelm2-qkv-bias"])

test_export_qk_norm, test_logits_qk_norm = oracle_tests(
    "stablelm", ["stablelm2-qk-norm"],
    export_xfail="the converter's StableLMModel.modify_tensors returns (instead of yielding from) the generator "
                 "that stacks the per-head q/k norms, so they are never written and prepare_tensors raises "
                 "'Unprocessed norms'")


def test_stablelm_defaults_are_transformers():
    check_defaults("stablelm")

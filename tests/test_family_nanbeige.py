"""Nanbeige 4.2 (NanbeigeForCausalLM, remote code; transformers 5.24 has no Nanbeige class): converter bytes at
every outtype, llama.cpp logits against an equivalent transformers computation, refusals of what llama.cpp's
nanbeige cannot run.

Logits oracle. Nanbeige's modeling code (modeling_nanbeige.py of Nanbeige4.2-3B, read in
github.com/johnhalloran321/Nanbeige4.2-3B-mps-fix patch/modeling_nanbeige.py, commit a164cc1f, a copy of the release's
file with device fixes only; its configuration_nanbeige.py read beside it) computes, with every optional part off
(qk_layernorm, n-gram embeddings, LoopSplit, hyper-connections, depth attention, empty loop_loss_weights):
NanbeigeDecoderLayer = transformers' LlamaDecoderLayer (input_layernorm -> attention -> residual,
post_attention_layernorm -> SwiGLU MLP -> residual; RMSNorm in float32 times the weight; q/k/v/o without bias;
head_dim from config, default hidden // heads; rotate-half rope over the whole head at rope_theta;
repeat_kv over consecutive query heads; scores scaled by 1/sqrt(head_dim)); NanbeigeModel.forward runs the
whole stored stack num_loops times with the same positions and causal mask, each pass with its own cache slots
(layer + loop x layers), and applies model.norm after every pass unless skip_loop_final_norm (then only after
the last); lm_head without scaling. So the reference is transformers 5.24's LlamaForCausalLM over the same
weights with its layer list run num_loops times and its own model.norm between passes (below), in float32.
"""
import json

import pytest

from family_oracle import nmse, oracle_tests, reference_logits_test
from family_variants import assert_refused

FIXTURES = ["nanbeige", "nanbeige-3loops-skipnorm"]
test_export, _ = oracle_tests("nanbeige", FIXTURES)


def looped_llama_logits(path, ids):
    """Nanbeige's forward, as its modeling code computes it, over transformers' Llama modules."""
    import torch
    import transformers

    cfg = json.loads((path / "config.json").read_text())
    loops, skip = cfg["num_loops"], cfg["skip_loop_final_norm"]
    llama_cfg = transformers.LlamaConfig(**{k: v for k, v in cfg.items() if k not in (
        "architectures", "auto_map", "model_type", "kv_channels", "num_loops", "loop_loss_weights",
        "skip_loop_final_norm")})
    model = transformers.LlamaForCausalLM.from_pretrained(path, config=llama_cfg, dtype=torch.float32)
    inner = model.model

    class NormBetweenPasses(torch.nn.Module):
        def __init__(self, norm):
            super().__init__()
            self.norm = norm

        def forward(self, hidden_states, **kwargs):
            return self.norm(hidden_states)

    stack = []
    for loop in range(loops):
        stack += list(inner.layers)
        if loop < loops - 1 and not skip:
            stack.append(NormBetweenPasses(inner.norm))
    inner.layers = torch.nn.ModuleList(stack)
    inner.config.num_hidden_layers = len(stack)
    with torch.no_grad():
        return model(torch.tensor([ids]), use_cache=False).logits[0].float().numpy()


test_logits = reference_logits_test("nanbeige", FIXTURES, looped_llama_logits,
                                    "transformers' Llama layers run looped")


def test_the_loops_change_the_function(checkpoint):
    """The reference is not Llama run once: a wrong loop count or norm placement would show."""
    import torch
    import transformers

    path = checkpoint("nanbeige")
    ids = list(range(5, 21))
    cfg = json.loads((path / "config.json").read_text())
    llama_cfg = transformers.LlamaConfig(**{k: v for k, v in cfg.items() if k not in (
        "architectures", "auto_map", "model_type", "kv_channels", "num_loops", "loop_loss_weights",
        "skip_loop_final_norm")})
    once = transformers.LlamaForCausalLM.from_pretrained(path, config=llama_cfg, dtype=torch.float32)
    with torch.no_grad():
        single = once(torch.tensor([ids])).logits[0].numpy()
    assert nmse(single, looped_llama_logits(path, ids)) > 1e-2


def test_kv_states_the_loops(checkpoint):
    from hfview.config import read_as, read_config
    from hfview.families.nanbeige import FAMILY

    for name, loops, skip in (("nanbeige", 2, False), ("nanbeige-3loops-skipnorm", 3, True)):
        path = checkpoint(name) / "config.json"
        h = read_as(FAMILY, read_config(path), path)
        kv = {p.key: p.value for p in FAMILY.parameters(h, 2, 0)}
        assert kv["nanbeige.num_loops"] == loops and kv["nanbeige.skip_loop_final_norm"] is skip
        assert kv["nanbeige.block_count"] == 2  # the stored layers; llama.cpp runs num_loops x as many


def test_transformers_has_no_nanbeige_class():
    """The converter reads config.json as written only because AutoConfig cannot read it."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    assert "nanbeige" not in CONFIG_MAPPING
    assert not hasattr(transformers, "NanbeigeForCausalLM")


@pytest.mark.parametrize("changes, message", [
    (dict(qk_layernorm=True), "qk_layernorm"),
    (dict(emb_neighbor_num=2, emb_split_num=4, ngram_vocab_size_ratio=4), "emb_neighbor_num"),
    (dict(insert_ngram_layer_idx=[1]), "insert_ngram_layer_idx"),
    (dict(enable_double_loop_split=True), "enable_double_loop_split"),
    (dict(loop_share_kv=True), "loop_share_kv"),
    (dict(enable_hyper_connection=True), "enable_hyper_connection"),
    (dict(enable_mhc=True), "enable_mhc"),
    (dict(enable_depth_attention=True), "enable_depth_attention"),
    (dict(loop_loss_weights=[0.5]), "loop_loss_weights"),
    (dict(attention_bias=True), "attention_bias True"),
    (dict(mlp_bias=True), "mlp_bias True"),
    (dict(rope_scaling={"type": "dynamic", "factor": 2.0}), "rope_type 'dynamic'"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(kv_channels=8), "kv_channels 8"),
    (dict(num_loops=0), "num_loops"),
    (dict(rms_norm_eps=None), "rms_norm_eps None: missing"),
    (dict(num_key_value_heads=None), "num_key_value_heads None: missing"),
    (dict(architectures=["NanbeigeForSequenceClassification"]), "architectures"),
    (dict(jang_runtime={"architecture": "looped_transformer"}), "jang_runtime"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("nanbeige"), tmp_path, message, **changes)

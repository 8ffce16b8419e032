"""PLaMo 1 (PlamoForCausalLM, remote code -> llama.cpp plamo through the converter's PlamoModel).

* bytes oracle: `hfview export` == the pinned converter's file, every outtype, on the fixture with PLaMo-13B's
  attention (hidden 5120, 40 heads, n_shared_head 8), the only shape the converter's hard-coded reshapes accept. On
  plamo-small (12 heads sharing 3 KV heads) the converter itself stops at its shape assertion: a strict xfail.
* logits oracle: transformers 5.24 has no PLaMo class, so the reference is PLaMo's forward composed from
  transformers' own modules in float32 (plamo_logits below), from the stored safetensors and config.json alone.

What the reference follows, read from the release's modeling_plamo.py as its public copies state it (QEfficient's
transformers/models/plamo copy, mlx-lm's models/plamo.py): each decoder layer computes n = norm(x) (an RMSNorm,
weight times the normalised input) and returns x + attn(n) + mlp(n); attention has num_attention_heads heads of
hidden_size / num_attention_heads, k_proj and v_proj ceil(num_attention_heads / n_shared_head) heads, expanded by
`repeat` over the head axis (query head h reads KV head h % n_kv: tiled, not grouped); q and k rotate halves (NeoX)
with base 10000 over the head width (the release's rotary embedding takes no base from the config); scores scale by
head_dim^-0.5 under a causal mask; the MLP is down(silu(gate(n)) * up(n)); the final RMSNorm, then lm_head.
Here the tiling is done on the weights: a multi-head Llama attention whose k_proj and v_proj rows are the stored
KV heads repeated n_shared_head times, head block after head block, computes exactly the release's repeat.
"""
import json

import numpy as np
import pytest

from family_oracle import nmse, oracle_tests, reference_logits_test
from family_variants import assert_refused

_CONVERTER_FAILS = ("the pinned converter's PlamoModel asserts q_proj and o_proj are 5120 x 5120 (PLaMo-13B's "
                    "shape) and fails on any other: only the logits vouch for the view at this size")


def plamo_logits(path, ids, *, sharing="tiled"):
    """PLaMo's forward (see the module docstring) over transformers 5.24's Llama RMSNorm, attention, MLP and
    rotary modules, in float32. sharing="grouped" instead hands the KV heads out in ggml's grouped order (query
    head h reads KV head h // n_shared_head), which is not PLaMo: the test that the sharing counts uses it."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as ml

    cfg = json.loads((path / "config.json").read_text())
    w = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    hidden, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["rms_norm_eps"]
    shared = cfg.get("n_shared_head", 8)
    d = hidden // heads
    n_kv = -(-heads // shared)
    lcfg = LlamaConfig(hidden_size=hidden, intermediate_size=cfg["intermediate_size"], num_attention_heads=heads,
                       num_key_value_heads=heads, head_dim=d, hidden_act="silu", rms_norm_eps=eps,
                       attention_bias=False, mlp_bias=False, max_position_embeddings=cfg["max_position_embeddings"],
                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    lcfg._attn_implementation = "eager"

    def expand(kv):  # [n_kv * d, hidden] -> [heads * d, hidden], one KV head per query head
        per_head = kv.reshape(n_kv, d, hidden)
        index = torch.arange(heads) % n_kv if sharing == "tiled" else torch.arange(heads) // shared
        return per_head[index].reshape(heads * d, hidden)

    def norm(name):
        m = ml.LlamaRMSNorm(hidden, eps=eps)
        m.load_state_dict({"weight": w[name]})
        return m.eval()

    layers = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.layers.{i}."
        attn = ml.LlamaAttention(lcfg, layer_idx=i).eval()
        attn.load_state_dict({"q_proj.weight": w[p + "self_attn.q_proj.weight"],
                              "k_proj.weight": expand(w[p + "self_attn.k_proj.weight"]),
                              "v_proj.weight": expand(w[p + "self_attn.v_proj.weight"]),
                              "o_proj.weight": w[p + "self_attn.o_proj.weight"]})
        mlp = ml.LlamaMLP(lcfg).eval()
        mlp.load_state_dict({k: w[p + "mlp." + k] for k in ("gate_proj.weight", "up_proj.weight", "down_proj.weight")})
        layers.append((norm(p + "norm.weight"), attn, mlp))
    final, rope = norm("model.norm.weight"), ml.LlamaRotaryEmbedding(lcfg)
    n = len(ids)
    pos = torch.arange(n)
    mask = torch.zeros(n, n).masked_fill(pos[None, :] > pos[:, None], float("-inf"))[None, None]
    with torch.no_grad():
        x = torch.nn.functional.embedding(torch.tensor([ids]), w["model.embed_tokens.weight"])
        for pre, attn, mlp in layers:
            h = pre(x)
            x = x + attn(h, position_embeddings=rope(x, pos[None]), attention_mask=mask)[0] + mlp(h)
        return (final(x) @ w["lm_head.weight"].T)[0].numpy()


LABEL = "PLaMo's forward composed from transformers' Llama modules"
test_export, _ = oracle_tests("plamo", ["plamo"])
test_export_small, _ = oracle_tests("plamo", ["plamo-small"], export_xfail=_CONVERTER_FAILS)
test_logits = reference_logits_test("plamo", ["plamo", "plamo-small"], plamo_logits, LABEL)


def test_reference_is_causal_and_its_kv_sharing_counts(checkpoint):
    """The composition is causal, and handing the KV heads out grouped instead of tiled changes it (so the view's
    regrouping of q_proj / o_proj is what the logits test checks, not something any order would pass)."""
    ids = list(range(300, 316))
    for name in ("plamo-small", "plamo"):
        path = checkpoint(name)
        full = plamo_logits(path, ids)
        assert np.allclose(plamo_logits(path, ids[:8]), full[:8], atol=1e-4)
        assert nmse(plamo_logits(path, ids, sharing="grouped"), full) > 1e-4, name


def test_query_heads_are_regrouped_and_kv_kept(checkpoint):
    """attn_q's rows and attn_output's columns move head by head (presented head b * 8 + a is stored head a * 5 + b
    for PLaMo-13B's 40 heads over 5 KV heads); attn_k and attn_v are as stored; head_count_kv is 5."""
    from safetensors.torch import load_file

    from hfview import HfCheckpoint

    path = checkpoint("plamo")
    stored = {k: v.float().numpy() for k, v in load_file(str(path / "model.safetensors")).items()}
    view = HfCheckpoint(path, "f32")
    q, o = view.read_tensor("blk.0.attn_q.weight"), view.read_tensor("blk.0.attn_output.weight")
    attn = "model.layers.layers.0.self_attn."
    sq, so = stored[attn + "q_proj.weight"], stored[attn + "o_proj.weight"]
    for a, b in ((0, 1), (3, 4), (7, 2)):
        new, old = b * 8 + a, a * 5 + b
        assert np.array_equal(q[new * 128:(new + 1) * 128], sq[old * 128:(old + 1) * 128])
        assert np.array_equal(o[:, new * 128:(new + 1) * 128], so[:, old * 128:(old + 1) * 128])
    assert np.array_equal(view.read_tensor("blk.0.attn_k.weight"), stored[attn + "k_proj.weight"])
    kv = {k.key: k.value for k in view.kv}
    assert kv["plamo.attention.head_count_kv"] == 5 and kv["plamo.context_length"] == 4096


@pytest.mark.parametrize("change, match", [
    ({"tie_word_embeddings": True}, "tie_word_embeddings"),
    ({"n_shared_head": 5}, "n_shared_head 5 does not divide"),
    ({"hidden_size": None}, "hidden_size None: missing"),
    ({"rms_norm_eps": None}, "rms_norm_eps None: missing"),
    ({"intermediate_size": None}, "intermediate_size None: missing"),
    ({"rope_theta": 500000.0}, "rope_theta"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"architectures": ["PlamoModel"]}, "PlamoModel"),
])
def test_refusals_by_name(checkpoint, tmp_path, change, match):
    assert_refused(checkpoint("plamo-small"), tmp_path, match, **change)


def test_n_shared_head_defaults_to_plamo_configs(checkpoint, tmp_path):
    """Without n_shared_head the view shares by PlamoConfig's 8 (the group the converter's reshape hard-codes): the
    same keys and the same regrouped query rows as the fixture that states it."""
    from family_variants import DROP, variant

    from hfview import HfCheckpoint

    path = checkpoint("plamo")
    unstated = variant(path, tmp_path / "unstated", n_shared_head=DROP)
    stated, dropped = HfCheckpoint(path, "f32"), HfCheckpoint(unstated, "f32")
    def hyperparameters(view):
        return [(k.key, k.value) for k in view.kv if k.key.startswith("plamo.")]

    assert hyperparameters(dropped) == hyperparameters(stated)
    assert np.array_equal(dropped.read_tensor("blk.0.attn_q.weight"), stated.read_tensor("blk.0.attn_q.weight"))


def test_a_group_the_stored_kv_heads_contradict_is_refused(checkpoint, tmp_path):
    """n_shared_head 4 over 40 heads means 10 KV heads; the stored k_proj holds 5: refused naming the tensor."""
    from family_variants import variant

    from hfview import HfCheckpoint
    from hfview.errors import HfviewError

    with pytest.raises(HfviewError, match=r"k_proj.*n_shared_head 4"):
        HfCheckpoint(variant(checkpoint("plamo"), tmp_path / "v", n_shared_head=4))

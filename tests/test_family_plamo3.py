"""PLaMo 3 (Plamo3ForCausalLM, remote code -> llama.cpp plamo3 through the converter's Plamo3Model).

* bytes oracle: `hfview export` == the pinned converter's file, every outtype;
* logits oracle: transformers 5.24 has no PLaMo 3 class, so the reference is PLaMo 3's forward composed from
  transformers' own modules in float32 (plamo3_logits below), from the stored safetensors and config.json alone.

What the reference follows, read from the release's remote code as its public copies state it (vLLM's
model_executor/models/plamo3.py, SGLang's plamo3.py, mlx-lm's models/plamo3.py and the release's
configuration_plamo.py): each layer is x + post_mixer_norm(attn(pre_mixer_norm(x))), then
x + post_mlp_norm(mlp(pre_mlp_norm(x))); every RMSNorm scales by its stored weight plus a fixed offset (1 for
pre_mixer_norm, pre_mlp_norm, q_norm, k_norm and the final norm; 1/5 for post_mixer_norm; 5^-1.5 for post_mlp_norm);
qkv_proj's rows are all query heads, then the key heads, then the value heads; q and k pass a per-head RMSNorm
before a NeoX (rotate-half) rotation; attention scales by head_dim^-0.5; gate_up_proj's first half is the gate,
silu(gate) * up goes down. Layer i attends fully when (i + 1) % sliding_window_pattern == 0 (at rope_theta, YaRN
with factor rope_scaling_factor over initial_context_length, beta_fast 32, beta_slow 1, not truncated, where the
factor is not 1), the others attend to the last window_size positions, the current one included (vLLM's and
SGLang's window), and rotate at rope_local_theta. A tied head is the embedding.
"""
import json

import numpy as np
import pytest

from family_oracle import nmse, oracle_tests, reference_logits_test
from family_variants import assert_refused

FIXTURES = ["plamo3", "plamo3-yarn"]

# the offsets the release's modeling code adds to each stored norm scale
_OFFSETS = {"pre_mixer_norm": 1.0, "post_mixer_norm": 1.0 / 5, "pre_mlp_norm": 1.0, "post_mlp_norm": 1.0 / 5 ** 1.5}


def plamo3_logits(path, ids, *, window_override=None, unscaled=False):
    """PLaMo 3's forward (see the module docstring) over transformers 5.24's Llama RMSNorm, MLP and rotary modules
    and Gemma 3's attention (its q/k norms scale by 1 + w, PLaMo 3's q/k offset), in float32."""
    import torch
    from safetensors.torch import load_file
    from transformers import Gemma3TextConfig, LlamaConfig
    from transformers.models.gemma3 import modeling_gemma3 as mg
    from transformers.models.llama import modeling_llama as ml

    cfg = json.loads((path / "config.json").read_text())
    w = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    hidden, heads, kv, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, ff, n_layers = cfg["rms_norm_eps"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    window = window_override or cfg["window_size"]
    pattern = cfg["sliding_window_pattern"]
    factor = 1 if unscaled else cfg.get("rope_scaling_factor", 1)

    def norm(prefix, dim, off):
        m = ml.LlamaRMSNorm(dim, eps=eps)
        m.load_state_dict({"weight": w[prefix + ".weight"] + off})
        return m.eval()

    def rotary(theta, yarn):
        rope = {"rope_type": "default", "rope_theta": float(theta)}
        if yarn:
            rope = {"rope_type": "yarn", "rope_theta": float(theta), "factor": float(factor),
                    "original_max_position_embeddings": cfg["initial_context_length"], "beta_fast": 32.0,
                    "beta_slow": 1.0, "truncate": False}
        c = LlamaConfig(hidden_size=hidden, num_attention_heads=heads, head_dim=d,
                        max_position_embeddings=cfg["max_position_embeddings"], rope_parameters=rope)
        return ml.LlamaRotaryEmbedding(c)

    acfg = Gemma3TextConfig(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=kv, head_dim=d,
                            query_pre_attn_scalar=d, rms_norm_eps=eps, attention_bias=False,
                            attn_logit_softcapping=None, num_hidden_layers=n_layers, sliding_window=window)
    acfg._attn_implementation = "eager"
    mcfg = LlamaConfig(hidden_size=hidden, intermediate_size=ff, hidden_act="silu", mlp_bias=False)
    n = len(ids)
    pos = torch.arange(n)
    causal = pos[None, :] <= pos[:, None]
    masks = {True: causal, False: causal & (pos[:, None] - pos[None, :] < window)}
    layers = []
    for i in range(n_layers):
        p = f"model.layers.layers.{i}."
        full = (i + 1) % pattern == 0
        attn = mg.Gemma3Attention(acfg, layer_idx=i).eval()
        qkv = w[p + "mixer.qkv_proj.weight"]
        attn.load_state_dict({
            "q_proj.weight": qkv[:heads * d], "k_proj.weight": qkv[heads * d:(heads + kv) * d],
            "v_proj.weight": qkv[(heads + kv) * d:], "o_proj.weight": w[p + "mixer.o_proj.weight"],
            "q_norm.weight": w[p + "mixer.q_norm.weight"], "k_norm.weight": w[p + "mixer.k_norm.weight"]})
        mlp = ml.LlamaMLP(mcfg).eval()
        gate_up = w[p + "mlp.gate_up_proj.weight"]
        mlp.load_state_dict({"gate_proj.weight": gate_up[:ff], "up_proj.weight": gate_up[ff:],
                             "down_proj.weight": w[p + "mlp.down_proj.weight"]})
        norms = {k: norm(p + k, hidden, off) for k, off in _OFFSETS.items()}
        theta = cfg["rope_theta"] if full else cfg["rope_local_theta"]
        layers.append((full, attn, mlp, norms, rotary(theta, full and factor not in (None, 1))))
    final = norm("model.norm", hidden, 1.0)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]
    with torch.no_grad():
        x = torch.nn.functional.embedding(torch.tensor([ids]), w["model.embed_tokens.weight"])
        for full, attn, mlp, norms, rope in layers:
            mask = torch.zeros(n, n).masked_fill(~masks[full], float("-inf"))[None, None]
            h = attn(norms["pre_mixer_norm"](x), position_embeddings=rope(x, pos[None]), attention_mask=mask)[0]
            x = x + norms["post_mixer_norm"](h)
            x = x + norms["post_mlp_norm"](mlp(norms["pre_mlp_norm"](x)))
        return (final(x) @ head.T)[0].numpy()


LABEL = "PLaMo 3's forward composed from transformers' Llama and Gemma 3 modules"
test_export, _ = oracle_tests("plamo3", FIXTURES)
test_logits = reference_logits_test("plamo3", FIXTURES, plamo3_logits, LABEL)


def test_reference_is_causal_and_windowed(checkpoint):
    """The composition is causal, and its window and its norm offsets count (a reference that cannot miss is none)."""
    path = checkpoint("plamo3")
    ids = list(range(300, 316))
    full = plamo3_logits(path, ids)
    assert np.allclose(plamo3_logits(path, ids[:8]), full[:8], atol=1e-4)
    # within the window both kinds of layer see everything; past it the sliding layers do not
    wide = plamo3_logits(path, ids, window_override=64)
    assert np.allclose(wide[:8], full[:8], atol=1e-4)
    assert nmse(wide[8:], full[8:]) > 1e-4
    # the YaRN fixture's global layers rotate differently from unscaled ones already within the prompt
    yarn = checkpoint("plamo3-yarn")
    assert nmse(plamo3_logits(yarn, ids, unscaled=True), plamo3_logits(yarn, ids)) > 1e-4


def test_norm_offsets_are_the_converters(checkpoint):
    """Each norm is presented as stored + its constant (1, 1/5, 5^-1.5), in float32 at --outtype f32."""
    from safetensors.torch import load_file

    from hfview import HfCheckpoint

    path = checkpoint("plamo3")
    stored = load_file(str(path / "model.safetensors"))
    view = HfCheckpoint(path, "f32")
    names = {t.name for t in view.tensors}
    assert "output.weight" not in names  # tied: the head is the embedding
    for hf, gguf, c in (("pre_mixer_norm", "attn_norm", 1.0), ("post_mixer_norm", "post_attention_norm", 0.2),
                        ("pre_mlp_norm", "ffn_norm", 1.0), ("post_mlp_norm", "post_ffw_norm", 5 ** -1.5),
                        ("mixer.q_norm", "attn_q_norm", 1.0), ("mixer.k_norm", "attn_k_norm", 1.0)):
        ours = view.read_tensor(f"blk.1.{gguf}" + ("" if gguf.startswith("post_") else ".weight"))
        ref = stored[f"model.layers.layers.1.{hf}.weight"].float().numpy() + np.float32(c)
        assert np.array_equal(ours, ref), hf


@pytest.mark.parametrize("change, match", [
    ({"linear_type": "fp8"}, "linear_type"),
    ({"scale_embedding": True}, "scale_embedding"),
    ({"attention_bias": True}, "attention_bias"),
    ({"hidden_activation": "gelu"}, "hidden_activation"),
    ({"rope_scaling_factor": 2.0, "initial_context_length": None}, "initial_context_length"),
    ({"sliding_window_pattern": 0}, "sliding_window_pattern"),
    ({"sliding_window": 16}, "sliding_window"),
    ({"window_size": None}, "window_size is missing"),
    ({"rope_local_theta": None}, "rope_local_theta is missing"),
    ({"head_dim": None}, "head_dim is missing"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
    ({"sliding_window": 8, "window_size": None}, "window_size is missing"),
    ({"interleaved_sliding_window": [8, None, 8]}, "interleaved_sliding_window"),
    ({"interleaved_sliding_window": [8, 8, 8, None]}, "interleaved_sliding_window"),
])
def test_refusals_by_name(checkpoint, tmp_path, change, match):
    assert_refused(checkpoint("plamo3"), tmp_path, match, **change)


@pytest.mark.parametrize("key", ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                 "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
                                 "rms_norm_eps", "rope_theta", "rope_local_theta", "window_size",
                                 "sliding_window_pattern"])
def test_a_key_the_remote_code_defaults_is_required(checkpoint, tmp_path, key):
    """No Plamo3Config defaults reach the converter: a key whose remote default the converter's silence would not
    give llama.cpp is refused by name when absent (REMOTE_DEFAULTS states those defaults, from the release's
    configuration_plamo.py)."""
    from hfview.families.plamo3 import REMOTE_DEFAULTS

    assert key in REMOTE_DEFAULTS
    assert_refused(checkpoint("plamo3"), tmp_path, f"{key} is missing", **{key: None})


def test_fixture_states_the_remote_codes_keys(checkpoint):
    """The fixture's config.json carries every key of the release's Plamo3Config, as a release's does."""
    from hfview.families.plamo3 import REMOTE_DEFAULTS

    cfg = json.loads((checkpoint("plamo3") / "config.json").read_text())
    assert set(REMOTE_DEFAULTS) <= set(cfg)
    assert cfg["interleaved_sliding_window"] == [8, None, 8, None]  # as Plamo3Config computes and saves it

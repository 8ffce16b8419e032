"""PLaMo 2 (Plamo2ForCausalLM, remote code -> llama.cpp plamo2 through the converter's Plamo2Model).

* bytes oracle: `hfview export` == the pinned converter's file, every outtype;
* logits oracle: transformers 5.24 has no PLaMo 2 class, so the reference is PLaMo 2's forward composed from
  transformers' own modules in float32 (plamo2_logits below), from the stored safetensors and config.json alone.
  llama.cpp 0.3.36 never returns on the converter's file (nor, the bytes being the same, on the view): it takes n_rot
  from layer 0's head count, 0 on a Mamba layer. So llama.cpp runs (in a subprocess, time-limited) the view's exported
  bytes with head_count's zeros filled, the one KV changed, and test_converter_file_does_not_run_in_llama_cpp shows
  the converter's own file does not return.

What the reference follows, read from the release's remote code as its public copies state it (the release's
modeling_plamo.py as ported to MLX by mlx-lm (its first plamo2.py, with the naive scan ssd_chunk_scan_combined and
causal_conv1d), vLLM's model_executor/models/plamo2.py): layer i is a Mamba layer unless i % mamba_step ==
mamba_step // 2; each layer is x + post_mixer_norm(mixer(pre_mixer_norm(x))), then
x + post_mlp_norm(mlp(pre_mlp_norm(x))); each of those norms (and the final one) scales by its stored weight plus a
fixed offset (1, 1/5, 1, 5^-1.5; 1 for the final norm). The Mamba mixer: in_proj's output per head is [gate, x]; x
passes a causal depthwise conv1d (no bias) and SiLU; bcdt_proj(x) splits into B, C (mamba_d_state each) and a step of
max(64, hidden_size / 16) columns, each RMS-normalised (rms_norm_eps) and scaled by its plain weight; the step goes
through dt_proj, + dt_bias, softplus; per head the state (head width x d_state) decays by exp(dt * -exp(A_log)) and
adds dt * B * x; y = C . state + D * x, times SiLU(gate), then out_proj. The attention: qkv_proj's rows are all query
heads, then key heads, then value heads; q and k are RMS-normalised per head (epsilon 1e-6) and scaled by per-head
weights (q_weight, k_weight: [heads, head width]); NeoX (rotate-half) rotation at base 10000 over absolute positions;
scale hidden_size_per_head^-0.5; layers not in full_attention_idx see the current position and the
attention_window_size before it. The MLP: gate_up_proj's first half is the gate, silu(gate) * up goes down. A tied
head is the embedding.

transformers' modules used: LlamaRMSNorm (every norm), LlamaMLP, LlamaRotaryEmbedding / apply_rotary_pos_emb and
eager_attention_forward (Llama's, with its GQA repeat); the scan is the release's naive one, step by step.
"""
import json

import numpy as np
import pytest

from family_oracle import nmse, oracle_tests
from family_variants import assert_refused

FIXTURES = ["plamo2", "plamo2-untied"]

_OFFSETS = {"pre_mixer_norm": 1.0, "post_mixer_norm": 1.0 / 5, "pre_mlp_norm": 1.0, "post_mlp_norm": 1.0 / 5 ** 1.5}


def _is_mamba(cfg, i):
    n, step = cfg["num_hidden_layers"], cfg.get("mamba_step", 2)
    return i != n - 1 if n <= step // 2 else i % step != step // 2


def plamo2_logits(path, ids, *, window_override=None, carry_state=True, conv=True):
    """PLaMo 2's forward (see the module docstring) over transformers 5.24's Llama modules, in float32.
    window_override: the attention window instead of attention_window_size; carry_state False: the scan forgets its
    state at every step; conv False: the conv1d passes x through (both only to show the reference depends on them)."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig
    from transformers.models.llama import modeling_llama as ml

    cfg = json.loads((path / "config.json").read_text())
    w = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    hidden, heads, kv, d = (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
                            cfg["hidden_size_per_head"])
    eps, ff, n_layers = cfg["rms_norm_eps"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    n_mh, state, k_conv = cfg["mamba_num_heads"], cfg["mamba_d_state"], cfg["mamba_d_conv"]
    window = window_override or cfg["attention_window_size"]
    full_idx = set(cfg.get("full_attention_idx") or [])

    def norm(dim, weight, e=eps):
        m = ml.LlamaRMSNorm(dim, eps=e)
        m.load_state_dict({"weight": weight})
        return m.eval()

    rope = ml.LlamaRotaryEmbedding(LlamaConfig(hidden_size=hidden, num_attention_heads=heads, head_dim=d,
                                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0}))
    mcfg = LlamaConfig(hidden_size=hidden, intermediate_size=ff, hidden_act="silu", mlp_bias=False)
    attn_module = type("A", (torch.nn.Module,), {})()
    attn_module.num_key_value_groups = heads // kv
    attn_module.eval()
    n = len(ids)
    pos = torch.arange(n)

    def mamba(p, h):
        zx = (h @ w[p + "in_proj.weight"].T).reshape(n, n_mh, 2 * d)
        z, x = zx[..., :d].reshape(n, n_mh * d), zx[..., d:].reshape(n, n_mh * d)
        if conv:
            padded = torch.nn.functional.pad(x.T[None], (k_conv - 1, 0))
            x = torch.nn.functional.conv1d(padded, w[p + "conv1d.weight"], groups=n_mh * d)[0].T
        x = torch.nn.functional.silu(x)
        bcdt = x @ w[p + "bcdt_proj.weight"].T
        B, C, dt = bcdt[:, :state], bcdt[:, state:2 * state], bcdt[:, 2 * state:]
        dt = norm(dt.shape[-1], w[p + "dt_norm_weight"])(dt)
        B = norm(state, w[p + "B_norm_weight"])(B)
        C = norm(state, w[p + "C_norm_weight"])(C)
        dt = torch.nn.functional.softplus(dt @ w[p + "dt_proj.weight"].T + w[p + "dt_bias"])  # (n, heads)
        A = -torch.exp(w[p + "A_log"])
        xs = x.reshape(n, n_mh, d)
        s = torch.zeros(n_mh, d, state)
        ys = []
        for t in range(n):
            if not carry_state:
                s = torch.zeros_like(s)
            s = s * torch.exp(dt[t] * A)[:, None, None] + (dt[t][:, None, None] * B[t][None, None, :]) * xs[t][:, :, None]
            y = s @ C[t] + w[p + "D"][:, None] * xs[t]
            ys.append(y.reshape(-1))
        y = torch.stack(ys) * torch.nn.functional.silu(z)
        return y @ w[p + "out_proj.weight"].T

    def attention(i, p, h):
        qkv = h @ w[p + "qkv_proj.weight"].T
        q, k, v = qkv[:, :heads * d], qkv[:, heads * d:(heads + kv) * d], qkv[:, (heads + kv) * d:]
        q = q.reshape(1, n, heads, d).transpose(1, 2)
        k = k.reshape(1, n, kv, d).transpose(1, 2)
        v = v.reshape(1, n, kv, d).transpose(1, 2)
        q = norm(d, torch.ones(d), 1e-6)(q) * w[p + "q_weight"][None, :, None, :]
        k = norm(d, torch.ones(d), 1e-6)(k) * w[p + "k_weight"][None, :, None, :]
        cos, sin = rope(v, pos[None])
        q, k = ml.apply_rotary_pos_emb(q, k, cos, sin)
        allowed = pos[None, :] <= pos[:, None]
        if i not in full_idx:
            allowed = allowed & (pos[:, None] - pos[None, :] <= window)
        mask = torch.zeros(n, n).masked_fill(~allowed, float("-inf"))[None, None]
        out, _ = ml.eager_attention_forward(attn_module, q, k, v, mask, scaling=d ** -0.5)
        return out.reshape(n, heads * d) @ w[p + "o_proj.weight"].T

    with torch.no_grad():
        x = w["model.embed_tokens.weight"][torch.tensor(ids)]
        for i in range(n_layers):
            p = f"model.layers.layers.{i}."
            norms = {k: norm(hidden, w[p + k + ".weight"] + off) for k, off in _OFFSETS.items()}
            mlp = ml.LlamaMLP(mcfg).eval()
            gate_up = w[p + "mlp.gate_up_proj.weight"]
            mlp.load_state_dict({"gate_proj.weight": gate_up[:ff], "up_proj.weight": gate_up[ff:],
                                 "down_proj.weight": w[p + "mlp.down_proj.weight"]})
            h = norms["pre_mixer_norm"](x)
            h = mamba(p + "mixer.", h) if _is_mamba(cfg, i) else attention(i, p + "mixer.", h)
            x = x + norms["post_mixer_norm"](h)
            x = x + norms["post_mlp_norm"](mlp(norms["pre_mlp_norm"](x)))
        x = norm(hidden, w["model.norm.weight"] + 1.0)(x)
        head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]
        return (x @ head.T).numpy()


LABEL = "PLaMo 2's forward composed from transformers' Llama modules and the release's naive scan"
test_export, _ = oracle_tests("plamo2", FIXTURES)

# llama.cpp 0.3.36 cannot run the converter's PLaMo 2 file: llama_model's generic hyperparameter load takes the head
# width, and with it n_rot, from layer 0's head count, which the converter writes 0 (layer 0 is a Mamba layer in every
# PLaMo 2: it writes per-layer head counts, 0 on Mamba layers); plamo2's own load restores the head width from
# key_length but not n_rot, and its attention layers then rotate 0 of 16 dimensions, where ggml's rope loop never ends.
# The view presents the converter's bytes, so llama.cpp fed from it never returns either.
# So the logits oracle runs llama.cpp (in a subprocess, with a time limit) on the view's exported bytes with that one KV
# filled, and a test shows the converter's own file does not return.


_DECODE = """
import sys, numpy as np, llama_cpp
lm = llama_cpp.Llama(sys.argv[1], n_ctx=64, n_batch=64, logits_all=True, verbose=False, n_threads=1)
ids = lm.tokenize(sys.argv[2].encode("utf-8"))[:16]
lm.eval(ids)
np.save(sys.argv[3], np.array(lm.scores[:len(ids)], dtype=np.float32))
np.save(sys.argv[4], np.array(ids))
"""


def _decode(gguf_path, tmp_path, timeout):
    """llama.cpp's logits at every position of the oracle's prompt (its first 16 tokens) from a GGUF file, in a
    subprocess that is stopped after `timeout` seconds (TimeoutError)."""
    import subprocess
    import sys

    from family_oracle import PROMPT

    logits, ids = tmp_path / "logits.npy", tmp_path / "ids.npy"
    try:
        subprocess.run([sys.executable, "-c", _DECODE, str(gguf_path), PROMPT, str(logits), str(ids)], check=True,
                       timeout=timeout, capture_output=True)
    except subprocess.TimeoutExpired as e:
        raise TimeoutError(f"llama.cpp did not return within {timeout} s on {gguf_path.name}") from e
    return np.load(logits), [int(i) for i in np.load(ids)]


def _with_head_counts_filled(src, dst):
    """A copy of the GGUF file `src` whose plamo2.attention.head_count has the attention layers' count on the Mamba
    layers too (where llama.cpp's plamo2 never reads it): the one change that lets llama.cpp 0.3.36 run it."""
    import shutil

    from gguf import GGUFReader

    shutil.copyfile(src, dst)
    field = GGUFReader(dst, "r+").fields["plamo2.attention.head_count"]
    counts = [int(field.parts[i][0]) for i in field.data]
    for i in field.data:
        field.parts[i][0] = max(counts)
    return dst


@pytest.mark.parametrize("name", FIXTURES)
def test_converter_file_does_not_run_in_llama_cpp(name, converted, tmp_path):
    """The premise of the xfail above, on the converter's own file: llama.cpp does not return on it (60 s, where the
    same file with only head_count's zeros filled decodes the prompt in about a second)."""
    theirs = converted(name, "f32")
    _decode(_with_head_counts_filled(theirs, tmp_path / "filled.gguf"), tmp_path, 120)
    with pytest.raises(TimeoutError):
        _decode(theirs, tmp_path, 60)


@pytest.mark.parametrize("outtype", ["f32", "f16", "bf16", "auto"])
@pytest.mark.parametrize("name", FIXTURES)
def test_logits_with_head_counts_filled(name, outtype, checkpoint, tmp_path):
    """What llama.cpp computes from the view's bytes once head_count's zeros (the only KV llama.cpp cannot run) are
    filled, against PLaMo 2's forward composed from transformers' modules: the view's tensors and every other KV."""
    from family_oracle import NMSE_BAR

    from hfview import HfCheckpoint
    from hfview.export import export

    ours = export(HfCheckpoint(checkpoint(name), outtype), tmp_path / "ours.gguf")
    logits, ids = _decode(_with_head_counts_filled(ours, tmp_path / "filled.gguf"), tmp_path, 300)
    assert len(ids) == 16
    ref = plamo2_logits(checkpoint(name), ids)
    value = nmse(logits, ref)
    print(f"{name} {outtype}: NMSE {value:.3e} against {LABEL} (head_count filled), top-1 agreement "
          f"{np.mean(logits.argmax(-1) == ref.argmax(-1)):.3f}")
    assert value < NMSE_BAR


def test_reference_is_causal_and_stateful(checkpoint):
    """The composition is causal; the scan's carried state, the conv1d and the attention window each count (a
    reference that cannot miss is none)."""
    path = checkpoint("plamo2")
    ids = list(range(300, 316))
    full = plamo2_logits(path, ids)
    assert np.allclose(plamo2_logits(path, ids[:8]), full[:8], atol=1e-4)
    assert nmse(plamo2_logits(path, ids, carry_state=False)[1:], full[1:]) > 1e-4
    assert nmse(plamo2_logits(path, ids, conv=False), full) > 1e-4
    narrow = plamo2_logits(path, ids, window_override=4)
    assert np.allclose(narrow[:5], full[:5], atol=1e-4)  # the current position and 4 before it: all there is
    assert nmse(narrow[5:], full[5:]) > 1e-4


def test_norm_offsets_and_decay_are_the_converters(checkpoint):
    """Each sandwich norm is presented as stored + its constant (1, 1/5, 5^-1.5), the final norm + 1, A as
    -exp(A_log), the mixer's own norms and the per-head q/k scales as stored, in float32 at --outtype f32."""
    import torch
    from safetensors.torch import load_file

    from hfview import HfCheckpoint

    path = checkpoint("plamo2")
    stored = load_file(str(path / "model.safetensors"))
    view = HfCheckpoint(path, "f32")
    names = {t.name for t in view.tensors}
    assert "output.weight" not in names  # tied: the head is the embedding
    f = lambda name: stored[name].float().numpy()  # noqa: E731
    for bid, hf, gguf, c in ((1, "pre_mixer_norm", "attn_norm.weight", 1.0), (0, "post_mixer_norm", "post_attention_norm", 0.2),
                             (1, "pre_mlp_norm", "ffn_norm.weight", 1.0), (0, "post_mlp_norm", "post_ffw_norm", 5 ** -1.5)):
        ref = f(f"model.layers.layers.{bid}.{hf}.weight") + np.float32(c)
        assert np.array_equal(view.read_tensor(f"blk.{bid}.{gguf}"), ref), hf
    assert np.array_equal(view.read_tensor("output_norm.weight"), f("model.norm.weight") + np.float32(1.0))
    a_log = stored["model.layers.layers.0.mixer.A_log"].float()
    assert np.array_equal(view.read_tensor("blk.0.ssm_a"), (-torch.exp(a_log)).numpy())
    for hf, gguf in (("dt_norm_weight", "blk.0.ssm_dt_norm"), ("B_norm_weight", "blk.0.ssm_b_norm"),
                     ("D", "blk.0.ssm_d"), ("dt_bias", "blk.0.ssm_dt.bias")):
        assert np.array_equal(view.read_tensor(gguf), f(f"model.layers.layers.0.mixer.{hf}")), hf
    assert np.array_equal(view.read_tensor("blk.1.attn_q_norm.weight"), f("model.layers.layers.1.mixer.q_weight"))
    conv = f("model.layers.layers.0.mixer.conv1d.weight")
    assert np.array_equal(view.read_tensor("blk.0.ssm_conv1d.weight"), conv[:, 0, :])


def test_layer_kinds_follow_mamba_step():
    """The release's is_mamba, as the per-layer head counts say it."""
    from hfview.families.plamo2 import mamba_layers

    assert mamba_layers({"num_hidden_layers": 4, "mamba_step": 2}) == [True, False, True, False]
    assert mamba_layers({"num_hidden_layers": 4, "mamba_step": 4}) == [True, True, False, True]
    assert mamba_layers({"num_hidden_layers": 2, "mamba_step": 6}) == [True, False]  # few layers: the last attends
    assert mamba_layers({"num_hidden_layers": 16}) == [i % 2 == 0 for i in range(16)]  # plamo-2-1b


@pytest.mark.parametrize("change, match", [
    ({"mamba_enabled": False}, "mamba_enabled false"),
    ({"mamba_step": 1}, "mamba_step 1"),
    ({"num_hidden_layers": 1, "mamba_step": 2}, "no Mamba layer"),
    ({"full_attention_idx": [0]}, "full_attention_idx lists layer 0, which is a Mamba layer"),
    ({"full_attention_idx": [5]}, "full_attention_idx lists layer 5, which is past the layer count"),
    ({"sliding_window": 16}, "sliding_window 16 differs from attention_window_size"),
    ({"linear_type": "fp8"}, "linear_type"),
    ({"eval_attention_n_bit": 8}, "eval_attention_n_bit"),
    ({"rms_norm_eps": 1e-5}, "rms_norm_eps"),
    ({"rope_local_theta": 1000000}, "rope_local_theta"),
    ({"num_key_value_heads": 3}, "num_key_value_heads"),
    ({"vocab_size": None}, "vocab_size is missing"),
    ({"image_token_id": 5}, "image_token_id"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "rope_scaling"),
])
def test_refusals_by_name(checkpoint, tmp_path, change, match):
    assert_refused(checkpoint("plamo2"), tmp_path, match, **change)


def test_the_release_window_is_the_one_llama_cpp_does_not_apply(checkpoint):
    """Released configs list no full-attention layer, so the attention layers slide through attention_window_size,
    which llama.cpp's plamo2 does not: the runner stops the context there. With every attention layer listed, none."""
    from hfview.families.plamo2 import FAMILY, normalise
    from runner.api import unapplied_window

    cfg = json.loads((checkpoint("plamo2") / "config.json").read_text())
    assert unapplied_window(FAMILY, normalise(cfg)) == 2048
    assert unapplied_window(FAMILY, normalise({**cfg, "full_attention_idx": [1, 3]})) is None

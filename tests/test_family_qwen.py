"""Qwen-1 (QWenLMHeadModel, remote code -> llama.cpp qwen): converter bytes at every outtype, llama.cpp logits
against Qwen-1's forward, the long-context switches, refusals.

Bytes. The converter reads Qwen-1's vocabulary through the release's tokenization_qwen.py (trust_remote_code). The
byte oracle is the converter run on a copy whose tokenizer module calls PreTrainedTokenizer.__init__ last (the
restoration community copies carry for transformers >= 4.36; a first probe outside the suite failed with the release's
order, but a converter run on the fixture as released also succeeded once, possibly served a cached remote module: not
settled, so no test claims either way). hfview reads qwen.tiktoken and runs no code, so its view is the same.

Logits. transformers 5.24 has no Qwen-1 class. The reference is Qwen-1's forward as the release's modeling_qwen.py
states it (Qwen/Qwen-72B's copy in github.com/ds-llo/qwcs, commit 443804a5; the first Qwen-7B-Chat revision in
github.com/undefdev/Qwen-7B-Chat agrees on the block), composed here in float32 from the stored safetensors and
config.json: RMSNorm ln_1, c_attn split into q | k | v of hidden_size each, rotate-half rotary over kv_channels at
rotary_emb_base (raised by dynamic NTK's alpha where the length passes seq_length), queries scaled by logn past
seq_length, causal softmax(q k^T / sqrt(head width)) v, c_proj without bias, RMSNorm ln_2, c_proj(w1(x) *
silu(w2(x))), RMSNorm ln_f, lm_head. Up to seq_length it equals transformers' Qwen2ForCausalLM over the split
weights (checked below, so the reference is transformers' own computation there).

The pinned converter writes Qwen-1's RMSNorm epsilon under TextModel's LayerNorm key (qwen.attention.
layer_norm_epsilon, from layer_norm_epsilon), while llama.cpp's qwen requires qwen.attention.layer_norm_rms_epsilon:
llama.cpp refuses the converter's own file, and so the view's (its bytes are the converter's). The standard
logits test is therefore a strict xfail; the logits are measured with llama.cpp's own KV override
(llama_model_kv_override, llama-cli's --override-kv) supplying that one key at load, the file unchanged.

Qwen-VL and Qwen-Audio (qwen-vl, qwen-audio): the decoder with an encoder's config and tensors beside it
(transformer.visual.* / transformer.audio.*) and the release's tags in its tokenizer code. The converter drops the
encoder and writes the decoder with those tags; the view's bytes are its bytes. Over text alone their forward is
Qwen-1's, so the same reference serves.
"""
from __future__ import annotations

import ctypes
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

import oracle
from family_oracle import NMSE_BAR, OUTTYPES, PROMPT, check_export, nmse, reference_logits_test
from family_variants import assert_refused, variant
from hfview.runner.stream import ModelLoadError

FIXTURE = "qwen"
RMS_EPS_KEY = "qwen.attention.layer_norm_rms_epsilon"
_FIRST = "        super().__init__(**kwargs)  # first, as the release has it\n"
_LAST = '        self.im_end_id = self.special_tokens["<|im_end|>"]\n'


def restored(src: Path, root: Path) -> Path:
    """A copy of `src` (same directory name: general.name comes from it) whose tokenization_qwen.py calls
    PreTrainedTokenizer.__init__ last instead of first; nothing else differs."""
    dst = root / src.name
    if not dst.exists():
        shutil.copytree(src, dst)
        code = (dst / "tokenization_qwen.py").read_text(encoding="utf-8")
        assert code.count(_FIRST) == 1 and code.count(_LAST) == 1
        code = code.replace(_FIRST, "").replace(_LAST, _LAST + "        super().__init__(**kwargs)\n")
        (dst / "tokenization_qwen.py").write_text(code, encoding="utf-8")
    return dst


# Qwen-VL and Qwen-Audio: the decoder with an encoder beside it and the release's tags in its tokenizer code
WITH_ENCODERS = ["qwen-vl", "qwen-audio"]


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", [FIXTURE, *WITH_ENCODERS])
def test_export(name, outtype, checkpoint, tmp_path_factory, tmp_path, record_property):
    """hfview export of the fixture as released == the converter's file for the restored copy (sha256)."""
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "qwen")
    record_property("oracle", "bytes")
    src = checkpoint(name)
    theirs = oracle.convert_cached(restored(src, tmp_path_factory.getbasetemp() / "qwen-restored"), outtype)
    ours = export(HfCheckpoint(src, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


# ------------------------------------------------------------------------------------------ the reference
def qwen1_logits(path: Path, ids: list[int]) -> np.ndarray:
    """Qwen-1's forward (the release's modeling_qwen.py, inference, one sequence, no cache) in float32 from
    config.json and the stored tensors, composed from transformers' RMSNorm and rotary helpers."""
    import torch
    import torch.nn.functional as F
    from safetensors.torch import load_file
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm, rotate_half

    c = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    w = {k: v.to(torch.float32) for k, v in load_file(str(Path(path) / "model.safetensors")).items()}
    hidden, n_head, dim = c["hidden_size"], c["num_attention_heads"], c["kv_channels"]
    head = hidden // n_head
    n, seq = len(ids), c["seq_length"]

    def norm(x, weight):
        m = Qwen2RMSNorm(hidden, eps=c["layer_norm_epsilon"])
        m.weight.data = weight
        return m(x)

    # dynamic NTK: alpha from the whole length (1 up to seq_length), the base raised by alpha^(dim / (dim - 2))
    alpha = max(2 ** math.ceil(math.log(n / seq, 2) + 1) - 1, 1) if c.get("use_dynamic_ntk") else 1.0
    base = c["rotary_emb_base"] * alpha ** (dim / (dim - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    freqs = torch.outer(torch.arange(n, dtype=torch.float32), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]  # [n, 1, dim] against [n, heads, head]
    # logn: position i (1-based) past seq_length scales its query by log_seq(i)
    logn = torch.tensor([math.log(i, seq) if i > seq else 1.0 for i in range(1, n + 1)])[:, None, None]
    mask = torch.ones(n, n, dtype=torch.bool).tril()

    with torch.no_grad():
        x = w["transformer.wte.weight"][torch.tensor(ids)]
        for i in range(c["num_hidden_layers"]):
            p = f"transformer.h.{i}."
            h = norm(x, w[p + "ln_1.weight"])
            qkv = h @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]
            q, k, v = (t.reshape(n, n_head, head) for t in qkv.split(hidden, dim=-1))
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if c.get("use_logn_attn") and n > seq:
                q = q * logn
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))  # [heads, n, head]
            scores = (q @ k.transpose(-1, -2)) / head ** 0.5
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            a = (F.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(n, hidden)
            x = x + a @ w[p + "attn.c_proj.weight"].T
            h = norm(x, w[p + "ln_2.weight"])
            m = (h @ w[p + "mlp.w1.weight"].T) * F.silu(h @ w[p + "mlp.w2.weight"].T)
            x = x + m @ w[p + "mlp.c_proj.weight"].T
        x = norm(x, w["transformer.ln_f.weight"])
        return (x @ w["lm_head.weight"].T).numpy()


def qwen2_twin(src: Path, out: Path) -> Path:
    """The Qwen-1 checkpoint `src` as a Qwen2ForCausalLM checkpoint in `out` (same values, c_attn split)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Qwen2Config

    c = json.loads((src / "config.json").read_text(encoding="utf-8"))
    hidden = c["hidden_size"]
    Qwen2Config(vocab_size=c["vocab_size"], hidden_size=hidden, intermediate_size=c["intermediate_size"] // 2,
                num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
                num_key_value_heads=c["num_attention_heads"], max_position_embeddings=c["max_position_embeddings"],
                rms_norm_eps=c["layer_norm_epsilon"], tie_word_embeddings=False, use_sliding_window=False,
                rope_parameters={"rope_type": "default", "rope_theta": float(c["rotary_emb_base"])}).save_pretrained(out)
    renames = {"transformer.wte.": "model.embed_tokens.", "transformer.ln_f.": "model.norm.",
               "transformer.h.": "model.layers.", ".attn.c_proj.": ".self_attn.o_proj.",
               ".ln_1.": ".input_layernorm.", ".ln_2.": ".post_attention_layernorm.",
               ".mlp.w1.": ".mlp.up_proj.", ".mlp.w2.": ".mlp.gate_proj.", ".mlp.c_proj.": ".mlp.down_proj."}
    tensors = {}
    for name, t in load_file(str(src / "model.safetensors")).items():
        for old, new in renames.items():
            name = name.replace(old, new)
        if ".attn.c_attn." in name:
            base, wb = name.split(".attn.c_attn.")
            for part, value in zip("qkv", t.split(hidden)):
                tensors[f"{base}.self_attn.{part}_proj.{wb}"] = value.contiguous()
            continue
        tensors[name] = t
    save_file({k: v.to(torch.float32) for k, v in tensors.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    return out


def _ids(n: int, seed: int = 0) -> list[int]:
    return [int(i) for i in np.random.default_rng(seed).integers(0, 151643, n)]


def test_reference_is_qwen2_twin_up_to_seq_length(checkpoint, tmp_path):
    """Up to seq_length Qwen-1's forward is transformers' Qwen2ForCausalLM over the split weights: q/k/v biases,
    no c_proj bias, w2 the gate, one KV head per head, rope at rotary_emb_base over the whole head."""
    import torch
    from transformers import Qwen2ForCausalLM

    src = checkpoint(FIXTURE)
    twin = Qwen2ForCausalLM.from_pretrained(qwen2_twin(src, tmp_path / "twin"), dtype=torch.float32)
    ids = _ids(24)
    with torch.no_grad():
        theirs = twin(torch.tensor([ids])).logits[0].numpy()
    value = nmse(qwen1_logits(src, ids), theirs)
    print(f"Qwen-1 forward vs Qwen2ForCausalLM twin: NMSE {value:.3e}")
    assert value < 1e-10


def test_reference_moves(checkpoint, tmp_path):
    """The reference is causal (a later token leaves earlier logits alone), positions matter (the rope base
    changes the logits), and w1/w2 are not interchangeable (the gate is w2)."""
    src = checkpoint(FIXTURE)
    ids = _ids(12, seed=1)
    base = qwen1_logits(src, ids)
    changed = qwen1_logits(src, ids[:-1] + [(ids[-1] + 1) % 151643])
    assert np.array_equal(base[:-1], changed[:-1]) and nmse(changed[-1:], base[-1:]) > 1e-3
    other_base = qwen1_logits(variant(src, tmp_path / "base", rotary_emb_base=500), ids)
    assert nmse(other_base[1:], base[1:]) > 1e-3 and np.allclose(other_base[0], base[0], atol=1e-5)

    def swap(t):
        return {k.replace("mlp.w1.", "mlp.tmp.").replace("mlp.w2.", "mlp.w1.").replace("mlp.tmp.", "mlp.w2."): v
                for k, v in t.items()}
    from family_variants import weights_variant
    assert nmse(qwen1_logits(weights_variant(src, tmp_path / "swapped", swap), ids), base) > 1e-3


# ------------------------------------------------------------------------------------------ llama.cpp
def view_logits(path: Path, outtype: str, ids: list[int] | None = None, n_ctx: int = 64):
    """llama.cpp fed from the view (no file), loaded as hfview's runner loads it: with the family's load-time KV
    (the RMS epsilon the converter's file lacks) as an override; (ids, logits). ids default to llama.cpp's first
    16 tokens of the oracle prompt."""
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel, load_model

    with StreamModel(load_model(HfCheckpoint(path, outtype)), n_ctx=n_ctx) as m:
        ids = m.tokenize(PROMPT)[:16] if ids is None else ids
        assert len(ids) >= 16
        return ids, m.logits(ids)


# llama.cpp from the view vs Qwen-1's forward: the runner supplies the missing RMS epsilon at load (Family.load_kv).
# Qwen-VL's and Qwen-Audio's forward over text alone (no image or audio tag among the ids, so their encoder does not
# run: modeling_qwen.py consults it only where image_start_id / audio_info is present) is Qwen-1's over the decoder
test_logits = reference_logits_test("qwen", [FIXTURE, *WITH_ENCODERS], qwen1_logits, "Qwen-1's forward")


@pytest.mark.parametrize("name, start_key, start_tag, tags", [
    ("qwen-vl", "visual.image_start_id", "<img>", 9), ("qwen-audio", "audio.audio_start_id", "<audio>", 3314)])
def test_the_releases_tags_follow_qwens_special_tokens(name, start_key, start_tag, tags, checkpoint):
    """The view's tokens: Qwen's 208 special tokens from 151643, then the release's tags (CONTROL), then [PAD] holes;
    the start tag at the id the fixture's config states as the release does; no encoder tensor in the view."""
    from hfview import HfCheckpoint

    path = checkpoint(name)
    ckpt = HfCheckpoint(path, "f32")
    kv = {k.key: k.value for k in ckpt.kv}
    tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    key, field = start_key.split(".")
    first = 151643 + 208
    assert tokens[config[key][field]] == start_tag and tokens[151645] == "<|im_end|>"
    assert all(types[i] == 3 for i in range(151643, first + tags))  # CONTROL
    assert tokens[first + tags] == f"[PAD{first + tags}]" and len(tokens) == config["vocab_size"]
    assert not [t.name for t in ckpt.tensors if "visual" in t.name or "audio" in t.name]


def test_the_view_declares_the_rms_epsilon_llama_cpp_needs(checkpoint):
    """The file is the converter's (no layer_norm_rms_epsilon in it); the key llama.cpp requires comes as a load-time
    override of the config's value, and inspect / export name it as llama-cli's --override-kv."""
    from hfview import HfCheckpoint
    from hfview.inspect import describe, render

    path = checkpoint(FIXTURE)
    ckpt = HfCheckpoint(path, "f32")
    eps = json.loads((path / "config.json").read_text(encoding="utf-8"))["layer_norm_epsilon"]
    assert RMS_EPS_KEY not in {kv.key for kv in ckpt.kv}
    assert ckpt.load_kv == {RMS_EPS_KEY: eps}
    assert f"--override-kv {RMS_EPS_KEY}=float:{eps!r}" in render(describe(ckpt))


@pytest.mark.parametrize("data_path", ["memfd", "stream"])
def test_without_the_override_llama_cpp_refuses_the_view(checkpoint, data_path):
    """What the override does, on either data path (a memory file llama.cpp maps, or the FILE*): the view loads
    with it; the same view with no load-time KV fails in llama.cpp on the missing key."""
    from hfview import HfCheckpoint, memfile
    from hfview.runner.stream import load_model

    if data_path == "memfd" and not memfile.supported():
        pytest.skip("no memfd on this system")
    ckpt = HfCheckpoint(checkpoint(FIXTURE), "f32")
    with load_model(ckpt, data_path=data_path) as model:
        assert model.data_path == data_path
    ckpt.load_kv = {}
    with pytest.raises(ModelLoadError, match=RMS_EPS_KEY):
        load_model(ckpt, data_path=data_path)


def test_a_callers_override_wins_and_others_are_kept(checkpoint):
    """params that already carry overrides (llama_cpp.Llama's kv_overrides): a caller's value for the same key is
    kept over the family's, and a caller's other keys stay."""
    import llama_cpp.llama_cpp as ll
    from hfview import HfCheckpoint
    from hfview.runner.stream import _with_kv_overrides

    params = ll.llama_model_default_params()
    given = (ll.llama_model_kv_override * 3)()
    given[0].key, given[0].tag, given[0].value.val_f64 = RMS_EPS_KEY.encode(), ll.LLAMA_KV_OVERRIDE_TYPE_FLOAT, 0.5
    given[1].key, given[1].tag, given[1].value.val_i64 = b"qwen.context_length", ll.LLAMA_KV_OVERRIDE_TYPE_INT, 77
    params.kv_overrides = ctypes.cast(given, ctypes.POINTER(ll.llama_model_kv_override))
    ckpt = HfCheckpoint(checkpoint(FIXTURE), "f32")
    keep = _with_kv_overrides(params, ckpt.load_kv)
    got = [(o.key.decode(), o.tag) for o in keep][:-1]
    assert got == [(RMS_EPS_KEY, ll.LLAMA_KV_OVERRIDE_TYPE_FLOAT), ("qwen.context_length", ll.LLAMA_KV_OVERRIDE_TYPE_INT)]
    assert keep[0].value.val_f64 == 0.5 and keep[1].value.val_i64 == 77 and keep[2].key == b""


def test_generate_runs_qwen1(checkpoint):
    """hfview's runner over a Qwen-1 checkpoint loads (the override applied) and greedy-decodes Qwen-1's choices:
    each generated token is the argmax of Qwen-1's forward over the ids before it."""
    from hfview import runner

    path = checkpoint(FIXTURE)
    with runner.load(str(path), precision="f32", n_ctx=64) as r:
        ids = r.tokenize(PROMPT, add_special=False)[:8]
        out = r.run(ids=ids, max_tokens=4, temperature=0).tokens
    assert len(out) == 4
    ref = qwen1_logits(path, ids + out)
    assert list(ref[len(ids) - 1:-1].argmax(-1)) == out


def test_llama_cpp_refuses_the_converters_own_file(checkpoint, tmp_path_factory):
    """The ceiling: llama.cpp loading the converter's own file (restored copy, f32) fails on the missing key."""
    from hfview.runner.stream import load_model_from_path

    theirs = oracle.convert_cached(restored(checkpoint(FIXTURE), tmp_path_factory.getbasetemp() / "qwen-restored"),
                                   "f32")
    with pytest.raises(ModelLoadError, match=RMS_EPS_KEY):
        load_model_from_path(theirs)


# ------------------------------------------------------------------------------------------ long context
SHORT = 16  # seq_length of the variants below: the long-context switches act past 16 tokens


def test_long_context_switches_act_only_past_seq_length(checkpoint, tmp_path):
    """use_dynamic_ntk and use_logn_attn change nothing up to seq_length tokens and change every position past it
    (dynamic NTK's base follows the whole length), in Qwen-1's forward."""
    src = checkpoint(FIXTURE)
    on = variant(src, tmp_path / "on", seq_length=SHORT)
    off = variant(src, tmp_path / "off", seq_length=SHORT, use_dynamic_ntk=False, use_logn_attn=False)
    ids = _ids(40, seed=2)
    assert np.array_equal(qwen1_logits(on, ids[:SHORT]), qwen1_logits(off, ids[:SHORT]))
    long_on, long_off = qwen1_logits(on, ids), qwen1_logits(off, ids)
    assert nmse(long_on[1:SHORT], long_off[1:SHORT]) > 1e-3  # the NTK base, from the whole length
    assert nmse(long_on[SHORT:], long_off[SHORT:]) > 1e-3


def test_llama_cpp_matches_qwen1_up_to_seq_length(checkpoint, tmp_path):
    """At exactly seq_length tokens (switches on) llama.cpp from the view is Qwen-1's forward."""
    path = variant(checkpoint(FIXTURE), tmp_path / "short", seq_length=SHORT)
    ids, ours = view_logits(path, "f32", _ids(SHORT, seed=3))
    value = nmse(ours, qwen1_logits(path, ids))
    print(f"qwen f32, {SHORT} tokens = seq_length: NMSE {value:.3e} against Qwen-1's forward")
    assert value < NMSE_BAR


@pytest.mark.xfail(strict=True, reason="past seq_length Qwen-1 raises its rope base with the whole length (dynamic "
                                       "NTK) and scales its queries (logn); llama.cpp's qwen computes neither")
def test_llama_cpp_past_seq_length(checkpoint, tmp_path):
    path = variant(checkpoint(FIXTURE), tmp_path / "short", seq_length=SHORT)
    ids, ours = view_logits(path, "f32", _ids(40, seed=4))
    value = nmse(ours, qwen1_logits(path, ids))
    print(f"qwen f32, 40 tokens past seq_length {SHORT}: NMSE {value:.3e} against Qwen-1's forward")
    assert value < NMSE_BAR


def test_llama_cpp_past_seq_length_is_qwen1_without_the_switches(checkpoint, tmp_path):
    """What llama.cpp computes past seq_length: Qwen-1's forward with use_dynamic_ntk and use_logn_attn off."""
    src = checkpoint(FIXTURE)
    ids, ours = view_logits(variant(src, tmp_path / "short", seq_length=SHORT), "f32", _ids(40, seed=4))
    off = variant(src, tmp_path / "off", seq_length=SHORT, use_dynamic_ntk=False, use_logn_attn=False)
    value = nmse(ours, qwen1_logits(off, ids))
    print(f"qwen f32, 40 tokens past seq_length {SHORT}: NMSE {value:.3e} against Qwen-1's forward without the switches")
    assert value < NMSE_BAR


# ------------------------------------------------------------------------------------------ config
@pytest.mark.parametrize("changes, message", [
    (dict(kv_channels=8), "kv_channels 8"),
    (dict(rotary_pct=0.5), "rotary_pct 0.5"),
    (dict(no_bias=False), "no_bias False"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings True"),
    (dict(rope_theta=1000000), "rope_theta 1000000 and rotary_emb_base 10000 differ"),
    (dict(intermediate_size=175), "intermediate_size 175: odd"),
    (dict(scale_attn_weights=False), "scale_attn_weights"),
    (dict(use_cache_quantization=True), "use_cache_quantization"),
    (dict(visual={"heads": 16}, audio={"n_head": 20}), "both visual and audio are stated"),
    (dict(visual={"image_start_id": 151851}), r"visual.image_start_id 151851 is not 151857, the id of <img>"),
    (dict(audio={"audio_start_id": 151859}), r"audio.audio_start_id 151859 is not 155163, the id of <audio>"),
    (dict(visual=[448]), r"visual is \[448\]; expected an object"),
    (dict(seq_length=None), "seq_length is missing"),
    (dict(rotary_emb_base=None), "rotary_emb_base is missing"),
    (dict(intermediate_size=None, ffn_hidden_size=176), "ffn_hidden_size 176"),
    (dict(architectures=["QWenForCausalLM"]), "QWenForCausalLM"),
], ids=["kv_channels", "rotary_pct", "biases", "tied", "theta", "odd_ff", "unscaled", "kv_quant", "vl_and_audio",
        "image_start_id", "audio_start_id", "visual_null", "no_seq_length", "no_base", "first_release", "arch"])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint(FIXTURE), tmp_path, message, **changes)


def test_the_tokenizer_code_is_not_run(checkpoint, tmp_path):
    """A tokenization_qwen.py that would fail on import changes nothing for the view: hfview reads qwen.tiktoken."""
    from hfview import HfCheckpoint

    dst = tmp_path / "ck"
    shutil.copytree(checkpoint(FIXTURE), dst)
    (dst / "tokenization_qwen.py").write_text("raise SystemExit('checkpoint code was run')\n", encoding="utf-8")
    kv = {k.key: k.value for k in HfCheckpoint(dst, "f32").kv}
    assert kv["tokenizer.ggml.pre"] == "qwen2" and kv["tokenizer.ggml.tokens"][151645] == "<|im_end|>"
    assert kv["tokenizer.ggml.tokens"][151851] == "[PAD151851]" and kv["tokenizer.ggml.bos_token_id"] == 151643


def test_released_config_kv_carries_its_values():
    from released_config import DATA, config_path_kv
    kv = config_path_kv(DATA / "qwen" / "Qwen__Qwen-72B.json")
    assert kv["qwen.block_count"] == 80 and kv["qwen.embedding_length"] == 8192
    assert kv["qwen.attention.head_count"] == 64 and kv["qwen.feed_forward_length"] == 49152
    assert kv["qwen.context_length"] == 32768 and kv["qwen.rope.freq_base"] == 1000000.0

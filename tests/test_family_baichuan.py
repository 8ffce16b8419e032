"""Baichuan 1 and 2 (remote code -> llama.cpp baichuan through the converter's BaichuanModel).

* bytes oracle: `hfview export` == the converter's file, every outtype, on a 7B-style fixture (32 layers: llama.cpp's
  RoPE depth) and two 13B-style ones (40 layers: its ALiBi depth; Baichuan 1 and Baichuan 2). The pinned converter
  fails on every Baichuan checkpoint (see CONVERTER_FAILS): its failure is a strict xfail, and the bytes are
  proven against it with the one word restored;
* logits oracle: transformers 5.24 has no Baichuan class, so the reference is the release's forward composed from
  transformers' own modules in float32 (baichuan_logits below), from the stored safetensors and config.json alone.

What the reference follows, read from the release's remote code as its public copies state it (Baichuan-7B's
models/modeling_baichuan.py in github.com/baichuan-inc/Baichuan-7B; Baichuan2-7B-Base's and Baichuan2-13B-Chat's
modeling_baichuan.py as ipex-llm's models/baichuan2.py adapts them; vLLM's models/baichuan.py): W_pack's output is
q, k, v one after the other (hidden_size each); the 7B models rotate q and k in rotate-half halves (theta 10000,
head width hidden/heads); the 13B models add to q.k / sqrt(head width) an ALiBi bias slope_h * (key position)
(a constant per query row less than the usual relative form, which softmax ignores) with the slopes of
_get_interleave (the ALiBi paper's: powers of 2^(-8/n) for a power of two n, the odd ones of 2n interleaved for
the rest), which are BLOOM's build_alibi_tensor's; RMSNorms before attention and MLP, a SwiGLU MLP, a final RMSNorm;
the logits through lm_head, whose rows Baichuan 2 (vocab_size 125696) divides by their L2 norm first (NormHead).

Baichuan 2's NormHead: the converter writes lm_head's rows as stored, so llama.cpp, fed the converter's file,
misses the release's forward; that miss is measured (tests/converter_ceiling.py) and the view held to it. The view's
body is held to the ordinary bar against the same forward with the head as stored.
"""
import json

import numpy as np
import pytest

from converter_ceiling import GGUFFile, check_within_ceiling, llama_cpp_logits
from family_oracle import (NMSE_BAR, OUTTYPES, check_export, check_logits, nmse, oracle_tests,
                           reference_logits_test)
from family_variants import assert_refused, variant, weights_variant

FIXTURES = ["baichuan-7b", "baichuan-13b", "baichuan2-13b"]


def _interleave(n):
    """The release's _get_interleave(n), its ALiBi slopes, written out from its remote code for the check below."""
    import math

    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _interleave(2 * closest)[0::2][:n - closest]


def baichuan_logits(path, ids, *, scheme=None, norm_head=None):
    """Baichuan's forward (see the module docstring) over transformers 5.24's Llama RMSNorm, MLP, attention and
    rotary modules and BLOOM's ALiBi tensor, in float32. `scheme` ("rope", "alibi" or "none") and `norm_head`
    default to what the config says (hfview.families.baichuan.positions / is_baichuan2)."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.llama import modeling_llama as ml

    from hfview.families import baichuan

    cfg = json.loads((path / "config.json").read_text())
    scheme = scheme or baichuan.positions(cfg)
    norm_head = baichuan.is_baichuan2(cfg) if norm_head is None else norm_head
    w = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items()}
    hidden, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["rms_norm_eps"]
    lcfg = LlamaConfig(hidden_size=hidden, intermediate_size=cfg["intermediate_size"], num_attention_heads=heads,
                       num_key_value_heads=heads, num_hidden_layers=cfg["num_hidden_layers"], rms_norm_eps=eps,
                       hidden_act="silu", attention_bias=False, mlp_bias=False, max_position_embeddings=4096,
                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    lcfg._attn_implementation = "eager"
    n = len(ids)
    pos = torch.arange(n)
    causal = torch.zeros(n, n).masked_fill(pos[None, :] > pos[:, None], float("-inf"))[None, None]
    if scheme == "alibi":
        bias = build_alibi_tensor(torch.ones(1, n), heads, torch.float32).reshape(1, heads, 1, n)
        mask = causal + bias  # slope_h * key position, on every query row
    else:
        mask = causal
    if scheme == "rope":
        rope = ml.LlamaRotaryEmbedding(lcfg)(torch.zeros(1, n, hidden), pos[None])
    else:  # an identity rotation: cos 1, sin 0
        d = hidden // heads
        rope = (torch.ones(1, n, d), torch.zeros(1, n, d))

    def norm(name):
        m = ml.LlamaRMSNorm(hidden, eps=eps)
        m.load_state_dict({"weight": w[name]})
        return m.eval()

    layers = []
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        attn = ml.LlamaAttention(lcfg, layer_idx=i).eval()
        q, k, v = w[p + "self_attn.W_pack.weight"].split(hidden)
        attn.load_state_dict({"q_proj.weight": q, "k_proj.weight": k, "v_proj.weight": v,
                              "o_proj.weight": w[p + "self_attn.o_proj.weight"]})
        mlp = ml.LlamaMLP(lcfg).eval()
        mlp.load_state_dict({f"{x}_proj.weight": w[p + f"mlp.{x}_proj.weight"] for x in ("gate", "up", "down")})
        layers.append((norm(p + "input_layernorm.weight"), attn, norm(p + "post_attention_layernorm.weight"), mlp))
    head = w["lm_head.weight"]
    if norm_head:
        head = torch.nn.functional.normalize(head)
    with torch.no_grad():
        x = torch.nn.functional.embedding(torch.tensor([ids]), w["model.embed_tokens.weight"])
        for n1, attn, n2, mlp in layers:
            x = x + attn(n1(x), position_embeddings=rope, attention_mask=mask)[0]
            x = x + mlp(n2(x))
        return (norm("model.norm.weight")(x) @ head.T)[0].numpy()


def stored_head_logits(path, ids):
    """baichuan_logits with lm_head's rows as stored (as the converter writes them), NormHead or not."""
    return baichuan_logits(path, ids, norm_head=False)


LABEL = "Baichuan's forward composed from transformers' Llama and BLOOM modules"

# The pinned converter fails on every Baichuan checkpoint: BaichuanModel.modify_tensors hands each tensor other than
# W_pack back to itself (`self.modify_tensors(...)` where its base class's is meant), which recurses until Python's
# limit (RecursionError in gguf-py's tensor_mapping). Its own failure is a strict xfail; the bytes are proven against
# the same converter with that one word restored (`self.` -> `super().`), everything else as pinned.
_BROKEN = "yield from self.modify_tensors(data_torch, self.map_tensor_name(name), bid)"
_RESTORED = "yield from super().modify_tensors(data_torch, self.map_tensor_name(name), bid)"
CONVERTER_FAILS = ("the pinned converter's BaichuanModel.modify_tensors calls itself for every tensor but W_pack "
                   "(RecursionError); bytes are proven against it with super() restored")
test_export_pinned_converter_fails, _ = oracle_tests("baichuan", FIXTURES, export_xfail=CONVERTER_FAILS)


def _restored_root():
    """A copy of the pinned converter's tree (in the oracle's cache, outside the project) with the one word restored."""
    import shutil

    import oracle

    root = oracle.converter_root()
    out = oracle.CACHE / f"llama-cpp-python-{oracle.LLAMA_CPP_PYTHON}-baichuan-restored" / "llama.cpp"

    def make(tmp):
        shutil.copytree(root, tmp)
        module = tmp / "conversion" / "baichuan.py"
        text = module.read_text(encoding="utf-8")
        assert text.count(_BROKEN) == 1, "the pinned converter's BaichuanModel changed: revisit this restoration"
        module.write_text(text.replace(_BROKEN, _RESTORED), encoding="utf-8")
    return oracle.made_once(out, make)


def convert_restored(model_dir, outfile, outtype):
    """The restored converter run on `model_dir` (a fresh interpreter, as `python convert_hf_to_gguf.py` runs)."""
    import subprocess
    import sys

    import oracle

    root = _restored_root()
    proc = subprocess.run([sys.executable, str(root / "convert_hf_to_gguf.py"), str(model_dir), "--outfile",
                           str(outfile), "--outtype", outtype], cwd=root, env=oracle._converter_env(root),
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode:
        raise oracle.ConverterFailed(proc.stderr[-4000:])
    return outfile


@pytest.fixture(scope="session")
def restored(checkpoint):
    """restored(name, outtype) -> the restored converter's GGUF for fixture `name`, cached by the fixture's content
    (its directory name carries its digest)."""
    import oracle

    def get(name, outtype):
        ckpt = checkpoint(name)
        out = oracle.CACHE / "converted-baichuan-restored" / f"{ckpt.name}-{outtype}.gguf"
        return oracle.made_once(out, lambda tmp: convert_restored(ckpt, tmp, outtype))
    return get


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export(name, outtype, checkpoint, restored, tmp_path, record_property):
    record_property("family", "baichuan")
    record_property("oracle", "bytes")
    check_export(name, outtype, checkpoint, restored, tmp_path)
test_logits = reference_logits_test("baichuan", ["baichuan-7b"], baichuan_logits, LABEL,
                                    outtypes=["f32", "f16", "auto"])  # bf16: the ceiling test below
test_logits_alibi = reference_logits_test("baichuan", ["baichuan-13b"], baichuan_logits, LABEL)


def test_baichuan_7b_bf16_logits_within_the_converters_ceiling(checkpoint, restored, record_property):
    """--outtype bf16 of the float16-stored 7B-style fixture: 32 layers of bf16-rounded weights miss the float32
    forward past the bar in llama.cpp running the converter's own file too; the view's logits miss by no more."""
    record_property("family", "baichuan")
    record_property("oracle", "logits")
    check_within_ceiling("baichuan-7b", "bf16", checkpoint, restored, baichuan_logits)


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_baichuan2_logits_within_the_converters_normhead_ceiling(outtype, checkpoint, restored, record_property):
    """Against the release's forward (NormHead): llama.cpp fed the converter's file misses it (lm_head's rows as
    stored); the view's logits miss by no more."""
    record_property("family", "baichuan")
    record_property("oracle", "logits")
    check_within_ceiling("baichuan2-13b", outtype, checkpoint, restored, baichuan_logits)


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_baichuan2_alibi_body_meets_the_bar_with_the_stored_head(outtype, checkpoint, record_property):
    """The 13B-style body (ALiBi over 5 heads, 40 layers) against the release's forward with the head the converter
    writes: everything but the NormHead, at the ordinary bar."""
    record_property("family", "baichuan")
    record_property("oracle", "logits")
    check_logits("baichuan2-13b", outtype, checkpoint, reference=stored_head_logits,
                 against=LABEL + ", head as stored")


def test_reference_is_causal_and_its_positions_and_head_count(checkpoint):
    """The composition is causal; its RoPE, its ALiBi and Baichuan 2's NormHead each move the logits; its ALiBi
    slopes (BLOOM's) are the release's _get_interleave (a reference that cannot miss is none)."""
    import torch
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    ids = list(range(300, 316))
    for name, scheme in (("baichuan-7b", "rope"), ("baichuan-13b", "alibi"), ("baichuan2-13b", "alibi")):
        path = checkpoint(name)
        full = baichuan_logits(path, ids)
        assert np.allclose(baichuan_logits(path, ids[:8]), full[:8], atol=1e-4), name
        # the first position sees only itself: no scheme moves it; later ones do
        plain = baichuan_logits(path, ids, scheme="none")
        assert np.allclose(plain[0], full[0], atol=1e-4), name
        assert nmse(plain[1:], full[1:]) > 1e-3, f"{name}: {scheme} does not move the logits"
    path = checkpoint("baichuan2-13b")
    assert nmse(stored_head_logits(path, ids), baichuan_logits(path, ids)) > NMSE_BAR
    for n_head in (4, 5, 40):
        slopes = build_alibi_tensor(torch.ones(1, 2), n_head, torch.float32)[:, 0, 1].numpy()
        assert np.allclose(slopes, _interleave(n_head), rtol=1e-6), n_head


def test_normhead_ceiling_is_the_head_alone(checkpoint, restored):
    """The ceiling's cause: llama.cpp on the converter's file meets the bar against the stored-head forward and
    misses the NormHead one; normalising lm_head's rows is all that separates the two."""
    path = checkpoint("baichuan2-13b")
    ids, theirs = llama_cpp_logits(GGUFFile(restored("baichuan2-13b", "f32")))
    assert nmse(theirs, stored_head_logits(path, ids)) < NMSE_BAR
    ceiling = nmse(theirs, baichuan_logits(path, ids))
    print(f"baichuan2-13b f32: llama.cpp on the converter's file vs the release's NormHead forward: NMSE {ceiling:.3e}")
    assert ceiling > NMSE_BAR


def test_fixtures_build_byte_identical(checkpoint, builder, tmp_path):
    """The recipes are deterministic: a second build of each fixture equals the cached one, file for file."""
    import hashlib

    for name in FIXTURES:
        again = builder.build(name, tmp_path / name)
        for f in sorted(checkpoint(name).iterdir()):
            assert hashlib.sha256(f.read_bytes()).digest() == hashlib.sha256((again / f.name).read_bytes()).digest(), f


def test_baichuan2_is_told_by_vocab_size(checkpoint):
    """Baichuan 2 by vocab_size 125696 (its tokenizer's size; Baichuan 1's is 64000), whatever the class name."""
    from hfview.families.baichuan import is_baichuan2, positions

    b1 = json.loads((checkpoint("baichuan-7b") / "config.json").read_text())
    b2 = json.loads((checkpoint("baichuan2-13b") / "config.json").read_text())
    assert not is_baichuan2(b1) and is_baichuan2(b2)
    assert not is_baichuan2(dict(b2, vocab_size=64000))  # Baichuan-13B: the same class, Baichuan 1's vocabulary
    assert is_baichuan2(dict(b1, architectures=["BaichuanForCausalLM"], vocab_size=125696))  # Baichuan2-7B
    assert (positions(b1), positions(b2)) == ("rope", "alibi")


def test_w_pack_split_is_the_converters(checkpoint):
    """attn_q / attn_k are W_pack's first and second thirds in rotation pairs, attn_v its last third as stored."""
    from safetensors.torch import load_file

    from hfview import HfCheckpoint
    from hfview.views import rotation_pairs

    path = checkpoint("baichuan2-13b")
    w = load_file(str(path / "model.safetensors"))["model.layers.7.self_attn.W_pack.weight"].float().numpy()
    view = HfCheckpoint(path, "f32")
    q, k, v = np.split(w, 3)
    assert np.array_equal(view.read_tensor("blk.7.attn_q.weight"), q[rotation_pairs(80, 5)])
    assert np.array_equal(view.read_tensor("blk.7.attn_k.weight"), k[rotation_pairs(80, 5)])
    assert np.array_equal(view.read_tensor("blk.7.attn_v.weight"), v)


def _two_layers(src, dst):
    def keep(t):
        return {k: v for k, v in t.items()
                if not k.startswith("model.layers.") or int(k.split(".")[2]) < 2}
    out = weights_variant(src, dst / "w", keep)
    return variant(out, dst / "c", num_hidden_layers=2)


def test_a_layer_count_neither_32_nor_40_is_refused_and_would_run_without_positions(checkpoint, tmp_path):
    """llama.cpp's baichuan gives a depth other than 32 or 40 neither RoPE nor ALiBi. The view refuses it by name;
    the converter writes it, and llama.cpp then computes the forward without positions (matching the composition
    with none, and missing the one with the RoPE Baichuan-7B's code would apply)."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    small = _two_layers(checkpoint("baichuan-7b"), tmp_path)
    with pytest.raises(ConfigError, match="num_hidden_layers 2: llama.cpp's baichuan picks its positions"):
        HfCheckpoint(small)
    ids, ours = llama_cpp_logits(GGUFFile(convert_restored(small, tmp_path / "two.gguf", "f32")), list(range(300, 316)))
    assert nmse(ours, baichuan_logits(small, ids, scheme="none")) < NMSE_BAR
    assert nmse(ours, baichuan_logits(small, ids, scheme="rope")) > 1e-3


@pytest.mark.parametrize("change, match", [
    ({"num_hidden_layers": 40, "architectures": ["BaiChuanForCausalLM"]}, "BaiChuanForCausalLM"),
    ({"num_key_value_heads": 2}, "num_key_value_heads 2"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({"tie_word_embeddings": True}, "tie_word_embeddings"),
    ({"rms_norm_eps": None}, "'rms_norm_eps'"),
    ({"max_position_embeddings": None}, "no context length"),
    ({"rope_theta": 500000.0}, "rope_theta"),
    ({"rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling"),
])
def test_refusals(change, match, checkpoint, tmp_path):
    src = checkpoint("baichuan2-13b" if change.get("num_hidden_layers") == 40 else "baichuan-7b")
    assert_refused(src, tmp_path, match, **change)


def test_model_max_length_is_the_context_where_no_max_position_embeddings(checkpoint):
    from hfview import HfCheckpoint

    kv = {k.key: k.value for k in HfCheckpoint(checkpoint("baichuan2-13b"), "f32").kv}
    assert kv["baichuan.context_length"] == 4096 and kv["baichuan.block_count"] == 40
    assert kv["baichuan.rope.dimension_count"] == 16
    assert kv["baichuan.tensor_data_layout"] == "Meta AI original pth"


# Two Baichuan configs the search reached only as text, not as config.json files (hence FEWER in
# tests/test_released_configs.py): a Baichuan2-7B derivative's (TongGu-7B) as transformers printed it in a log kept in
# a GitHub repository (find_string id 3881833864), and a Baichuan-13B-based one (DISC-FinLLM) quoted in a document
# (find_string id 45597557903, its _name_or_path and AutoModelForCausalLM path left as quoted).
_TONGGU_7B = {
    "_from_model_config": True, "architectures": ["BaichuanForCausalLM"],
    "auto_map": {"AutoConfig": "configuration_baichuan.BaichuanConfig",
                 "AutoModel": "modeling_baichuan.BaichuanForCausalLM",
                 "AutoModelForCausalLM": "modeling_baichuan.BaichuanForCausalLM"},
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 11008, "max_position_embeddings": 4096, "model_max_length": 4096, "model_type": "baichuan",
    "num_attention_heads": 32, "num_hidden_layers": 32, "pad_token_id": 0, "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.52.3", "use_cache": False,
    "vocab_size": 125696, "z_loss_weight": 0,
}
_DISC_FINLLM = {
    "_from_model_config": True, "_name_or_path": "/export/.xhs/Baichuan2-13B-Chat",
    "architectures": ["BaichuanForCausalLM"],
    "auto_map": {"AutoConfig": "configuration_baichuan.BaichuanConfig",
                 "AutoModel": "modeling_baichuan.BaichuanForCausalLM",
                 "AutoModelForCausalLM": "/export/.xhs/Baichuan2-13B-Chat--modeling_baichuan.BaichuanForCausalLM"},
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02,
    "intermediate_size": 13696, "model_max_length": 4096, "model_type": "baichuan", "num_attention_heads": 40,
    "num_hidden_layers": 40, "pad_token_id": 0, "rms_norm_eps": 1e-06, "tie_word_embeddings": False,
    "torch_dtype": "float16", "transformers_version": "4.33.2", "use_cache": False, "vocab_size": 64000,
}


@pytest.mark.parametrize("config, scheme, baichuan2", [(_TONGGU_7B, "rope", True), (_DISC_FINLLM, "alibi", False)])
def test_quoted_configs_through_the_config_path(config, scheme, baichuan2, tmp_path):
    """Each quoted config passes the config path HfCheckpoint takes (gate, keys, values, family checks, KV)."""
    from released_config import config_path_kv

    from hfview.families.baichuan import is_baichuan2, positions

    d = tmp_path / "baichuan"
    d.mkdir()
    (d / "quoted.json").write_text(json.dumps(config), encoding="utf-8")
    kv = config_path_kv(d / "quoted.json")
    assert kv["baichuan.block_count"] == config["num_hidden_layers"]
    assert kv["baichuan.context_length"] == 4096
    assert kv["baichuan.rope.dimension_count"] == 128
    assert (positions(config), is_baichuan2(config)) == (scheme, baichuan2)

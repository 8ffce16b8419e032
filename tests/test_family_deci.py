"""Nemotron-NAS (DeciLMForCausalLM, model_type nemotron-nas, remote code; transformers 5.24 has no class):
converter bytes at every outtype, llama.cpp logits against transformers' Llama modules composed per layer as
the release's modeling code composes them, refusals of what llama.cpp's deci cannot run.

Logits oracle. Read: a modeling_decilm.py of the release's lineage (DeciLMDecoderLayer with DeciLMLinearAttention,
get_block_config, the release's "DeciLM-specific code" comments; the search index's file id 40716953308, its
repository not named by the index), a PyTorch port of the release's model (AttentionConfig / FFNConfig / BlockConfig,
_ffn_mult_to_intermediate_size; id 53107669424), a copy of DeciLMLinearAttention ("matches HF checkpoint key
self_attn.linear_attn"; id 52388203514), the pinned converter's conversion/deci.py and llama.cpp's
src/models/deci.cpp; the same composition as vLLM's and SGLang's nemotron_nas.py (which import LlamaAttention and
LlamaMLP). Per layer: if the attention is replaced with a linear layer, x = x + W(input_layernorm(x)) (LinearSubblockReplacement,
one hidden x hidden matrix); else if it is not no_op, x = x + Attention(input_layernorm(x)) with num_attention_heads //
n_heads_in_group KV heads, head width hidden / heads, rope over the whole head (Llama 3 scaling from
rope_scaling); if the FFN is not no_op, x = x + MLP(post_attention_layernorm(x)), a SwiGLU of width
round_up(int(2 * ffn_mult * hidden / 3), 256); then model.norm and lm_head. So the reference is transformers
5.24's LlamaAttention / LlamaMLP / LlamaRMSNorm / LlamaRotaryEmbedding, each built from a LlamaConfig with that
layer's KV-head count or FFN width, over the fixture's weights in float32 (below).
"""
import copy
import json

import pytest

import oracle
from family_oracle import OUTTYPES, oracle_tests, reference_logits_test
from family_variants import assert_refused

FIXTURES = ["deci", "deci-plain-rope"]
# Measured: on every config laid out as the releases are (rope_scaling llama3), the pinned converter dies in
# AutoTokenizer.from_pretrained, which reads config.json through transformers' bare PreTrainedConfig (no class for
# nemotron-nas); its rope standardisation evaluates self.max_position_embeddings before that attribute exists.
CONVERTER_FAILS = ("transformers 5.24's AutoTokenizer reads a nemotron-nas config.json (llama3 rope_scaling) "
                   "through the bare PreTrainedConfig and fails: AttributeError 'max_position_embeddings'")
# (one outtype: it fails before writing anything, whatever the outtype)
test_export_as_released, _ = oracle_tests("deci", ["deci"], outtypes=["f32"], export_xfail=CONVERTER_FAILS)
# plain rope: the converter reads it directly, so its own file is the bytes oracle with no variant
test_export_plain_rope, _ = oracle_tests("deci", ["deci-plain-rope"])


def converter_reading_llama3_in_capitals(model_dir, outtype, tmp_path):
    """The pinned converter's file for `model_dir` had AutoTokenizer not failed: the same checkpoint (same directory
    name, so the same general.name) with rope_scaling.rope_type "LLAMA3". transformers' rope standardisation
    matches "llama3" case-sensitively and so leaves it alone; DeciModel compares rope_type.lower() with "llama3"
    and is the only reader of it on this path (no scaling keys are written), so it writes the same file."""
    copy = tmp_path / "variant" / model_dir.name
    copy.mkdir(parents=True)
    for f in model_dir.iterdir():
        if f.name != "config.json":
            (copy / f.name).symlink_to(f)
    cfg = json.loads((model_dir / "config.json").read_text())
    assert cfg["rope_scaling"]["rope_type"] == "llama3", "only llama3 needs the variant"
    cfg["rope_scaling"]["rope_type"] = "LLAMA3"
    (copy / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    return oracle.convert_cached(copy, outtype)


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", ["deci"])
def test_export(name, outtype, checkpoint, tmp_path, record_property):
    """Bytes oracle: the view's file == the converter's on the same weights with llama3 spelled LLAMA3 (above)."""
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "deci")
    record_property("oracle", "bytes")
    theirs = converter_reading_llama3_in_capitals(checkpoint(name), outtype, tmp_path)
    ours = export(HfCheckpoint(checkpoint(name), outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def _llama_config(cfg, **changes):
    import transformers
    keep = ("vocab_size", "hidden_size", "num_attention_heads", "max_position_embeddings", "rms_norm_eps",
            "hidden_act", "attention_bias", "mlp_bias", "rope_theta", "rope_scaling", "tie_word_embeddings")
    c = transformers.LlamaConfig(**{k: copy.deepcopy(cfg[k]) for k in keep if k in cfg},
                                 num_hidden_layers=cfg["num_hidden_layers"], **changes)
    c._attn_implementation = "sdpa"
    return c


def block_composed_llama_logits(path, ids):
    """Nemotron-NAS's forward, as its modeling code computes it, over transformers' Llama modules."""
    import torch
    from safetensors.torch import load_file
    from transformers.models.llama import modeling_llama as ml

    cfg = json.loads((path / "config.json").read_text())
    weights = {k: v.float() for k, v in load_file(path / "model.safetensors").items()}
    heads, hidden = cfg["num_attention_heads"], cfg["hidden_size"]
    base = _llama_config(cfg, num_key_value_heads=heads, intermediate_size=256)

    def loaded(module, prefix):
        module.load_state_dict({k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)})
        return module.eval()

    layers = []
    for i, block in enumerate(cfg["block_configs"]):
        p = f"model.layers.{i}."
        attn = mlp = None
        if block["attention"]["replace_with_linear"]:  # x + W(input_layernorm(x)): the release's linear attention
            attn = (loaded(ml.LlamaRMSNorm(hidden, eps=cfg["rms_norm_eps"]), p + "input_layernorm."),
                    lambda y, w=weights[p + "self_attn.linear_attn.weight"], **kwargs: (y @ w.T,))
        elif not block["attention"]["no_op"]:
            c = _llama_config(cfg, num_key_value_heads=heads // block["attention"]["n_heads_in_group"])
            attn = (loaded(ml.LlamaRMSNorm(hidden, eps=cfg["rms_norm_eps"]), p + "input_layernorm."),
                    loaded(ml.LlamaAttention(c, layer_idx=i), p + "self_attn."))
        if not block["ffn"]["no_op"]:
            width = int(2 * block["ffn"]["ffn_mult"] * hidden / 3)
            width += -width % 256
            c = _llama_config(cfg, intermediate_size=width)
            mlp = (loaded(ml.LlamaRMSNorm(hidden, eps=cfg["rms_norm_eps"]), p + "post_attention_layernorm."),
                   loaded(ml.LlamaMLP(c), p + "mlp."))
        layers.append((attn, mlp))
    rotary = ml.LlamaRotaryEmbedding(base)
    norm = loaded(ml.LlamaRMSNorm(hidden, eps=cfg["rms_norm_eps"]), "model.norm.")
    with torch.no_grad():
        x = torch.nn.functional.embedding(torch.tensor([ids]), weights["model.embed_tokens.weight"])
        position = rotary(x, torch.arange(len(ids))[None])
        for attn, mlp in layers:
            if attn is not None:
                x = x + attn[1](attn[0](x), position_embeddings=position, attention_mask=None)[0]
            if mlp is not None:
                x = x + mlp[1](mlp[0](x))
        return (norm(x) @ weights["lm_head.weight"].T)[0].numpy()


test_logits = reference_logits_test("deci", FIXTURES, block_composed_llama_logits,
                                    "transformers' Llama modules composed per block config")


def test_reference_is_causal_and_per_block(checkpoint, tmp_path):
    """The composition is causal (a later token leaves earlier logits alone) and the block configs matter."""
    import numpy as np

    path = checkpoint("deci")
    ids = list(range(1000, 1016))
    full = block_composed_llama_logits(path, ids)
    assert np.allclose(block_composed_llama_logits(path, ids[:8]), full[:8], atol=1e-4)
    # the linear attention (layer 2) counts: the reference without it misses
    from family_oracle import nmse
    from family_variants import variant
    without = variant(path, tmp_path / "no-linear",
                      block_configs=_blocks(path, 2, "attention", no_op=True, replace_with_linear=False))
    assert nmse(block_composed_llama_logits(without, ids), full) > 1e-3


def test_kv_states_the_blocks(checkpoint):
    from hfview.config import read_as, read_config
    from hfview.families.deci import FAMILY

    path = checkpoint("deci") / "config.json"
    h = read_as(FAMILY, read_config(path), path)
    kv = {p.key: p.value for p in FAMILY.parameters(h, 5, 0)}
    assert kv["deci.attention.head_count_kv"] == [2, 0, 0, 0, 1]
    assert kv["deci.attention.head_count"] == [4, 0, 4, 0, 4]  # the linear layer: all heads, no KV heads
    assert kv["deci.feed_forward_length"] == [256, 512, 256, 0, 256]
    assert kv["deci.attention.key_length"] == kv["deci.rope.dimension_count"] == 8


def test_transformers_has_no_nemotron_nas_class():
    """The converter reads config.json as written only because AutoConfig cannot read it."""
    pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    assert "nemotron-nas" not in CONFIG_MAPPING


def _blocks(path, layer, part, **values):
    blocks = json.loads((path / "config.json").read_text())["block_configs"]
    blocks[layer][part].update(values)
    return blocks


@pytest.mark.parametrize("layer, part, values, message", [
    (4, "ffn", dict(ffn_mult=None, no_op=True), r"attention without an FFN .* dropped"),
    (2, "ffn", dict(ffn_mult=None, no_op=True), r"attention without an FFN .* dropped"),
    (0, "attention", dict(n_heads_in_group=None, no_op=True, replace_with_linear=True),
     "no_op and replace_with_linear both true"),
    (0, "attention", dict(replace_with_linear=True), "with n_heads_in_group 2"),
    (0, "ffn", dict(ffn_mult=None, replace_with_linear=True), "ffn.replace_with_linear is true.*width 0"),
    (0, "attention", dict(window_length=4), "window_length is 4"),
    (0, "attention", dict(num_sink_tokens=2), "num_sink_tokens is 2"),
    (0, "ffn", dict(sparsify=["ffn"]), "sparsify"),
    (0, "attention", dict(n_heads_in_group=3), "n_heads_in_group 3 does not divide"),
    (0, "attention", dict(no_op=True), "no_op True / replace_with_linear False with n_heads_in_group 2"),
    (1, "ffn", dict(no_op=True), "no_op True with ffn_mult 14.0"),
    (0, "attention", dict(mystery=1), "mystery"),
    (0, "attention", dict(n_heads_in_group=None, no_op=True), r"block_configs\[0\] has no attention"),
])
def test_refused_block(layer, part, values, message, checkpoint, tmp_path):
    path = checkpoint("deci")
    assert_refused(path, tmp_path, message, block_configs=_blocks(path, layer, part, **values))


@pytest.mark.parametrize("changes, message", [
    (dict(num_hidden_layers=3), "block_configs lists 5 layers"),
    (dict(attention_bias=True), "attention_bias True"),
    (dict(mlp_bias=True), "mlp_bias True"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(head_dim=16), "head_dim 16"),
    (dict(rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}),
     "rope_type 'yarn'"),
    (dict(vocab_size=32000), "vocab_size 32000"),
    (dict(block_configs=None), "block_configs"),
    (dict(architectures=["DeciLMForSequenceClassification"]), "architectures"),
    (dict(num_key_value_heads=8), "num_key_value_heads"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("deci"), tmp_path, message, **changes)


def test_a_layer_storing_a_half_its_block_config_lacks_is_refused(checkpoint, tmp_path):
    """Layer 1 is attention-free: a block config giving it attention names the missing tensor."""
    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError
    from family_variants import variant

    path = checkpoint("deci")
    blocks = _blocks(path, 1, "attention", n_heads_in_group=2, no_op=False)
    with pytest.raises(CheckpointError, match=r"model.layers.1.input_layernorm.weight.*lacks it"):
        HfCheckpoint(variant(path, tmp_path / "v", block_configs=blocks))
    # layer 2's linear attention read as grouped: its q_proj is missing
    blocks = _blocks(path, 2, "attention", n_heads_in_group=2, replace_with_linear=False)
    with pytest.raises(CheckpointError, match=r"model.layers.2.self_attn.k_proj.weight.*lacks it"):
        HfCheckpoint(variant(path, tmp_path / "w", block_configs=blocks))

"""ChatGLM2/3 and GLM-4-9B in their own layout (ChatGLMModel, remote code -> llama.cpp chatglm).

transformers has no ChatGLM class. Logits oracle: GLM-4-9B-chat's modeling code (modeling_chatglm.py) computes
transformers' GlmForCausalLM: RMSNorm before attention and MLP, q/k/v with biases from one query_key_value
(split q | k | v, KV groups shared by consecutive query heads as repeat_kv does), rotary over the first half of
each head in interleaved pairs with base 10000 x rope_ratio (RotaryEmbedding(kv_channels // 2): the same
frequencies as Glm's partial_rotary_factor 0.5), SwiGLU over dense_h_to_4h's chunk(2) (gate first, as Glm's
gate_up_proj), no biases elsewhere, a final RMSNorm and an untied output_layer. Query-key layer scaling divides
by the layer number and multiplies back before the softmax. So a Glm twin of the fixture (query_key_value split,
tensors renamed, the same config) run by transformers is the reference for llama.cpp fed from the view.
"""
import json

import pytest

from family_oracle import oracle_tests, twin_logits_test
from family_variants import assert_refused

FIXTURES = ["chatglm", "chatglm3"]
test_export, _ = oracle_tests("chatglm", FIXTURES)


def glm_twin(src, out):
    """The ChatGLM checkpoint `src` as a GlmForCausalLM checkpoint in `out` (same values)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import GlmConfig

    c = json.loads((src / "config.json").read_text())
    n_head, n_kv, hidden = c["num_attention_heads"], c["multi_query_group_num"], c["hidden_size"]
    head = c["kv_channels"]
    GlmConfig(vocab_size=c["padded_vocab_size"], hidden_size=hidden, intermediate_size=c["ffn_hidden_size"],
              num_hidden_layers=c["num_layers"], num_attention_heads=n_head, num_key_value_heads=n_kv,
              head_dim=head, rms_norm_eps=c["layernorm_epsilon"], attention_bias=True, tie_word_embeddings=False,
              max_position_embeddings=c["seq_length"], pad_token_id=c["pad_token_id"],
              eos_token_id=c["eos_token_id"],
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0 * c.get("rope_ratio", 1),
                               "partial_rotary_factor": 0.5}).save_pretrained(out)
    renames = {"transformer.embedding.word_embeddings.": "model.embed_tokens.",
               "transformer.encoder.final_layernorm.": "model.norm.", "transformer.output_layer.": "lm_head.",
               "transformer.encoder.layers.": "model.layers.", ".self_attention.dense.": ".self_attn.o_proj.",
               ".mlp.dense_h_to_4h.": ".mlp.gate_up_proj.", ".mlp.dense_4h_to_h.": ".mlp.down_proj."}
    tensors = {}
    for name, t in load_file(src / "model.safetensors").items():
        if name.endswith("rotary_pos_emb.inv_freq"):
            continue
        for old, new in renames.items():
            name = name.replace(old, new)
        if ".self_attention.query_key_value." in name:
            base, wb = name.split(".self_attention.query_key_value.")
            q, k, v = torch.split(t, [n_head * head, n_kv * head, n_kv * head])
            for part, value in zip("qkv", (q, k, v)):
                tensors[f"{base}.self_attn.{part}_proj.{wb}"] = value.contiguous()
            continue
        tensors[name] = t
    save_file({k: v.to(torch.float32) for k, v in tensors.items()}, out / "model.safetensors",
              metadata={"format": "pt"})
    return out


test_logits = twin_logits_test("chatglm", FIXTURES, glm_twin, "Glm")


def test_inv_freq_buffer_dropped_and_qkv_kept_fused(checkpoint):
    from hfview import HfCheckpoint
    names = {t.name for t in HfCheckpoint(checkpoint("chatglm"), "f32").tensors}
    assert "blk.0.attn_qkv.weight" in names and "blk.0.attn_qkv.bias" in names
    assert not any("rotary" in n or "inv_freq" in n for n in names)


@pytest.mark.parametrize("changes, message", [
    (dict(rmsnorm=False), "rmsnorm"),
    (dict(add_bias_linear=True), "add_bias_linear"),
    (dict(post_layer_norm=False), "post_layer_norm"),
    (dict(apply_residual_connection_post_layernorm=True), "apply_residual_connection_post_layernorm"),
    (dict(multi_query_attention=False), "multi_query_attention"),
    (dict(quantization_bit=4), "quantization_bit"),
    (dict(pre_seq_len=128), "pre_seq_len"),
    (dict(kv_channels=32), "kv_channels 32"),
    (dict(num_hidden_layers=3), "num_hidden_layers 3 != num_layers 2"),
    (dict(vocab_size=None), "vocab_size is missing"),
    # the first ChatGLM-6B (2-D positions, GELU, LayerNorm): its keys are none the family knows
    (dict(position_encoding_2d=True), "position_encoding_2d"),
    (dict(partial_rotary_factor=0.25), "partial_rotary_factor"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("chatglm"), tmp_path, message, **changes)


def test_tiktoken_only_directory_refused(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.tokenizer.errors import TokenizerError

    src = checkpoint("chatglm")
    dst = tmp_path / "no-tokenizer-json"
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "tokenizer.json":
            (dst / f.name).symlink_to(f)
    with pytest.raises(TokenizerError, match="tokenizer.json is missing"):
        HfCheckpoint(dst)


def test_chatglm3_vocabulary_numbers_specials_after_the_pieces(checkpoint):
    """ChatGLM3's SentencePiece path: the pieces (ids 0-2 renamed), its nine specials as control tokens right after
    them, and [PAD<id>] up to padded_vocab_size, as set_vocab_chatglm3 writes them (the bytes oracle compares the
    whole file; this names what a wrong numbering would break)."""
    import sentencepiece

    from hfview import HfCheckpoint
    from hfview.tokenizer.vocab import CHATGLM3_SPECIALS, CONTROL, UNUSED

    src = checkpoint("chatglm3")
    kv = {k.key: k.value for k in HfCheckpoint(src, "f32").kv}
    n = sentencepiece.SentencePieceProcessor(model_file=str(src / "tokenizer.model")).vocab_size()
    tokens, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    assert kv["tokenizer.ggml.model"] == "llama" and kv["tokenizer.ggml.pre"] == "chatglm-spm"
    assert len(tokens) == json.loads((src / "config.json").read_text())["padded_vocab_size"]
    assert tokens[:3] == ["<unk>", "<bos>", "<eos>"]
    assert tuple(tokens[n:n + len(CHATGLM3_SPECIALS)]) == CHATGLM3_SPECIALS
    assert set(types[n:n + len(CHATGLM3_SPECIALS)]) == {CONTROL}
    assert tokens[-1] == f"[PAD{len(tokens) - 1}]" and types[-1] == UNUSED


def test_chatglm3_needs_its_tokenizer_model(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.tokenizer.errors import TokenizerError

    src = checkpoint("chatglm3")
    dst = tmp_path / "no-tokenizer-model"
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "tokenizer.model":
            (dst / f.name).symlink_to(f)
    with pytest.raises(TokenizerError, match="tokenizer.model is missing"):
        HfCheckpoint(dst)


def test_chatglm3_padded_vocab_size_must_hold_the_specials(checkpoint, tmp_path):
    from family_variants import variant

    from hfview import HfCheckpoint
    from hfview.tokenizer.errors import TokenizerError

    with pytest.raises(TokenizerError, match="padded_vocab_size 32005 must be at least the 32000 pieces"):
        HfCheckpoint(variant(checkpoint("chatglm3"), tmp_path / "v", padded_vocab_size=32005))

"""CodeShell (CodeShellForCausalLM, remote code -> llama.cpp codeshell).

transformers has no CodeShell class. Logits oracle: CodeShell's modeling code (modeling_codeshell.py, read in the
release's own repository, github.com/WisdomShell/codeshell model/, commit d86d64ca, and in an earlier copy whose
non-grouped c_attn interleaves per head, hence group_query_attention is refused off) computes transformers'
Starcoder2ForCausalLM: LayerNorms with weight and bias before
attention and MLP and at the end, c_attn split as q (n_embd rows) | k | v (num_query_groups heads each) when
group_query_attention is set, k and v repeat_interleave'd over consecutive query heads (repeat_kv), Llama's
rotate-half rotary over the whole head at base 10000 (no scaling when rope_scaling is null), scores scaled by
1/sqrt(head width) (the fp32 softmax's layer-number scale is divided out and multiplied back), c_proj with bias,
an MLP c_fc -> gelu_pytorch_tanh -> c_proj with biases, no embedding scale, an untied lm_head. So a Starcoder2
twin of the fixture (c_attn split, tensors renamed, the same config) run by transformers is the reference for
llama.cpp fed from the view.
"""
import json

import pytest

from family_oracle import oracle_tests, twin_logits_test
from family_variants import assert_refused

test_export, _ = oracle_tests("codeshell", ["codeshell"])


def starcoder2_twin(src, out):
    """The CodeShell checkpoint `src` as a Starcoder2ForCausalLM checkpoint in `out` (same values)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import Starcoder2Config

    c = json.loads((src / "config.json").read_text())
    n_embd, n_head, groups = c["n_embd"], c["n_head"], c["num_query_groups"]
    head = n_embd // n_head
    Starcoder2Config(vocab_size=c["vocab_size"], hidden_size=n_embd, intermediate_size=c["n_inner"] or 4 * n_embd,
                     num_hidden_layers=c["n_layer"], num_attention_heads=n_head, num_key_value_heads=groups,
                     max_position_embeddings=c["n_positions"], norm_epsilon=c["layer_norm_epsilon"], use_bias=True,
                     hidden_act=c["activation_function"], sliding_window=None, tie_word_embeddings=False,
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0}).save_pretrained(out)
    renames = {"transformer.wte.": "model.embed_tokens.", "transformer.ln_f.": "model.norm.",
               "transformer.h.": "model.layers.", ".attn.c_proj.": ".self_attn.o_proj.",
               ".ln_1.": ".input_layernorm.", ".ln_2.": ".post_attention_layernorm."}
    tensors = {}
    for name, t in load_file(src / "model.safetensors").items():
        for old, new in renames.items():
            name = name.replace(old, new)
        if ".attn.c_attn." in name:
            base, wb = name.split(".attn.c_attn.")
            for part, value in zip("qkv", torch.split(t, [n_embd, groups * head, groups * head])):
                tensors[f"{base}.self_attn.{part}_proj.{wb}"] = value.contiguous()
            continue
        tensors[name] = t
    save_file({k: v.to(torch.float32) for k, v in tensors.items()}, out / "model.safetensors",
              metadata={"format": "pt"})
    return out


test_logits = twin_logits_test("codeshell", ["codeshell"], starcoder2_twin, "Starcoder2")


@pytest.mark.parametrize("changes, message", [
    (dict(group_query_attention=False), "group_query_attention"),  # c_attn interleaved per head: another layout
    (dict(position_embedding_type="learned_absolute"), "position_embedding_type"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "rope_scaling"),  # the converter writes factor 1
    (dict(activation_function="gelu"), "activation_function"),
    (dict(scale_attn_weights=False), "scale_attn_weights"),
    (dict(n_inner=128), "n_inner 128"),
    (dict(num_query_groups=3), "num_query_groups 3"),
    (dict(n_positions=None), "n_positions is missing"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("codeshell"), tmp_path, message, **changes)


def test_released_config_kv_carries_its_values():
    from released_config import DATA, config_path_kv
    kv = config_path_kv(DATA / "codeshell" / "WisdomShell__CodeShell-7B.json")
    assert kv["codeshell.block_count"] == 42 and kv["codeshell.embedding_length"] == 4096
    assert kv["codeshell.attention.head_count"] == 32 and kv["codeshell.attention.head_count_kv"] == 8
    assert kv["codeshell.context_length"] == 8192 and kv["codeshell.feed_forward_length"] == 16384

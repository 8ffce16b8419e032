"""Nemotron-H Puzzle (NemotronHPuzzleForCausalLM, model_type nemotron_h_puzzle, remote code; transformers 5.24 has no
class): converter bytes at every outtype, llama.cpp logits against transformers' Nemotron-H modules composed per
layer as the Puzzle's modeling code composes them, refusals of what llama.cpp's nemotron_h_moe cannot run.

Logits oracle. A Puzzle is Nemotron-H whose config lists its layers in block_configs: the pinned converter's
NemotronHPuzzleModel (conversion/nemotron.py) takes the layer kinds from each block's block_type and writes each
mixture block's moe_intermediate_size and num_experts_per_tok per layer, everything else (the expert count, the
shared expert's width, the latent width, routing) from the top level; llama.cpp's nemotron_h_moe
(src/models/nemotron-h.cpp, "Puzzle models set a different expert FFN size per layer") builds each layer's experts
at its width and routes its top-k. The releases' modeling_nemotron_h_puzzle.py was not found in the search index;
what was read of the family besides the converter says the same (Megatron-Bridge's NemotronHPuzzleBridge tests:
"Puzzle keeps num_moe_experts and moe_shared_expert_intermediate_size constant across MoE layers", the per-layer
overrides being moe_ffn_hidden_size and moe_router_topk only; vLLM's model registry and an SGLang-style model file
serving NemotronHPuzzleForCausalLM with their Nemotron-H model class): each layer is transformers' NemotronHBlock of
a NemotronHConfig that carries that block's expert width and top-k. So the reference is transformers 5.24's NemotronHForCausalLM built at
the top level's config, each mixture layer's mixer rebuilt as NemotronHMoE from a config with its block's
moe_intermediate_size and num_experts_per_tok, over the fixture's weights in float32 (the MTP head left out, as
the converter leaves it).

Released configs: none is in the search index (the Puzzle checkpoints are on the Hugging Face hub only, and no
repository indexed carries a byte copy of their config.json), so no released-config test stands here.
"""
import copy
import json

import pytest

import oracle
from family_oracle import nmse, oracle_tests, reference_logits_test
from family_variants import DROP, assert_refused, variant

FIXTURES = ["nemotron_h_puzzle", "nemotron_h_puzzle-backbone"]
test_export, _ = oracle_tests("nemotron_h_puzzle", FIXTURES)
_KIND = {"mamba": "linear_attention", "attention": "full_attention", "moe": "moe"}
_PUZZLE_KEYS = ("architectures", "auto_map", "model_type", "block_configs", "mtp_block_configs",
                "hybrid_override_pattern", "mtp_hybrid_override_pattern", "num_nextn_predict_layers", "norm_eps")


def composed_nemotron_h(path, per_block=True):
    """transformers' NemotronHForCausalLM with each mixture layer's NemotronHMoE built at its block's expert width
    and top-k (per_block False: every layer at the first mixture block's, to show the per-layer values matter)."""
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMoE

    cfg = json.loads((path / "config.json").read_text())
    blocks = cfg["block_configs"]
    moe = [b for b in blocks if b["block_type"] == "moe"]
    base = {k: v for k, v in cfg.items() if k not in _PUZZLE_KEYS}
    base.update(layers_block_type=[_KIND[b["block_type"]] for b in blocks], num_hidden_layers=len(blocks),
                moe_intermediate_size=moe[0]["moe_intermediate_size"], num_experts_per_tok=moe[0]["num_experts_per_tok"])
    config = transformers.NemotronHConfig(**base)
    model = transformers.NemotronHForCausalLM(config)
    for i, block in enumerate(blocks):
        if block["block_type"] == "moe" and per_block:
            layer_config = copy.deepcopy(config)
            layer_config.moe_intermediate_size = block["moe_intermediate_size"]
            layer_config.num_experts_per_tok = block["num_experts_per_tok"]
            model.model.layers[i].mixer = NemotronHMoE(layer_config, layer_idx=i)
    stored = {k: v.float() for k, v in load_file(str(path / "model.safetensors")).items() if not k.startswith("mtp.")}
    state = {}
    for name, value in stored.items():
        name = "model." + name[len("backbone."):] if name.startswith("backbone.") else name
        if ".experts." in name:  # experts.{x}.up_proj.weight -> experts.up_proj[x]
            head, x, rest = name.rsplit(".", 3)[0], int(name.split(".")[-3]), name.split(".")[-2]
            state.setdefault(f"{head}.{rest}", {})[x] = value
        else:
            state[name] = value
    for key, parts in list(state.items()):
        if isinstance(parts, dict):
            state[key] = torch.stack([parts[x] for x in range(len(parts))])
    if not per_block:  # the narrower experts padded with zero rows / columns: the top-k alone then differs
        for key in list(state):
            want = model.state_dict()[key].shape
            if state[key].shape != want:
                padded = torch.zeros(want)
                padded[tuple(slice(0, d) for d in state[key].shape)] = state[key]
                state[key] = padded
    model.load_state_dict(state, strict=True)
    return model.float().eval()


def puzzle_logits(path, ids):
    import torch
    with torch.no_grad():
        return composed_nemotron_h(path)(torch.tensor([ids]), use_cache=False).logits[0].float().numpy()


test_logits = reference_logits_test("nemotron_h_puzzle", FIXTURES, puzzle_logits,
                                    "transformers' Nemotron-H modules built per block")


def test_the_per_block_values_change_the_function(checkpoint):
    """The reference is not one Nemotron-H config over every layer: the per-layer top-k shows in the logits."""
    import torch
    path = checkpoint("nemotron_h_puzzle-backbone")
    ids = list(range(5, 21))
    with torch.no_grad():
        uniform = composed_nemotron_h(path, per_block=False)(torch.tensor([ids]), use_cache=False).logits[0].numpy()
    assert nmse(uniform, puzzle_logits(path, ids)) > 1e-3


def test_the_file_carries_the_per_layer_values(checkpoint):
    from hfview import HfCheckpoint
    view = HfCheckpoint(checkpoint("nemotron_h_puzzle"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["general.architecture"] == "nemotron_h_moe"
    assert list(kv["nemotron_h_moe.feed_forward_length"]) == [0, 20, 0, 0, 12]
    assert list(kv["nemotron_h_moe.expert_feed_forward_length"]) == [0, 20, 0, 0, 12]
    assert list(kv["nemotron_h_moe.expert_used_count"]) == [0, 3, 0, 0, 2]
    assert list(kv["nemotron_h_moe.attention.head_count_kv"]) == [0, 0, 2, 0, 0]
    assert not [t.name for t in view.tensors if t.name.startswith("mtp")]


@pytest.mark.parametrize("change, message", [
    ({"block_configs": DROP}, "block_configs None"),
    ({"num_hidden_layers": 4}, "block_configs lists 5 layers, num_hidden_layers says 4"),
    ({"hybrid_override_pattern": "MEM*E"}, "hybrid_override_pattern and block_configs disagree"),
    ({"moe_latent_size": DROP}, "moe_latent_size not stated"),
    ({"n_routed_experts": DROP}, "n_routed_experts not stated"),
    ({"head_dim": DROP}, "head_dim not stated"),
    ({"n_group": 2}, "n_group 2"),
    ({"time_step_limit": [0.0, 10.0]}, "time_step_limit"),
])
def test_configs_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("nemotron_h_puzzle"), tmp_path, message, **change)


def _blocks(checkpoint, edit):
    blocks = json.loads((checkpoint("nemotron_h_puzzle") / "config.json").read_text())["block_configs"]
    edit(blocks)
    return blocks


@pytest.mark.parametrize("edit, message", [
    (lambda b: b[1].update(block_type="mlp"), r"block_configs\[1\]: block_type 'mlp'"),
    (lambda b: b[1].update(block_type="no_op"), r"block_configs\[1\]: block_type 'no_op'"),
    (lambda b: b[4].pop("num_experts_per_tok"), r"block_configs\[4\]: a moe block without num_experts_per_tok"),
    (lambda b: b[4].update(num_experts_per_tok=5), r"num_experts_per_tok 5 of 4 experts"),
    (lambda b: b[0].update(moe_intermediate_size=20), r"block_configs\[0\]: moe_intermediate_size on a mamba block"),
    (lambda b: b[1].update(n_routed_experts=8), r"block_configs\[1\]: n_routed_experts 8 beside the top level's 4"),
    (lambda b: b[1].update(moe_latent_size=8), r"moe_latent_size 8 beside the top level's 16"),
    (lambda b: [blk.update(block_type="moe", moe_intermediate_size=8, num_experts_per_tok=1)
                for blk in b if blk["block_type"] == "mamba"], "no mamba block"),
])
def test_blocks_llama_cpp_cannot_run_are_refused(checkpoint, tmp_path, edit, message):
    blocks = _blocks(checkpoint, edit)
    kinds = {"mamba": "M", "attention": "*", "moe": "E"}
    assert_refused(checkpoint("nemotron_h_puzzle"), tmp_path, message, block_configs=blocks,
                   hybrid_override_pattern="".join(kinds.get(b["block_type"], "?") for b in blocks)
                   if all(b["block_type"] in kinds for b in blocks) else DROP)


def test_a_block_restating_the_top_level_reads_the_same(checkpoint, tmp_path):
    """A block may repeat a top-level value (the ModelOpt Puzzle writer puts n_routed_experts and the shared and
    latent widths in each moe block): the same file."""
    from hfview import HfCheckpoint
    src = checkpoint("nemotron_h_puzzle")
    blocks = _blocks(checkpoint, lambda b: [blk.update(n_routed_experts=4, moe_latent_size=16,
                                                       moe_shared_expert_intermediate_size=24)
                                            for blk in b if blk["block_type"] == "moe"])
    base = HfCheckpoint(src, "f32")
    restated = HfCheckpoint(variant(src, tmp_path / src.name, block_configs=blocks), "f32")
    assert [(k.key, k.value) for k in base.kv] == [(k.key, k.value) for k in restated.kv]


@pytest.mark.parametrize("outtype", ["f32"])
def test_the_layers_as_layers_block_type_read_the_same(outtype, checkpoint, tmp_path):
    """The layers stated as layers_block_type instead of the pattern, the layer count null (as Megatron-Bridge's
    Puzzle export writes the one, and Puzzle configs quoted in other projects' tests state both): bytes == the
    converter's on that variant."""
    from hfview import HfCheckpoint
    from hfview.export import export
    path = variant(checkpoint("nemotron_h_puzzle"), tmp_path / "nemotron_h_puzzle", hybrid_override_pattern=DROP,
                   layers_block_type=["mamba", "moe", "attention", "mamba", "moe"], num_hidden_layers=None)
    theirs = oracle.convert_cached(path, outtype)
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


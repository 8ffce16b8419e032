"""BitNet b1.58 (BitnetForCausalLM / BitNetForCausalLM -> llama.cpp bitnet through the converter's BitnetModel).

* bytes oracle: `hfview export` == the converter's file at every outtype on a checkpoint of latent projections,
  which the converter's weight_quant writes ternary (the view computes it on read). On a packed release's form
  (quant_method "bitnet": uint8 codes beside weight_scale) the pinned converter fails in its default lazy mode
  (dequant_bitnet shifts a lazy tensor by an eager one: "Tensor on device cpu is not on the expected device meta"),
  a strict xfail; the bytes are proven against the converter run with --no-lazy, where it completes;
* logits oracle: transformers' BitNetForCausalLM (its own modules: sub-norms, SiLU-gated FFN, rope) over the
  fixture's weights as transformers' BitNet integration makes them: the latent projections ternarized by its
  online quantization (integrations.bitnet.WeightQuant), the packed ones unpacked by its unpack_weights and divided
  by weight_scale as BitLinear does. Activations are not quantized there: BitLinear / AutoBitLinear round each
  token's inputs to 8 bits, which llama.cpp's bitnet does not compute, so the reference is the model llama.cpp's
  graph states (the fixture is loaded with its sub-norms under transformers' names; the converter reads 1bitLLM's).
"""
import numpy as np
import pytest

import oracle
from family_defaults import check_defaults
from family_oracle import NMSE_BAR, check_export, check_logits, nmse, oracle_tests, reference_logits_test

PACKED_FAILS = ("the pinned converter's dequant_bitnet fails in lazy mode (an eager shift tensor against a lazy "
                "weight: \"Tensor on device cpu is not on the expected device meta\")")

test_export, _ = oracle_tests("bitnet", ["bitnet"])
test_export_packed, _ = oracle_tests("bitnet", ["bitnet-packed"], export_xfail=PACKED_FAILS)

_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
_TRANSFORMERS_NAMES = {".self_attn.inner_attn_ln.": ".self_attn.attn_sub_norm.",
                       ".mlp.ffn_layernorm.": ".mlp.ffn_sub_norm."}


def _transformers_state(path):
    """The fixture's tensors under transformers' BitNet names, each projection as its BitNet integration makes it
    (float32): ternarized by WeightQuant, or unpacked and divided by weight_scale."""
    import torch
    from safetensors.torch import load_file
    from transformers.integrations.bitnet import WeightQuant, unpack_weights

    stored = load_file(str(path / "model.safetensors"))
    state = {}
    with torch.compiler.set_stance("force_eager"):  # transformers' own functions, run eagerly on the CPU
        for name, t in stored.items():
            if name.endswith(".weight_scale"):
                continue
            for ours, theirs in _TRANSFORMERS_NAMES.items():
                name = name.replace(ours, theirs)
            if name.split(".")[-2] not in _PROJECTIONS:
                state[name] = t.float()
            elif t.dtype == torch.uint8:
                scale = stored[name.replace(".weight", ".weight_scale")]
                state[name] = unpack_weights(t, dtype=torch.float32) / scale.float()
            else:
                state[name] = WeightQuant.apply(t.float())
    return state


def bitnet_logits(path, ids) -> np.ndarray:
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(path)
    config.quantization_config = None  # the weights are given as the integration makes them: plain linears
    model = transformers.BitNetForCausalLM(config).float().eval()
    missing, unexpected = model.load_state_dict(_transformers_state(path), strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    model.tie_weights()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


test_logits = reference_logits_test("bitnet", ["bitnet"], bitnet_logits,
                                    "transformers' BitNet with its integration's ternary weights")


@pytest.mark.parametrize("outtype", ["f32", "f16", "bf16", "auto"])
def test_packed_export_equals_the_converter_run_without_lazy(outtype, checkpoint, tmp_path, record_property):
    record_property("family", "bitnet")
    record_property("oracle", "bytes")
    check_export("bitnet-packed", outtype, checkpoint,
                 lambda name, o: oracle.convert_cached(checkpoint(name), o, "--no-lazy"), tmp_path)


def test_defaults_match_transformers():
    check_defaults("bitnet")

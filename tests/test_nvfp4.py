"""NVFP4 (ModelOpt's NVFP4 / W4A16_NVFP4 / MIXED_PRECISION, stated in config.json or hf_quant_config.json, and
compressed-tensors' nvfp4-pack-quantized): each NVFP4 weight presented as the converter writes it
(conversion/base.py _generate_nvfp4_tensors): its bits moved into ggml's NVFP4 blocks on read, first in the file,
experts stacked, each followed by its per-tensor `.scale` / `.input_scale` where not 1; the FP8 layers of a mixed
checkpoint dequantized; the `prec_a4` KV for W4A16_NVFP4; the file type MOSTLY_NVFP4. Byte-identical to the pinned
converter's file at every outtype; llama.cpp's logits from the view against transformers over the checkpoint's
dequantized float32 twin (transformers cannot load NVFP4 on the CPU)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from family_oracle import OUTTYPES, check_export, check_logits, oracle_tests

FIXTURES = {"llama": ["llama-nvfp4", "llama-nvfp4-record"], "qwen3_moe": ["qwen3_moe-nvfp4"],
            "qwen3": ["qwen3-nvfp4-mixed", "qwen3-nvfp4-w4a16", "qwen3-nvfp4-ct"]}
ALL = [n for names in FIXTURES.values() for n in names]


@pytest.mark.parametrize("outtype", OUTTYPES + ["q8_0"])
@pytest.mark.parametrize("name", ALL)
def test_export(name, outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", next(f for f, names in FIXTURES.items() if name in names))
    record_property("oracle", "bytes")
    check_export(name, outtype, checkpoint, converted, tmp_path)

"""What the benchmarks share: the generated >= 1 GB checkpoint, and one child process measured."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import oracle  # noqa: E402

WORK = oracle.CACHE / "bench"


def _llama(layers: int, hidden: int, experts: int):
    """Llama (dense), or with `experts` a Mixtral: that many experts of width hidden / 2 per layer, 2 per token."""
    heads, kv_heads, ff = hidden // 64, max(1, hidden // 256), int(hidden * 2.75) // 64 * 64
    kvd = kv_heads * 64
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000,
              "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "rms_norm_eps": 1e-5,
              "max_position_embeddings": 4096, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
              "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False}
    if experts:
        config.update({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_local_experts": experts,
                       "num_experts_per_tok": 2, "intermediate_size": hidden // 2, "sliding_window": None})

    def layer(p, i):
        moe = f"{p}block_sparse_moe."
        return {p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,),
                p + "self_attn.q_proj.weight": (hidden, hidden), p + "self_attn.k_proj.weight": (kvd, hidden),
                p + "self_attn.v_proj.weight": (kvd, hidden), p + "self_attn.o_proj.weight": (hidden, hidden),
                **({p + "mlp.gate_proj.weight": (ff, hidden), p + "mlp.up_proj.weight": (ff, hidden),
                    p + "mlp.down_proj.weight": (hidden, ff)} if not experts else {
                    moe + "gate.weight": (experts, hidden),
                    **{f"{moe}experts.{x}.{w}.weight": shape for x in range(experts)
                       for w, shape in (("w1", (hidden // 2, hidden)), ("w2", (hidden, hidden // 2)),
                                        ("w3", (hidden // 2, hidden)))}})}

    head = {"model.embed_tokens.weight": (32000, hidden), "lm_head.weight": (32000, hidden),
            "model.norm.weight": (hidden,)}
    return config, head, layer, "llama-spm-model"


def _deepseek_v3(layers: int, hidden: int, experts: int):
    """DeepSeek-V3 (latent attention): queries through a rank-3/8 bottleneck, keys and values through kv_lora_rank
    hidden / 4 (kv_b_proj holding both halves), heads of 64 + 32 rope / 64 value; the first layer dense
    (first_k_dense_replace 1), then `experts` routed experts of width hidden / 2 in 4 groups keeping 2, 2 per token,
    one shared expert, sigmoid scores with e_score_correction_bias (noaux_tc), yarn as released: the proportions of
    fixtures/families/deepseek_v3.py's self-consistent config, scaled."""
    if experts < 4 or experts % 4:
        raise SystemExit("--family deepseek_v3 needs --experts, a multiple of 4 (4 expert groups)")
    heads, ff, moe_ff = hidden // 64, int(hidden * 2.75) // 64 * 64, hidden // 2
    q_rank, kv_rank, nope, rope, v = hidden * 3 // 8, hidden // 4, 64, 32, 64
    vocab = 128256
    yarn = {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096, "type": "yarn"}
    config = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "vocab_size": vocab,
              "hidden_size": hidden, "intermediate_size": ff, "moe_intermediate_size": moe_ff,
              "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": heads,
              "n_routed_experts": experts, "num_experts_per_tok": 2, "n_shared_experts": 1,
              "first_k_dense_replace": 1, "moe_layer_freq": 1, "n_group": 4, "topk_group": 2, "norm_topk_prob": True,
              "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
              "aux_loss_alpha": 0.001, "seq_aux": True, "ep_size": 1, "q_lora_rank": q_rank,
              "kv_lora_rank": kv_rank, "qk_nope_head_dim": nope, "qk_rope_head_dim": rope, "v_head_dim": v,
              "hidden_act": "silu", "max_position_embeddings": 163840, "rms_norm_eps": 1e-6,
              "rope_theta": 10000.0, "rope_scaling": yarn, "attention_bias": False, "num_nextn_predict_layers": 1,
              "bos_token_id": 128000, "eos_token_id": 128001, "tie_word_embeddings": False,
              "torch_dtype": "bfloat16"}

    def mlp(p, width):
        return {p + "gate_proj.weight": (width, hidden), p + "up_proj.weight": (width, hidden),
                p + "down_proj.weight": (hidden, width)}

    def layer(p, i):
        a = p + "self_attn."
        tensors = {p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,),
                   a + "q_a_proj.weight": (q_rank, hidden), a + "q_a_layernorm.weight": (q_rank,),
                   a + "q_b_proj.weight": (heads * (nope + rope), q_rank),
                   a + "kv_a_proj_with_mqa.weight": (kv_rank + rope, hidden), a + "kv_a_layernorm.weight": (kv_rank,),
                   a + "kv_b_proj.weight": (heads * (nope + v), kv_rank), a + "o_proj.weight": (hidden, heads * v)}
        if i < 1:
            return {**tensors, **mlp(p + "mlp.", ff)}
        tensors.update({p + "mlp.gate.weight": (experts, hidden), p + "mlp.gate.e_score_correction_bias": (experts,)})
        for x in range(experts):
            tensors.update(mlp(f"{p}mlp.experts.{x}.", moe_ff))
        return {**tensors, **mlp(p + "mlp.shared_experts.", moe_ff)}

    head = {"model.embed_tokens.weight": (vocab, hidden), "lm_head.weight": (vocab, hidden),
            "model.norm.weight": (hidden,)}
    return config, head, layer, "llama3-tiktoken"


def _granitemoehybrid(layers: int, hidden: int, experts: int):
    """Granite 4.0 H (hybrid): Mamba-2 layers (expand 2, heads of 64, state 128, one group) with an attention
    layer every 4th (layer_types as released, no positions), in every layer a mixture of `experts` experts of width
    hidden / 2 (stored stacked, as released), 2 per token, and a shared MLP of width hidden; tied embeddings,
    Granite's multipliers: granite-4.0-h-tiny's shape (fixtures/families/granitemoehybrid.py), scaled."""
    if experts < 4:
        raise SystemExit("--family granitemoehybrid needs --experts (at least 4)")
    heads, kv_heads, width = hidden // 64, max(1, hidden // 256), hidden // 2
    d_inner, d_head, d_state, groups, conv = 2 * hidden, 64, 128, 1, 4
    m_heads, conv_dim = d_inner // d_head, d_inner + 2 * groups * d_state
    vocab = 50264
    kinds = ["attention" if i % 4 == 3 else "mamba" for i in range(layers)]
    config = {"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
              "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": width,
              "shared_intermediate_size": hidden, "num_hidden_layers": layers, "layer_types": kinds,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "num_local_experts": experts,
              "num_experts_per_tok": 2, "mamba_n_heads": m_heads, "mamba_d_head": d_head, "mamba_d_state": d_state,
              "mamba_n_groups": groups, "mamba_d_conv": conv, "mamba_expand": 2, "mamba_chunk_size": 256,
              "mamba_conv_bias": True, "mamba_proj_bias": False, "attention_bias": False, "hidden_act": "silu",
              "embedding_multiplier": 12.0, "attention_multiplier": 0.0078125, "residual_multiplier": 0.22,
              "logits_scaling": 6.0, "position_embedding_type": "nope", "normalization_function": "rmsnorm",
              "init_method": "mup", "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "rope_scaling": None, "router_aux_loss_coef": 0.001, "tie_word_embeddings": True,
              "bos_token_id": 50256, "eos_token_id": 50256, "pad_token_id": 50256, "torch_dtype": "bfloat16"}

    def layer(p, i):
        tensors = {p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,)}
        if kinds[i] == "mamba":
            m = p + "mamba."
            tensors.update({m + "A_log": (m_heads,), m + "D": (m_heads,), m + "dt_bias": (m_heads,),
                            m + "conv1d.weight": (conv_dim, 1, conv), m + "conv1d.bias": (conv_dim,),
                            m + "in_proj.weight": (2 * d_inner + 2 * groups * d_state + m_heads, hidden),
                            m + "norm.weight": (d_inner,), m + "out_proj.weight": (hidden, d_inner)})
        else:
            a, kvd = p + "self_attn.", kv_heads * 64
            tensors.update({a + "q_proj.weight": (hidden, hidden), a + "k_proj.weight": (kvd, hidden),
                            a + "v_proj.weight": (kvd, hidden), a + "o_proj.weight": (hidden, hidden)})
        moe = p + "block_sparse_moe."
        return {**tensors, moe + "input_linear.weight": (experts, 2 * width, hidden),
                moe + "output_linear.weight": (experts, hidden, width), moe + "router.layer.weight": (experts, hidden),
                p + "shared_mlp.input_linear.weight": (2 * hidden, hidden),
                p + "shared_mlp.output_linear.weight": (hidden, hidden)}

    head = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    return config, head, layer, "granitemoehybrid-gpt2"


# family -> fn(layers, hidden, experts) -> (config.json, the tensors of shard 0 {name: shape},
# fn(prefix, layer index) -> that layer's tensors {name: shape}, tokenizer recipe)
FAMILIES = {"llama": _llama, "deepseek_v3": _deepseek_v3, "granitemoehybrid": _granitemoehybrid}


def _write_tokenizer(recipe: str, out: Path) -> None:
    """Llama's tokenizer.model alone, or one of fixtures/build.py's tokenizer recipes (read, not edited)."""
    if recipe == "llama-spm-model":
        shutil.copy(ROOT / "fixtures" / "tokenizers" / "llama-spm" / "tokenizer.model", out)
        return
    sys.path.insert(0, str(ROOT / "fixtures"))
    import build

    build._TOKENIZER_WRITERS[recipe](out)


def e4m3_values() -> np.ndarray:
    """The float32 value of each of the 256 float8_e4m3fn codes (1 sign, 4 exponent bits of bias 7, 3 mantissa bits;
    no infinities, S.1111.111 is NaN)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp, man = (codes >> 3) & 0xF, codes & 7
    value = np.where(exp == 0, man / 8 * 2.0 ** -6, (1 + man / 8) * 2.0 ** (exp - 7.0)) * sign
    value[(exp == 15) & (man == 7)] = np.nan
    return value.astype(np.float32)


def is_fp8_linear(name: str, shape: tuple) -> bool:
    """The weights a block-FP8 release stores as float8_e4m3fn with a `<weight>_scale_inv`: every linear of the layers
    (attention's projections, each expert's, the shared expert's, the dense MLP's) but the router; embeddings, head,
    norms and biases stay bf16 (DeepSeek-V3's release, Qwen3-*-FP8's)."""
    return (len(shape) == 2 and name.startswith("model.layers.") and ".mlp.gate." not in name
            and name.endswith(("_proj.weight", "_proj_with_mqa.weight")))


_E4M3_CODES: np.ndarray | None = None


def fp8_weight(rng, shape: tuple, block: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A random block-FP8 weight: e4m3 codes (uint8) of values about N(0, 64) (well inside e4m3's +-448, where its 3
    mantissa bits keep their precision), and float32 `weight_scale_inv` multipliers, one per `block` (cut at the
    edges), near 0.02 / 64 each: the dequantized weight is about N(0, 0.02), as the bf16 weights here."""
    global _E4M3_CODES
    if _E4M3_CODES is None:  # 65536 draws of N(0, 64), each rounded to its nearest e4m3 code; weights sample them
        values = e4m3_values()
        order = np.argsort(np.nan_to_num(values, nan=np.inf), kind="stable")[:-2]  # finite values, ascending
        draws = np.clip(np.random.default_rng(1).standard_normal(65536) * 64, -448, 448)
        at = np.clip(np.searchsorted(values[order], draws), 1, len(order) - 1)
        nearer = np.where(draws - values[order][at - 1] < values[order][at] - draws, at - 1, at)
        _E4M3_CODES = order[nearer].astype(np.uint8)
    rows, cols = shape
    codes = _E4M3_CODES[rng.integers(0, 65536, size=shape, dtype=np.uint16)]
    scale = (0.02 / 64 * rng.uniform(0.5, 1.5, size=(-(-rows // block[0]), -(-cols // block[1])))).astype(np.float32)
    return codes, scale


def make_checkpoint(out: Path, layers: int, hidden: int, experts: int = 0, family: str = "llama",
                    fp8_block: tuple[int, int] | None = None) -> Path:
    """Random bf16 weights of `family` (FAMILIES) written with numpy + safetensors (no torch), one shard for the
    embeddings and one per layer, with a real tokenizer. With `fp8_block`, block FP8 as DeepSeek-V3 and Qwen3-*-FP8
    release it (fp8_linears)."""
    if (out / "config.json").is_file():
        return out
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    config, head, layer, tokenizer = FAMILIES[family](layers, hidden, experts)
    rng = np.random.default_rng(0)

    def bf16(*shape):
        x = rng.standard_normal(shape, dtype=np.float32) * 0.02
        return (x.view(np.uint32) >> 16).astype(np.uint16)

    def save(name, shapes):
        """A safetensors file written by hand: numpy has no bfloat16 (nor float8), so the header says BF16 (F8_E4M3)
        itself."""
        tensors, dtypes = {}, {}
        for key, shape in shapes.items():
            if fp8_block and is_fp8_linear(key, shape):
                tensors[key], tensors[key + "_scale_inv"] = fp8_weight(rng, shape, fp8_block)
                dtypes[key], dtypes[key + "_scale_inv"] = "F8_E4M3", "F32"
            else:
                tensors[key], dtypes[key] = bf16(*shape), "BF16"
        header, offset = {}, 0
        for key, arr in tensors.items():
            header[key] = {"dtype": dtypes[key], "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
            offset += arr.nbytes
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(tmp / name, "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text)
            for arr in tensors.values():
                f.write(arr.tobytes())

    save("model-00000.safetensors", head)
    for i in range(layers):
        save(f"model-{i + 1:05d}.safetensors", layer(f"model.layers.{i}.", i))
    if fp8_block:
        config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                         "weight_block_size": list(fp8_block)}
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    _write_tokenizer(tokenizer, tmp)
    tmp.rename(out)
    return out


def run(cmd: list[str], env=None, cwd: Path | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS bytes and stdout of one child process, run as a user runs it: with Python's bytecode
    caches (`warm_bytecode`), whatever PYTHONDONTWRITEBYTECODE says here. The peak is wait4's: the largest of the
    child's and of the processes it waited for (a view's vocabulary built apart, hfview.vocab_cache, which has
    ended before the model loads: the view's own peak is the larger one). `cwd`: the child's working directory,
    this project's root unless given: a `python -c` child puts its working directory first on sys.path, so one
    started elsewhere (from another checkout) would import that directory's hfview whatever PYTHONPATH says."""
    import tempfile

    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        env["LAUNCHED_AT"] = repr(time.time())  # for a child that times from its launch (FIRST_LOGITS)
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True, cwd=cwd or ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{cmd[:3]} failed:\n{err.read()[-3000:]}")
        return wall, usage.ru_maxrss * 1024, out.read()


def checkpoint(layers: int, hidden: int, experts: int = 0, family: str = "llama",
               fp8_block: tuple[int, int] | None = None) -> Path:
    """The benchmark checkpoint, made once in a child process (a forked child's peak RSS would otherwise
    include this process's arrays), with its shards read once so every contender starts warm."""
    if family == "llama":
        name = f"mixtral-{layers}x{hidden}x{experts}" if experts else f"llama-{layers}x{hidden}"
    else:
        name = f"{family}-{layers}x{hidden}x{experts}"
    if fp8_block:
        name += f"-fp8-{fp8_block[0]}x{fp8_block[1]}"
    path = WORK / name
    if not (path / "config.json").is_file():
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); "
                        f"import common; common.make_checkpoint(common.WORK / {path.name!r}, {layers}, {hidden}, "
                        f"experts={experts}, family={family!r}, fp8_block={fp8_block!r})"], check=True)
    warm_bytecode()
    for f in path.glob("*.safetensors"):
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass
    return path


def warm_bytecode(*trees: Path) -> None:
    """Compile hfview's and the converter's modules once, as pip and a first import do on a user's machine: with
    PYTHONDONTWRITEBYTECODE set (as on the machines this project runs on) every contender would otherwise compile
    its Python from source on each start, hfview's ~100 modules (0.25 s) more than llama.cpp's loader alone. `trees`:
    other checkouts whose hfview is measured too (load.py --compare-with)."""
    import compileall

    for d in (ROOT / "hfview", oracle.converter_root(), *(tree / "hfview" for tree in trees)):
        compileall.compile_dir(d, quiet=1)


def convert(ckpt: Path, out: Path, outtype: str = "bf16") -> tuple[float, int]:
    root = oracle.converter_root()
    env = dict(os.environ, PYTHONPATH=str(root))
    wall, rss, _ = run([sys.executable, str(root / "convert_hf_to_gguf.py"), str(ckpt), "--outfile", str(out),
                        "--outtype", outtype], env)
    return wall, rss


# A child that loads `path` as `mode` and prints, as JSON: seconds from its first line to the model freed, and
# `first_logits`: seconds from its launch (run's LAUNCHED_AT, interpreter start-up included) to the logits in hand,
# the latency a user waits for, which leaves out freeing the model and the process's exit; `imported`: from its
# launch to its imports done (llama_cpp's among them), the rest being the data path's; `imported_cpu`: the CPU seconds
# the child had used by then (process_time: one thread until then), its start-up's cost whatever else the machine runs.
# FIRST_LOGITS: the view ("view": as the runner chooses, HFVIEW_DATA_PATH; "view-stream": through the FILE*;
# "view-memfd": from a memory file), through hfview's runner. FILE_FIRST_LOGITS: a GGUF file with ("mmap") or without
# ("nommap") mmap, through llama.cpp's bindings alone, as a user of llama.cpp loads it: it imports nothing of hfview's
# (hfview's imports are the view's cost, not the file's), with the same model and context settings as the runner's.
FIRST_LOGITS = r"""
import os, sys, time, json
t0 = time.perf_counter()
mode, path = sys.argv[1], sys.argv[2]
from hfview.runner.stream import StreamModel, load_model
from hfview import HfCheckpoint
from hfview.runner.devices import llama_bindings
llama_bindings()  # llama_cpp imported, as the file's child imports it
imported = time.time() - float(os.environ.get("LAUNCHED_AT", "nan"))
imported_cpu = time.process_time()
src = load_model(HfCheckpoint(path), data_path=mode.partition("-")[2] or None)
with StreamModel(src, n_ctx=32) as m:
    logits = m.logits([1, 450, 4996])
    first = time.time() - float(os.environ.get("LAUNCHED_AT", "nan"))
    data_path = m.model.data_path
print(json.dumps({"seconds": time.perf_counter() - t0, "first_logits": first, "imported": imported,
                  "imported_cpu": imported_cpu, "finite": bool(abs(logits).max() < 1e30), "data_path": data_path}))
"""
FILE_FIRST_LOGITS = r"""
import os, sys, time, json, ctypes
t0 = time.perf_counter()
mode, path = sys.argv[1], sys.argv[2]
import llama_cpp as ll
imported = time.time() - float(os.environ.get("LAUNCHED_AT", "nan"))
imported_cpu = time.process_time()
ll.llama_backend_init()
params = ll.llama_model_default_params()
params.load_mode = ll.LLAMA_LOAD_MODE_MMAP if mode == "mmap" else ll.LLAMA_LOAD_MODE_NONE
params.lazy_mode = ll.LLAMA_LAZY_MODE_OFF
params.n_gpu_layers = 0
model = ll.llama_model_load_from_file(os.fsencode(path), params)
assert model, f"llama.cpp could not load {path}"
cp = ll.llama_context_default_params()
cp.n_ctx = cp.n_batch = cp.n_ubatch = 32
cp.n_seq_max, cp.no_perf, cp.offload_kqv, cp.op_offload = 1, True, False, False
ctx = ll.llama_init_from_model(model, cp)
ids = (ll.llama_token * 3)(1, 450, 4996)
assert ll.llama_decode(ctx, ll.llama_batch_get_one(ids, 3)) == 0
n_vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(model))
last = ll.llama_get_logits_ith(ctx, -1)
first = time.time() - float(os.environ.get("LAUNCHED_AT", "nan"))
finite = all(abs(last[i]) < 1e30 for i in range(n_vocab))
ll.llama_free(ctx)
ll.llama_model_free(model)
print(json.dumps({"seconds": time.perf_counter() - t0, "first_logits": first, "imported": imported,
                  "imported_cpu": imported_cpu, "finite": finite, "data_path": "file"}))
"""


def fp8_cast_bf16(src: Path, dst: Path) -> None:
    """A BF16 copy of a block-FP8 checkpoint as DeepSeek's inference/fp8_cast_bf16.py makes one: shard by shard, each
    weight with a `<weight>_scale_inv` dequantized (the scale repeated over its block and cut at the edges, times the
    e4m3 value, in float32) and stored bf16, the scales dropped; config.json without its quantization_config; the
    tokenizer files copied. Each shard is fsynced, as an export is timed until its file is on disk."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    config = json.loads((src / "config.json").read_text())
    block = config.pop("quantization_config")["weight_block_size"]
    config["torch_dtype"] = "bfloat16"
    for f in sorted(src.iterdir()):
        if f.suffix == ".safetensors":
            out = {}
            with safe_open(str(f), "pt") as shard:
                names = list(shard.keys())
                for name in names:
                    if name.endswith("_scale_inv"):
                        continue
                    t = shard.get_tensor(name)
                    if name + "_scale_inv" in names:
                        scale = shard.get_tensor(name + "_scale_inv")
                        scale = scale.repeat_interleave(block[0], 0).repeat_interleave(block[1], 1)
                        t = (t.float() * scale[:t.shape[0], :t.shape[1]]).to(torch.bfloat16)
                    out[name] = t
            save_file(out, str(dst / f.name), metadata={"format": "pt"})
            fd = os.open(dst / f.name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        elif f.name != "config.json" and f.is_file():
            shutil.copy(f, dst / f.name)
    (dst / "config.json").write_text(json.dumps(config, indent=2))

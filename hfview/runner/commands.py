"""`hfview generate`, `parity`, `serve`, `decide`, `capture`, `steer-vector`, `export-lora`: COMMANDS, which hfview.cli
registers."""
from __future__ import annotations

import json
import sys

import click
import numpy as np

from hfview.errors import HfviewError

PRECISION = click.Choice(["auto", "f32", "f16", "bf16", "q8_0"])
DEVICE = click.Choice(["cpu", "cuda", "metal"], case_sensitive=False)


def _note(text: str) -> None:
    click.echo(f"hfview: {text}", err=True)


@click.command()
@click.option("--model", default=None, help="Checkpoint directory or Hub id (default: the embedded model).")
@click.option("--prompt", required=True, help="The prompt (the user message in chat mode).")
@click.option("--system", default=None, help="System message: TEXT, or a FILE holding it (chat mode).")
@click.option("--max-tokens", type=click.IntRange(min=0), default=256, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0.0), default=None,
              help="0 is greedy. Default, as for each sampling option: the model's (generation_config.json), "
                   "else llama.cpp's.")
@click.option("--top-k", type=int, default=None, help="<= 0: the whole vocabulary.")
@click.option("--top-p", type=click.FloatRange(min=0.0, max=1.0, min_open=True), default=None)
@click.option("--min-p", type=click.FloatRange(min=0.0, max=1.0), default=None)
@click.option("--repeat-penalty", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="1 is off (transformers' repetition_penalty).")
@click.option("--repeat-last-n", type=click.IntRange(min=-1), default=None,
              help="Tokens the repeat penalty looks back over (prompt included).")
@click.option("--seed", type=click.IntRange(min=0, max=2**32 - 1), default=None,
              help="Sampling seed: the same seed gives the same output (default: a new one, shown by --json).")
@click.option("--precision", type=PRECISION, default="auto", show_default=True,
              help="The view's outtype (what convert_hf_to_gguf.py --outtype would write).")
@click.option("--quant", default=None, metavar="TYPE",
              help="A llama-quantize file type (Q4_K_M, Q8_0, ...) over --precision, quantized as llama.cpp reads "
                   "each tensor: the model llama_model_quantize would write, with no file written.")
@click.option("--imatrix", default=None, metavar="FILE",
              help="llama-imatrix's importance matrix for --quant (GGUF or legacy .dat).")
@click.option("--device", type=DEVICE, default="cpu", show_default=True)
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@click.option("--n-ctx", type=click.IntRange(min=1), default=None,
              help="Context length (default: min(4096, the model's training context)).")
@click.option("--backend", type=click.Choice(["auto", "llama.cpp", "torch"]), default="auto", show_default=True,
              help="auto: llama.cpp when the view covers the family, else transformers.")
@click.option("--chat/--no-chat", default=None,
              help="Apply the model's chat template (default: on when the model has one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of streaming text.")
@click.option("--progress/--no-progress", default=None, help="Loading bar (default: on a terminal).")
@click.option("--steer", "steer", multiple=True, metavar="FILE[:STRENGTH]",
              help="A control vector (llama.cpp's control-vector GGUF) added to the residual stream, times "
                   "STRENGTH (default 1); repeatable, summed.")
@click.option("--steer-layers", default=None, metavar="A-B",
              help="Layers the control vectors apply to, inclusive (default: 1..n_layer-1, all llama.cpp steers).")
@click.option("--kv-cache", type=click.Choice(["f16", "f32"]), default="f16", show_default=True,
              help="KV cache type (f32 also turns flash attention off: exact to float32).")
@click.option("--lora", "lora", multiple=True, metavar="DIR[:SCALE]",
              help="A PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors), times SCALE "
                   "(default 1); repeatable.")
@click.pass_context
def generate(ctx, model, prompt, system, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
             repeat_last_n, seed, precision, quant, imatrix, device, revision, n_ctx, backend, chat, as_json, progress,
             steer, steer_layers, kv_cache, lora):
    """Generate text from a checkpoint, run by llama.cpp straight from the view."""
    from .api import load
    from .chat import read_system

    if progress is None:
        progress = sys.stderr.isatty()
    system_text = read_system(system)
    runner = None
    try:
        from .steer import parse_layer_range
        runner = load(model, precision=precision, device=device.lower(), n_ctx=n_ctx, revision=revision,
                      progress=progress, backend=backend, steer=list(steer) or None,
                      steer_layers=parse_layer_range(steer_layers), kv_cache=kv_cache, lora=list(lora) or None,
                      quant=quant, imatrix=imatrix)
        for note in runner.notes:
            _note(note)
        if chat and not runner.chat_template:
            raise HfviewError("--chat: this model has no chat template (tokenizer.chat_template); use --no-chat")
        ids = runner.prompt_ids(prompt, system=system_text, chat=chat)

        def stream(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        result = runner.run(ids=ids, max_tokens=max_tokens, on_text=None if as_json else stream,
                            temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                            repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, seed=seed)
        if as_json:
            click.echo(json.dumps({
                "model": str(model) if model is not None else str(runner.model_path),
                "model_revision": runner.model_revision,
                "text": result.text, "tokens": result.tokens, "prompt_tokens": result.prompt_tokens,
                "stop": result.stop, "seconds": round(result.seconds, 4),
                "first_token_seconds": round(result.first_token_seconds, 4),
                "tokens_per_second": None if result.tokens_per_second != result.tokens_per_second
                else round(result.tokens_per_second, 2),
                "chat": chat if chat is not None else runner.chat_template is not None,
                "precision": runner.checkpoint.outtype if runner.checkpoint is not None else None,
                "quant": runner.checkpoint.quant if runner.checkpoint is not None else None,
                "device": device.lower(), "n_ctx": runner.n_ctx, "seed": result.sampling["seed"],
                "sampling": result.sampling, "backend": runner.backend,
                "data_path": getattr(runner, "data_path", None),
            }, ensure_ascii=False))
        else:
            sys.stdout.write("\n")
            sys.stdout.flush()
            if result.stop == "context":
                _note(f"stopped: the context ({runner.n_ctx} tokens) is full")
    except KeyboardInterrupt:
        # Ctrl-C: end the line, no traceback, the shell's convention for SIGINT.
        sys.stdout.write("\n")
        sys.stdout.flush()
        ctx.exit(130)
    finally:
        if runner is not None:
            runner.close()


@click.command()
@click.option("--model", default=None, help="Checkpoint directory or Hub id (default: the embedded model).")
@click.option("--prompt", default=None, help="Text to compare on (default: a short mixed sentence).")
@click.option("--threshold", type=click.FloatRange(min=0.0), default=1e-4, show_default=True,
              help="Pass when NMSE is below this.")
@click.option("--precision", type=PRECISION, default="f32", show_default=True)
@click.option("--revision", default=None)
@click.option("--lora", "lora", multiple=True, metavar="DIR[:SCALE]",
              help="PEFT LoRA adapters on both sides (transformers through peft).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def parity(ctx, model, prompt, threshold, precision, revision, lora, as_json):
    """Compare llama.cpp (from the view) with transformers' forward pass: exit 0 only under the threshold."""
    from .parity import DEFAULT_PROMPT, compare

    report = compare(model, prompt=prompt or DEFAULT_PROMPT, threshold=threshold, precision=precision,
                     revision=revision, lora=list(lora) or None)
    click.echo(json.dumps(report.as_dict()) if as_json else report.render())
    ctx.exit(0 if report.passed else 1)


@click.command()
@click.option("--model", default=None, help="Checkpoint directory or Hub id (default: the embedded model).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (0.0.0.0: every interface; set --api-key then).")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=8080, show_default=True,
              help="0: a free port (the log line says which).")
@click.option("--n-ctx", type=click.IntRange(min=1), default=None,
              help="Context length each request gets; requests queue on one context (default: min(4096, the "
                   "model's training context)).")
@click.option("--api-key", default=None, envvar="HFVIEW_API_KEY",
              help="Require 'Authorization: Bearer KEY' (or env HFVIEW_API_KEY).")
@click.option("--precision", type=PRECISION, default="auto", show_default=True,
              help="The view's outtype (what convert_hf_to_gguf.py --outtype would write).")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@click.option("--rpc", default=None, metavar="HOST:PORT,...",
              help="llama.cpp rpc-servers to split the layers over (needs a build with -DGGML_RPC=ON).")
@click.option("--lora", "lora", multiple=True, metavar="DIR[:SCALE]",
              help="A PEFT LoRA adapter directory applied to every request (see hfview generate --lora).")
@click.option("--runtime", default=None, metavar="PATH",
              help="Run this llama-server binary (your own llama.cpp build) on the view instead: it opens the view's "
                   "memory file (/proc/self/fd/N, inherited; Linux), no file written. Arguments after -- go to it.")
@click.argument("runtime_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def serve(ctx, model, host, port, n_ctx, api_key, precision, revision, rpc, lora, runtime, runtime_args):
    """OpenAI-compatible server (llama-cpp-python's) over the view: /v1/models, /v1/completions,
    /v1/chat/completions, /health. Ctrl-C stops it (exit 0). With --runtime, your own llama-server serves it."""
    from .serve import serve as run
    from .serve import serve_runtime

    if runtime is None and runtime_args:
        raise HfviewError(f"unexpected arguments {' '.join(runtime_args)}: only --runtime takes arguments after --")
    if runtime is not None:
        if rpc:
            raise HfviewError("--rpc with --runtime: pass llama-server's own --rpc after -- instead")
        ctx.exit(serve_runtime(model, runtime, host=host, port=port, n_ctx=n_ctx, api_key=api_key,
                               precision=precision, revision=revision, lora=list(lora) or None,
                               extra=tuple(runtime_args), log=_note))
    try:
        run(model, host=host, port=port, n_ctx=n_ctx, api_key=api_key, precision=precision, revision=revision,
            rpc=[e.strip() for e in rpc.split(",") if e.strip()] if rpc else None, log=_note, lora=list(lora) or None)
    except KeyboardInterrupt:
        # Ctrl-C while loading, before serving (once serving, Ctrl-C is how it stops: exit 0)
        ctx.exit(130)


_MODEL = click.option("--model", default=None, help="Checkpoint directory or Hub id (default: the embedded model).")
_ANALYSIS_PRECISION = click.option("--precision", type=PRECISION, default="auto", show_default=True,
                                   help="The view's outtype (f32 for comparisons with transformers).")


def _steer_options(f):
    f = click.option("--lora", "lora", multiple=True, metavar="DIR[:SCALE]",
                     help="A PEFT LoRA adapter applied while running (see hfview generate --lora).")(f)
    f = click.option("--steer-layers", default=None, metavar="A-B",
                     help="Layers the control vectors apply to (default: all llama.cpp steers).")(f)
    return click.option("--steer", "steer", multiple=True, metavar="FILE[:STRENGTH]",
                        help="A control vector applied while running (see hfview generate --steer).")(f)


KV_CACHE = click.Choice(["f16", "f32"])
_ANALYSIS_KV = click.option("--kv-cache", type=KV_CACHE, default="f32", show_default=True,
                            help="KV cache type; f32 also turns flash attention off (exact to float32), f16 is "
                                 "llama.cpp's default.")


def _load_for(model, precision, device, revision, n_ctx=None, steer=(), steer_layers=None, kv_cache="f32", lora=()):
    from .api import load
    from .steer import parse_layer_range

    runner = load(model, precision=precision, device=device.lower(), revision=revision, n_ctx=n_ctx,
                  backend="llama.cpp", steer=list(steer) or None, steer_layers=parse_layer_range(steer_layers),
                  kv_cache=kv_cache, lora=list(lora) or None)
    for note in runner.notes:
        _note(note)
    return runner


@click.command()
@_MODEL
@click.option("--prompt", required=True, help="The text the options follow.")
@click.option("--option", "options", multiple=True, required=True,
              help="A continuation to score, exactly as it would follow the prompt (a leading space is part of "
                   "it); repeat for each option.")
@click.option("--by", type=click.Choice(["sum", "mean"]), default="sum", show_default=True,
              help="Rank by the summed log-probability of the option's tokens, or by their mean.")
@click.option("--chat/--no-chat", default=False, show_default=True,
              help="Put the prompt through the chat template (the options are the assistant's reply).")
@click.option("--system", default=None, help="System message (with --chat): TEXT or a FILE holding it.")
@_ANALYSIS_PRECISION
@click.option("--device", type=DEVICE, default="cpu", show_default=True)
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@click.option("--n-ctx", type=click.IntRange(min=1), default=None)
@_ANALYSIS_KV
@_steer_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def decide(model, prompt, options, by, chat, system, precision, device, revision, n_ctx, kv_cache, steer,
           steer_layers, lora, as_json):
    """Rank options by the log-probability llama.cpp gives their tokens after the prompt."""
    from .chat import read_system
    from .decide import decide as run

    system_text = read_system(system)
    with _load_for(model, precision, device, revision, n_ctx, steer, steer_layers, kv_cache, lora) as runner:
        scores = run(runner, prompt, list(options), chat=chat, system=system_text, by=by)
        model_name = str(model) if model is not None else str(runner.model_path)
        data_path = runner.data_path
    if as_json:
        click.echo(json.dumps({"model": model_name, "prompt": prompt, "by": by, "chat": chat,
                               "precision": precision, "data_path": data_path, "choice": scores[0].option,
                               "options": [s.as_dict() for s in scores]}, ensure_ascii=False))
        return
    width = max(len(repr(s.option)) for s in scores)
    click.echo(f"{'rank':>4}  {'option':<{width}}  {'logprob':>10}  {'mean':>9}  tokens")
    for s in scores:
        click.echo(f"{s.rank:>4}  {repr(s.option):<{width}}  {s.logprob:>10.4f}  {s.mean_logprob:>9.4f}  {s.n_tokens}")


@click.command()
@_MODEL
@click.option("--prompt", required=True, help="The text whose residual stream is captured.")
@click.option("--layer", "layer_spec", required=True, metavar="N[,N...]",
              help="Layers (0-based, as llama.cpp's l_out-N) after which to capture; ranges A-B allowed.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="The .safetensors file to write (atomically): l_out.N [tokens, hidden] float32, and tokens.")
@click.option("--chat/--no-chat", default=False, show_default=True, help="Put the prompt through the chat template.")
@_ANALYSIS_PRECISION
@click.option("--device", type=DEVICE, default="cpu", show_default=True)
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@_ANALYSIS_KV
@_steer_options
@click.option("--json", "as_json", is_flag=True, help="Print what was written as one JSON object.")
def capture(model, prompt, layer_spec, out, chat, precision, device, revision, kv_cache, steer, steer_layers,
            lora, as_json):
    """Write the residual stream after chosen layers, for every token, read through llama.cpp's eval callback."""
    from .capture import capture as run
    from .capture import parse_layers, write_safetensors

    layers = parse_layers(layer_spec)
    with _load_for(model, precision, device, revision, None, steer, steer_layers, kv_cache, lora) as runner:
        ids = runner.prompt_ids(prompt, chat=chat)
        states = run(runner, ids, layers)
        model_name = str(model) if model is not None else str(runner.model_path)
        data_path = runner.data_path
    tensors = {f"l_out.{n}": a for n, a in states.items()}
    tensors["tokens"] = np.asarray(ids, dtype=np.int64)
    meta = {"model": model_name, "prompt": prompt, "layers": layers, "precision": precision, "chat": chat,
            "steer": [str(s) for s in steer], "lora": list(lora), "producer": "hfview capture (llama.cpp l_out-N)"}
    write_safetensors(out, tensors, meta)
    info = {"out": str(out), "layers": layers, "n_tokens": len(ids),
            "hidden": int(next(iter(states.values())).shape[1]), "data_path": data_path}
    click.echo(json.dumps(info) if as_json else
               f"wrote {out}: layers {','.join(map(str, layers))} x {info['n_tokens']} tokens x {info['hidden']}")


def _prompt_lines(path: str) -> list[str]:
    """One prompt per line, blank lines skipped, escapes (\\n, \\t, ...) processed: the generator's files."""
    from pathlib import Path

    from .steer import unescape
    return [unescape(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line]


@click.command("steer-vector")
@_MODEL
@click.option("--positive", multiple=True, help="A positive prompt (repeatable; paired in order with --negative).")
@click.option("--negative", multiple=True, help="A negative prompt (repeatable).")
@click.option("--positive-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Positive prompts, one a line (cvector-generator's --positive-file format).")
@click.option("--negative-file", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False),
              help="The control-vector GGUF to write (atomically).")
@_ANALYSIS_PRECISION
@click.option("--device", type=DEVICE, default="cpu", show_default=True)
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@_ANALYSIS_KV
@click.option("--json", "as_json", is_flag=True)
def steer_vector(model, positive, negative, positive_file, negative_file, out, precision, device, revision,
                 kv_cache, as_json):
    """Make a control vector from paired contrast prompts (llama.cpp cvector-generator's "mean" method)."""
    from .steer import SteerError, steer_vector as run, write_control_vector

    pos = list(positive) + (_prompt_lines(positive_file) if positive_file else [])
    neg = list(negative) + (_prompt_lines(negative_file) if negative_file else [])
    if len(pos) != len(neg):
        raise SteerError(f"{len(pos)} positive and {len(neg)} negative prompts: they must pair up")
    if not pos:
        raise SteerError("give at least one pair: --positive TEXT --negative TEXT (or --positive-file/--negative-file)")
    with _load_for(model, precision, device, revision, kv_cache=kv_cache) as runner:
        directions = run(runner, list(zip(pos, neg)))
        from .capture import _arch
        hint = _arch(runner.sm.model)  # llama.cpp's general.architecture, as the generator's model_hint
        data_path = runner.data_path
    write_control_vector(out, directions, hint)
    layers = sorted(directions)
    info = {"out": str(out), "pairs": len(pos), "directions": [f"direction.{n}" for n in layers],
            "data_path": data_path}
    click.echo(json.dumps(info) if as_json else
               f"wrote {out}: {len(layers)} directions (direction.{layers[0]}..{layers[-1]}) from {len(pos)} pairs")


@click.command("export-lora")
@click.argument("adapter", type=click.Path(exists=True, file_okay=False))
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--base", default=None,
              help="The base model (directory or Hub id; default: adapter_config.json's base_model_name_or_path).")
@click.option("--outtype", type=click.Choice(["f32", "f16", "bf16"]), default="f32", show_default=True,
              help="As convert_lora_to_gguf.py --outtype (f32 is its default too).")
@click.option("--revision", default=None, help="Hub revision of the base model.")
def export_lora(adapter, out, base, outtype, revision):
    """Write a PEFT LoRA adapter as the GGUF convert_lora_to_gguf.py writes, byte for byte (atomically)."""
    from hfview import HfCheckpoint

    from .lora import LoraError, base_of
    from .lora import export_lora as run
    from .resolve import local_dir

    base = base or base_of(adapter)
    if base is None:
        raise LoraError(f"{adapter}: adapter_config.json names no base_model_name_or_path: pass --base MODEL")
    base_dir, _ = local_dir(base, revision)
    path = run(adapter, HfCheckpoint(base_dir, "f32", vocab_apart=False), out, outtype)
    click.echo(f"wrote {path} ({path.stat().st_size} bytes)")


COMMANDS = [generate, parity, serve, decide, capture, steer_vector, export_lora]

"""`hfview tokenize` and `hfview tokenizer-check` (registered into hfview's CLI by hfview.cli).

tokenize: the ids HfTokenizer gives for a text over MODEL's tokenizer files (what transformers 5.24's
AutoTokenizer gives). tokenizer-check: those ids against llama.cpp's tokenizer built from the vocabulary
of hfview's view of MODEL, over a corpus; exit status 0 only when every case agrees.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

# The default corpus lives in the source tree (fixtures/ is not installed with the package).
DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "tokenizer-check.txt"


def _model_dir(model: str, revision: str | None) -> Path:
    """MODEL as a local directory: an existing directory as is, anything else resolved as a Hub id."""
    from hfview.runner.resolve import local_dir

    return local_dir(model, revision)[0]


@click.command()
@click.option("--model", required=True, help="Checkpoint directory or Hub id.")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@click.option("--special/--no-special", default=True, show_default=True,
              help="Add the BOS/EOS the tokenizer's post-processor adds.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: ids and token strings.")
@click.argument("text")
def tokenize(model, revision, special, as_json, text):
    """Print the token ids of TEXT ('-': read standard input) under MODEL's Hugging Face tokenizer."""
    from .hf import HfTokenizer

    if text == "-":
        text = sys.stdin.read()
    hf = HfTokenizer(_model_dir(model, revision))
    ids = hf.encode(text, add_special_tokens=special)
    if as_json:
        click.echo(json.dumps({"model": model, "text": text, "add_special": special, "ids": ids,
                               "tokens": [hf.id_to_token(i) for i in ids]}, ensure_ascii=False))
    else:
        click.echo(" ".join(map(str, ids)))


@click.command("tokenizer-check")
@click.option("--model", required=True, help="Checkpoint directory or Hub id.")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@click.option("--corpus", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="One case per line, or llama.cpp's ggml-vocab-*.gguf.inp format "
                   "(default: fixtures/corpus/tokenizer-check.txt).")
@click.option("--special/--no-special", default=True, show_default=True,
              help="Add BOS/EOS on both sides (ours: the post-processor; llama.cpp: add_bos/add_eos).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def tokenizer_check(ctx, model, revision, corpus, special, as_json):
    """Compare our ids with llama.cpp's (from the view's vocabulary) on each corpus case: exit 0 only when
    all agree; mismatching cases are printed with both id lists."""
    from .parity import check_checkpoint, read_corpus

    if corpus is None:
        if not DEFAULT_CORPUS.is_file():
            from .errors import TokenizerError
            raise TokenizerError(f"the default corpus {DEFAULT_CORPUS} is not here (it ships with the source "
                                 "tree, not the installed package): pass --corpus FILE")
        corpus = DEFAULT_CORPUS
    texts = read_corpus(corpus)
    report = check_checkpoint(_model_dir(model, revision), texts, add_special=special, corpus_name=str(corpus))
    report.model = model
    click.echo(json.dumps(report.as_dict(), ensure_ascii=False) if as_json else report.render())
    ctx.exit(0 if report.passed else 1)


COMMANDS = [tokenize, tokenizer_check]

"""What the GLM families share: the GLM-4 BPE vocab with special ids found by token content."""
from __future__ import annotations

from pathlib import Path

from ...names import Keys


def glm_special_vocab(model_dir: Path, h: dict, by_content: tuple[tuple[str, str], ...],
                      tokenizer: str = "a GLM-4 tokenizer") -> list:
    """get_vocab_base's tokens as a gpt2 vocab, then SpecialVocab (merges, ids from the tokenizer files) with
    each (type, token content) of `by_content` set where the tokenizer files did not already set that type.
    The contents must be added tokens of the tokenizer, as in every GLM-4 tokenizer."""
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.hf_auto import AutoTokenizerView
    from hfview.tokenizer.special import SpecialVocab
    from hfview.tokenizer.vocab import bpe_tokens
    from hfview.tokenizer.writer import KVWriter

    model_dir = Path(model_dir)
    tokens, types, pre = bpe_tokens(model_dir, h)
    added = AutoTokenizerView(model_dir, h).get_added_vocab()
    w = KVWriter()
    w.add_string(Keys.Tokenizer.MODEL, "gpt2")
    w.add_string(Keys.Tokenizer.PRE, pre)
    w.add_array(Keys.Tokenizer.LIST, tokens)
    w.add_array(Keys.Tokenizer.TOKEN_TYPE, types)
    special = SpecialVocab(model_dir, load_merges=True)
    for typ, content in by_content:
        if content not in added:
            raise TokenizerError(f"{model_dir / 'tokenizer.json'}: {content!r} is not an added token; {tokenizer} "
                                 f"has it (the converter takes the {typ} token id from it)")
        special.set_special_token(typ, added[content])
    special.write(w)
    return w.kvs()


def glm_vocab(model_dir: Path, h: dict) -> list:
    # TextModel._set_vocab_glm: the BPE vocab, then bos/eot/unk/eom found by content among the added tokens
    return glm_special_vocab(model_dir, h, (("bos", "[gMASK]"), ("eot", "<|user|>"), ("unk", "<|endoftext|>"),
                                            ("eom", "<|observation|>")))

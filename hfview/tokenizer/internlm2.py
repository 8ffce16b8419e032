"""InternLM2's SentencePiece vocab as the converter's InternLM2Model.set_vocab writes it.

It differs from the plain SentencePiece routine: a piece that is the NUL character is written as '🐉' (an
empty string would break llama.cpp), pieces named [UNUSED...] are UNUSED, added_tokens.json entries are
appended (not placed by id), tokenizer_config.json's and tokenizer.json's added tokens overwrite their ids
(USER_DEFINED, CONTROL when special, score -1000), add_space_prefix comes from the model's normalizer, and a
chat model's '<|im_end|>' replaces the end-of-sequence id.
"""
from __future__ import annotations

from pathlib import Path

from hfview.gguf_layout import KV

from .errors import TokenizerError
from .special import SpecialVocab, read_json, read_tokenizer_json
from .spm import load_sentencepiece
from .writer import KVWriter
from ..names import Keys

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
CHAT_EOS = "<|im_end|>"
NUL_STAND_IN = "\U0001F409"  # 🐉


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(data):
            raise ValueError("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(data: bytes):
    """(field number, wire type, value) of a protobuf message: varints as ints, length-delimited as bytes."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire in (1, 5):
            value, i = data[i:i + (8 if wire == 1 else 4)], i + (8 if wire == 1 else 4)
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def add_dummy_prefix(path: Path) -> bool:
    """ModelProto.normalizer_spec (field 3).add_dummy_prefix (field 3, default true), read without protobuf."""
    data = path.read_bytes()
    try:
        found = True
        for number, wire, value in _fields(data):
            if number == 3 and wire == 2:
                for inner, inner_wire, flag in _fields(value):
                    if inner == 3 and inner_wire == 0:
                        found = bool(flag)
        return found
    except ValueError as e:
        raise TokenizerError(f"{path}: not a readable SentencePiece model ({e})") from e


def internlm2_vocab(model_dir: Path, hparams: dict) -> list[KV]:
    model_dir = Path(model_dir)
    path = model_dir / "tokenizer.model"
    if not path.is_file():
        raise TokenizerError(f"{path} is missing: InternLM2's vocab is its SentencePiece model")
    sp = load_sentencepiece(path)
    vocab_size = hparams.get("vocab_size", sp.vocab_size())
    if vocab_size > sp.vocab_size():
        raise TokenizerError(f"{path}: {sp.vocab_size()} pieces, but config.json's vocab_size is {vocab_size}; the "
                             f"converter reads one piece per id and fails past the model's last piece")

    tokens: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    for tid in range(vocab_size):
        piece = sp.IdToPiece(tid)
        if sp.IsUnknown(tid):
            typ = UNKNOWN
        elif sp.IsControl(tid):
            typ = CONTROL
        elif sp.IsUnused(tid):
            typ = UNUSED
        elif sp.IsByte(tid):
            typ = BYTE
        else:
            typ = NORMAL
        tokens.append(NUL_STAND_IN if piece == "\x00" else piece)
        scores.append(sp.GetScore(tid))
        types.append(UNUSED if piece.startswith("[UNUSED") else typ)

    added_path = model_dir / "added_tokens.json"
    if added_path.is_file():
        for content in read_json(added_path):
            tokens.append(content)
            scores.append(-1000.0)
            types.append(USER_DEFINED)

    chat_eos_id = None

    def overwrite(tid: int, data: dict, where: Path) -> None:
        nonlocal chat_eos_id
        if not 0 <= tid < len(tokens):
            raise TokenizerError(f"{where}: added token {data['content']!r} has id {tid}, outside the "
                                 f"{len(tokens)}-token vocab")
        if data["content"] == CHAT_EOS:
            chat_eos_id = tid
        tokens[tid], scores[tid] = data["content"], -1000.0
        types[tid] = CONTROL if data.get("special") else USER_DEFINED

    cfg_path = model_dir / "tokenizer_config.json"
    if cfg_path.is_file():
        for key, data in read_json(cfg_path).get("added_tokens_decoder", {}).items():
            overwrite(int(key), data, cfg_path)
    json_path = model_dir / "tokenizer.json"
    if json_path.is_file():
        for data in read_tokenizer_json(json_path).get("added_tokens", []):
            overwrite(int(data["id"]), data, json_path)

    w = KVWriter()
    w.add_string(Keys.Tokenizer.MODEL, "llama")
    w.add_string(Keys.Tokenizer.PRE, "default")
    w.add_array(Keys.Tokenizer.LIST, tokens)
    w.add_array(Keys.Tokenizer.SCORES, scores)
    w.add_array(Keys.Tokenizer.TOKEN_TYPE, types)
    w.add_bool(Keys.Tokenizer.ADD_PREFIX, add_dummy_prefix(path))
    special = SpecialVocab(model_dir, n_vocab=len(tokens))
    if "eos" not in special.special_token_ids:
        raise TokenizerError(f"{model_dir}: no end-of-sequence token in tokenizer_config.json / config.json; "
                             f"the converter's InternLM2 vocab needs one")
    if chat_eos_id is not None:
        special.special_token_ids["eos"] = chat_eos_id  # a chat model ends its turns with <|im_end|>
    special.write(w)
    return w.kvs()

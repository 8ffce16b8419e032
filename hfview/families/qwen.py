"""Qwen-1 (QWenLMHeadModel, model_type qwen, remote code: Qwen-1.8B/7B/14B/72B and their -Chat) -> llama.cpp `qwen`
(the converter's QwenModel).

The block of the release's modeling_qwen.py: RMSNorm ln_1, a fused c_attn (q rows, then k, then v, each
hidden_size wide) with biases, rotate-half rotary over the whole head (kv_channels wide) at rotary_emb_base, scores
scaled by 1/sqrt(head width), c_proj without a bias; RMSNorm ln_2 and a SiLU-gated MLP c_proj(w1(x) * silu(w2(x))),
whose gate is therefore w2 (the converter maps w2 to ffn_gate and w1 to ffn_up, as llama.cpp's qwen computes
up * silu(gate)); RMSNorm ln_f and an untied lm_head. The converter's QwenModel writes only TextModel's keys, read
from config.json as written (transformers has no Qwen-1 config class): rotary_emb_base as the rope base (or
rope_theta where a release states both), max_position_embeddings as the context, intermediate_size (twice the MLP
width, which llama.cpp's qwen halves) as the feed-forward length.

The pinned converter and llama.cpp disagree on one key: QwenModel writes layer_norm_epsilon under TextModel's
LayerNorm name (qwen.attention.layer_norm_epsilon), while llama.cpp's qwen requires
qwen.attention.layer_norm_rms_epsilon. The view writes the converter's bytes, so llama.cpp refuses it as it refuses
the converter's own file ("key not found in model: qwen.attention.layer_norm_rms_epsilon"); with that one key
supplied as a load-time KV override (llama.cpp's --override-kv; Family.load_kv, which hfview's runner applies) it
runs as Qwen-1 (tests/test_family_qwen.py).

Long context: released configs turn on use_dynamic_ntk and use_logn_attn. Both act only past seq_length tokens:
dynamic NTK raises the rope base by alpha = 2^ceil(log2(n / seq_length) + 1) - 1, which is 1 for n <= seq_length,
and logn scales a query at position i by log_seq_length(i), 1 for i <= seq_length. Up to seq_length tokens the
release's forward is the one llama.cpp's qwen computes; past it the release's base changes with the whole length
and its queries grow, which llama.cpp's qwen does not compute (tests/test_family_qwen.py measures both sides).

The vocabulary: the converter reads it only through the release's tokenizer code (tokenization_qwen.py, run with
trust_remote_code). hfview runs no checkpoint code: it reads qwen.tiktoken as that code reads it (`base64(token)
rank` per line, the stated ranks) and the special tokens that code defines at fixed ids (<|endoftext|>, <|im_start|>,
<|im_end|>, <|extra_0|>..<|extra_204|> from 151643 on), and writes what the converter's _set_vocab_qwen writes from
them: ids past the tokenizer as [PAD<id>], one merge per multi-byte token, BOS/EOS/UNK <|endoftext|> where config.json
states no special ids.

Qwen-VL and Qwen-Audio are QWenLMHeadModel too: Qwen-1's decoder with a visual (`visual`) or audio (`audio`) encoder
under transformer.visual.* / transformer.audio.*, whose output their forward puts in place of the image or audio
tags' positions; over text alone their forward is Qwen-1's. The converter drops the encoder's tensors (its
filter_tensors skips names holding "visual." / "audio.") and writes the text decoder, its tokens taken from the
release's tokenizer code, which numbers its own tags after Qwen's special tokens (Qwen-VL's <ref> .. <imgpad>,
Qwen-Audio's audio, task, language and timestamp tags): the view does the same, reading those tags as that code
defines them, and checks config.json's image_start_id / audio_start_id against them.
"""
from __future__ import annotations

import unicodedata
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError, shown
from ..family import Family, Refuse, RunnerFacts, Skip, Tensor, stated, unset
from ..names import GGUF, Keys
from ..params import text_model_parameters

# transformers has no Qwen-1 config class (the release's configuration_qwen.py is remote code the converter does not
# run): config.json is read as written, as the converter reads it
DEFAULTS = {"qwen": {}}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "max_position_embeddings", "layer_norm_epsilon", "rotary_emb_base", "rope_theta", "tie_word_embeddings",
    # checked: the computation llama.cpp's qwen has (head width, whole-head rotary, biases where it has them)
    "kv_channels", "rotary_pct", "no_bias",
    # checked: Qwen-1's long-context switches, which change nothing up to seq_length tokens (module docstring)
    "seq_length", "use_dynamic_ntk", "use_logn_attn",
    # the first release's names (Qwen-7B, August 2023), refused by name in check: the converter finds no
    # feed-forward length among them, and llama.cpp refuses its file
    "n_embd", "n_head", "n_layer", "n_positions", "ffn_hidden_size",
    # Qwen-VL's and Qwen-Audio's encoders (QWenLMHeadModel too): their presence names the release's added tags, and
    # the start tag's id is checked against them
    "visual", "audio",
})
HARMLESS: Harmless = {
    # dropout, the attention kernel, the dtype the release's code casts to, an export switch
    "emb_dropout_prob": ANY, "attn_dropout_prob": ANY, "use_flash_attn": ANY, "bf16": ANY, "fp16": ANY,
    "fp32": ANY, "softmax_in_fp32": ANY, "onnx_safe": ANY, "tokenizer_type": ANY,
    # the computation llama.cpp's qwen has: scores scaled by 1/sqrt(head width), a KV cache kept unquantized
    "scale_attn_weights": (True,), "use_cache_quantization": (False,), "use_cache_kernel": (False,),
    # the first release's Megatron-style keys, beside the names check refuses
    "activation": ("swiglu",), "pos_emb": ("rotary",), "apply_residual_connection_post_layernorm": (False,),
    "attn_pdrop": ANY, "embd_pdrop": ANY, "resid_pdrop": ANY, "bias_dropout_fusion": ANY, "params_dtype": ANY,
    "padded_vocab_size": ANY,
}

_ARCH = "qwen"
_H = "transformer.h.{bid}."
TENSORS = (
    Tensor("transformer.wte.weight", GGUF.TOKEN_EMBD.weight),
    Tensor(_H + "ln_1.weight", GGUF.ATTN_NORM.weight),
    Tensor(_H + "attn.c_attn.{wb}", GGUF.ATTN_QKV.wb),
    Tensor(_H + "attn.c_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_H + "ln_2.weight", GGUF.FFN_NORM.weight),
    Tensor(_H + "mlp.w1.weight", GGUF.FFN_UP.weight),
    Tensor(_H + "mlp.w2.weight", GGUF.FFN_GATE.weight),
    Tensor(_H + "mlp.c_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor("transformer.ln_f.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    # Qwen-VL's / Qwen-Audio's encoder, which the converter's filter_tensors drops (names holding "visual." / "audio.")
    Skip("transformer.visual.{rest}", when=lambda h: "visual" in h),
    Skip("transformer.audio.{rest}", when=lambda h: "audio" in h),
)

_REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "max_position_embeddings", "layer_norm_epsilon", "kv_channels", "seq_length")


REFUSE = (
    Refuse("rotary_pct", (1.0,), "the converter writes no rope width, and llama.cpp's qwen rotates the whole head; "
           "only rotary_pct 1.0 (every release's) runs as the model", default=1.0),
    # absent: refused by check as missing
    Refuse("intermediate_size", lambda v: v is None or v % 2 == 0, "odd: Qwen-1's MLP is intermediate_size / 2 wide "
           "(w1 and w2), and llama.cpp's qwen halves it too"),
    # `is True`, not (True,): 1 == True would pass a tuple
    Refuse("no_bias", lambda v: v is True, "the release's code then puts biases on c_proj, w1 and w2, which "
           "llama.cpp's qwen does not have (it has c_attn's only)", default=True),
    Refuse("tie_word_embeddings", unset, "llama.cpp's qwen needs its own output matrix and the converter writes none "
           "for a tied Qwen-1 (no release ties them)"),
    Refuse("rotary_emb_base", stated, "rotary_emb_base is missing; Qwen-1's config.json states it "
           "(the release's code rotates at it)"),
)


def check(h: dict, path: Path) -> None:
    if "visual" in h and "audio" in h:
        raise ConfigError(f"{path}: both visual and audio are stated: Qwen-VL's and Qwen-Audio's tokenizer code each add "
                          f"their own tags after Qwen's special tokens, and no release states both")
    for key, (start_key, start_tag) in _START_TAGS.items():
        if key not in h:
            continue
        encoder = h[key]  # an object: the config reader refuses any other value of a nested config
        wanted = special_tokens(h)[start_tag]
        if encoder.get(start_key, wanted) != wanted:
            raise ConfigError(f"{path}: {key}.{start_key} {shown(encoder[start_key])} is not {wanted}, the id of "
                              f"{start_tag} in the Qwen-{'VL' if key == 'visual' else 'Audio'} release's tokenizer code, "
                              f"which hfview reads as the converter runs it: this checkpoint's tokenizer is another")
    # before the required keys: Qwen-7B's first release lacks intermediate_size among them
    if "ffn_hidden_size" in h and "intermediate_size" not in h:
        # measured (tests/test_converter_refusals.py): the converter converts it, and llama.cpp, given the RMS epsilon
        # as the runner gives it, refuses its file
        raise ConfigError(f"{path}: ffn_hidden_size {h['ffn_hidden_size']} (Qwen-7B's first release, n_embd / "
                          f"n_layer names): the converter finds no feed-forward length among these names and writes "
                          f"none, and llama.cpp refuses its file (\"check_tensor_dims: tensor 'blk.0.ffn_gate.weight' "
                          f"has wrong shape; expected ..., 0\"); use the release's current config.json (hidden_size, "
                          f"intermediate_size, ...)")
    for key in _REQUIRED:
        if h.get(key) is None:
            raise ConfigError(f"{path}: {key} is missing; Qwen-1's config.json states it (no config class fills "
                              f"defaults: the converter reads the file as written)")
    hidden, heads = h["hidden_size"], h["num_attention_heads"]
    if h["kv_channels"] * heads != hidden:
        raise ConfigError(f"{path}: kv_channels {h['kv_channels']} x num_attention_heads {heads} is not hidden_size "
                          f"{hidden}: the release's attention splits c_attn in hidden_size parts, and llama.cpp's qwen "
                          f"has heads of hidden_size / num_attention_heads")
    base, theta = h.get("rotary_emb_base"), h["rope_parameters"].get("rope_theta")
    if theta != base:
        raise ConfigError(f"{path}: rope_theta {theta} and rotary_emb_base {base} differ: the converter writes "
                          f"rope_theta, the release's code rotates at rotary_emb_base")
    if h["max_position_embeddings"] < h["seq_length"]:
        raise ConfigError(f"{path}: max_position_embeddings {h['max_position_embeddings']} is below seq_length "
                          f"{h['seq_length']}: no release states that")


def normalise(h: dict) -> dict:
    """TextModel's rope base: rope_theta where the config states it (Qwen-72B states both), else rotary_emb_base."""
    rope = h["rope_parameters"]
    if "rope_theta" not in rope and h.get("rotary_emb_base") is not None:
        rope["rope_theta"] = h["rotary_emb_base"]
    return h


def load_kv(h: dict) -> dict:
    """The key llama.cpp's qwen requires and the converter does not write: the RMS epsilon, given at load."""
    return {f"{_ARCH}.attention.layer_norm_rms_epsilon": float(h["layer_norm_epsilon"])}


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's keys only (QwenModel adds none): block count, context, widths, heads, rope base, LayerNorm eps
    (as layer_norm_epsilon, the name the config gives it)."""
    return text_model_parameters(h, _ARCH, block_count, file_type)


# What the release's tokenization_qwen.py defines in code: its split pattern and its special tokens at fixed ids
QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
SPECIAL_START_ID = 151643
QWEN_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", *(f"<|extra_{i}|>" for i in range(205)))
# Qwen-VL's tokenization_qwen.py numbers its image tags (IMAGE_ST) after those: <img> is 151857, its config.json's
# visual.image_start_id
QWEN_VL_TAGS = ("<ref>", "</ref>", "<box>", "</box>", "<quad>", "</quad>", "<img>", "</img>", "<imgpad>")
# Qwen-Audio's numbers its audio tags (AUDIO_ST) after them: its eight languages, 3001 timestamps, 128 MIDI pitches
# and velocities; <audio> is 155163, its config.json's audio.audio_start_id
QWEN_AUDIO_TAGS = (
    "[[[AUDIO:modality]]]", "<|startoftranscript|>", "<|startofanalysis|>", "<|translate|>", "<|transcribe|>",
    "<|caption|>", "<|keyword|>", "<|unknown|>",
    *(f"<|{lang}|>" for lang in ("en", "zh", "de", "es", "ko", "fr", "ja", "it")),
    "<|zh_tr|>", "<|notimestamps|>", "<|sil|>", "<|timestamps|>", *(f"<|{i * 0.01:.2f}|>" for i in range(3001)),
    "<|caption_audiocaps|>", "<|caption_clotho|>", "<|audioset_ontology|>", "<|caption_plain|>", "<|itn|>",
    "<|wo_itn|>", "<|startofentityvalue|>", "<|endofentityvalue|>", "<|startofentitytype|>", "<|endofentitytype|>",
    "<|named_entity_recognition|>", "<|audio_grounding|>", "<|startofword|>", "<|endofword|>", "<|delim|>",
    "<|emotion_recognition|>", "<|music_description|>", "<|note_analysis|>", "<|pitch|>",
    *(f"<|midi_pitch_{i}|>" for i in range(128)), "<|velocity|>", *(f"<|midi_velocity_{i}|>" for i in range(128)),
    "<|sonic|>", "<|instrument|>", "<|speaker_meta|>", "<|song_meta|>", "<|question|>", "<|answer|>", "<|choice|>",
    "<|scene|>", "<|event|>", "<|vocal_classification|>", "<|speech_understanding|>", "<|scenario|>", "<|action|>",
    "<|entities|>", "<|speech_edit|>", "<audio>", "</audio>")
_ADDED_TAGS = {"visual": QWEN_VL_TAGS, "audio": QWEN_AUDIO_TAGS}
_START_TAGS = {"visual": ("image_start_id", "<img>"), "audio": ("audio_start_id", "<audio>")}


def special_tokens(h: dict) -> dict[str, int]:
    """The special tokens the release's tokenizer code defines, by id: Qwen's, then Qwen-VL's or Qwen-Audio's tags
    where config.json states that encoder."""
    added = next((tags for key, tags in _ADDED_TAGS.items() if key in h), ())
    return {t: SPECIAL_START_ID + i for i, t in enumerate(QWEN_SPECIALS + added)}


def _probe_ids(ranks: dict[bytes, int], specials: dict[str, int]) -> list[int]:
    """The ids tokenization_qwen.py's encode gives the converter's probe text: NFC, the split, BPE in each piece
    (its special tokens are allowed in text; the probe has none)."""
    from hfview.tokenizer.digests import PRE_TOKENIZER_PROBE
    from hfview.tokenizer.tiktoken_bpe import bpe_parts, tiktoken_split
    text = unicodedata.normalize("NFC", PRE_TOKENIZER_PROBE)
    if any(s in text for s in specials):
        raise AssertionError("the pre-tokenizer probe names a Qwen special token")
    ids: list[int] = []
    for piece in tiktoken_split(QWEN_PATTERN, text):
        data = piece.encode("utf-8")
        ids += [ranks[data]] if data in ranks else [ranks[p] for p in bpe_parts(ranks, data)]
    return ids


def vocab(model_dir: Path, h: dict) -> list:
    """_set_vocab_qwen: tokens of the ranks and the special tokens over vocab_size ids (holes as [PAD<id>]), the
    pre-tokenizer named by the probe digest, one merge per two-part token, SpecialVocab without merges, and
    <|endoftext|> as BOS and EOS where config.json states none, and always as UNK."""
    import hashlib

    from hfview.tokenizer.digests import pre_tokenizer_named
    from hfview.tokenizer.special import SpecialVocab
    from hfview.tokenizer.tiktoken_bpe import load_ranks, recover_merges, tiktoken_tokens
    from hfview.tokenizer.writer import KVWriter

    ranks_file = Path(model_dir) / "qwen.tiktoken"
    if not ranks_file.is_file():
        raise ConfigError(f"{ranks_file} is missing: the converter reads Qwen-1's vocabulary from qwen.tiktoken "
                          f"(through the release's tokenizer code), and hfview reads that file")
    ranks = load_ranks(ranks_file)
    specials = special_tokens(h)
    taken = set(ranks.values())
    if len(taken) != len(ranks) or any(tid in taken for tid in specials.values()):
        raise ConfigError(f"{ranks_file}: its ranks repeat or reach the special tokens' ids ({SPECIAL_START_ID} on): "
                          f"the release's tokenizer code asserts they do not")
    if max(taken | set(specials.values())) >= h["vocab_size"]:
        raise ConfigError(f"{ranks_file}: {len(ranks)} ranks and {len(specials)} special tokens up to id "
                          f"{max(taken | set(specials.values()))}, but vocab_size is {h['vocab_size']}: the converter "
                          f"asserts every id fits")
    digest = hashlib.sha256(str(_probe_ids(ranks, specials)).encode()).hexdigest()
    pre = pre_tokenizer_named(digest, str(ranks_file))
    tokens, types = tiktoken_tokens(ranks, specials, h["vocab_size"], str(ranks_file))
    special = SpecialVocab(model_dir, load_merges=False)
    special.merges = recover_merges(ranks, require_pairs=True, where=str(ranks_file))
    if not special.special_token_ids:
        special.set_special_token("bos", specials["<|endoftext|>"])
        special.set_special_token("eos", specials["<|endoftext|>"])
    special.set_special_token("unk", specials["<|endoftext|>"])
    w = KVWriter()
    w.add_string(Keys.Tokenizer.MODEL, "gpt2")
    w.add_string(Keys.Tokenizer.PRE, pre)
    w.add_array(Keys.Tokenizer.LIST, tokens)
    w.add_array(Keys.Tokenizer.TOKEN_TYPE, types)
    special.write(w)
    return w.kvs()


FAMILY = Family(
    name="qwen",
    gguf_arch=_ARCH,
    architectures=("QWenLMHeadModel",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    runner=RunnerFacts(load_kv=load_kv),
)

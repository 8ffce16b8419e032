"""Errors the tokenizer package raises on purpose: each names the file or key at fault and what to do."""


from hfview.errors import CheckpointError


class TokenizerError(CheckpointError, ValueError):
    """The checkpoint's tokenizer files cannot give the tokenizer.* metadata the converter would write."""


class UnknownPreTokenizer(TokenizerError):
    """The probe digest of a BPE tokenizer is not in the converter's table (the converter refuses it too)."""

    def __init__(self, digest: str, where: str = ""):
        self.digest = digest
        at = f" ({where})" if where else ""
        super().__init__(
            f"the BPE pre-tokenizer{at} has probe digest {digest}, which the pinned converter does not know: "
            "convert_hf_to_gguf.py refuses this tokenizer (get_vocab_base_pre raises NotImplementedError). "
            "Use a checkpoint whose tokenizer the converter supports, or one converted by a newer llama.cpp.")

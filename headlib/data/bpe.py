"""Joint source+target BPE with HF `tokenizers`, trained once and cached by corpus + settings.

NFC normalisation and a Metaspace pre-tokenizer, so that `decode(encode(s)) == NFC(s)` for
every line that does not start with a space and whose characters were seen in training (inner
spaces are kept; a leading space is dropped, which sacreBLEU's tokenizer ignores anyway). BLEU
is computed on this detokenized output.
"""
from __future__ import annotations

import hashlib
import unicodedata
from collections import Counter
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from headlib.files import artifacts_dir, atomic_write

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)   # ids 0, 1, 2, 3
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)


class BPE:
    """A trained joint BPE: `encode` gives piece ids (no specials), `decode` gives raw text."""

    def __init__(self, tokenizer: Tokenizer):
        self.tok = tokenizer
        assert [self.tok.token_to_id(s) for s in SPECIALS] == list(range(4)), "special ids moved"

    @property
    def vocab_size(self) -> int:
        return self.tok.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts) -> list[list[int]]:
        return [e.ids for e in self.tok.encode_batch(list(texts), add_special_tokens=False)]

    def encode_targets(self, texts) -> list[list[int]]:
        """Target-side texts as ids: with one joint BPE, as `encode_batch` (a pretrained model's
        tokenizer may split targets with a model of their own)."""
        return self.encode_batch(texts)

    def pieces(self, text: str) -> list[str]:
        return self.tok.encode(text, add_special_tokens=False).tokens

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of each piece in `text` (for mapping pieces to parsed words)."""
        return self.tok.encode(text, add_special_tokens=False).offsets

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids if int(i) >= len(SPECIALS) or int(i) == UNK_ID]
        return self.tok.decode(ids, skip_special_tokens=False)

    def decode_batch(self, batch) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def save(self, path: str | Path) -> None:
        atomic_write(path, lambda tmp: self.tok.save(str(tmp)))

    @classmethod
    def load(cls, path: str | Path) -> "BPE":
        return cls(Tokenizer.from_file(str(path)))


def normalize(text: str) -> str:
    """What round-tripping preserves: the NFC form of the line (see the module docstring)."""
    return unicodedata.normalize("NFC", text)


def train_bpe(texts, vocab_size: int) -> BPE:
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS),
                                  min_frequency=2, show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    return BPE(tok)


def cached_bpe(src, tgt, vocab_size: int, cache_dir: str | Path | None = None) -> BPE:
    """Train a joint BPE on source+target lines, or load the one cached for these exact inputs."""
    h = hashlib.sha256(f"bpe-v1|{vocab_size}|".encode())
    for line in (*src, *tgt):
        h.update(line.encode()); h.update(b"\n")
    path = Path(cache_dir or artifacts_dir() / "bpe") / f"bpe-{vocab_size}-{h.hexdigest()[:16]}.json"
    if path.is_file():
        return BPE.load(path)
    bpe = train_bpe([*src, *tgt], vocab_size)
    bpe.save(path)
    return bpe


def piece_frequencies(bpe, sentences) -> Counter:
    """Training-data frequency of every BPE piece id (rare tokens, Sec. 5.3)."""
    freq: Counter = Counter()
    for ids in bpe.encode_batch(sentences):
        freq.update(ids)
    return freq

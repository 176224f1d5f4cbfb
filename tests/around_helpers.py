"""A digit 'tokenizer' so that text-level functions (BLEU, patterns) run on `trained_tiny`."""
import random

from headlib.data.corpora import Corpus


class DigitBPE:
    """Token i <-> the word "w<i>"."""

    def encode_batch(self, texts):
        return [[int(w[1:]) for w in t.split()] for t in texts]

    encode_targets = encode_batch

    def decode(self, ids):
        return " ".join(f"w{i}" for i in ids)


def reverse_corpus(n=12, seed=3, vocab=12):
    """Sentences of the reversal task `trained_tiny` learned (tokens 4..vocab-1)."""
    rng = random.Random(seed)
    src = [[rng.randrange(4, vocab) for _ in range(rng.randrange(3, 7))] for _ in range(n)]
    text = lambda ids: " ".join(f"w{i}" for i in ids)
    return Corpus("reverse", tuple(text(s) for s in src), tuple(text(s[::-1]) for s in src))

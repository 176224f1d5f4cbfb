"""Head functions of a pruned model (`headlib.analysis.probe`, Fig. 8): only open heads are
labelled, and a closed head is no baseline for the others. Hand-built maps with known functions."""
from collections import Counter

import torch

from headlib.analysis import probe as probe_module
from headlib.analysis.heads import Parsed
from headlib.analysis.probe import FunctionProbe, open_encoder_heads

TEXT = "ab cd ef gh ij"                   # 5 words of 2 pieces each: 10 pieces, then EOS
RAREST = 7                                # the piece "h" of "gh"


class PairBPE:
    """Every word is two pieces: its first character and the rest."""

    def offsets(self, text):
        out, pos = [], 0
        for word in text.split(" "):
            start = text.index(word, pos)
            out += [(start, start + 1), (start + 1, start + len(word))]
            pos = start + len(word)
        return out

    def encode_batch(self, sentences):
        return [[100 + i for i in range(len(self.offsets(s)))] for s in sentences]


def maps_with_known_functions(n: int = 10) -> torch.Tensor:
    """(1 layer, 3 heads, n+1, n+1): head 1 attends to the rarest piece, head 2 to the next piece
    (positional +1 at 9 of 10 queries), head 3 to the first piece."""
    m = torch.zeros(1, 3, n + 1, n + 1)
    for q in range(n):
        m[0, 0, q, RAREST] = 1
        m[0, 1, q, min(q + 1, n - 1)] = 1
        m[0, 2, q, 0] = 1
    m[:, :, n] = 1 / (n + 1)
    return m


class MaskedModel:
    def __init__(self, open_heads):
        self.mask = torch.tensor([open_heads], dtype=torch.float)          # (layers, heads)

    def head_mask(self, kind):
        return self.mask


def known_probe(monkeypatch) -> FunctionProbe:
    """A probe whose model's maps are `maps_with_known_functions` on 4 copies of TEXT, parsed by hand,
    with piece frequencies that make piece RAREST the rarest (and not among the 500 most frequent)."""
    maps = [maps_with_known_functions()] * 4
    monkeypatch.setattr(probe_module, "encoder_attention", lambda model, bpe, sentences: maps)
    freq = Counter({1000 + i: 1000 for i in range(600)}) + Counter({100 + i: 50 - i for i in range(10)})
    freq[100 + RAREST] = 1
    probe = FunctionProbe(PairBPE(), [TEXT] * 4, train_sources=[])
    probe.__dict__.update(parsed=[Parsed(TEXT, ((0, 2), (3, 5), (6, 8), (9, 11), (12, 14)), (("nsubj", 1, 0),))] * 4,
                          freq=freq)                                  # the cached properties, set by hand
    return probe


def labelled(open_heads, monkeypatch) -> dict:
    out = known_probe(monkeypatch)(MaskedModel(open_heads))
    assert out["function_sentences"] == 4
    assert [(r["layer"], r["head"]) for r in out["head_stats"]] == [(1, h + 1) for h in range(3) if open_heads[h]]
    return {(r["layer"], r["head"]): r["functions"] for r in out["functions"]}


def test_all_heads_open_get_their_known_functions(monkeypatch):
    assert labelled([1, 1, 1], monkeypatch) == {(1, 1): "rare", (1, 2): "pos+1"}


def test_a_closed_head_is_not_labelled_and_not_the_others_baseline(monkeypatch):
    assert labelled([0, 1, 1], monkeypatch) == {(1, 2): "pos+1"}      # no other head attends to the rarest piece
    assert labelled([1, 0, 1], monkeypatch) == {(1, 1): "rare"}
    assert labelled([0, 0, 1], monkeypatch) == {}


def test_open_encoder_heads_are_one_based():
    assert open_encoder_heads(MaskedModel([0, 1, 1])).values.tolist() == [[1, 2], [1, 3]]


def test_head_stats_measure_how_close_each_open_head_comes_to_each_function(monkeypatch):
    stats = {r["head"]: r for r in known_probe(monkeypatch)(MaskedModel([1, 1, 1]))["head_stats"]}
    assert (stats[2]["offset"], stats[2]["positional_share"]) == (1, 0.9)       # 9 of 10 queries at +1
    assert stats[1]["rarest"] == 1.0 and stats[2]["rarest"] == stats[3]["rarest"] == 0.0
    # nsubj: the verb "cd" (word 1) -> its subject "ab" (word 0); head 3 attends to piece 0 from everywhere: always
    # right for v->s, as the baseline's offset -1 is; head 1 (to word 3) never right: margin -1
    assert stats[3]["syntactic_margin"] == 0.0 and stats[1]["syntactic_margin"] == -1.0

"""Deletion curves: on a hand-built additive score the best ordering's curve is lowest, the
worst's highest, and a random ordering lies between them at every fraction; refined LRP with
every head kept is plain LRP, and with no head kept relevance reaches the source only by the
residual path."""
import random

import pytest
import torch

from headlib.bpe import UNK_ID
from headlib.deletion import compare_orderings, deletion_curve
from headlib.lrp import own_translations, source_relevance_batch

from around_helpers import DigitBPE, reverse_corpus


def test_random_deletion_lies_between_best_and_worst_on_an_additive_score():
    weights = torch.tensor([5.0, 0.5, 3.0, 1.0, 4.0, 2.0, 0.0])                 # last: EOS, never deleted
    src = torch.arange(10, 17)

    def score(srcs):  # the sum of the weights of the tokens still present
        return ((srcs != UNK_ID).float() * weights).sum(1)

    best = weights[:-1].argsort(descending=True).tolist()
    worst = best[::-1]
    low, high = deletion_curve(score, src, best), deletion_curve(score, src, worst)
    for seed in range(20):
        order = random.Random(seed).sample(range(6), 6)
        mid = deletion_curve(score, src, order)
        assert all(a <= m + 1e-9 <= b + 2e-9 for a, m, b in zip(low, mid, high)), (seed, low, mid, high)
    assert low[0] == high[0] == 15.5 and low[-1] == high[-1] == 0.0
    with pytest.raises(ValueError, match="permutation"):
        deletion_curve(score, src, [0, 1, 2])


def test_refined_lrp_with_all_heads_is_plain_lrp(trained_tiny):
    model, bpe = trained_tiny, DigitBPE()
    src = torch.tensor([[5, 6, 7, 8, 2]])
    tgt_in, tgt_out = own_translations(model, src)
    plain = source_relevance_batch(model, src, tgt_in, tgt_out)
    torch.testing.assert_close(source_relevance_batch(model, src, tgt_in, tgt_out, torch.ones(2, 4)), plain)
    assert not torch.allclose(source_relevance_batch(model, src, tgt_in, tgt_out, torch.zeros(2, 4)), plain)
    table = compare_orderings(model, bpe, list(reverse_corpus(4).src), torch.tensor([[1, 1, 0, 0], [0, 1, 1, 0.0]]))
    assert set(table["ordering"]) == {"plain LRP", "refined LRP", "random"} and table["area"].notna().all()

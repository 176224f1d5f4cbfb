"""Attention edits: quantization with enough bits is the identity, thresholds count what they
zero, constant attention with a sentence's own pattern reproduces the sentence's output."""
import pytest
import torch
from around_helpers import DigitBPE, reverse_corpus

from headlib.analysis.interventions import (Counts, average_patterns, constant_attention, edit_attention, log_quantize,
                                            threshold)
from headlib.data.batching import source_tensor


def weights():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(2, 3, 5, 5, generator=g) * 3).softmax(-1)


def test_log_quantization_with_enough_bits_is_the_identity():
    w = weights()
    torch.testing.assert_close(log_quantize(24, floor=1e-9)(w, 0), w, atol=1e-6, rtol=0)
    coarse = log_quantize(2, floor=1e-2)(w, 0)          # 3 levels: 1e-2, 1e-1, 1; below the floor 0
    expected = torch.where(w >= 1e-2, 10 ** torch.round(torch.log10(w)), torch.zeros_like(w))
    torch.testing.assert_close(coarse, expected, rtol=1e-5, atol=0)


def test_threshold_zeroes_and_counts_small_values():
    w, counts = weights(), Counts()
    out = threshold(0.1, counts)(w, 0)
    assert torch.equal(out, torch.where(w >= 0.1, w, torch.zeros_like(w)))
    assert counts.values == w.numel() and counts.zeroed == int((w < 0.1).sum())
    assert torch.equal(threshold(0.0)(w, 0), w)


def test_constant_attention_with_a_sentences_own_pattern_reproduces_it(trained_tiny):
    model, bpe = trained_tiny, DigitBPE()
    sentence = reverse_corpus(1).src[0]
    patterns = average_patterns(model, bpe, [sentence])          # the average of one sentence
    src = source_tensor(bpe.encode_batch([sentence]))
    tgt_in = torch.tensor([[1, 5, 6]])
    with torch.no_grad():
        before = model(src, tgt_in)
        every_head = {(l, h) for l in range(2) for h in range(4)}
        with edit_attention(model, "enc-self", constant_attention(patterns, every_head)):
            same = model(src, tgt_in)
        other = next(s for s in reverse_corpus(50, seed=9).src    # another sentence of the same length
                     if len(s.split()) == len(sentence.split()) and s != sentence)
        with edit_attention(model, "enc-self", constant_attention(average_patterns(model, bpe, [other]), every_head)):
            edited = model(src, tgt_in)
    torch.testing.assert_close(same, before, atol=1e-6, rtol=0)
    assert not torch.allclose(edited, before, atol=1e-4)           # the edit is applied
    with torch.no_grad():
        assert torch.equal(model(src, tgt_in), before)              # hooks removed


def test_average_patterns_average_per_length(trained_tiny):
    """Two sentences of one length average to the mean of their maps; another length keys its own."""
    from headlib.analysis.heads import encoder_attention
    model, bpe = trained_tiny, DigitBPE()
    pool = list(reverse_corpus(60, seed=3).src)
    a = pool[0]
    b = next(s for s in pool[1:] if len(s.split()) == len(a.split()))
    c = next(s for s in pool if len(s.split()) != len(a.split()))
    patterns = average_patterns(model, bpe, [a, b, c])
    ma, mb, mc = (encoder_attention(model, bpe, [s])[0] for s in (a, b, c))
    assert sorted(patterns) == sorted({ma.size(-1), mc.size(-1)})
    torch.testing.assert_close(patterns[ma.size(-1)], (ma + mb) / 2)
    torch.testing.assert_close(patterns[mc.size(-1)], mc)


def test_constant_attention_in_a_padded_batch_and_for_unseen_lengths(trained_tiny):
    """Each row of a padded batch gets its own length's pattern (read from the padding), as when
    alone; a length never seen uses the next longer pattern cropped and renormalised (counted as
    a fallback); with no longer one the weights are left as they are."""
    model, bpe = trained_tiny, DigitBPE()
    pool = list(reverse_corpus(60, seed=4).src)
    short = pool[0]
    long_ = next(s for s in pool if len(s.split()) > len(short.split()) + 1)
    every_head = {(l, h) for l in range(2) for h in range(4)}
    patterns = average_patterns(model, bpe, pool[10:])
    assert {len(s.split()) + 1 for s in (short, long_)} <= set(patterns)
    edit = constant_attention(patterns, every_head)
    tgt_in = torch.tensor([[1, 5, 6]])
    with torch.no_grad(), edit_attention(model, "enc-self", edit):
        alone = [model(source_tensor(bpe.encode_batch([s])), tgt_in)[0] for s in (short, long_)]
        both = model(source_tensor(bpe.encode_batch([short, long_])), tgt_in.expand(2, -1))
    torch.testing.assert_close(both[0], alone[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(both[1], alone[1], atol=1e-5, rtol=0)
    n = len(short.split()) + 1                                   # pieces + EOS
    longer = {m: p for m, p in patterns.items() if m > n}
    counts = Counts()
    w = torch.full((1, 4, n, n), 1.0 / n)
    out = constant_attention(longer, every_head, counts)(w, 0)
    cropped = longer[min(longer)][0][:, :n, :n]
    torch.testing.assert_close(out[0], cropped / cropped.sum(-1, keepdim=True))
    assert counts.fallbacks == 1 and torch.allclose(out[0].sum(-1), torch.ones(4, n))
    assert torch.equal(constant_attention({m: p for m, p in patterns.items() if m < n}, every_head)(w, 0), w)


def test_bad_bits_are_refused():
    with pytest.raises(ValueError, match="bits must be >= 1"):
        log_quantize(0)

"""Deletion curves: on a hand-built additive score the best ordering's curve is lowest, the
worst's highest, and a random ordering lies between them at every fraction; refined LRP with
every head kept is plain LRP, and with no head kept relevance reaches the source only by the
residual path."""
import random

import pytest
import torch
from around_helpers import DigitBPE, reverse_corpus

from headlib.analysis.deletion import compare_orderings, deletion_curve
from headlib.analysis.lrp import own_translations, source_relevance_batch
from headlib.data.bpe import UNK_ID


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
    # Nothing deleted: every ordering starts at the mean log-probability of the model's own
    # translation, written out here from one teacher-forced forward pass
    first = table[table["sentence"] == 0]
    src = torch.tensor([bpe.encode_batch(list(reverse_corpus(4).src[:1]))[0] + [2]])
    tgt_in, tgt_out = own_translations(model, src)
    with torch.no_grad():
        logp = model(src, tgt_in).float().log_softmax(-1)[0]
    expected = logp.gather(-1, tgt_out[0, :, None]).mean().item()
    assert first["0"].tolist() == pytest.approx([expected] * 3, rel=1e-5)


def test_source_relevance_is_the_sum_over_steps_of_each_steps_input_relevance():
    """One backward pass over the summed top-1 logits = the per-step relevance of the encoder's
    input (written out step by step with the conservation test's helper), summed over steps."""
    from test_lrp import batch, relevance_at, tiny_model
    model = tiny_model(seed=2, zero_bias=False)
    src, tgt_in, tgt_out = batch()
    fast = source_relevance_batch(model, src, tgt_in, tgt_out)          # (B, S)
    for row in range(src.size(0)):
        steps = [t for t in range(tgt_out.size(1)) if tgt_out[row, t] != 0]
        per_step = sum(relevance_at(model, src[row:row + 1], tgt_in[row:row + 1, :max(steps) + 1], t, 0,
                                    ["encoder.0"])[1][0] for t in steps)
        assert fast[row].sum().item() == pytest.approx(per_step, rel=1e-4, abs=1e-5)


def test_refined_lrp_conserves_the_logits_with_the_blocked_heads_as_a_sink():
    """Zero biases; relevance blocked at every head of encoder layer 1. What reaches the source (by
    the residual path only), plus what stops at the blocked heads' outputs z (z . dL/dz, the same
    gradient as in plain LRP: nothing above layer 1 changes), plus what reaches the decoder's input
    is the whole of L, the summed top-1 logits. Blocking one head instead moves relevance by that
    head alone: another head gives another result."""
    from test_lrp import batch, tiny_model

    from headlib.analysis.lrp import capture_heads, conservative, top1_logits
    model = tiny_model(seed=5)
    src, tgt_in, tgt_out = batch()
    valid = tgt_out.ne(0)
    keep = torch.ones(2, 4)
    keep[0] = 0
    refined = source_relevance_batch(model, src, tgt_in, tgt_out, keep)           # (B, S)
    captured = {}
    hook = model.decoder[0].register_forward_pre_hook(lambda m, a: captured.__setitem__("y", a[0]))
    with torch.enable_grad(), conservative(model), capture_heads(model) as heads:
        total = top1_logits(model(src, tgt_in))[valid].sum()
        g_z, g_y = torch.autograd.grad(total, [heads[0], captured["y"]])
    hook.remove()
    sink = (heads[0] * g_z).sum() + (captured["y"] * g_y).sum()
    assert refined.sum().item() + sink.item() == pytest.approx(total.item(), rel=1e-4)
    assert abs(sink.item()) > 1e-2 * abs(total.item())                            # the heads carried some
    one, other = torch.ones(2, 4), torch.ones(2, 4)
    one[1, 2], other[1, 0] = 0, 0
    plain = source_relevance_batch(model, src, tgt_in, tgt_out)
    a, b = (source_relevance_batch(model, src, tgt_in, tgt_out, k) for k in (one, other))
    assert not torch.allclose(a, plain) and not torch.allclose(a, b)

"""Exactly-k subset gates (DSP): the relaxation sums to k and tends to the hard top-k."""
import pytest
import torch

from headlib.pruning.subset import SubsetGates, soft_top_k, subset_overlap


def test_soft_top_k_at_a_middle_temperature_is_the_written_out_relaxation():
    """k = 2, tau = 1 on three scores: the first softmax, then the scores lowered by log(1 - p)
    and a second softmax (Xie & Ermon 2019), written out with math; the two sum to k."""
    import math
    scores = [2.0, 1.0, 0.0]

    def softmax(x):
        e = [math.exp(v) for v in x]
        return [v / sum(e) for v in e]
    p1 = softmax(scores)
    p2 = softmax([s + math.log(1 - p) for s, p in zip(scores, p1)])
    expected = [a + b for a, b in zip(p1, p2)]
    mask = soft_top_k(torch.tensor(scores, dtype=torch.float64), 2, 1.0)
    assert mask.tolist() == pytest.approx(expected, rel=1e-12)
    assert sum(expected) == pytest.approx(2.0) and expected[0] > expected[1] > expected[2]   # may exceed 1


def test_soft_top_k_at_low_temperature_is_the_hard_top_k():
    scores = torch.tensor([0.3, 2.0, -1.0, 1.5, 0.9, -0.2], dtype=torch.float64)
    hard = torch.zeros(6, dtype=torch.float64)
    hard[scores.topk(3).indices] = 1
    assert torch.allclose(soft_top_k(scores, 3, 1e-3), hard, atol=1e-9)


def test_gates_hard_masks_keep_the_k_largest_logits_and_train_with_exact_budget():
    gates = SubsetGates({"enc-self": (2, 4), "dec-enc": (1, 4)}, k=5)
    with torch.no_grad():
        gates.logits.copy_(torch.arange(12.0).flip(0))             # head i has logit 11 - i
    masks = gates.hard_masks()
    assert masks["enc-self"].flatten().tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    assert masks["dec-enc"].sum() == 0
    gates.train()
    soft = gates()
    assert sum(m.sum() for m in soft.values()).item() == pytest.approx(5, abs=1e-4)
    assert gates.penalty().item() == 0
    gates.eval()
    assert all(torch.equal(gates()[k], masks[k]) for k in masks)


def test_anneal_is_log_linear_and_bad_k_is_named():
    gates = SubsetGates({"enc-self": (2, 4)}, k=2, tau=(0.1, 1e-3))
    gates.anneal(0.5)
    assert gates.tau == pytest.approx(1e-2)
    with pytest.raises(ValueError, match="prune.k must be in 1..8"):
        SubsetGates({"enc-self": (2, 4)}, k=9)


def test_subset_overlap_is_one_for_separated_logits_and_k_over_n_for_equal_ones():
    separated = torch.tensor([50.0, 40.0, 30.0, 0.0, -10.0, -20.0])
    assert subset_overlap(separated, 3) == 1.0
    assert abs(subset_overlap(torch.zeros(48), 12) - 12 / 48) < 0.01    # random subsets
    between = subset_overlap(torch.tensor([2.0, 1.0, 0.0, -1.0]), 2)
    assert 0.5 < between < 1.0

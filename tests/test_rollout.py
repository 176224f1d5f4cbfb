"""Attention rollout: identity attention rolls out to the identity; rows stay distributions."""
import torch

from headlib.rollout import rollout, source_attributions

from around_helpers import DigitBPE, reverse_corpus


def test_rollout_of_identity_attention_is_the_identity():
    maps = torch.eye(5).expand(3, 4, 5, 5)
    torch.testing.assert_close(rollout(maps), torch.eye(5))


def test_rollout_is_the_product_of_residual_mixed_layers():
    g = torch.Generator().manual_seed(0)
    maps = torch.randn(2, 3, 4, 4, generator=g).softmax(-1)
    a = [0.5 * torch.eye(4) + 0.5 * m.mean(0) for m in maps]
    torch.testing.assert_close(rollout(maps), a[1] @ a[0])
    torch.testing.assert_close(rollout(maps).sum(-1), torch.ones(4))


def test_source_attributions_are_rank_correlations(trained_tiny):
    table = source_attributions(trained_tiny, DigitBPE(), list(reverse_corpus(6).src))
    assert len(table) >= 3
    assert table[["LRP vs local", "LRP vs rollout", "local vs rollout"]].abs().le(1).all().all()

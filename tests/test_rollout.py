"""Attention rollout: identity attention rolls out to the identity; rows stay distributions."""
import pytest
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
    from scipy.stats import spearmanr
    from headlib.lrp import own_translations, source_relevance_batch
    sentences = list(reverse_corpus(6).src)                      # 3-6 tokens each: every one has a row
    table = source_attributions(trained_tiny, DigitBPE(), sentences)
    assert table["tokens"].tolist() == [len(s.split()) for s in sentences]
    # Without the attention part (residual share 1) the rollout is the identity: global = local
    no_mixing = source_attributions(trained_tiny, DigitBPE(), sentences, residual=1.0)
    assert no_mixing["local vs rollout"].eq(1.0).all()
    # LRP vs local for the first sentence, written out: cross attention summed over target steps
    src = torch.tensor([DigitBPE().encode_batch(sentences[:1])[0] + [2]])       # EOS id 2
    tgt_in, tgt_out = own_translations(trained_tiny, src)
    with torch.no_grad():
        _, w = trained_tiny(src, tgt_in, return_attention=True)
    n = src.size(1) - 1
    local = w["dec-enc"][:, 0, :, :tgt_out.size(1), :n].float().mean(dim=(0, 1)).sum(0)
    lrp = source_relevance_batch(trained_tiny, src, tgt_in, tgt_out)[0, :n]
    assert table["LRP vs local"][0] == pytest.approx(spearmanr(lrp.numpy(), local.numpy()).statistic)


def test_layer_profile_and_agreement_on_a_hand_built_table():
    import pandas as pd
    from headlib.crosslingual import agreement, layer_profile
    table = pd.DataFrame({"layer": [1, 1, 1, 1, 2, 2, 2, 2], "head": [1, 2, 3, 4] * 2,
                          "relevance": [0.7, 0.1, 0.1, 0.1, 0.25, 0.25, 0.25, 0.25], "confidence": [0.5] * 8})
    prof = layer_profile(table)
    assert prof["top share"].round(9).tolist() == [0.7, 0.25]
    assert abs(prof["effective heads"][0] - 1 / 0.52) < 1e-9 and abs(prof["effective heads"][1] - 4) < 1e-9
    rows = agreement({"x": pd.Series([1, 2, 3]), "y": pd.Series([3, 2, 1]), "z": pd.Series([1, 2, 3])})
    assert rows.set_index(["a", "b"])["rho"].to_dict() == {("x", "y"): -1.0, ("x", "z"): 1.0, ("y", "z"): -1.0}


def test_head_profiles_are_cached_by_the_run_record_and_the_sentences(trained_tiny, tmp_path, monkeypatch):
    """A pair's profiles are computed once from its model, then read back without loading it, until
    its run's record or the sentences change."""
    import dataclasses

    import pandas as pd
    from headlib import crosslingual

    class Vocab(DigitBPE):
        vocab_size = 12

    loads, record = [], {"steps": 10}
    monkeypatch.setattr(crosslingual, "trained_model", lambda profile, pair, seed: loads.append(pair) or
                        (trained_tiny, Vocab(), {}))
    monkeypatch.setattr(crosslingual, "run_record", lambda cfg: record)
    monkeypatch.setattr(crosslingual, "results_dir", lambda profile, pair, seed: tmp_path)
    src = list(reverse_corpus(6).src)
    sets = {"ntrex": src[:3], "own": src[3:]}
    first = crosslingual.cached_head_profiles("smoke", "en-fr", 1, sets)
    assert loads == ["en-fr"]
    for name, sentences in sets.items():
        pd.testing.assert_frame_equal(first.tables[name], crosslingual.head_profile(trained_tiny, Vocab(), sentences))
    again = crosslingual.cached_head_profiles("smoke", "en-fr", 1, sets)
    assert loads == ["en-fr"]                       # read back: no model loaded
    for name in sets:
        pd.testing.assert_frame_equal(again.tables[name], first.tables[name])
    assert again.vocab_size == 12 and again.model == dataclasses.asdict(trained_tiny.cfg)
    record["steps"] = 11                            # a rerun that learned something differently
    crosslingual.cached_head_profiles("smoke", "en-fr", 1, sets)
    assert loads == ["en-fr"] * 2
    crosslingual.cached_head_profiles("smoke", "en-fr", 1, {"ntrex": src[:2], "own": src[3:]})
    assert loads == ["en-fr"] * 3                   # other sentences

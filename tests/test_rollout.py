"""Attention rollout: identity attention rolls out to the identity; rows stay distributions."""
import pytest
import torch
from around_helpers import DigitBPE, reverse_corpus

from headlib.analysis.rollout import rollout, source_attributions


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

    from headlib.analysis.lrp import own_translations, source_relevance_batch
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


def test_source_attributions_on_hand_built_attention_and_relevance(monkeypatch):
    """2 layers, 2 heads, 4 source tokens + EOS, a 2-token translation; the model's parts replaced
    by hand-built tensors and the three rank correlations worked out by hand."""
    from headlib.analysis import rollout as module

    class WordBPE:
        def encode_batch(self, texts):
            return [[4 + i for i in range(len(t.split()))] for t in texts]

    class Model:
        def eval(self):
            return self

    eye, S = torch.eye(5), 5
    shift = torch.zeros(S, S)                 # every token attends to the next one, EOS to itself
    for i in range(S):
        shift[i, min(i + 1, S - 1)] = 1.0
    first = torch.zeros(S, S)
    first[:, 0] = 1.0                         # every token attends to the first one
    enc = torch.stack([torch.stack([eye, shift]), torch.stack([first, eye])])[:, None]      # (L, B, H, S, S)
    # Cross attention (L, B, H, T + 1, S), rows = target steps. The heads of a layer differ, and
    # so do the layers: alone, either layer ranks the source tokens otherwise than their average.
    # The third target row lies beyond the translation and must be cut off.
    cross = torch.tensor([
        [[[0.2, 0.05, 0.2, 0.35, 0.2], [0.1, 0.2, 0.3, 0.3, 0.1], [1.0, 0.0, 0.0, 0.0, 0.0]],
         [[0.0, 0.25, 0.2, 0.35, 0.2], [0.1, 0.2, 0.3, 0.3, 0.1], [1.0, 0.0, 0.0, 0.0, 0.0]]],
        [[[0.1, 0.65, 0.2, 0.05, 0.0], [0.1, 0.2, 0.4, 0.1, 0.2], [1.0, 0.0, 0.0, 0.0, 0.0]],
         [[0.1, 0.65, 0.2, 0.05, 0.0], [0.1, 0.2, 0.2, 0.1, 0.4], [1.0, 0.0, 0.0, 0.0, 0.0]]],
    ])[:, None]
    lrp = torch.tensor([[0.9, 0.1, 0.3, 0.2, 5.0]])                   # EOS (last) left out

    def fake_attention(model, src, tgt_in):
        if src.size(1) == S:
            return enc, cross
        n = src.size(1)
        return torch.eye(n).expand(2, 1, 2, n, n), torch.full((2, 1, 2, 3, n), 1.0 / n)

    monkeypatch.setattr(module, "_attention", fake_attention)
    monkeypatch.setattr(module, "own_translations", lambda model, src: (torch.tensor([[1, 7]]), torch.tensor([[7, 2]])))
    monkeypatch.setattr(module, "source_relevance_batch",
                        lambda model, src, tgt_in, tgt_out: lrp if src.size(1) == S else torch.ones(1, src.size(1)))
    table = source_attributions(Model(), WordBPE(), ["a b c d", "too short"])
    assert table["tokens"].tolist() == [4]                             # 2 tokens: no row

    # By hand. Heads and layers averaged: rows (0.1, 0.4, 0.2, 0.2, 0.1) and (0.1, 0.2, 0.3, 0.2, 0.2),
    # summed: local = (0.2, 0.6, 0.5, 0.4 | EOS 0.3).
    # Residual-mixed layers: A1 = I/2 + (I + shift)/4 = 3I/4 + shift/4, A2 = 3I/4 + first/4;
    # rollout R = A2 A1 = (9 I + 3 shift + 3 first + first.shift) / 16, first.shift = all rows to token 1.
    # global_j = sum_i local_i R[i, j]; the rows of the cross attention sum to 1, so sum_i local_i = 2:
    #   16 global = (9*0.2 + 3*2, 9*0.6 + 3*0.2 + 2, 9*0.5 + 3*0.6, 9*0.4 + 3*0.5) = (7.8, 8.0, 6.3, 5.1)
    # Ranks (1 = smallest) of the 4 tokens: LRP (4, 1, 3, 2), local (1, 4, 3, 2), global (3, 4, 2, 1);
    # no ties, so rho = 1 - 6 sum d^2 / (n (n^2 - 1)) = 1 - sum d^2 / 10 with n = 4:
    #   LRP vs local:    d = (3, -3, 0, 0),  sum d^2 = 18 -> -0.8
    #   LRP vs rollout:  d = (1, -3, 1, 1),  sum d^2 = 12 -> -0.2
    #   local vs rollout: d = (-2, 0, 1, 1), sum d^2 = 6  ->  0.4
    row = table.iloc[0]
    assert row["LRP vs local"] == pytest.approx(-0.8)
    assert row["LRP vs rollout"] == pytest.approx(-0.2)
    assert row["local vs rollout"] == pytest.approx(0.4)
    manual = rollout(enc[:, 0])
    torch.testing.assert_close(manual, (9 * eye + 3 * shift + 3 * first + first @ shift) / 16)


def test_layer_profile_and_agreement_on_a_hand_built_table():
    import pandas as pd

    from headlib.studies.crosslingual import agreement, layer_profile
    table = pd.DataFrame({"layer": [1, 1, 1, 1, 2, 2, 2, 2], "head": [1, 2, 3, 4] * 2,
                          "relevance": [0.7, 0.1, 0.1, 0.1, 0.25, 0.25, 0.25, 0.25], "confidence": [0.5] * 8})
    prof = layer_profile(table)
    assert prof["top share"].round(9).tolist() == [0.7, 0.25]
    assert abs(prof["effective heads"][0] - 1 / 0.52) < 1e-9 and abs(prof["effective heads"][1] - 4) < 1e-9
    negative = layer_profile(table.assign(relevance=[-0.7, -0.1, 0.0, -0.1] + [0.25] * 4))
    assert negative.loc[0, ["top share", "effective heads"]].isna().all()     # no positive relevance in layer 1
    assert negative.loc[1, "effective heads"] == pytest.approx(4)
    rows = agreement({"x": pd.Series([1, 2, 3]), "y": pd.Series([3, 2, 1]), "z": pd.Series([1, 2, 3])})
    assert rows.set_index(["a", "b"])["rho"].to_dict() == {("x", "y"): -1.0, ("x", "z"): 1.0, ("y", "z"): -1.0}


def test_head_profiles_are_cached_by_the_run_record_and_the_sentences(trained_tiny, tmp_path, monkeypatch):
    """A pair's profiles are computed once from its model, then read back without loading it, until
    its run's record or the sentences change."""
    import dataclasses

    import pandas as pd

    from headlib.studies import crosslingual

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

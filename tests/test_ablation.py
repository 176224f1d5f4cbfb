"""Single-head ablation and the pattern-type rule."""
import torch
from around_helpers import DigitBPE, reverse_corpus

from headlib.analysis.ablation import head_types, pattern_type, single_head_ablation, teacher_forced_attention


def test_ablating_a_head_that_is_already_off_changes_nothing(trained_tiny):
    model, bpe, corpus = trained_tiny, DigitBPE(), reverse_corpus()
    model.set_head_mask("enc-self", torch.tensor([[1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]))
    try:
        table = single_head_ablation(model, bpe, corpus, kinds=("enc-self", "dec-enc"))
    finally:
        model.set_head_mask("enc-self", torch.ones(2, 4))
    assert len(table) == 2 * 8 and table.attrs["full"] > 50        # the model learned the task
    off = table[(table["kind"] == "enc-self") & (table["layer"] == 1) & (table["head"] == 2)]
    assert off["change"].item() == 0.0
    assert (table["change"] != 0).any()                              # other heads do matter
    assert torch.equal(model.head_mask("enc-self"), torch.ones(2, 4))


def test_pattern_rule_on_hand_built_maps():
    n = 16
    eye = torch.eye(n)
    first = torch.zeros(n, n)
    first[:, 0] = 1.0
    band = torch.zeros(n, n)
    for i in range(n):
        for j in range(max(0, i - 3), min(n, i + 4)):
            band[i, j] = 1.0
    band = band / band.sum(1, keepdim=True)
    assert pattern_type(eye) == "diagonal"
    assert pattern_type(first) == "vertical"
    assert pattern_type(0.5 * eye + 0.5 * first) == "vertical+diagonal"
    assert pattern_type(band) == "block"
    assert pattern_type(torch.full((n, n), 1.0 / n)) == "heterogeneous"
    # a rectangular (decoder-encoder) map aligned monotonically is diagonal
    mono = torch.zeros(4, 8)
    mono[torch.arange(4), torch.tensor([0, 2, 5, 7])] = 1.0
    assert pattern_type(mono) == "diagonal"


def test_head_types_cover_every_head_once(trained_tiny):
    maps = teacher_forced_attention(trained_tiny, DigitBPE(), reverse_corpus(), n=5)
    assert maps[0]["dec-enc"].shape[:2] == (2, 4)
    table = head_types(maps)
    assert len(table) == 3 * 2 * 4
    assert len(table[["kind", "layer", "head"]].drop_duplicates()) == 3 * 2 * 4


def test_head_types_take_the_most_frequent_type_and_its_share():
    n = 8
    eye, first = torch.eye(n), torch.zeros(n, n)
    first[:, 0] = 1.0
    maps = [{"enc-self": m.expand(1, 2, n, n)} for m in (eye, eye, eye, first, first)]   # 1 layer, 2 heads
    table = head_types(maps)
    assert table[["layer", "head", "type"]].values.tolist() == [[1, 1, "diagonal"], [1, 2, "diagonal"]]
    assert table["share"].tolist() == [0.6, 0.6]


def test_change_by_type_averages_each_kinds_heads_of_a_type():
    import pandas as pd

    from headlib.analysis.ablation import change_by_type
    ablation = pd.DataFrame({"kind": ["enc-self", "enc-self", "enc-self", "dec-enc"],
                             "type": ["diagonal", "diagonal", "vertical", "vertical"],
                             "change": [-0.5, 0.2, 1.0, -2.0]})
    table = change_by_type(ablation)
    assert table.loc["diagonal", "enc-self"] == "-0.15 (2 heads)"     # (-0.5 + 0.2) / 2
    assert table.loc["vertical", "enc-self"] == "1.0 (1 heads)"
    assert table.loc["vertical", "dec-enc"] == "-2.0 (1 heads)"
    assert table.loc["diagonal", "dec-enc"] == ""                     # no diagonal head in dec-enc

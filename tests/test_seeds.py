"""Across seeds: comparisons that do not depend on the order of heads within a layer, and the
tables gathered from every seed's result directory."""
import json

import numpy as np
import pandas as pd
import pytest

from headlib.settings import results_dir
from headlib.studies.seeds import sorted_within_layers, structure_agreement, verdicts
from headlib.train.records import training_table


def head_table(values):
    """Sec. 4's head table from {layer: [relevance of head 1, 2, ...]}; confidence = 1 - relevance."""
    return pd.DataFrame([{"layer": l, "head": h + 1, "relevance": v, "confidence": 1 - v}
                         for l, row in values.items() for h, v in enumerate(row)])


def test_permuting_heads_within_a_layer_changes_nothing():
    a = head_table({1: [0.6, 0.3, 0.1], 2: [0.2, 0.5, 0.3]})
    b = head_table({1: [0.1, 0.6, 0.3], 2: [0.3, 0.2, 0.5]})           # the same layers, heads permuted
    c = head_table({1: [0.4, 0.35, 0.25], 2: [0.9, 0.05, 0.05]})       # other profiles
    assert sorted_within_layers(a, "relevance").equals(sorted_within_layers(b, "relevance"))
    assert sorted_within_layers(a, "relevance").loc[(2, 1)] == 0.5
    agree = structure_agreement({1: a, 2: b, 3: c})
    same = agree[(agree["a"] == "seed 1") & (agree["b"] == "seed 2")]
    assert same["rho"].tolist() == pytest.approx([1.0] * 3)
    top = agree[(agree["what"] == "top-head share per layer") & (agree["b"] == "seed 3")]
    assert top["rho"].tolist() == pytest.approx([-1.0, -1.0])          # layer 1 leads in a, layer 2 in c


def test_a_null_draw_with_an_undefined_top_share_is_left_out():
    """Relevance can be negative: a shuffle that leaves a layer no positive relevance has no top share
    (NaN). Such draws leave the null; counted as draws below rho, they made p too small."""
    a = head_table({1: [0.6, 0.3, 0.1], 2: [0.2, 0.5, 0.3], 3: [0.4, 0.4, 0.2]})
    b = head_table({1: [0.5, -0.1, 0.2], 2: [-0.2, 0.4, -0.3], 3: [0.3, 0.1, -0.05]})
    top = structure_agreement({1: a, 2: b}, n_null=200).set_index("what").loc["top-head share per layer"]
    assert np.isfinite(top["null mean"]) and "nan" not in top["null 95%"]
    assert 1 / 201 <= top["p"] <= 1


def test_training_table_and_verdicts_gather_every_seed(monkeypatch, tmp_path):
    monkeypatch.setenv("HEADLIB_ARTIFACTS", str(tmp_path))
    for seed, bleu in ((2, 30.5), (1, 31.0)):
        scores = {"beam": {"bleu": bleu}, "greedy": {"bleu": bleu - 1}}
        (results_dir("smoke", "en-de", seed) / "training_results.json").write_text(json.dumps(
            {"pair": "en-de", "steps": 30, "train_minutes": 0.1, "test": {"test_2017_flickr": {}, "test_2016_flickr": scores}}))
    table = training_table("smoke", "en-de")
    assert table["seed"].tolist() == [1, 2] and table["BLEU (beam)"].tolist() == [31.0, 30.5]
    heads = head_table({1: [0.6, 0.3, 0.1], 2: [0.2, 0.5, 0.3]}).assign(rank_in_layer=1)
    heads.to_csv(results_dir("smoke", "en-de", 1) / "head_importance.csv", index=False)
    for name in ("lrp_rules.csv", "null_head_importance.csv"):        # C2: both rules, and its null
        heads[["layer", "head"]].assign(conservative=heads["relevance"], paper=heads["relevance"]).to_csv(
            results_dir("smoke", "en-de", 1) / name, index=False)
    v = verdicts("smoke", "en-de", [1, 2])
    assert list(v.columns) == ["seed 1", "seed 2"]
    assert (v["seed 2"] == "not measured").all() and (v["seed 1"] != "not measured").any()


def test_the_null_separates_layer_structure_from_sorting():
    """Sorted profiles of unrelated heads agree by sorting alone: the permutation null says so.
    Two noisy copies of a model whose layers differ (layer l's heads near l) agree far above the
    null; two models of independent i.i.d. heads agree about as the null does."""
    rng = np.random.default_rng(0)
    layered = {l: l + 0.3 * np.arange(8) / 8 for l in range(1, 7)}
    noisy = [head_table({l: v + rng.normal(0, 0.1, 8) for l, v in layered.items()}) for _ in range(2)]
    flat = [head_table({l: rng.normal(0, 1, 8) for l in range(1, 7)}) for _ in range(2)]
    structured = structure_agreement({"a": noisy[0], "b": noisy[1]}, n_null=200)
    unrelated = structure_agreement({"a": flat[0], "b": flat[1]}, n_null=200)
    rel = lambda t: t[t["what"] == "relevance, layer profiles"].iloc[0]
    assert rel(structured)["rho"] > 0.9 and rel(structured)["null mean"] < 0.7 and rel(structured)["p"] < 0.01
    assert rel(unrelated)["null mean"] > 0.5                     # sorting alone makes profiles agree
    assert abs(rel(unrelated)["rho"] - rel(unrelated)["null mean"]) < 0.25 and rel(unrelated)["p"] > 0.05
    again = structure_agreement({"a": flat[0], "b": flat[1]}, n_null=200)
    assert again.equals(unrelated)                               # the null is seeded


def test_bleu_spread_text_gives_the_spread_and_says_when_budgets_differ():
    from headlib.studies.seeds import bleu_spread_text
    one = pd.DataFrame({"seed": [1], "updates": [30], "BLEU (beam)": [31.0]})
    assert "Only one seed" in bleu_spread_text(one)
    three = pd.DataFrame({"seed": [1, 2, 3], "updates": [30, 30, 28], "BLEU (beam)": [31.0, 30.0, 32.0]})
    text = bleu_spread_text(three)
    assert "**31.00 ± 1.00**" in text and "range 30.00–32.00, a spread of 2.00" in text
    assert "made 28–30 updates" in text
    assert "updates in their" not in bleu_spread_text(three.assign(updates=30))

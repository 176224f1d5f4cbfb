"""Reading a Sec. 6 sweep (`headlib.pruning.readout`): order of kinds, survival, enrichment, the
pruned-vs-scratch and method tables and their verdicts, on hand-built sweeps with known answers."""
import math

import pandas as pd
import pytest

from headlib.pruning.points import nearest
from headlib.pruning.readout import enrichment, method_gaps, pruning_order, survival
from pruning_helpers import point_row


def test_nearest_survival_and_order_on_a_hand_built_sweep():
    rows = [point_row(0.01, [[1, 1], [1, 1]]), point_row(0.1, [[1, 0], [1, 1]]), point_row(1.0, [[0, 0], [0, 1]])]
    assert nearest(rows, 3)["lam"] == 0.1
    assert nearest(rows, 2)["lam"] == 0.1   # ties go to the smaller lambda
    surv = survival(rows).set_index(["layer", "head"])["survives_to_lambda"]
    assert surv.to_dict() == {(1, 1): 0.1, (1, 2): 0.01, (2, 1): 0.1, (2, 2): 1.0}
    table = pd.DataFrame({"lambda": [0.001, 0.01, 0.1, 1.0], "enc-self heads": [48, 20, 5, 0],
                          "dec-self heads": [48, 40, 20, 3], "dec-enc heads": [48, 48, 30, 10],
                          "total heads": [144, 108, 55, 13]})
    assert pruning_order(table) == [("enc-self", 0.01), ("dec-self", 0.1), ("dec-enc", 1.0)]


def test_enrichment_finds_retained_heads_that_are_the_specialized_and_relevant_ones():
    heads = pd.DataFrame({"layer": [1] * 8 + [2] * 8, "head": list(range(1, 9)) * 2})
    kept = [[1, 1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0]]
    heads["specialized"] = [h <= 4 for h in heads["head"]]
    heads["relevance"] = [1.0 if h <= 4 else 0.0 for h in heads["head"]] + 0.01 * heads.index
    row = enrichment([point_row(0.1, kept)], heads).iloc[0]
    assert row["retained"] == 8 and row["specialized retained"] == 8 and row["specialized pruned"] == 0
    assert row["Fisher p"] < 1e-3 and row["Mann-Whitney p"] < 1e-3
    flipped = enrichment([point_row(0.1, [[1 - v for v in r] for r in kept])], heads).iloc[0]
    assert flipped["Fisher p"] > 0.99 and flipped["Mann-Whitney p"] > 0.99


def test_the_within_layer_test_sees_which_heads_of_a_layer_survive_not_which_layers():
    """Layer 1's heads all survive and layer 2's mostly close: across layers the survivors look
    more relevant on average, but within layer 2 the open head is the least relevant, so the
    within-layer test finds nothing. Its p-value agrees with a slow reference that enumerates
    every within-layer mask."""
    import itertools

    import numpy as np
    from headlib.pruning.readout import within_layer_p
    heads = pd.DataFrame({"layer": [1] * 4 + [2] * 4, "head": list(range(1, 5)) * 2,
                          "relevance": [0.4, 0.3, 0.2, 0.1, 0.04, 0.03, 0.02, 0.01], "specialized": False})
    row = enrichment([point_row(0.1, [[1, 1, 1, 1], [0, 0, 0, 1]])], heads, draws=20_000).iloc[0]
    assert row["relevance retained"] > 5 * row["relevance pruned"] and row["within-layer p"] > 0.5
    # the exact p-value: over the 4 masks of layer 2 with one open head, the share as extreme as observed
    layer2 = heads["relevance"][4:].to_numpy()
    stat = lambda open_: layer2[open_].mean() - np.delete(layer2, open_).mean()
    exact = np.mean([stat(i) >= stat(3) - 1e-12 for i in range(4)])                      # 4 of 4
    assert row["within-layer p"] == pytest.approx(exact, abs=0.02)
    kept = np.array([1, 1, 0, 0, 1, 0, 1, 0], bool)                                       # two layers mixed
    masks = [np.array(a + b, bool) for a in map(list, set(itertools.permutations([1, 1, 0, 0])))
             for b in map(list, set(itertools.permutations([1, 0, 1, 0])))]
    total = lambda m: sum(heads["relevance"][(heads["layer"] == l) & m].mean()
                          - heads["relevance"][(heads["layer"] == l) & ~m].mean() for l in (1, 2))
    exact = np.mean([total(m) >= total(kept) - 1e-12 for m in masks])
    fast = within_layer_p(heads["layer"].to_numpy(), heads["relevance"].to_numpy(), kept, draws=20_000)
    assert fast == pytest.approx(exact, abs=0.01)
    assert math.isnan(within_layer_p(heads["layer"].to_numpy(), heads["relevance"].to_numpy(),
                                     np.array([1] * 4 + [0] * 4, bool)))                   # no layer has both


def test_holm_against_its_definition():
    from headlib.pruning.readout import holm
    p = pd.Series([0.01, 0.04, math.nan, 0.03, 0.5])
    adjusted = holm(p)
    # by hand: sorted 0.01, 0.03, 0.04, 0.5 with m = 4: 0.04, 0.09, max(0.08, 0.09), min(1, 0.5)
    assert adjusted.round(10).tolist()[:2] == [0.04, 0.09] and math.isnan(adjusted[2])
    assert adjusted[3] == pytest.approx(0.09) and adjusted[4] == pytest.approx(0.5)
    assert (adjusted.dropna() >= p.dropna()).all()


def test_strictly_first_or_last_refuses_a_tie():
    from headlib.pruning.readout import strictly
    inf = math.inf
    order = [("enc-self", 0.005), ("dec-self", 0.05), ("dec-enc", 0.05)]
    assert strictly(order, "enc-self", "first") and not strictly(order, "dec-enc", "last")
    assert strictly([("enc-self", 0.01), ("dec-self", 0.1), ("dec-enc", inf)], "dec-enc", "last")
    assert not strictly([("enc-self", inf), ("dec-self", inf), ("dec-enc", inf)], "enc-self", "first")


def test_encoder_first_cross_last_needs_a_real_order():
    from headlib.pruning.readout import encoder_first_cross_last
    inf = float("inf")
    assert encoder_first_cross_last([("enc-self", 0.01), ("dec-self", 0.1), ("dec-enc", inf)])
    assert not encoder_first_cross_last([("enc-self", inf), ("dec-self", inf), ("dec-enc", inf)])   # nothing pruned
    assert not encoder_first_cross_last([("dec-self", 0.01), ("enc-self", 0.1), ("dec-enc", 1.0)])
    assert not encoder_first_cross_last([("enc-self", 0.1), ("dec-enc", 0.1), ("dec-self", 0.1)])   # a tie is not first


def test_method_gaps_compare_the_random_mean_with_the_best_method_per_k():
    methods = pd.DataFrame([(3, "DSP", 30.0), (3, "random", 26.0), (3, "random", 28.0), (3, "LRP", 29.0),
                            (3, "from scratch", 33.0), (12, "DSP", 35.0), (12, "random", 35.2), (12, "LRP", 34.6)],
                           columns=["k", "method", "BLEU"])
    gaps = method_gaps(methods).set_index("k")
    assert gaps.loc[3, "best"] == "DSP" and gaps.loc[3, "best BLEU"] == 30.0   # from scratch left out
    assert gaps.loc[3, "spread"] == pytest.approx(3.0) and gaps.loc[3, "random gap"] == pytest.approx(3.0)
    assert gaps.loc[12, "best"] == "random" and gaps.loc[12, "random gap"] == 0.0
    assert gaps.loc[12, "spread"] == pytest.approx(0.6)


def test_the_choice_of_heads_matters_only_beyond_every_random_draw_and_the_seed_spread():
    import pandas as pd

    from headlib.pruning.readout import choice_of_heads_verdict
    rows = [(3, "LRP", 35.0), (3, "random", 34.0), (3, "random", 34.2), (3, "random", 33.0),
            (10, "LRP", 34.8), (10, "random", 34.9), (10, "random", 33.5), (10, "random", 33.6),
            (12, "LRP", 35.0), (12, "random", 34.8), (12, "random", 34.7), (3, "from scratch", 40.0)]
    methods = pd.DataFrame(rows, columns=["k", "method", "BLEU"])
    # k=3: above every draw, mean 33.73 is 1.27 behind; k=10: one draw above LRP; k=12: 0.25 behind
    assert "matters beyond the fine-tuning budget at 3 heads" in choice_of_heads_verdict(methods, 0.57)
    assert "not assessable on one seed: at 3, 12 heads" in choice_of_heads_verdict(methods, None)
    assert "at no head count" in choice_of_heads_verdict(methods, 2.0)


def test_mean_open_layer_weights_layers_by_open_heads_over_partly_pruned_points():
    from headlib.pruning.readout import mean_open_layer
    rows = [{"retained": {"dec-enc": 8}, "per_layer": {"dec-enc": [4, 4]}},       # nothing closed: left out
            {"retained": {"dec-enc": 4}, "per_layer": {"dec-enc": [1, 3]}},       # layers 1, 2, 2, 2
            {"retained": {"dec-enc": 2}, "per_layer": {"dec-enc": [0, 2]}},       # layers 2, 2
            {"retained": {"dec-enc": 0}, "per_layer": {"dec-enc": [0, 0]}}]       # all closed: left out
    assert mean_open_layer(rows, "dec-enc", 8) == pytest.approx(11 / 6)
    assert math.isnan(mean_open_layer(rows[:1], "dec-enc", 8))


def _point(lam, mask, bleu):
    return {"lam": lam, "mask": mask, "test_beam": bleu}


def test_pruned_points_meet_the_from_scratch_run_of_their_mask():
    """All-kinds points match a run trained with their mask however it was written (an encoder-only
    spec for a point that closed only encoder heads); a point with no run gets NaN; several points
    with one mask all meet its run (the all-attention table, one row per point)."""
    from headlib.pruning.readout import pruned_vs_scratch
    on = "dec-self:11/11,dec-enc:11/11"
    rows = [_point(0.01, f"enc-self:11/11,{on}", 30.0),                     # nothing closed: no run
            _point(0.1, f"enc-self:10/01,{on}", 29.0),
            _point(0.2, "enc-self:10/01,dec-self:10/11,dec-enc:11/11", 28.0),   # same encoder, not the same model
            _point(0.5, f"enc-self:10/01,{on}", 27.5)]
    scratch = [{"mask": "enc-self:10/01", "test_beam": 28.5, "device": "cpu"},
               {"mask": "enc-self:10/01,dec-self:10/11", "test_beam": 28.25, "device": "gpu"}]
    t = pruned_vs_scratch(rows, scratch)
    assert list(t.columns) == ["mask", "lambda", "pruned", "from scratch", "pruned - scratch", "pruned - scratch low",
                               "pruned - scratch high", "scratch device"]
    assert t["pruned - scratch low"].isna().all()             # no translations kept: no interval
    assert t["lambda"].tolist() == [0.01, 0.1, 0.2, 0.5] and t["pruned"].tolist() == [30.0, 29.0, 28.0, 27.5]
    assert t["mask"].tolist() == ["", "enc-self:10/01", "enc-self:10/01,dec-self:10/11", "enc-self:10/01"]
    assert math.isnan(t["from scratch"][0]) and math.isnan(t["pruned - scratch"][0]) and pd.isna(t["scratch device"][0])
    assert t["from scratch"][1:].tolist() == [28.5, 28.25, 28.5]
    assert t["pruned - scratch"][1:].tolist() == pytest.approx([0.5, -0.25, -1.0])
    assert t["scratch device"][1:].tolist() == ["cpu", "gpu", "cpu"]


def test_method_comparison_picks_each_methods_point_per_head_count():
    """At each k: Hard Concrete's first point with exactly k heads (none at k=1), DSP, the fixed masks
    asked for (fine-tuned through the callback, random draws named "random"), and the from-scratch
    runs with k encoder heads and every decoder head; the table shows means, and mean ± std for the
    random draws."""
    from headlib.pruning.readout import method_comparison, method_table
    measures = pd.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "confidence": [0.9, 0.1, 0.2, 0.8],
                             "LRP": [0.1, 0.9, 0.8, 0.2], "gradient (Michel)": [0.5, 0.6, 0.7, 0.1]})
    bleu = {"random-s1": 20.0, "random-s2": 22.0, "confidence": 25.0, "lrp": 26.0, "michel": 27.0}
    asked = []

    def fine_tune(**kw):
        asked.append((kw["label"], kw["mask"]))
        return {"test_beam": bleu[kw["label"]], "device": "cpu"}

    hc = [{"lam": 0.01, "retained": {"enc-self": 2}, "test_beam": 24.0, "device": "gpu"},
          {"lam": 0.02, "retained": {"enc-self": 2}, "test_beam": 23.0, "device": "gpu"}]
    dsp = {1: {"test_beam": 18.0, "device": "cpu"}, 2: {"test_beam": 21.0, "device": "cpu"}}
    scratch = [{"retained": {"enc-self": 2, "dec-self": 4, "dec-enc": 4}, "test_beam": 28.0, "device": "gpu"},
               {"retained": {"enc-self": 2, "dec-self": 3, "dec-enc": 4}, "test_beam": 1.0, "device": "gpu"}]
    t = method_comparison([2, 1], hc, dsp, fine_tune, measures, ["random", "confidence", "michel"], (1, 2), scratch, 4)
    assert t.values.tolist() == [
        [2, "Hard Concrete", 24.0, "gpu"], [2, "DSP", 21.0, "cpu"], [2, "random", 20.0, "cpu"],
        [2, "random", 22.0, "cpu"], [2, "confidence", 25.0, "cpu"], [2, "gradient (Michel)", 27.0, "cpu"],
        [2, "from scratch", 28.0, "gpu"], [1, "DSP", 18.0, "cpu"], [1, "random", 20.0, "cpu"],
        [1, "random", 22.0, "cpu"], [1, "confidence", 25.0, "cpu"], [1, "gradient (Michel)", 27.0, "cpu"]]
    # each measure's masks keep its top heads: confidence 1.1, 2.2 at k=2 and 1.1 at k=1; gradient 2.1, 1.2 and 2.1
    assert [m for label, m in asked if label == "confidence"] == ["enc-self:10/01", "enc-self:10/00"]
    assert [m for label, m in asked if label == "michel"] == ["enc-self:01/10", "enc-self:00/10"]
    table = method_table(t)
    assert list(table.index) == ["Hard Concrete", "DSP", "random", "confidence", "gradient (Michel)", "from scratch"]
    assert list(table.columns) == ["1 heads", "2 heads"]
    assert table.loc["random", "2 heads"] == "21.00 ± 1.41 (n=2)" and table.loc["DSP", "1 heads"] == "18.00"
    assert table.loc["Hard Concrete", "1 heads"] == "" and table.loc["from scratch", "2 heads"] == "28.00"


def test_dev_choice_counts_which_setting_scores_higher_on_dev_at_each_head_count():
    from headlib.pruning.readout import dev_choice
    runs = [(3, 0.02, {"dev_greedy": 10.0, "test_beam": 99.0}), (3, 0.2, {"dev_greedy": 12.0, "test_beam": 1.0}),
            (12, 0.02, {"dev_greedy": 20.0}), (12, 0.2, {"dev_greedy": 21.0}),
            (24, 0.02, {"dev_greedy": 30.0}), (24, 0.2, {"dev_greedy": 29.0})]
    assert dev_choice(runs) == {"wins": {0.02: 1, 0.2: 2}, "chosen": 0.2, "head_counts": 3}   # test BLEU plays no part
    from headlib.pruning.readout import dev_choice_note
    assert dev_choice_note(dev_choice(runs), 0.2, "the rate").endswith("2 of 3 head counts, so dev agrees with the "
                                                                        "setting used above.")
    assert "dev would choose 0.2, not the 0.02 used above" in dev_choice_note(dev_choice(runs), 0.02, "the rate")
    taus = [(3, (0.1, 1e-3), {"dev_greedy": 10.0}), (3, (0.1, 1e-8), {"dev_greedy": 11.0})]
    assert dev_choice(taus)["chosen"] == (0.1, 1e-8)


def test_differences_carry_the_paired_bootstrap_interval_of_the_kept_translations():
    """With each row's test translations and the references, every difference gets the interval
    `bleu_difference` gives for that pair of rows."""
    from headlib.nn.decode import bleu_difference
    from headlib.pruning.readout import budget_table, sweep_table
    refs = ["a man rides a red bike", "two dogs run in the snow", "a woman sings on a stage", "kids play ball"] * 5
    worse = ["a man rides a bike", "two dogs in snow", "a woman on a stage", "kids ball"] * 5
    on = "dec-self:11/11,dec-enc:11/11"
    full = {"test_beam": 30.0, "test_hypotheses": refs}
    point = _point(0.1, f"enc-self:10/01,{on}", 29.0) | {"test_hypotheses": worse, "test_greedy": 28.0,
                                                        "kinds": ["enc-self"], "retained": {"enc-self": 2}}
    table = sweep_table([point], full, full, refs)
    want = bleu_difference(worse, refs, refs)
    assert (table["vs. full low"][0], table["vs. full high"][0]) == (want["low"], want["high"]) and want["high"] < 0
    run = {"mask": "enc-self:10/01", "retained": {"enc-self": 2, "dec-self": 4, "dec-enc": 4}, "test_beam": 31.0,
           "device": "cpu", "test_hypotheses": refs, "steps": 10}
    versus = budget_table([point], [run], None, full, {"steps": 5, "train_tokens": 50}, refs)
    assert (versus["pruned - scratch low"][0], versus["pruned - scratch high"][0]) == (want["low"], want["high"])


def test_the_budget_table_sets_each_run_beside_its_point_with_both_budgets_and_the_control_last():
    """One row per run in the runs' order, beside the first point (in the sweep's order) with its
    mask however it is written; the control last; a run no point has the mask of is an error."""
    from headlib.pruning.readout import budget_table
    on = "dec-self:11/11,dec-enc:11/11"
    four = {"dec-self": 4, "dec-enc": 4}
    point = {"lam": 0.1, "kinds": ["enc-self"], "mask": f"enc-self:10/01,{on}", "test_beam": 29.0,
             "retained": {"enc-self": 2, **four}, "path_updates": 300, "path_tokens": 600}
    later = point | {"lam": 0.2, "test_beam": 1.0, "path_updates": 400}          # the same mask again
    fuller = point | {"lam": 0.01, "mask": f"enc-self:11/10,{on}", "test_beam": 30.0, "path_updates": 100,
                      "path_tokens": 200, "retained": {"enc-self": 3, **four}}
    run = {"mask": "enc-self:10/01", "retained": {"enc-self": 2, **four}, "test_beam": 28.0, "steps": 1300,
           "tokens": 2610, "device": "cpu"}
    other = {"mask": "enc-self:11/10", "retained": {"enc-self": 3, **four}, "test_beam": 30.5, "steps": 1100,
             "tokens": 2190, "device": "gpu"}
    control = {"mask": "", "retained": {"enc-self": 4, **four}, "test_beam": 30.5, "steps": 1300, "tokens": 2590,
               "device": "cpu"}
    table = budget_table([fuller, point, later], [run, other], control, {"test_beam": 30.0},
                         {"steps": 1000, "train_tokens": 2000})
    assert table["pruned kinds"].tolist() == ["enc-self", "enc-self", "none (all heads: the control)"]
    assert table["heads kept (enc-self/dec-self/dec-enc)"].tolist() == ["2/4/4", "3/4/4", "4/4/4"]
    assert table["lambda"].tolist()[:2] == [0.1, 0.01] and table["control"].tolist() == [False, False, True]
    assert table["pruned - scratch"].tolist() == [1.0, -0.5, -0.5]
    assert table["pruned - scratch low"].isna().all()                              # no translations kept
    assert table[["pruned updates", "scratch updates", "pruned tokens", "scratch tokens"]].values.tolist() == \
        [[1300, 1300, 2600, 2610], [1100, 1100, 2200, 2190], [1000, 1300, 2000, 2590]]
    assert table["scratch device"].tolist() == ["cpu", "gpu", "cpu"]
    assert list(table.columns) == list(budget_table([point], [], None, {}, {}).columns)   # none: the same columns
    with pytest.raises(ValueError, match="enc-self:01/00"):
        budget_table([point], [run | {"mask": "enc-self:01/00"}], None, {"test_beam": 30.0},
                     {"steps": 1000, "train_tokens": 2000})


def test_function_counts_count_each_open_head_once_per_kind_of_function():
    from headlib.pruning.readout import function_counts
    stats = [{"layer": 1, "head": 1, "positional_share": 0.95, "syntactic_margin": -0.2, "rarest": 0.4},
             {"layer": 2, "head": 3, "positional_share": 0.3, "syntactic_margin": 0.15, "rarest": 0.9},
             {"layer": 3, "head": 2, "positional_share": 0.92, "syntactic_margin": 0.01, "rarest": 0.0}]
    rows = [{"lam": 0.01, "retained": {"enc-self": 3}, "head_stats": stats,
             "functions": [{"layer": 1, "head": 1, "functions": "pos-1, rare"},
                           {"layer": 2, "head": 3, "functions": "nsubj v->s, amod n->adj"},
                           {"layer": 3, "head": 2, "functions": "pos+1"}]},
            {"lam": 0.1, "retained": {"enc-self": 0}, "functions": [], "head_stats": []}]
    t = function_counts(rows)
    assert t.iloc[0].tolist() == [0.01, 3, 2, 1, 1, 0.95, 0.15, 0.4]       # layer 2's 0.9 is no layer-1 rate
    assert t.iloc[1, :5].tolist() == [0.1, 0, 0, 0, 0] and t.iloc[1, 5:].isna().all()


def test_order_text_shows_a_tie_as_a_tie():
    from headlib.pruning.readout import order_text
    order = [("enc-self", 0.005), ("dec-self", 0.05), ("dec-enc", 0.05)]
    assert order_text(order) == "enc-self (lambda 0.005) < dec-self (lambda 0.05) = dec-enc (lambda 0.05)"
    assert order_text(order[:1]) == "enc-self (lambda 0.005)"

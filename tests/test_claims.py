"""The claims table: verdicts on hand-built result tables whose answers are known."""
import json

import pandas as pd
import pytest

from headlib.claims import (FAILS, HOLDS, MIN_BLEU, MISSING, PARTLY, UNASSESSABLE, claims_table, not_assessable,
                            scale_note)


def _importance(relevance, confidence):
    n = len(relevance)
    return pd.DataFrame({"layer": [1 + i // 4 for i in range(n)], "head": [1 + i % 4 for i in range(n)],
                         "relevance": relevance, "confidence": confidence, "rank_in_layer": 1})


def _rare(out, head=4):
    """A rare-word table whose layer-1 candidate is `head` (C1 leaves it out as the paper's exception)."""
    pd.DataFrame({"layer": 1, "head": [1, 2, 3, 4], "rarest": [0.9 if h == head else 0.1 for h in range(1, 5)],
                  "top2": 0.5, "n": 100}).to_csv(out / "rare_word_rates.csv", index=False)


def _relevance_null(out, share=0.4, paper_share=None):
    """The model at initialisation's relevance under both LRP rules (C2's null): in every layer of 4
    heads one head holds `share` of the layer's |relevance| (`paper_share` under the paper's rule);
    and lrp_rules.csv for the trained model, with the paper rule's relevance equal to the page's."""
    imp = pd.read_csv(out / "head_importance.csv")
    rest = lambda x: (1 - x) / 3
    pattern = lambda x: [x if h == 1 else rest(x) for h in imp["head"]]
    imp[["layer", "head"]].assign(conservative=pattern(share), paper=pattern(paper_share or share)).to_csv(
        out / "null_head_importance.csv", index=False)
    if not (out / "lrp_rules.csv").is_file():
        imp[["layer", "head"]].assign(conservative=imp["relevance"], paper=imp["relevance"]).to_csv(
            out / "lrp_rules.csv", index=False)


def _nulls(out, positional=0.3, syntactic=0.0, rare=0.1):
    """The model at initialisation's tables (C3-C5's null for the best of 48 heads), all low by default."""
    pd.DataFrame({"layer": 1, "head": [1, 2], "offset": [1, 0], "fraction": [positional, 0.9], "confidence": 0.2,
                  "positional": False}).to_csv(out / "null_positional_heads.csv", index=False)
    pd.DataFrame({"relation": ["nsubj", "amod", "dobj"], "direction": ["a", "b", "a"], "accuracy": syntactic}).to_csv(
        out / "null_syntactic_best.csv", index=False)
    pd.DataFrame({"layer": 1, "head": [1, 2, 3, 4], "rarest": rare, "top2": 0.2, "n": 100}).to_csv(
        out / "null_rare_word_rates.csv", index=False)


def test_verdicts_follow_the_stated_criteria(tmp_path):
    rel = [0.7, 0.1, 0.1, 0.1, 0.1, 0.6, 0.2, 0.1]                 # one dominant head per layer
    _importance(rel, [0.9, 0.2, 0.3, 0.1, 0.15, 0.8, 0.4, 0.05]).to_csv(tmp_path / "head_importance.csv", index=False)
    pd.DataFrame({"layer": [1, 1], "head": [1, 2], "offset": [-1, 0], "fraction": [0.95, 0.3],
                  "confidence": [0.85, 0.4], "positional": [True, False]}).to_csv(tmp_path / "positional_heads.csv", index=False)
    pd.DataFrame({"relation": ["nsubj", "amod", "dobj"], "direction": ["a", "b", "a"], "accuracy": [0.6, 0.5, 0.4],
                  "syntactic": [True, False, False], "syntactic_relative": [True, True, False]}).to_csv(tmp_path / "syntactic_best.csv", index=False)
    _nulls(tmp_path)
    _relevance_null(tmp_path)
    _encoder(tmp_path, full=([0.5, 0.3, -1.5], [-0.3, -0.5, -2.3], [1.3, 1.1, -0.7]),
             control=([0.0, -0.2, -2.0], [-0.8, -0.95, -2.6], [0.8, 0.6, -1.4]), heads=[48, 10, 2])
    pd.DataFrame({"pruned - scratch": [0.4, -0.2], "pruned - scratch low": [0.1, -0.9],
                  "pruned - scratch high": [0.7, 0.5]}).to_csv(tmp_path / "pruning_encoder_scratch.csv", index=False)
    pd.DataFrame({"lambda": [0.001, 0.01, 0.1], "enc-self heads": [48, 10, 0], "dec-self heads": [48, 30, 5],
                  "dec-enc heads": [48, 40, 20], "total heads": [144, 80, 25],
                  "pruned - scratch": [None, 0.3, 0.1], "pruned - scratch low": [None, -0.2, -0.4],
                  "pruned - scratch high": [None, 0.8, 0.6]}).to_csv(tmp_path / "pruning_all_attention.csv", index=False)
    table = claims_table(tmp_path).set_index("claim")
    verdict = table["verdict"].to_dict()
    assert verdict["C2"] == HOLDS                     # top share 0.7 and 0.6 above the initial model's 0.4
    assert verdict["C3"] == HOLDS                     # 95% on offset -1 with confidence 0.85
    assert verdict["C4"] == PARTLY                    # 1 of 3 relation-directions: fewer than half
    assert verdict["C5"] == MISSING                   # no rare-word table
    assert verdict["C6"] == HOLDS                     # 10 heads: both intervals above -1.0
    assert verdict["C7"] == PARTLY                    # one interval of four above 0
    assert "encoder +0.40 [+0.10, +0.70], -0.20 [-0.90, +0.50]; all attention +0.30" in table.loc["C7", "ours"]
    assert "pruned ahead at 1 of 4, scratch ahead at 0" in table.loc["C7", "ours"]
    assert verdict["C8"] == PARTLY                    # enc-self at 0.01, dec-self and dec-enc both at 0.1: a tie
    assert verdict["C9"] == MISSING
    paper = table["by the paper's bar"].to_dict()
    assert paper["C6"] == HOLDS                       # 10 heads at +0.3, within 0.15 of the unpruned model
    assert paper["C7"] == PARTLY and paper["C8"] == HOLDS and paper["C3"] == HOLDS   # 3 of 4 ahead; ties allowed
    assert table.loc["C1", "under the paper's LRP rule"] == verdict["C1"]      # the same relevance under both rules
    assert table.loc["C3", "under the paper's LRP rule"] == "-"


def _encoder(out, full, control, heads=(48, 12), bleu=None):
    """A Sec. 6.2 table: per point its difference (point, low, high) against the unpruned model
    (`full`) and against the all-heads control (`control`)."""
    diff = full[0]
    bleu = bleu or [30.0 + d for d in diff]
    table = {"lambda": [0.001 * 10 ** i for i in range(len(heads))], "enc-self heads": list(heads), "BLEU": bleu}
    for name, (point, low, high) in (("vs. full", full), ("vs. all heads", control)):
        table |= {name: point, f"{name} low": low, f"{name} high": high}
    pd.DataFrame(table).to_csv(out / "pruning_encoder.csv", index=False)


def test_a_claim_that_fails(tmp_path):
    _importance([0.1, 0.2, 0.3, 0.4], [0.9, 0.8, 0.7, 0.6]).to_csv(tmp_path / "head_importance.csv", index=False)
    _rare(tmp_path)
    _nulls(tmp_path)
    _relevance_null(tmp_path, share=0.45)
    table = claims_table(tmp_path).set_index("claim")
    assert table.loc["C1", "verdict"] == FAILS       # rho = -1
    assert table.loc["C2", "verdict"] == FAILS       # top share 0.4 < the initial model's 0.45
    assert table.loc["C2", "by the paper's bar"] == HOLDS   # top two: 0.7 of the layer


def test_c2_takes_the_top_head_by_absolute_relevance_against_the_model_at_initialisation(tmp_path):
    """A head that pushes the top-1 logit down counts by its size; the verdict moves with the null
    and, under the paper's LRP rule, with that rule's relevance and null."""
    _importance([-0.6, 0.2, 0.1, 0.1, 0.5, 0.2, 0.2, 0.1], 0.5).to_csv(tmp_path / "head_importance.csv", index=False)
    judged = lambda: claims_table(tmp_path).set_index("claim").loc["C2"]
    _relevance_null(tmp_path, share=0.4)
    row = judged()
    assert row["verdict"] == HOLDS                   # 0.6 / 1.0 and 0.5 / 1.0, both above 0.4
    assert "0.50-0.60; the largest share of any layer at initialisation 0.40; above it in 2 of 2" in row["ours"]
    _relevance_null(tmp_path, share=0.55)
    assert judged()["verdict"] == PARTLY             # layer 1 only
    _relevance_null(tmp_path, share=0.55, paper_share=0.3)
    assert judged()["under the paper's LRP rule"] == HOLDS
    from headlib.analysis.heads import layer_summary
    assert layer_summary(pd.read_csv(tmp_path / "head_importance.csv"))["head"].tolist() == [1, 1]


def _record(out, bleu, pair="en-de"):
    from headlib.data.corpora import main_test_set
    (out / "training_results.json").write_text(json.dumps({"pair": pair, "test": {main_test_set(pair): {"beam": {
        "bleu": bleu}}}}))


def test_a_model_that_does_not_translate_is_not_assessable(tmp_path):
    """The same tables judged for a model over and under MIN_BLEU: a verdict, then "not assessable"
    with the value still shown; a missing table stays "not measured"."""
    _importance([0.1, 0.2, 0.3, 0.4], [0.9, 0.8, 0.7, 0.6]).to_csv(tmp_path / "head_importance.csv", index=False)
    _rare(tmp_path)
    _nulls(tmp_path)
    _relevance_null(tmp_path)
    assert not_assessable(tmp_path) is None                                  # no record: tables only
    _record(tmp_path, MIN_BLEU + 0.01)
    assert claims_table(tmp_path).set_index("claim").loc["C1", "verdict"] == FAILS and not_assessable(tmp_path) is None
    _record(tmp_path, MIN_BLEU - 0.01)
    assert not_assessable(tmp_path) == "not assessable: the model scores 9.99 BLEU, under 10, so it does not translate."
    table = claims_table(tmp_path).set_index("claim")
    assert table.loc["C1", "verdict"] == table.loc["C2", "verdict"] == UNASSESSABLE
    assert table.loc["C1", "ours"].startswith("mean within-layer Spearman rho = -1.00")
    assert "scores 9.99 BLEU, under 10" in table.loc["C1", "ours"]
    assert table.loc["C6", "verdict"] == MISSING


def test_rare_word_claim_with_no_rare_token_is_not_assessable(tmp_path):
    _rare_word_tables(tmp_path, rank_of_head_2=1)
    rates = pd.read_csv(tmp_path / "rare_word_rates.csv").assign(n=0, rarest=0.0, top2=0.0)
    rates.to_csv(tmp_path / "rare_word_rates.csv", index=False)
    row = claims_table(tmp_path).set_index("claim").loc["C5"]
    assert row["verdict"] == UNASSESSABLE and row["ours"].endswith("nothing to measure")


def _rare_word_tables(out, rank_of_head_2):
    ranks = [2, rank_of_head_2, 3, 4] if rank_of_head_2 == 1 else [1, rank_of_head_2, 3, 4]
    imp = _importance([0.3, 0.4, 0.2, 0.1], [0.5, 0.6, 0.4, 0.3]).assign(rank_in_layer=ranks)
    imp.to_csv(out / "head_importance.csv", index=False)
    pd.DataFrame({"layer": 1, "head": [1, 2, 3, 4], "rarest": [0.2, 0.7, 0.3, 0.1],
                  "top2": [0.4, 0.9, 0.5, 0.2], "n": 100}).to_csv(out / "rare_word_rates.csv", index=False)
    _nulls(out)


def test_rare_word_claim_needs_the_rarest_rate_and_the_top_rank(tmp_path):
    _rare_word_tables(tmp_path, rank_of_head_2=1)
    row = claims_table(tmp_path).set_index("claim").loc["C5"]
    assert row["verdict"] == HOLDS and row["ours"].startswith("head 1.2: rarest 70% (+45.0 points over the median")
    assert "one of two rarest 90% (layer 1: 20%-90%), LRP rank 1 in layer 1" in row["ours"]
    _rare_word_tables(tmp_path, rank_of_head_2=2)
    assert claims_table(tmp_path).set_index("claim").loc["C5", "verdict"] == PARTLY   # stands out, rank 2


def test_a_rare_word_head_must_stand_out_from_the_other_layer_1_heads(tmp_path):
    """On short sentences every head hits one of the two rarest tokens often: a high top-2 rate
    shared by all layer-1 heads is no rare-word head (the margin is 10 points over the median)."""
    _importance([0.3, 0.4, 0.2, 0.1], [0.5, 0.6, 0.4, 0.3]).assign(rank_in_layer=[2, 1, 3, 4]).to_csv(
        tmp_path / "head_importance.csv", index=False)
    _nulls(tmp_path)
    for rarest, expected in (([0.30, 0.35, 0.31, 0.29], FAILS),        # +4.5 points: like the others
                             ([0.30, 0.405, 0.31, 0.29], PARTLY),   # +10 points, 40% < 50%
                             ([0.30, 0.55, 0.31, 0.29], HOLDS)):       # +24.5 points, 55%, rank 1
        pd.DataFrame({"layer": 1, "head": [1, 2, 3, 4], "rarest": rarest, "top2": [0.55, 0.58, 0.56, 0.54],
                      "n": 100}).to_csv(tmp_path / "rare_word_rates.csv", index=False)
        assert claims_table(tmp_path).set_index("claim").loc["C5", "verdict"] == expected, rarest


def test_positional_claim_needs_a_neighbour_not_the_token_itself(tmp_path):
    pd.DataFrame({"layer": [1, 1, 2], "head": [1, 2, 1], "offset": [0, 1, 0], "fraction": [0.95, 0.6, 0.5],
                  "confidence": [0.9, 0.5, 0.4], "positional": [True, False, False]}).to_csv(
        tmp_path / "positional_heads.csv", index=False)
    _nulls(tmp_path)
    row = claims_table(tmp_path).set_index("claim").loc["C3"]
    assert row["verdict"] == FAILS                    # 95% on offset 0 is a diagonal head
    assert "closest: 1.2 at offset +1 60%" in row["ours"] and "2 of 3 heads attend most often to the token itself" in row["ours"]


def test_pruned_vs_scratch_is_judged_by_its_intervals(tmp_path):
    def scratch(diff, low, high):
        pd.DataFrame({"pruned - scratch": diff, "pruned - scratch low": low, "pruned - scratch high": high}
                     ).to_csv(tmp_path / "pruning_encoder_scratch.csv", index=False)
        return claims_table(tmp_path).set_index("claim").loc["C7"]
    assert scratch([0.6, 0.9], [0.1, 0.2], [1.1, 1.6])["verdict"] == HOLDS                 # both intervals above 0
    row = scratch([0.6, -0.9], [0.1, -1.5], [1.1, -0.3])
    assert row["verdict"] == PARTLY and "pruned ahead at 1 of 2, scratch ahead at 1" in row["ours"]
    assert scratch([0.6, 0.4], [-0.1, -0.3], [1.3, 1.1])["verdict"] == FAILS               # ahead, not significantly
    pd.DataFrame({"pruned - scratch": [0.6, -2.0], "pruned - scratch low": [0.1, -3.0],
                  "pruned - scratch high": [1.1, -1.0], "control": [False, True]}).to_csv(tmp_path / "pruning_encoder_scratch.csv", index=False)
    assert claims_table(tmp_path).set_index("claim").loc["C7", "verdict"] == HOLDS    # the control is no configuration


def test_few_heads_suffice_only_within_the_margin_of_both_references(tmp_path):
    """C6 against the unpruned model and the all-heads control, never a pruned point."""
    def c6(full, control):
        _encoder(tmp_path, full=([0.0, -0.3], [-0.8, full[0]], [0.8, full[1]]),
                 control=([0.0, -0.3], [-0.8, control[0]], [0.8, control[1]]))
        return claims_table(tmp_path).set_index("claim").loc["C6"]
    assert c6((-0.9, 0.3), (-0.8, 0.2))["verdict"] == HOLDS          # both intervals above -1.0
    assert c6((-0.9, 0.3), (-1.1, 0.2))["verdict"] == PARTLY         # the control's reaches below -1.0
    assert c6((-1.6, -1.1), (-0.8, 0.2))["verdict"] == FAILS         # shown to cost more than the unpruned model
    _encoder(tmp_path, full=([0.0, -0.3, -3.3], [-0.8, -0.9, -4.0], [0.8, 0.3, -2.6]),
             control=([0.0, -0.3, -3.3], [-0.8, -0.8, -4.0], [0.8, 0.2, -2.6]), heads=(48, 12, 0))
    row = claims_table(tmp_path).set_index("claim").loc["C6"]
    assert row["verdict"] == HOLDS and "the margin is 30% of the cost of closing every encoder head (-3.30)" in row["ours"]
    assert "12 encoder heads are within 1 BLEU of the unpruned model (30.00)" in row["ours"]
    pd.read_csv(tmp_path / "pruning_encoder.csv").drop(columns=["vs. all heads low"]).to_csv(
        tmp_path / "pruning_encoder.csv", index=False)
    assert claims_table(tmp_path).set_index("claim").loc["C6", "verdict"] == MISSING   # no control: no verdict


def test_fewest_heads_within_counts_a_point_exactly_at_the_tolerance():
    from headlib.claims import fewest_heads_within
    table = pd.DataFrame({"enc-self heads": [48, 12, 3], "BLEU": [35.0, 34.5, 34.4]})
    assert fewest_heads_within(table, 35.0, 0.5) == 12           # 35.0 - 34.5 is 0.5 up to rounding
    assert fewest_heads_within(table, 35.0, 0.6) == 3


def test_specialized_heads_survive_claim_is_corrected_and_needs_heads_with_functions(tmp_path):
    for within, fisher, specialized, expected in [
            ([0.01, 0.02], [0.01, 0.02], 2, HOLDS),        # both halves in both models
            ([0.01, 0.2], [0.5, 0.5], 2, PARTLY),          # relevance in one of two, no function
            ([0.01, 0.02], [0.01, 0.02], 0, PARTLY),       # no head has a function: that half not assessable
            ([0.3, 0.2], [0.5, 0.5], 0, FAILS)]:
        pd.DataFrame({"Mann-Whitney p": 0.01, "Fisher p": fisher, "within-layer p": within,
                      "within-layer p (Holm)": within, "Fisher p (Holm)": fisher, "specialized retained": specialized,
                      "specialized pruned": 0}).to_csv(tmp_path / "pruning_enrichment.csv", index=False)
        row = claims_table(tmp_path).set_index("claim").loc["C9"]
        assert row["verdict"] == expected, (within, fisher, specialized)
    assert "function half not assessable" in row["ours"]
    assert row["by the paper's bar"] == PARTLY                     # Mann-Whitney p 0.01 in both, no function
    pd.read_csv(tmp_path / "pruning_enrichment.csv").drop(columns=["within-layer p (Holm)"]).to_csv(
        tmp_path / "pruning_enrichment.csv", index=False)
    assert claims_table(tmp_path).set_index("claim").loc["C9", "verdict"] == MISSING


def test_c8_takes_a_tie_for_no_order(tmp_path):
    def c8(enc, dec_self, dec_enc):
        pd.DataFrame({"lambda": [0.001, 0.01, 0.1], "enc-self heads": enc, "dec-self heads": dec_self,
                      "dec-enc heads": dec_enc}).to_csv(tmp_path / "pruning_all_attention.csv", index=False)
        return claims_table(tmp_path).set_index("claim").loc["C8"]
    assert c8([48, 10, 0], [48, 40, 10], [48, 40, 30])["verdict"] == HOLDS       # 0.01 < 0.1 < never
    row = c8([48, 10, 0], [48, 40, 10], [48, 40, 10])                             # dec-self = dec-enc at 0.1
    assert row["verdict"] == PARTLY and row["by the paper's bar"] == HOLDS
    assert "enc-self is strictly first, dec-enc is not strictly last" in row["ours"]
    assert c8([48, 40, 10], [48, 10, 0], [48, 40, 30])["verdict"] == PARTLY       # dec-self first, dec-enc last
    assert c8([48, 40, 10], [48, 10, 0], [48, 10, 0])["verdict"] == FAILS


def test_c1_leaves_out_only_a_rare_word_head_that_c5_finds(tmp_path):
    """The paper's exception is a head C5 finds; a layer-1 head like the others is not left out."""
    _importance([0.9, 0.2, 0.3, 0.1, 0.6, 0.5, 0.4, 0.3], [0.1, 0.2, 0.3, 0.05, 0.9, 0.8, 0.7, 0.6]).to_csv(
        tmp_path / "head_importance.csv", index=False)
    _nulls(tmp_path)
    _rare(tmp_path, head=1)                                          # 90% against 10%: C5 finds head 1.1
    assert "without the rare-word head 1.1 (C5)" in claims_table(tmp_path).set_index("claim").loc["C1", "ours"]
    _nulls(tmp_path, rare=0.95)                                      # the untrained model does better: no head found
    assert "over every head: C5 finds no rare-word head" in claims_table(tmp_path).set_index("claim").loc["C1", "ours"]


def test_the_paper_bar_of_c5_can_pass_where_ours_does_not(tmp_path):
    """en-fr's head 1.4: 59% on one of the two rarest and LRP rank 1, without standing out."""
    _importance([0.3, 0.2, 0.2, 0.4], 0.5).assign(rank_in_layer=[2, 3, 3, 1]).to_csv(
        tmp_path / "head_importance.csv", index=False)
    _nulls(tmp_path)
    pd.DataFrame({"layer": 1, "head": [1, 2, 3, 4], "rarest": [0.30, 0.31, 0.29, 0.38], "top2": [0.5, 0.5, 0.5, 0.59],
                  "n": 100}).to_csv(tmp_path / "rare_word_rates.csv", index=False)
    row = claims_table(tmp_path).set_index("claim").loc["C5"]
    assert row["verdict"] == FAILS and row["by the paper's bar"] == HOLDS


def test_styled_keeps_the_verdict_next_to_the_claim():
    from headlib.claims import styled
    table = pd.DataFrame({"claim": ["C1", "C2"], "the paper says": ["a", "b"], "ours": ["x", "y"],
                          "verdict": [HOLDS, FAILS]})
    html = styled(table, ["the paper says"]).to_html()
    heads = [html.index(f">{c}</th>") for c in ("claim", "verdict", "the paper says", "ours")]
    assert heads == sorted(heads)
    assert "min-width: 8em" in html and html.count("background-color") == 2


def test_scale_note_gives_the_main_test_sets_beam_bleu(tmp_path):
    record = {"pair": "en-de", "config": {"model": {"d_model": 64}}, "steps": 1234, "train_minutes": 12.3,
              "stopped": "max_steps",
              "test": {"test_2017_flickr": {"beam": {"bleu": 99.0, "beam": 4}},     # not the main test set
                       "test_2016_flickr": {"beam": {"bleu": 12.345, "beam": 4}}}}
    (tmp_path / "training_results.json").write_text(json.dumps(record))
    note = scale_note(tmp_path)
    assert "d_model 512" in note and "d_model 64" in note and "1,234 updates (12 minutes)" in note
    assert "on 29,000 sentence pairs" in note                  # Multi30k en-de train
    assert "It scores 12.35 BLEU on test_2016_flickr (beam 4)" in note and "99" not in note
    assert note.endswith("the paper's en-ru models score 29.6 (WMT) and 32.4 (OpenSubtitles).")
    record |= {"stopped": "imported", "steps": 0, "source": "Helsinki-NLP/opus-mt-en-de"}
    (tmp_path / "training_results.json").write_text(json.dumps(record))
    assert "d_model 64 and was imported from `Helsinki-NLP/opus-mt-en-de`, not trained here (Sec. 3)" in scale_note(
        tmp_path)


def test_the_model_column_names_the_run_behind_each_claim_and_the_note_the_other_ones(tmp_path):
    """Claims read the tables of Sec. 4-6 pages; a page executed with another run (say, Sec. 6 not
    yet re-executed after the model changed) is named, and only those claims are listed."""
    from headlib.claims import other_models_note
    _importance([0.7, 0.1, 0.1, 0.1], [0.9, 0.2, 0.3, 0.1]).to_csv(tmp_path / "head_importance.csv", index=False)
    runs = {"04_important_heads": "new-run", "05_head_functions": "new-run",
            "06_pruning_encoder": "old-run", "07_pruning_all_attention": "old-run"}
    table = claims_table(tmp_path, runs=runs).set_index("claim")
    assert table.loc["C1", "model"] == "new-run" and table.loc["C6", "model"] == "old-run"
    assert table.loc["C7", "model"] == "old-run"               # two pages, one run
    note = other_models_note(table.reset_index(), "new-run")
    assert "C6/C7/C8/C9 from `old-run`" in note and "C1" not in note
    assert other_models_note(table.reset_index(), "old-run").count("C1/C2/C3/C4/C5 from `new-run`") == 1
    assert other_models_note(claims_table(tmp_path, runs={}), "new-run") == ""       # no pages: nothing named
    assert other_models_note(claims_table(tmp_path, runs={p: "new-run" for p in runs}), "new-run") == ""
    assert "model" not in claims_table(tmp_path).columns


def test_heads_count_only_above_the_best_head_of_the_model_at_initialisation(tmp_path):
    """C3-C5's null for taking the best of 48 heads: the same tables of the untrained model."""
    pd.DataFrame({"layer": [1, 1], "head": [1, 2], "offset": [-1, 0], "fraction": [0.95, 0.3],
                  "confidence": [0.85, 0.4], "positional": [True, False]}).to_csv(tmp_path / "positional_heads.csv",
                                                                                   index=False)
    pd.DataFrame({"relation": ["nsubj", "amod"], "direction": ["a", "b"], "accuracy": [0.6, 0.5],
                  "syntactic": [True, True], "syntactic_relative": [True, True]}).to_csv(tmp_path / "syntactic_best.csv",
                                                                                         index=False)
    _rare_word_tables(tmp_path, rank_of_head_2=1)
    verdicts = lambda: claims_table(tmp_path).set_index("claim")["verdict"].to_dict()
    _nulls(tmp_path)
    assert [verdicts()[c] for c in ("C3", "C4", "C5")] == [HOLDS, HOLDS, HOLDS]
    _nulls(tmp_path, positional=0.96, syntactic=0.65, rare=0.75)   # the untrained model does as well or better
    after = verdicts()
    assert [after[c] for c in ("C3", "C4", "C5")] == [FAILS, FAILS, FAILS]
    assert "at initialisation the best head's share at one offset other than 0 is 96%" in \
        claims_table(tmp_path).set_index("claim").loc["C3", "ours"]
    (tmp_path / "null_rare_word_rates.csv").unlink()
    assert verdicts()["C5"] == MISSING


def test_c1_ranks_heads_within_their_layer_and_tests_the_rare_word_exception(tmp_path):
    """Fig. 1's comparison on 6 layers of 8 heads: confidence that follows relevance within each layer
    holds, independent confidence does not; the rare-word head (relevant, not confident) is left
    out and reported. The permutation p-value agrees with a slow reference built from scipy."""
    import numpy as np
    from scipy.stats import spearmanr

    from headlib.claims import within_layer_rho
    rng = np.random.default_rng(3)
    rel = rng.random(48)
    follows = rel + 0.15 * rng.random(48)
    follows[1] = 0.0                                     # head 1.2: the most relevant of layer 1, least confident
    rel[1] = 2.0
    imp = pd.DataFrame({"layer": np.repeat(np.arange(1, 7), 8), "head": np.tile(np.arange(1, 9), 6),
                        "relevance": rel, "confidence": follows})
    imp["rank_in_layer"] = imp.groupby("layer")["relevance"].rank(ascending=False).astype(int)
    imp.to_csv(tmp_path / "head_importance.csv", index=False)
    pd.DataFrame({"layer": 1, "head": range(1, 9), "rarest": [0.1, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1], "top2": 0.5,
                  "n": 100}).to_csv(tmp_path / "rare_word_rates.csv", index=False)
    _nulls(tmp_path)
    row = claims_table(tmp_path).set_index("claim").loc["C1"]
    assert row["verdict"] == HOLDS and "without the rare-word head 1.2" in row["ours"]
    assert "ranks 1 by LRP and 8 by confidence in layer 1: the exception is seen" in row["ours"]
    imp.assign(confidence=rng.random(48)).to_csv(tmp_path / "head_importance.csv", index=False)
    assert claims_table(tmp_path).set_index("claim").loc["C1", "verdict"] == FAILS
    # the vectorised permutation test against explicit loops over scipy's spearmanr
    small = imp[imp["layer"] <= 2].assign(confidence=lambda t: t["relevance"] + rng.random(len(t)))
    observed, p, _ = within_layer_rho(small, draws=4000)
    groups = [g for _, g in small.groupby("layer")]
    assert observed == pytest.approx(np.mean([spearmanr(g["relevance"], g["confidence"]).statistic for g in groups]))
    slow = np.array([np.mean([spearmanr(g["relevance"], rng.permutation(g["confidence"].values)).statistic
                              for g in groups]) for _ in range(4000)])
    assert p == pytest.approx((1 + (slow >= observed - 1e-12).sum()) / 4001, abs=0.01)


def test_differences_without_intervals_are_not_measured(tmp_path):
    """A table whose points kept no translations (no intervals) gives no C6 or C7 verdict."""
    pd.DataFrame({"lambda": [0.001, 0.01], "enc-self heads": [48, 12], "BLEU": [30.0, 29.7], "vs. full": [0.2, -0.1],
                  "vs. smallest lambda": [0.0, -0.3]}).to_csv(tmp_path / "pruning_encoder.csv", index=False)
    pd.DataFrame({"pruned - scratch": [0.4], "pruned - scratch low": [float("nan")],
                  "pruned - scratch high": [float("nan")]}).to_csv(tmp_path / "pruning_encoder_scratch.csv", index=False)
    table = claims_table(tmp_path).set_index("claim")
    assert table.loc["C6", "verdict"] == table.loc["C7", "verdict"] == MISSING
    assert "no 95% intervals" in table.loc["C7", "ours"]


def test_the_study_time_counts_beyond_fine_tunings_per_method(tmp_path, monkeypatch):
    """Each DSP or fixed-mask record is counted once, its fine-tuning plus scoring minutes summed;
    Hard Concrete points are the Sec. 6 paths' and validations', not Beyond's."""
    from headlib.book.pages import claims as page
    monkeypatch.setattr(page, "results_dir", lambda *a: tmp_path)
    (tmp_path / "pruning").mkdir()
    records = {"enc-self-random-s1-k3-s5.json": ("fixed", 1.5, 0.25), "enc-self-lrp-k3-s5.json": ("fixed", 2.0, 0.25),
               "enc-self-dsp-k3-lr0.2-s5.json": ("dsp", 3.0, 0.5), "enc-self-lam0.1-s5.json": ("hard-concrete", 9.0, 9.0)}
    for name, (method, prune, score) in records.items():
        (tmp_path / "pruning" / name).write_text(json.dumps(
            {"method": method, "prune_minutes": prune, "score_minutes": score, "prune_config": {"steps": 5}}))
    units = {u["step"]: u["minutes"] for u in page.pruning_units("smoke", "en-de", 1)}
    assert units == {"Beyond: 1 DSP fine-tunings x 5 updates, scored": 3.5,
                     "Beyond: 2 fixed-mask (random, confidence, LRP, Michel) fine-tunings x 5 updates, scored": 4.0}


def test_the_study_time_counts_each_lottery_ticket_once(tmp_path, monkeypatch):
    """A ticket's minutes are its early training's plus its retraining's, as its record gives them."""
    from headlib.book.pages import claims as page
    monkeypatch.setattr(page, "results_dir", lambda *a: tmp_path)
    (tmp_path / "lottery").mkdir()
    (tmp_path / "lottery" / "lottery-k3-p15-r6.json").write_text(json.dumps(
        {"k": 3, "prune_at": 15, "ticket_updates": 24, "early": {"minutes": 1.25}, "ticket_minutes": 2.5}))
    assert page.lottery_units("smoke", "en-de", 1) == [
        {"step": "Around: lottery ticket of 3 encoder heads (15 + 24 updates)", "minutes": 3.75,
         "command": "python -m headlib.pruning.lottery --profile smoke --pair en-de --seed 1 --k 3"}]


def test_pending_units_name_what_each_missing_unit_needs(tmp_path, monkeypatch):
    """Another unit without a release needs its training; one released without pages needs only its
    pages; one with some pages needs the others, each with its command; and it is done once all
    its pages are in the book."""
    from types import SimpleNamespace
    from headlib.book.pages import claims as page
    from headlib.book.plan import NOTEBOOKS, Task, planned
    models = tmp_path / "models"
    monkeypatch.setattr(page.release, "release_dir", lambda profile, pair, seed: models / pair / f"seed{seed}")
    monkeypatch.setattr(page, "grids", lambda profile: SimpleNamespace(units=("en-de/1", "en-de/2", "en-fr/1")))
    (models / "en-fr" / "seed1").mkdir(parents=True)
    (models / "en-fr" / "seed1" / "card.json").write_text("{}")
    book = tmp_path / "book"
    others = lambda: page.pending_units("cpu", "en-de", 1, book).set_index("unit")["needs"].filter(like=": every page")
    needs = others()
    assert needs["en-de, seed 2: every page"].startswith("the unit's release: python -m headlib train")
    assert needs["en-fr, seed 1: every page"] == ("its pages, from its release: python -m headlib.book run "
                                                  "--profile cpu --pairs en-fr --seeds 1")
    page_03 = Task(NOTEBOOKS[0], "cpu", "en-fr", 1).output(book)
    page_03.parent.mkdir(parents=True)
    page_03.write_text("{}")
    assert list(others().index) == ["en-de, seed 2: every page"]
    rest = page.pending_units("cpu", "en-de", 1, book).set_index("unit")["needs"].filter(like="(en-fr, seed 1)")
    assert rest["Sec. 4 — Important heads (en-fr, seed 1)"] == ("its page, from its release: python -m headlib.book "
                                                                "run --profile cpu --pairs en-fr --seeds 1 --notebooks "
                                                                "04_important_heads")
    assert rest["Sec. 6.2 — Pruning the encoder (en-fr, seed 1)"].endswith("--pair en-fr --setting encoder, then scratches")
    assert not any("Domains" in unit for unit in rest.index)    # a fixed pair's page is its own unit, listed once
    assert "Across seeds (en-fr, seed 1)" not in rest.index        # the profile has one en-fr seed
    once = "Across seeds \\(en-de|Domains"                     # pages executed for the first seed only
    assert page.pending_units("cpu", "en-de", 1, book)["unit"].str.contains(once).sum() == 2
    assert page.pending_units("cpu", "en-de", 2, book)["unit"].str.contains(once).sum() == 0
    for task in planned(NOTEBOOKS, "cpu", ["en-fr"], [1]):
        task.output(book).parent.mkdir(parents=True, exist_ok=True)
        task.output(book).write_text("{}")
    assert page.pending_units("cpu", "en-de", 1, book)["unit"].str.contains("en-fr").sum() == 0


def test_rule_tables_of_another_execution_are_one_clear_error(tmp_path):
    """C2 finds the page's LRP rule by the column of lrp_rules.csv equal to head_importance.csv's
    relevance; tables of two executions name the file instead of a wrong null."""
    _importance([0.7, 0.1, 0.1, 0.1], 0.5).to_csv(tmp_path / "head_importance.csv", index=False)
    _relevance_null(tmp_path)
    rules = pd.read_csv(tmp_path / "lrp_rules.csv")
    rules.assign(conservative=rules["conservative"] + 0.1, paper=rules["paper"] + 0.2).to_csv(
        tmp_path / "lrp_rules.csv", index=False)
    with pytest.raises(ValueError, match="lrp_rules.csv: no rule's column equals head_importance.csv's relevance"):
        claims_table(tmp_path)

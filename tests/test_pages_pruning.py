"""The Sec. 6 pages' tables and verdicts (headlib.book.pages.pruning) on a hand-built sweep whose
answers are known; `sweep` itself (computing the points) runs in the smoke book."""
from __future__ import annotations

import dataclasses
import json
import math

import pandas as pd
import pytest

from headlib.book.pages import OTHER_MODELS
from headlib.book.pages import pruning as page

ROWS = 2  # layers of the toy encoder, 2 heads each: 4 heads per kind


def _point(lam, open_heads, bleu, kinds=("enc-self",), updates=100):
    spec = ",".join(f"{k}:" + "/".join("".join("1" if (l * 2 + h) < open_heads[k] else "0" for h in range(2))
                                       for l in range(ROWS)) for k in kinds)
    return {"lam": lam, "kinds": list(kinds), "retained": {k: open_heads.get(k, 4) for k in ("enc-self", "dec-self", "dec-enc")},
            "per_layer": {k: [min(2, max(0, open_heads.get(k, 4) - 2 * l)) for l in range(ROWS)]
                          for k in ("enc-self", "dec-self", "dec-enc")},
            "test_beam": bleu, "test_greedy": bleu - 1, "device": "cpu", "path_updates": updates, "mask": spec}


def _sweep(tmp_path, rows, scratch=(), validation=None, setting="encoder"):
    (tmp_path / "pruning").mkdir(exist_ok=True)
    full = {"lam": None, "retained": {"enc-self": 4, "dec-self": 4, "dec-enc": 4}, "test_beam": 30.0, "device": "cpu",
            "test_set": "test_2016_flickr", "per_layer": {"enc-self": [2, 2]}}
    control = {"retained": {"enc-self": 4, "dec-self": 4, "dec-enc": 4}, "test_beam": 29.0, "device": "cpu", "mask": "",
               "steps": 1100, "tokens": 2200, "results": {"run_dir": "en-de-smoke-ctrl", "fingerprint": "ffff"}}
    return page.Sweep(setting, {"steps": 1000, "train_tokens": 2000}, tmp_path / "pruning", 500,
                      "path" if validation else "independent",
                      full, rows, validation, [1100] * len(scratch), list(scratch), control, refs=None)


def test_encoder_values_count_the_fewest_heads_within_each_tolerance(tmp_path):
    rows = [_point(0.001, {"enc-self": 4}, 30.4), _point(0.01, {"enc-self": 2}, 30.0),
            _point(0.1, {"enc-self": 1}, 29.2), _point(1.0, {"enc-self": 0}, 20.0)]
    s = _sweep(tmp_path, rows)
    table = page.encoder_table(s)
    assert (tmp_path / "pruning_encoder.csv").is_file()
    assert table["vs. smallest lambda"].tolist() == pytest.approx([0.0, -0.4, -1.2, -10.4])
    values = page.encoder_values(s, table)
    assert values["sec6-within-full"] == 1 and values["sec6-within-tuned"] == 2    # 1.0 BLEU (ours: claims.MARGIN)
    assert values["sec6-within-full-paper"] == 2 and values["sec6-within-tuned-paper"] == 4   # 0.15 BLEU (paper)
    assert values["sec6-n-zero"] == 1 and values["sec6-zero-delta"] == pytest.approx(-10.0)
    assert values["sec6-zero-first"].startswith("-10.00 [") and values["sec6-zero-first"].endswith("at lambda 1")
    assert values["sec6-tuned-heads"] == 4 and values["sec6-n-points"] == 4


def test_validation_values_say_where_the_path_disagrees(tmp_path):
    rows = [_point(0.01, {"enc-self": 2}, 30.0)]
    checks = [{"lam": 0.01, "heads_agree": True, "bleu_agrees": True, "p_value": 0.5},
              {"lam": 0.1, "heads_agree": True, "bleu_agrees": False, "p_value": 0.01}]
    table, values = page.validation_values(_sweep(tmp_path, rows, validation={
        "points": checks, "path_updates": 260, "independent_updates": 1500, "update_ratio": 0.17}))
    assert len(table) == 2 and values["sec6-update-ratio"] == 0.17 and values["sec6-n-validated"] == 2
    assert "does not agree at lambda 0.1" in values["sec6-validation-verdict"].data
    table, values = page.validation_values(_sweep(tmp_path, rows, validation={
        "points": checks[:1], "path_updates": 100, "independent_updates": 500, "update_ratio": 0.2}))
    assert "agrees with the independent fine-tunings at all 1 lambdas" in values["sec6-validation-verdict"].data
    table, values = page.validation_values(_sweep(tmp_path, rows, setting="all"))
    assert table is None and values["sec63-update-ratio"] == 0 and "independent" in values["sec63-validation-verdict"].data


def test_setup_values_name_the_scratch_models_with_their_fingerprints(tmp_path):
    scratch = [{"retained": {"enc-self": 2}, "test_beam": 29.5, "device": "cpu", "mask": "enc-self:11/00",
                "results": {"run_dir": "en-de-smoke-abc", "fingerprint": "1234"}}]
    values = page.setup_values(_sweep(tmp_path, [_point(0.01, {"enc-self": 2}, 30.0)], scratch))
    models = json.loads(values[OTHER_MODELS])
    assert [(m["run"], m["fingerprint"]) for m in models] == [("en-de-smoke-abc", "1234"), ("en-de-smoke-ctrl", "ffff")]
    assert values["sec6-scratch-budgets"] == "1,100" and values["sec6-budget"] == 1000
    assert "one independent fine-tuning of 500 updates" in values["sec6-curve"].data


def test_all_values_compare_pruned_and_scratch_where_both_exist(tmp_path):
    kinds = ("enc-self", "dec-self", "dec-enc")
    rows = [_point(0.01, {"enc-self": 2, "dec-self": 4, "dec-enc": 4}, 29.0, kinds),
            _point(0.1, {"enc-self": 0, "dec-self": 2, "dec-enc": 4}, 27.0, kinds)]
    scratch = [dict(rows[1], test_beam=27.5, results={}, steps=1100, tokens=2300)]
    s = _sweep(tmp_path, rows, scratch, setting="all")
    table = page.all_table(s)
    assert table["total heads"].tolist() == [10, 6]
    assert math.isnan(table["pruned - scratch"][0]) and table["pruned - scratch"][1] == pytest.approx(-0.5)
    values = page.all_values(table)
    assert (values["sec63-pruned-wins"], values["sec63-scratch-wins"], values["sec63-n-scratch"]) == (0, 0, 1)  # no CI
    assert values["sec63-best-scratch-heads"] == 6 and values["sec63-differences"] == "-0.50 [+nan, +nan]"
    budgets = page.all_budget_table(s)
    assert budgets["control"].tolist() == [False, True] and budgets["pruned updates"].tolist() == [1100, 1000]
    fractions = page.open_fractions(s)
    assert fractions[fractions["lambda"] == 0.1].set_index("kind")["fraction open"].to_dict() == \
        {"enc-self": 0.0, "dec-self": 0.5, "dec-enc": 1.0}
    order = page.order_values(s, table)
    assert order["sec63-c8"] == "partly" and order["sec63-heads-per-layer"] == 2   # enc-self ties dec-self at 0.1
    (tmp_path / "training_results.json").write_text(json.dumps(      # a model that does not translate
        {"pair": "en-de", "test": {"test_2016_flickr": {"beam": {"bleu": 2.0}}}}))
    assert page.order_values(s, table)["sec63-c8"] == ("not assessable: the model scores 2.00 BLEU, under 10, so it "
                                                       "does not translate")


def test_head_table_marks_the_heads_with_a_function(tmp_path):
    importance = pd.DataFrame({"layer": [1, 1, 2], "head": [1, 2, 1], "relevance": [0.1, 0.2, 0.3],
                               "confidence": [0.5, 0.6, 0.7]})
    functions = pd.DataFrame({"layer": [1, 2], "head": [2, 1], "functions": ["positional (+1)", ""]})
    heads = page.head_table(importance, functions)
    assert heads["specialized"].tolist() == [False, True, False]


def test_the_encoder_scratch_table_is_table_2_with_the_control_left_out_of_the_verdict(tmp_path):
    rows = [_point(0.01, {"enc-self": 2}, 30.0) | {"path_tokens": 200}]
    scratch = [{"mask": "enc-self:11/00", "retained": {"enc-self": 2, "dec-self": 4, "dec-enc": 4}, "test_beam": 29.5,
                "device": "cpu", "steps": 1100, "tokens": 2190, "results": {}}]
    versus, values = page.encoder_scratch(_sweep(tmp_path, rows, scratch), None)
    assert versus["control"].tolist() == [False, True] and versus["pruned - scratch"].tolist() == [0.5, 1.0]
    assert versus[["pruned updates", "pruned tokens", "scratch updates"]].values.tolist() == [[1100, 2200, 1100],
                                                                                             [1000, 2000, 1100]]
    assert values["sec6-control-diff"].startswith("+1.00") and "at 0 of 1 configurations" in \
        values["sec6-scratch-verdict"].data                   # no translations kept: no interval, nothing ahead
    assert "contains 0" not in values["sec6-scratch-verdict"].data             # ... and no interval to contain it
    assert values["sec6-fewer-heads"] == "2 heads -0.50 [+nan, +nan]"         # all heads 29.0 - 2 heads 29.5
    assert "Table" not in page.budget_style(versus).to_html() and "1,100" in page.budget_style(versus).to_html()


def test_fig_8_labels_each_panel_with_the_functions_of_its_own_pruned_model(tmp_path):
    stats = lambda heads: [{"layer": l, "head": h, "positional_share": 0.5, "syntactic_margin": 0.0,   # noqa: E731
                            "rarest": 0.1} for l, h in heads]
    rows = [_point(0.01, {"enc-self": 3}, 30.0) | {"functions": [{"layer": 1, "head": 1, "functions": "pos-1"}],
                                                   "head_stats": stats([(1, 1), (1, 2), (2, 1)])},
            _point(0.1, {"enc-self": 1}, 29.0) | {"functions": [{"layer": 1, "head": 1, "functions": "nsubj v->s"}],
                                                  "head_stats": stats([(1, 1)]), "function_sentences": 7}]
    rows[0]["function_sentences"] = 7
    s = _sweep(tmp_path, rows)
    s.full |= {"functions": [], "head_stats": stats([(1, 1), (1, 2), (2, 1), (2, 2)])}
    table, values = page.functions_through_pruning(s)
    assert table[["model", "heads", "positional", "syntactic"]].values.tolist() == [
        ["unpruned", 4, 0, 0], ["pruned", 3, 1, 0], ["pruned", 1, 0, 1]]
    assert values == {"sec6-function-sentences": 7, "sec6-max-positional": 1, "sec6-max-syntactic": 1,
                      "sec6-max-rare": 0}
    assert (tmp_path / "pruning_functions.csv").is_file()
    heads = pd.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "relevance": [0.4, 0.3, 0.2, 0.1]})
    fig = page.survivors_figure(s, heads)
    cells = [[t.get_text() for t in ax.texts] for ax in fig.axes if ax.texts]
    assert cells == [["p-1", "", ""], ["s"]]      # open heads only, each point's own labels (not the unpruned model's)


def test_the_encoder_scratch_verdict_says_when_every_interval_contains_0(tmp_path):
    refs = [f"a caption number {i} with some words" for i in range(30)]
    rows = [_point(0.01, {"enc-self": 2}, 30.0) | {"test_hypotheses": refs}]
    scratch = [{"mask": "enc-self:11/00", "retained": {"enc-self": 2, "dec-self": 4, "dec-enc": 4}, "test_beam": 30.0,
                "device": "cpu", "steps": 1100, "tokens": 2190, "results": {}, "test_hypotheses": refs}]
    s = dataclasses.replace(_sweep(tmp_path, rows, scratch), refs=refs)
    s.control["test_hypotheses"] = refs
    versus, values = page.encoder_scratch(s, None)
    assert versus[["pruned - scratch low", "pruned - scratch high"]].values.tolist()[0] == [0.0, 0.0]
    assert "does not reproduce here for the encoder: every interval contains 0" in values["sec6-scratch-verdict"].data
    assert values["sec6-fewer-heads"] == "2 heads -1.00 [+0.00, +0.00]"      # the same translations: a 0-wide interval

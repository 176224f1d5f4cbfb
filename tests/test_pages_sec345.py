"""The Sec. 3-5 pages' tables, values and figures (headlib.book.pages.sec3/sec4/sec5) on hand-built
records and head tables with known answers; the model-dependent calls run in the smoke book."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import spearmanr

from headlib.book.pages import sec3, sec4, sec5
from headlib.book.pages import glue_all
from headlib.config import PROFILES, get_config


def _run(pair="en-de", bleu=30.0, steps=2800, history=()):
    score = lambda b: {"bleu": b, "chrf": b + 20, "bleu_signature": "nrefs:1|tok:13a", "n": 10, "beam": 4,
                       "len_alpha": 1.0}
    return {"pair": pair, "steps": steps, "parameters": 1000, "train_minutes": 12.5, "tokens_per_second": 900.0,
            "epochs": 2, "stopped": "max_steps", "chosen_weights": "best", "config": {"train": {"seed": 1}},
            "history": list(history), "test": {"test_2016_flickr": {"greedy": score(bleu - 1), "beam": score(bleu)},
                                               "test_2017_flickr": {"greedy": score(bleu - 5), "beam": score(bleu - 4)}}}


def test_config_table_sets_the_page_beside_the_paper():
    cpu, paper = PROFILES["cpu"], PROFILES["base"]
    table = sec3.config_table(cpu, paper, "cpu").set_index("setting")
    assert table.loc["heads per layer"].tolist() == [str(cpu.model.n_heads), "8"]
    assert table.loc["layer normalization"].tolist() == [f"{cpu.model.norm}-LN", "post-LN"]
    assert table.loc["target tokens per update"].tolist() == [str(cpu.train.max_tokens * cpu.train.accum),
                                                              str(paper.train.max_tokens * paper.train.accum)]
    assert table.loc["learning-rate schedule", "this page (cpu)"] == f"linear decay to 0 at update {cpu.train.max_steps:,}"
    values = sec3.config_values(cpu, paper)
    assert values["sec3-enc-heads"] == cpu.model.enc_layers * cpu.model.n_heads
    assert ("as the paper does" in values["sec3-norm"].data) == (cpu.model.norm == "post")


def test_per_pair_values_name_every_pair_and_test_set():
    results = {"en-de": _run(), "en-fr": _run("en-fr", 40.0)}
    values = sec3.test_values(results)
    assert values["sec3-en-fr-bleu-beam-test_2017_flickr"] == 36.0
    assert values["sec3-en-de-chrf-greedy-test_2016_flickr"] == 49.0
    assert values["sec3-en-fr-main-test-set"] == "test_2016_flickr" and values["sec3-en-fr-bleu-beam-main"] == 40.0
    assert len(values) == 2 * (2 * 2 * 2 + 3)
    assert sec3.signatures(results) == "`nrefs:1|tok:13a`"
    training = sec3.training_values(results)
    assert training["sec3-en-fr-steps"] == 2800 and training["sec3-en-de-train-minutes"] == 12.5
    assert sec3.per_pair(sec3.results_table, results)["pair"].tolist() == ["en-de"] * 2 + ["en-fr"] * 2
    sizes = pd.DataFrame({"train": [29000, 200]}, index=pd.Index(["en-de", "en-ru"], name="pair"))
    assert sec3.split_values(sizes) == {"sec3-train-pairs-en-de": 29000, "sec3-train-pairs-en-ru": 200}


def test_page_configs_parse_the_pairs_parameter():
    configs = sec3.page_configs("smoke", " en-de, en-fr ,", 3)
    assert list(configs) == ["en-de", "en-fr"]
    assert configs["en-fr"] == get_config("smoke", ["train.seed=3"], pair="en-fr")


def test_recipe_values_say_which_row_dev_and_test_choose():
    recipes = pd.DataFrame({"schedule": ["linear to 0 at 2,800", "inverse square root", "linear to 0 at 2,800"],
                            "peak lr": ["0.002", "0.001", "0.002"], "tokens per batch": [2048, 4096, 2048],
                            "seed": [1, 1, 2], "dev BLEU beam": [38.0, 37.0, 37.5],
                            "BLEU beam (test_2016_flickr)": [36.0, 36.9, 36.5]})
    wide = {"low": 0.6, "high": 2.2, "chosen": 2.2, "grid_best": 1.4, "test_set": "test_2016_flickr",
            "test_bleu": 35.6, "dev_margin": 0.06}
    cpu = PROFILES["cpu"].train
    values = sec3.recipe_values(recipes, cpu, wide)
    assert values["sec3-recipe-dev-choice"].data.startswith("row 1 of the table (linear to 0 at 2,800, peak lr 0.002")
    assert values["sec3-recipe-test-choice"].data.startswith("row 2 of the table (inverse square root")
    assert values["sec3-recipe-fixed"] == ("36.00, 36.50" if cpu.max_tokens == 2048 else "")
    assert values["sec3-recipe-wide-alpha"].startswith("over 0.6 to 2.2, dev chose alpha 2.2 over 1.4")


def test_norm_values_compare_the_profiles_placement_with_devs_choice():
    trial = pd.DataFrame({"layer norm": ["pre-LN", "post-LN"], "update": [2800, 2800],
                          "dev BLEU greedy": [35.4, 15.4]})
    assert "is the one dev chooses" in sec3.norm_values(trial, "pre")["sec3-norm-verdict"].data
    assert "is not the placement" in sec3.norm_values(trial, "post")["sec3-norm-verdict"].data
    assert sec3.norm_values(trial, "pre")["sec3-norm-choice"].data.startswith("**pre-LN**: 35.40 (pre-LN) against 15.40")


def test_an_imported_models_page_says_it_was_not_trained_here():
    paper, cpu = PROFILES["base"], PROFILES["cpu"]
    opus = dataclasses.replace(PROFILES["pretrained"], data=dataclasses.replace(paper.data, bpe_vocab=58100))
    trained = _run() | {"config": cpu.to_dict()}
    imported = _run(steps=0) | {"config": opus.to_dict(), "stopped": "imported", "source": "Helsinki-NLP/opus-mt-en-de"}
    assert sec3.model_config({"en-de": imported}) == opus and not sec3.imported(trained)
    ours, theirs = sec3.origin_values({"en-de": trained}, paper), sec3.origin_values({"en-de": imported}, paper)
    assert "trained here, from scratch" in ours["sec3-origin"].data
    assert "**not trained here**: it is `Helsinki-NLP/opus-mt-en-de` (en-de)" in theirs["sec3-origin"].data
    assert "0 updates" in theirs["sec3-cost-intro"].data and "0 updates" not in ours["sec3-cost-intro"].data
    assert ours["sec3-scale-summary"] == "width, vocabulary and data are scaled down to fit the compute"
    assert theirs["sec3-scale-summary"].startswith("nothing is scaled down: the model has the paper's size")
    tiny = dataclasses.replace(opus, model=dataclasses.replace(opus.model, d_model=32))
    assert sec3.scale_text(tiny, paper, trained_here=False) == "width is scaled down to fit the compute"
    assert (sec3.scale_text(PROFILES["smoke"], paper, trained_here=True)      # 2+2 layers of 4 heads, d_model 32
            == "depth, heads per layer, width, vocabulary and data are scaled down to fit the compute")
    trial = pd.DataFrame({"layer norm": ["pre-LN", "post-LN"], "update": [2800, 2800], "dev BLEU greedy": [35.4, 15.4]})
    assert "imported with its own placement, post-LN" in sec3.norm_values(trial, "post", trained_here=False)["sec3-norm-verdict"].data


def test_train_and_record_keeps_each_runs_record_with_the_results(smoke_run):
    cfg, out = smoke_run
    results = sec3.train_and_record({"en-de": cfg}, "smoke", cfg.train.seed)
    from headlib.settings import results_dir
    kept = json.loads((results_dir("smoke", "en-de", cfg.train.seed) / "training_results.json").read_text())
    assert kept == results["en-de"] == json.loads((out / "results.json").read_text())


def test_sec4_values_against_their_definitions(tmp_path):
    rng = np.random.default_rng(0)
    rel, conf = torch.tensor(rng.random((3, 4))), torch.tensor(rng.random((3, 4)))
    from headlib.analysis.heads import importance_table, layer_summary
    table = importance_table(rel, conf)
    values = sec4.correlation_values(table)
    assert values["sec4-spearman"] == pytest.approx(spearmanr(rel.flatten(), conf.flatten()).statistic)
    assert values["sec4-n-heads"] == 12
    shares = sec4.layer_values(layer_summary(table), 4)
    top = (rel.max(1).values / rel.sum(1)).numpy()
    assert (shares["sec4-top-share-min"], shares["sec4-top-share-max"]) == pytest.approx((top.min(), top.max()))
    assert shares["sec4-uniform-share"] == 0.25

    other = rel.clone()
    other[0] = other[0].flip(0)                      # layer 1 reversed: its top head differs, the rest agree
    rules, agree = sec4.rule_comparison(table, other, "conservative", "paper", tmp_path)
    assert agree["sec4-n-layers"] == 3 and agree["sec4-rule-same-top"] == 2
    assert agree["sec4-rule-rho-layer"] == pytest.approx((-1 + 1 + 1) / 3)
    written = pd.read_csv(tmp_path / "lrp_rules.csv")
    assert list(written.columns) == ["layer", "head", "conservative", "paper"]
    assert np.allclose(written["paper"], other.flatten().numpy())


def test_sec5_tables_on_hand_built_heads():
    best = pd.DataFrame({"relation": ["nsubj"], "direction": ["v->s"], "layer": [2], "head": [5], "accuracy": [0.6],
                         "accuracy_baseline": [0.4], "offset": [-1], "n": [30], "syntactic": [True],
                         "syntactic_relative": [True]})
    table = sec5.syntax_table(best)
    assert table.loc[0, "head"] == "2.5" and table.loc[0, "best head"] == 0.6 and table.loc[0, "baseline offset"] == -1

    importance = pd.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "relevance": [0.1, 0.9, 0.7, 0.3],
                               "rank_in_layer": [2, 1, 1, 2]})
    functions = pd.DataFrame({"layer": [1, 2], "head": [2, 1], "functions": ["positional (+1), rare", "syntactic"]})
    grid, labels = sec5.function_labels(functions, importance)
    assert labels.values.tolist() == [["", "positional (+1)\nrare"], ["syntactic", ""]]
    assert grid.values.tolist() == [[0.1, 0.9], [0.7, 0.3]]
    top = sec5.most_relevant_per_layer(importance)
    assert list(zip(top["layer"], top["head"])) == [(1, 2), (2, 1)]


def test_positional_heads_and_their_counts(tmp_path):
    n, layers, heads = 20, 1, 3                           # 19 of 20 queries on the previous token: 95%
    prev = torch.zeros(n, n)
    prev[torch.arange(1, n), torch.arange(n - 1)] = 1       # every query attends to the previous token
    prev[0, 0] = 1
    mostly_next = torch.eye(n)
    mostly_next[:15] = 0
    mostly_next[torch.arange(15), torch.arange(2, 17)] = 1  # offset +2 for 15 of 20 queries: 75%, not positional
    maps = [torch.stack([torch.stack([prev, mostly_next, torch.eye(n)])])] * 4     # (layers, heads, T, T) per sentence
    importance = pd.DataFrame({"layer": [1] * 3, "head": [1, 2, 3], "relevance": [0.5, 0.2, 0.3],
                               "rank_in_layer": [1, 3, 2]})
    pos, shown, counts = sec5.positional(maps, "include", importance, tmp_path)
    assert counts["sec5-n-heads"] == layers * heads
    assert counts["sec5-n-positional"] == len(shown) == 2 and set(shown["head"]) == {1, 3}
    assert counts["sec5-n-diagonal"] == 1 and counts["sec5-diagonal-max"] == 1.0
    assert pos.set_index("head").loc[2, ["offset", "fraction"]].tolist() == [2, 0.75]
    assert (tmp_path / "positional_heads.csv").is_file()


def test_over_training_values_follow_the_summary():
    history = []
    for step, share in ((400, 0.2), (800, 0.3), (1200, 0.5)):
        shares = torch.full((2, 2, 5), 0.1)
        shares[0, 1, 3] = share                             # layer 1, head 2, offset +1
        history.append({"step": step, "heads": {"offsets": [-2, -1, 0, 1, 2], "offset_share": shares.tolist(),
                                                "confidence": [[0.3, 0.4], [0.5, 0.6]],
                                                "rare_rate": [[0.1, 0.2], [0.0, 0.0]], "sentences": 500}})
    summary, values = sec5.over_training(history)
    assert values["sec5-emerge-first-step"] == 400 and values["sec5-emerge-last-step"] == 1200
    assert values["sec5-emerge-first-share"] == pytest.approx(0.2) and values["sec5-emerge-last-share"] == pytest.approx(0.5)
    assert values["sec5-emerge-last-offset"] == 1 and values["sec5-emerge-sentences"] == 500
    assert len(summary) == 3
    assert ("at the first evaluation (update 400) the most positional head (a fixed offset other than 0), L1H2, puts 20% "
            "of its argmax at offset +1; at the last (update 1,200), L1H2 puts 50%") in values["sec5-emerge-text"].data
    sec5.over_training_figure(history)
    summary, values = sec5.over_training([{"step": 0}])                   # an imported model: no training
    assert summary.empty and "not trained here" in values["sec5-emerge-text"].data


def test_glue_all_glues_every_value(monkeypatch):
    glued = []
    monkeypatch.setattr("myst_nb.glue", lambda key, value, display=True: glued.append((key, value, display)))
    glue_all({"a": 1, "b": "x"})
    assert glued == [("a", 1, False), ("b", "x", False)]


def test_claims_page_values_count_every_verdict():
    from headlib.book.pages import claims as page
    from headlib.claims import FAILS, HOLDS, MISSING
    table = pd.DataFrame({"claim": ["C1", "C2", "C3"], "ours": ["rho 0.9", "0.7", "-"],
                          "verdict": [HOLDS, HOLDS, MISSING], "model": ["run-a", "run-b", "-"]})
    values = page.verdict_values(table)
    assert values["claims-c2-ours"] == "0.7" and values["claims-c3-verdict"] == MISSING
    assert (values["claims-n-holds"], values["claims-n-missing"], values["claims-n-partly"]) == (2, 1, 0)
    assert sum(v for k, v in values.items() if k.startswith("claims-n-")) == len(table)
    assert "C2" in page.models_note(table, "run-a") and "run-b" in page.models_note(table, "run-a")
    assert page.models_note(table.iloc[[0, 2]], "run-a") == "Every claim comes from this page's model (`run-a`, Sec. 3)."
    assert FAILS in page.VERDICT_KEYS.values()


def test_claims_page_finds_the_pairs_with_results(tmp_path):
    from headlib.book.pages import claims as page
    for unit in ("en-de/seed1", "en-fr/seed1", "en-fr/seed2", "en-ru/seed2"):
        (tmp_path / unit).mkdir(parents=True)
        (tmp_path / unit / "head_importance.csv").write_text("layer,head\n")
    (tmp_path / "en-ru/seed1").mkdir()
    assert page.pairs_with_results(tmp_path / "en-de" / "seed1", 1) == ["en-de", "en-fr"]


def test_seeds_page_profiles_and_agreement():
    from headlib.book.pages import seeds as page
    head_table = lambda rel: pd.DataFrame({"layer": [1, 1, 2, 2], "head": [1, 2, 1, 2], "relevance": rel,
                                           "confidence": rel})
    tables = {1: head_table([0.1, 0.9, 0.6, 0.4]), 2: head_table([0.8, 0.2, 0.3, 0.7])}
    profiles = page.layer_profiles(tables)
    assert profiles[profiles["seed"] == "seed 2"].groupby("layer")["relevance"].max().tolist() == [0.8, 0.7]
    assert len(profiles) == 8 and set(profiles["seed"]) == {"seed 1", "seed 2"}
    page.profiles_figure(profiles)
    from headlib.studies.seeds import agreement_summary, structure_agreement
    agree, text = page.agreement(tables)
    assert agree.equals(structure_agreement(tables).round(2))
    assert text == agreement_summary(structure_agreement(tables), "seeds")
    placeholder, text = page.agreement({1: tables[1]})
    assert isinstance(placeholder, str) and "one seed" in text.lower()
    training = pd.DataFrame({"seed": [1, 3]})
    assert page.found_text(training, tables) == "trained models for seed(s) 1, 3; Sec. 4 tables for seed(s) 1, 2."

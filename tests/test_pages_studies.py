"""The Domains and Around pages' tables and texts (headlib.book.pages.domains, .around) on hand-built
analyses; the models, the adaptation and the studies themselves run in the smoke book."""
from __future__ import annotations

import pandas as pd
import pytest

from headlib.book.pages import domains as page
from headlib.profiles import profile


def test_relevance_grids_label_each_head_with_its_functions():
    d = {"importance": [{"layer": l, "head": h, "relevance": 0.1 * (2 * l + h)} for l in (1, 2) for h in (1, 2)],
         "functions": [{"layer": 2, "head": 1, "functions": "positional (-1), rare"}]}
    grid, labels = page.relevance_grids(d)
    assert grid.loc[2, 1] == pytest.approx(0.5)
    assert labels.values.tolist() == [["", ""], ["positional (-1)\nrare", ""]]
    assert page.relevance_grids(d | {"functions": []})[1].values.tolist() == [["", ""], ["", ""]]
    page.heatmaps_figure(d, d)


def test_adaptation_values_read_each_way_of_the_table():
    cfg = profile("smoke").domains
    alps = f"alps-k{cfg.adapt.k}"
    table = pd.DataFrame({"way": ["none", "all", alps, "random-s1", "random-s2"],
                          "tatoeba": [10.0, 20.0, 18.0, 12.0, 14.0], "updated share": [0.0, 1.0, 0.05, 0.05, 0.05]})
    values = page.adaptation_values(table, cfg)
    assert (values["adapt-bleu-none"], values["adapt-bleu-all"], values["adapt-bleu-alps"]) == (10.0, 20.0, 18.0)
    assert values["adapt-bleu-random"] == 13.0 and values["adapt-alps-share"] == 0.05
    assert values["adapt-k"] == str(cfg.adapt.k) and values["adapt-n-tatoeba"] == f"{cfg.n_target:,}"


def test_kinds_text_counts_the_alps_heads_per_kind():
    shift = pd.DataFrame([(k, l, h, s) for k, s in (("enc-self", 0.1), ("dec-self", 0.2), ("dec-enc", 0.3))
                          for l in (1, 2) for h in (1, 2)], columns=["kind", "layer", "head", "shift"])
    chosen = {("dec-enc", 1, 2), ("dec-enc", 2, 1), ("enc-self", 1, 1)}
    assert page.kinds_text(shift, chosen) == ("The ALPS heads by kind: 1 enc-self, 0 dec-self, 2 dec-enc. Mean relative "
                                              "weight change per kind in the all-parameter run: enc-self 0.100, "
                                              "dec-self 0.200, dec-enc 0.300.")
    page.shift_figure(shift, chosen)


def test_around_top_heads_keeps_each_layers_most_relevant():
    from headlib.book.pages.around import top_heads
    importance = pd.DataFrame({"layer": [1, 1, 1, 2, 2, 2], "head": [1, 2, 3, 1, 2, 3], "rank_in_layer": [3, 1, 2, 2, 3, 1]})
    assert top_heads(importance, 1, (2, 3)).tolist() == [[0, 1, 0], [0, 0, 1]]
    assert top_heads(importance, 2, (2, 3)).tolist() == [[0, 1, 1], [1, 0, 1]]


def test_beyond_speed_reads_a_benchmark_only_of_the_pages_model(tmp_path):
    import json
    from types import SimpleNamespace
    from headlib.book.pages import beyond
    out = tmp_path / "results" / "cpu" / "en-de" / "seed1"
    bench = tmp_path / "results" / "cpu" / "benchmarks" / "shrink_speed_1thread.json"
    bench.parent.mkdir(parents=True)
    row = {"config": "enc-self 12", "heads": {"enc-self": 12, "dec-self": 48, "dec-enc": 48}, "parameters": 1e7,
           "encode_speedup": 1.5, "beam_speedup": 1.1, "same_translations_as_masked": True}
    bench.write_text(json.dumps({"model": "aaaaaaaaaaaa", "threads": 1, "test_set": "t", "results": [row]}))
    table, values = beyond.speed(out, SimpleNamespace(fingerprint=lambda: "aaaaaaaaaaaa"))
    assert values["beyond-speed-enc"] == 1.5 and len(table) == 1
    table, values = beyond.speed(out, SimpleNamespace(fingerprint=lambda: "bbbbbbbbbbbb"))   # another model's
    assert "not measured on this model" in values["beyond-speed-source"].data and values["beyond-speed-k"] == 0

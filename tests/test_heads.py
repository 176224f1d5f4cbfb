"""Head-function scorers on hand-built attention maps whose argmaxes are known."""
from collections import Counter

import pytest
import torch

from headlib.analysis.heads import (Parsed, confidence, emergence_rate, emergence_summary, heads_over_training,
                                    offset_shares, piece_to_word, positional_heads, rare_word_rates, syntactic_accuracy,
                                    syntactic_heads, word_attention)


def one_hot_map(targets, n):
    """(n+1, n+1) attention (EOS last) whose query i attends only to key targets[i]; EOS row uniform."""
    m = torch.zeros(n + 1, n + 1)
    for i, t in enumerate(targets):
        m[i, t] = 1.0
    m[n] = 1.0 / (n + 1)
    return m


def test_confidence_excludes_eos_by_default():
    m = torch.zeros(1, 1, 3, 3)
    m[0, 0, 0] = torch.tensor([0.5, 0.3, 0.2])
    m[0, 0, 1] = torch.tensor([0.1, 0.2, 0.7])   # max on EOS key: excluded -> 0.2
    m[0, 0, 2] = torch.tensor([0.9, 0.05, 0.05])  # EOS query: excluded
    assert confidence([m])[0, 0].item() == pytest.approx((0.5 + 0.2) / 2)
    assert confidence([m], "include")[0, 0].item() == pytest.approx((0.5 + 0.7 + 0.9) / 3)
    assert confidence([m], "exclude-key")[0, 0].item() == pytest.approx((0.5 + 0.2 + 0.9) / 3)
    with pytest.raises(ValueError, match="eos_mode"):
        confidence([m], "bogus")


def test_positional_head_offset_and_fraction():
    # head 1 always attends to the previous token (first token to itself); head 2 to itself
    n = 10
    prev = one_hot_map([max(i - 1, 0) for i in range(n)], n)
    same = one_hot_map(list(range(n)), n)
    maps = [torch.stack([prev, same])[None] for _ in range(3)]            # (1, 2, n+1, n+1)
    df = positional_heads(maps).set_index("head")
    assert df.loc[1, "offset"] == -1 and df.loc[1, "fraction"] == pytest.approx(0.9)
    assert df.loc[1, "positional"]
    assert df.loc[2, "offset"] == 0 and df.loc[2, "fraction"] == 1.0


def test_offset_shares_agree_with_a_count_of_argmax_offsets():
    """Each head's share of argmax at offsets -2..+2 against a plain count over queries, on random
    maps of several lengths; where the most common offset is in range, it is positional_heads' fraction."""
    torch.manual_seed(0)
    maps = [torch.rand(2, 3, n + 1, n + 1).softmax(-1) for n in (1, 3, 6, 9)]
    shares = offset_shares(maps)                                          # (L, H, 5)
    for l in range(2):
        for h in range(3):
            offsets = [int(m[l, h, :-1, :-1][q].argmax()) - q for m in maps for q in range(m.size(-1) - 1)]
            for j, o in enumerate(range(-2, 3)):
                assert shares[l, h, j].item() == pytest.approx(offsets.count(o) / len(offsets))
    table = positional_heads(maps)
    for row in table.itertuples():
        if -2 <= row.offset <= 2:
            assert shares[row.layer - 1, row.head - 1, row.offset + 2].item() == pytest.approx(row.fraction)


def test_heads_over_training_tidies_a_history_and_finds_the_most_positional_head():
    """Two evaluations of a 2-layer, 2-head model: the rows are the recorded numbers; the summary's
    best head is the largest share at any offset but 0 (L2H2's 0.8 on the token itself is not
    positional), found by a plain scan."""
    def stats(shares, conf, rare):
        return {"sentences": 5, "offsets": [-2, -1, 0, 1, 2], "confidence": conf, "offset_share": shares, "rare_rate": rare}
    flat = [0.2] * 5
    history = [{"step": 400, "dev_bleu": 1.0},                                # before statistics were recorded
               {"step": 800, "heads": stats([[flat, [0, 0.5, 0.1, 0, 0]], [flat, [0, 0, 0.8, 0, 0]]], [[0.3, 0.4], [0.5, 0.6]],
                                            [[0.1, 0.7], [0.9, 0.0]])},
               {"step": 1200, "heads": stats([[flat, flat], [[0, 0, 0.1, 0.2, 0.65], flat]], [[0.3, 0.4], [0.5, 0.8]],
                                             [[0.2, 0.3], [0.9, 0.0]])}]
    curves = heads_over_training(history)
    assert len(curves) == 8 and set(curves["step"]) == {800, 1200}
    row = curves[(curves["step"] == 800) & (curves["layer"] == 1) & (curves["head"] == 2)].iloc[0]
    assert (row["offset -1"], row["confidence"], row["rare_rate"]) == (0.5, 0.4, 0.7)
    summary = emergence_summary(curves).set_index("step")
    assert summary.loc[800, "best positional share"] == 0.5 and summary.loc[800, "its offset"] == -1
    assert summary.loc[800, "its head"] == "L1H2"
    assert summary.loc[1200, "best positional share"] == 0.65 and summary.loc[1200, "its offset"] == 2
    assert summary.loc[1200, "its head"] == "L2H1" and summary.loc[1200, "max confidence"] == 0.8
    assert summary.loc[800, "max layer-1 rare rate"] == 0.7 and summary.loc[1200, "max layer-1 rare rate"] == 0.3


def test_emergence_rate_is_the_slope_of_the_second_half_and_the_peak_not_an_extrapolation():
    import pandas as pd
    summary = pd.DataFrame({"step": [400, 800, 1200, 1600], "best positional share": [0.9, 0.1, 0.3, 0.4]})
    rate = emergence_rate(summary)               # the second half: (1200, 0.3), (1600, 0.4)
    assert rate == {"slope_per_1000": pytest.approx(0.25), "from_step": 1200, "peak_share": 0.9, "peak_step": 400}


class CharBPE:
    """Pieces = words split after their first character (so every word has 1-2 pieces)."""

    def offsets(self, text):
        out, pos = [], 0
        for word in text.split(" "):
            start = text.index(word, pos)
            out.append((start, start + 1))
            if len(word) > 1:
                out.append((start + 1, start + len(word)))
            pos = start + len(word)
        return out


def test_word_attention_sums_to_and_averages_from():
    # words: "ab" (pieces 0,1) and "c" (piece 2)
    m = torch.tensor([[0.2, 0.3, 0.5, 0.0], [0.6, 0.2, 0.2, 0.0], [0.1, 0.1, 0.8, 0.0], [0.3] * 4])[None, None]
    wa = word_attention(m, [0, 0, 1], 2)[0, 0]
    assert torch.allclose(wa, torch.tensor([[(0.5 + 0.8) / 2, (0.5 + 0.2) / 2], [0.2, 0.8]]))


def test_syntactic_scorer_known_accuracies_and_baseline():
    text = "dogs chase cats"
    spans = ((0, 4), (5, 10), (11, 15))
    parsed = Parsed(text, spans, (("nsubj", 1, 0), ("dobj", 1, 2)))
    bpe = CharBPE()
    pw = piece_to_word(bpe.offsets(text), spans)
    assert pw == [0, 0, 1, 1, 2, 2]
    n = len(pw)

    def piece_map(word_targets):
        """Each piece of word w attends to the first piece of word word_targets[w]."""
        first = {w: pw.index(w) for w in range(3)}
        return one_hot_map([first[word_targets[w]] for w in pw], n)

    # head 1: verb -> subject, subject -> verb, object -> verb (all correct except v->o)
    h1 = piece_map({0: 1, 1: 0, 2: 1})
    # head 2: everyone attends to the next word (last word to itself)
    h2 = piece_map({0: 1, 1: 2, 2: 2})
    maps = [torch.stack([h1, h2])[None]] * 4
    heads, base = syntactic_accuracy(maps, [parsed] * 4, bpe)
    acc = heads.set_index(["relation", "direction", "head"])["accuracy"]
    assert acc["nsubj", "v->s", 1] == 1.0 and acc["nsubj", "s->v", 1] == 1.0
    assert acc["dobj", "v->o", 1] == 0.0 and acc["dobj", "o->v", 1] == 1.0
    assert acc["dobj", "v->o", 2] == 1.0 and acc["nsubj", "v->s", 2] == 0.0
    b = base.set_index(["relation", "direction"])
    assert b.loc[("nsubj", "v->s"), "offset"] == -1 and b.loc[("nsubj", "v->s"), "accuracy"] == 1.0
    assert b.loc[("dobj", "v->o"), "offset"] == 1
    best = syntactic_heads(heads, base)
    assert not best["syntactic"].any()   # a fixed offset explains every relation here


def test_positional_baseline_picks_most_frequent_offset():
    # three sentences with amod adjective -> noun at offset +1, one at +2
    bpe = CharBPE()
    sents = [("red car", ((0, 3), (4, 7)), (("amod", 1, 0),)),
             ("big dog", ((0, 3), (4, 7)), (("amod", 1, 0),)),
             ("old cat", ((0, 3), (4, 7)), (("amod", 1, 0),)),
             ("a b c", ((0, 1), (2, 3), (4, 5)), (("amod", 2, 0),))]
    parsed = [Parsed(t, s, a) for t, s, a in sents]
    maps = [torch.full((1, 1, len(bpe.offsets(p.text)) + 1, len(bpe.offsets(p.text)) + 1), 0.1) for p in parsed]
    _, base = syntactic_accuracy(maps, parsed, bpe)
    row = base.set_index("direction").loc["adj->n"]
    assert row["offset"] == 1 and row["accuracy"] == pytest.approx(0.75) and row["n"] == 4


def test_rare_word_rates():
    freq = Counter({10: 1000, 11: 900, 12: 5, 13: 3, 14: 800})
    ids = [10, 12, 11, 13]            # rarest: position 3 (id 13), second: position 1 (id 12)
    n = len(ids)
    to_rarest = torch.zeros(n + 1, n + 1); to_rarest[:, 3] = 1
    to_second = torch.zeros(n + 1, n + 1); to_second[:, 1] = 1
    to_first = torch.zeros(n + 1, n + 1); to_first[:, 0] = 1
    m = torch.stack([to_rarest, to_second, to_first])[None]          # (1, 3, n+1, n+1)
    common = [10, 11, 14]             # rarest token is frequent: sentence skipped
    df = rare_word_rates([m, m[..., :4, :4]], [ids, common], freq, exclude_top=3)
    r = df.set_index("head")
    assert (r["n"] == 1).all()
    assert r.loc[1, "rarest"] == 1.0 and r.loc[1, "top2"] == 1.0
    assert r.loc[2, "rarest"] == 0.0 and r.loc[2, "top2"] == 1.0
    assert r.loc[3, "rarest"] == 0.0 and r.loc[3, "top2"] == 0.0


def test_encoder_attention_crops_padded_batches_back_to_each_sentence(trained_tiny):
    """Sentences batched by length (with padding) get the maps they get alone, in input order."""
    from around_helpers import DigitBPE, reverse_corpus

    from headlib.analysis.heads import encoder_attention
    from headlib.data.batching import source_tensor
    bpe, sentences = DigitBPE(), list(reverse_corpus(7, seed=5).src)
    ids = bpe.encode_batch(sentences)
    assert len({len(i) for i in ids}) >= 3
    maps = encoder_attention(trained_tiny, bpe, sentences, max_tokens=14)    # several batches, padded
    for i, m in zip(ids, maps):
        with torch.no_grad():
            alone = trained_tiny.encode(source_tensor([i]), return_attention=True)[1][:, 0].float()
        assert m.shape == (2, 4, len(i) + 1, len(i) + 1)
        torch.testing.assert_close(m, alone, atol=1e-6, rtol=1e-5)


CONLLU = [
    "# text = Dogs don't chase cats",
    "1\tDogs\tdog\tNOUN\tNNS\t_\t4\tnsubj\t_\t_",
    "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_",                     # a multiword token: its words follow
    "2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_",
    "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_",
    "4\tchase\tchase\tVERB\tVB\t_\t0\troot\t_\t_",
    "5\tcats\tcat\tNOUN\tNNS\t_\t4\tobj\t_\t_",
    "",
    "# text = Cats were chased",
    "1\tCats\tcat\tNOUN\tNNS\t_\t3\tnsubj:pass\t_\t_",
    "2\twere\tbe\tAUX\tVBD\t_\t3\taux:pass\t_\t_",
    "3\tchased\tchase\tVERB\tVBN\t_\t0\troot\t_\t_",
    "3.1\tchased\tchase\tVERB\tVBN\t_\t_\t_\t3:conj\t_",     # an empty node: skipped
    "",
    "# text = Hello world",
    "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_",                 # the form is not in the text: skipped
    "",
]


def test_gold_trees_are_read_with_0_based_words_and_paper_relation_names(tmp_path):
    from headlib.analysis.heads import normalize_relation, parse_conllu
    path = tmp_path / "tiny.conllu"
    path.write_text("\n".join(CONLLU) + "\n", encoding="utf-8")
    dogs, cats = parse_conllu(path)
    assert dogs.spans == ((0, 4), (5, 7), (7, 10), (11, 16), (17, 21))
    assert dogs.arcs == (("nsubj", 3, 0), ("advmod", 3, 2), ("dobj", 3, 4))
    assert cats.spans == ((0, 4), (5, 9), (10, 16)) and cats.arcs == (("nsubj", 2, 0),)
    assert [normalize_relation(r) for r in ("obj", "nsubj:pass", "nsubjpass", "amod")] == ["dobj", "nsubj", "nsubj", "amod"]


def test_importance_ranks_and_head_function_labels_on_hand_built_tables():
    import pandas as pd

    from headlib.analysis.heads import head_functions, importance_table
    table = importance_table(torch.tensor([[0.1, 0.5, 0.5, 0.2]]), torch.tensor([[0.9, 0.1, 0.2, 0.3]]))
    assert table["rank_in_layer"].tolist() == [4, 1, 1, 3]                    # ties share the best rank
    assert table[["layer", "head"]].values.tolist() == [[1, 1], [1, 2], [1, 3], [1, 4]]
    positional = pd.DataFrame({"layer": [1, 1], "head": [1, 2], "offset": [-1, 1], "positional": [True, False]})
    syntactic = pd.DataFrame({"relation": "nsubj", "direction": "v->s", "layer": [2, 2], "head": [3, 4],
                              "accuracy": [0.60, 0.50]})
    baseline = pd.DataFrame({"relation": ["nsubj"], "direction": ["v->s"], "accuracy": [0.45]})
    rare = pd.DataFrame({"layer": [1, 1, 2], "head": [1, 2, 1], "rarest": [0.6, 0.3, 0.9], "n": 10})
    labels = head_functions(positional, syntactic, baseline, rare)
    assert labels.values.tolist() == [[1, 1, "pos-1, rare"], [2, 3, "nsubj v->s"]]   # 0.05 over: not syntactic
    alike = pd.DataFrame({"layer": 1, "head": [1, 2, 3], "rarest": [0.38, 0.33, 0.30], "n": 10})
    assert "rare" not in head_functions(positional, syntactic, baseline, alike)["functions"].str.cat()  # +5 points
    at_margin = alike.assign(rarest=[0.43, 0.33, 0.30])                              # exactly +10 points
    assert "rare" in head_functions(positional, syntactic, baseline, at_margin)["functions"].str.cat()


def test_short_functions_for_heatmap_cells():
    from headlib.analysis.heads import short_functions
    assert short_functions("pos-1, rare") == "p-1 r"
    assert short_functions("nsubj v->s, amod n->a, pos+2") == "s p+2"
    assert short_functions("") == "" and short_functions(float("nan")) == ""
    assert short_functions("poss n->p") == "s"                 # a relation whose name starts with "pos"

def test_syntactic_heads_absolute_and_relative_margins_on_a_hand_built_table():
    """Best head per relation and direction against its baseline: `syntactic` at least 10 points
    over it (exactly 10 counts, as "at least" says), `syntactic_relative` at least 10% over it."""
    import pandas as pd
    cases = {   # (relation, direction): (accuracy of heads 1 and 2, baseline)
        ("nsubj", "v->s"): ((0.90, 0.30), 0.50),    # 40 points over: both
        ("nsubj", "s->v"): ((0.20, 0.56), 0.50),    # 6 points, 12% over: relative only
        ("dobj", "v->o"): ((0.60, 0.10), 0.50),     # exactly 10 points (0.6 - 0.5 < 0.1 in floats): both
        ("dobj", "o->v"): ((0.44, 0.00), 0.40),     # 4 points, exactly 10% (0.44 < 0.4 * 1.1 in floats): relative
        ("amod", "n->adj"): ((0.30, 0.54), 0.50),   # 4 points, 8%: neither
        ("amod", "adj->n"): ((0.59, 0.59), 0.50),   # a tie: the first head; 9 points, 18%: relative only
    }
    heads = pd.DataFrame([{"relation": r, "direction": d, "layer": 1, "head": h + 1, "accuracy": a, "n": 50}
                          for (r, d), (accs, _) in cases.items() for h, a in enumerate(accs)])
    base = pd.DataFrame([{"relation": r, "direction": d, "offset": 1, "accuracy": b, "n": 50}
                         for (r, d), (_, b) in cases.items()])
    best = syntactic_heads(heads, base).set_index(["relation", "direction"])
    assert len(best) == len(cases)
    expected = {("nsubj", "v->s"): (1, 0.90, True, True), ("nsubj", "s->v"): (2, 0.56, False, True),
                ("dobj", "v->o"): (1, 0.60, True, True), ("dobj", "o->v"): (1, 0.44, False, True),
                ("amod", "n->adj"): (2, 0.54, False, False), ("amod", "adj->n"): (1, 0.59, False, True)}
    for key, (head, acc, absolute, relative) in expected.items():
        row = best.loc[key]
        assert (row["head"], row["accuracy"], row["accuracy_baseline"]) == (head, acc, cases[key][1]), key
        assert (bool(row["syntactic"]), bool(row["syntactic_relative"])) == (absolute, relative), key


def test_head_functions_label_a_head_exactly_10_points_over_its_baseline():
    import pandas as pd

    from headlib.analysis.heads import head_functions
    positional = pd.DataFrame({"layer": [1], "head": [1], "offset": [-1], "positional": [False]})
    syntactic = pd.DataFrame({"relation": "dobj", "direction": "v->o", "layer": [1, 1], "head": [2, 3],
                              "accuracy": [0.60, 0.59]})
    baseline = pd.DataFrame({"relation": ["dobj"], "direction": ["v->o"], "accuracy": [0.50]})
    rare = pd.DataFrame({"layer": [1], "head": [1], "rarest": [0.0], "n": 0})
    labels = head_functions(positional, syntactic, baseline, rare)
    assert labels.values.tolist() == [[1, 2, "dobj v->o"]]


def test_parser_agreement_counts_labelled_arcs_by_word_spans():
    from headlib.analysis.heads import parser_agreement
    text = "Oh, dogs chase small cats"
    # gold words: "Oh," dogs chase small cats; the parser splits "Oh" "," so its word indices differ
    gold = Parsed(text, ((0, 3), (4, 8), (9, 14), (15, 20), (21, 25)),
                  (("nsubj", 2, 1), ("dobj", 2, 4), ("amod", 4, 3)))
    predicted = Parsed(text, ((0, 2), (2, 3), (4, 8), (9, 14), (15, 20), (21, 25)),
                       (("nsubj", 3, 2),       # chase -> dogs: the matching arc
                        ("nsubj", 3, 5),       # chase -> cats: the right words, the wrong label
                        ("amod", 2, 4)))       # dogs -> small: the wrong head
    short = Parsed("cats run fast", ((0, 4), (5, 8), (9, 13)), (("nsubj", 1, 0), ("advmod", 1, 2)))
    table = parser_agreement([gold, short], [predicted, short]).set_index("relation")
    assert table.index.tolist() == ["nsubj", "dobj", "amod", "advmod"]
    # nsubj: 2 gold, 3 predicted, 2 matching; dobj: 1 gold, none predicted; amod: 1 and 1, none matching
    assert table["gold arcs"].tolist() == [2, 1, 1, 1] and table["parser arcs"].tolist() == [3, 0, 1, 1]
    assert table.loc["nsubj", "precision"] == pytest.approx(2 / 3) and table.loc["nsubj", "recall"] == 1.0
    assert table.loc["nsubj", "f1"] == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))       # 0.8
    for rel in ("dobj", "amod"):
        assert table.loc[rel, ["precision", "recall", "f1"]].tolist() == [0.0, 0.0, 0.0], rel
    assert table.loc["advmod", ["precision", "recall", "f1"]].tolist() == pytest.approx([1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="differ in text: 'cats run fast' vs 'Oh, dogs chase small cats'"):
        parser_agreement([gold, short], [predicted, predicted])


def test_layer_summary_takes_the_head_of_largest_absolute_relevance_and_its_share():
    import pandas as pd

    from headlib.analysis.heads import layer_summary
    table = pd.DataFrame({"layer": [1, 1, 1, 2, 2, 2], "head": [1, 2, 3, 1, 2, 3],
                          "relevance": [0.2, -0.6, 0.2, 0.5, 0.3, 0.2], "confidence": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]})
    s = layer_summary(table)
    assert s["head"].tolist() == [2, 1]                  # layer 1: head 2 pushes the token down, by the most
    assert s["relevance"].tolist() == pytest.approx([-0.6, 0.5])
    assert s["top share"].tolist() == pytest.approx([0.6, 0.5])
    assert s["layer mean"].tolist() == pytest.approx([-0.2 / 3, 1.0 / 3])
    assert s["confidence"].tolist() == [0.2, 0.4]

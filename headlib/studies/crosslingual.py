"""Cross-lingual consistency of head importance (after Ma et al. 2021, "Contributions of
Transformer Attention Heads in Multi- and Cross-lingual Tasks").

The same English sentences (NTREX-128 sources) go into each pair's encoder. Our models are
trained separately, one per target language; models trained with the same seed and shapes start
from identical weights, so head h of layer l is the same function at the start of every model and
head-by-head agreement asks whether training towards different targets keeps the same heads
important (with different seeds or shapes heads are exchangeable within a layer, and only layer
structure, e.g. the share of the layer's relevance taken by its top head, could be compared).
Within one model, the head ranking on NTREX (news) vs. the model's own test domain says whether
importance is a property of the head or of the data.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict
from typing import NamedTuple

import pandas as pd
from scipy.stats import spearmanr

from headlib.analysis.heads import confidence, encoder_attention, importance_table
from headlib.analysis.lrp import head_relevance
from headlib.config import get_config
from headlib.data.corpora import load_split, main_test_set
from headlib.files import write_json
from headlib.settings import results_dir
from headlib.train import trained_model
from headlib.train.records import model_id, record_digest, run_record


def head_profile(model, bpe, sentences, rule: str = "conservative") -> pd.DataFrame:
    """One row per encoder head: LRP relevance (per-sentence normalisation), confidence, rank."""
    relevance, _ = head_relevance(model, bpe, sentences, rule, normalize="sentence")
    return importance_table(relevance, confidence(encoder_attention(model, bpe, sentences)))


class PairProfiles(NamedTuple):
    tables: dict[str, pd.DataFrame]   # sentence set -> head_profile table
    vocab_size: int                   # with `model`, the model's shapes: equal shapes and seed, same initial weights
    model: dict                       # the ModelConfig, as a dict
    record: dict | None = None        # the run whose model it is: {"run_dir", "fingerprint"} (results.OTHER_MODELS)


def cached_head_profiles(profile: str, pair: str, seed: int, sentence_sets: dict[str, list[str]],
                         rule: str = "conservative") -> PairProfiles:
    """`head_profile` of the (profile, pair, seed) model on each named sentence set, cached in
    `results/<profile>/<pair>/seed<seed>/head_profiles.json` under the run's record digest (the
    identity the book keys pages by: this machine's run, else the committed one), the rule and the
    sentences. A page comparing pairs thus reads another pair's profiles without training its
    model, as the runner keeps other pairs' committed outputs; a retrained run that learned
    anything differently, or other sentences, recomputes them."""
    cfg = get_config(profile, [f"train.seed={seed}"], pair=pair)
    path = results_dir(profile, pair, seed) / "head_profiles.json"

    def key() -> dict:
        record = run_record(cfg)
        return {"run": record_digest(record) if record else None, "rule": rule,
                "sentences": {name: hashlib.sha256("\n".join(s).encode()).hexdigest()[:16]
                              for name, s in sentence_sets.items()}}

    if not (path.is_file() and (cached := json.loads(path.read_text()))["key"] == key()):
        model, bpe, _ = trained_model(profile, pair, seed)
        cached = {"key": key(), "vocab_size": bpe.vocab_size, "model": asdict(model.cfg),
                  "tables": {name: head_profile(model, bpe, s, rule).to_dict("tight")
                             for name, s in sentence_sets.items()}}
        write_json(path, cached)
    record = run_record(cfg) or {}
    return PairProfiles({name: pd.DataFrame.from_dict(t, orient="tight") for name, t in cached["tables"].items()},
                        cached["vocab_size"], cached["model"], model_id(record))


def layer_profile(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer: the top head's relevance share, and the effective number of heads
    1 / sum_h p_h^2 with p the layer's non-negative relevances normalised to sum to one; both NaN
    for a layer with no positive relevance."""
    def summary(g):
        p = g["relevance"].clip(lower=0)
        p = p / p.sum() if p.sum() > 0 else p * float("nan")
        return pd.Series({"top share": float(p.max()), "effective heads": float(1 / (p ** 2).sum(min_count=1)),
                          "max confidence": float(g["confidence"].max())})
    return table.groupby("layer")[["relevance", "confidence"]].apply(summary).reset_index()


def agreement(values: dict[str, pd.Series]) -> pd.DataFrame:
    """Spearman rho between every two named series (aligned by index), one row per pair."""
    return pd.DataFrame([{"a": a, "b": b, "rho": float(spearmanr(values[a], values[b]).statistic)}
                         for a, b in itertools.combinations(values, 2)])


def pair_profiles(profile: str, pairs: list[str], seed: int, ntrex: list[str]) -> dict[str, PairProfiles]:
    """Each pair's `cached_head_profiles` on the same English `ntrex` sentences ("ntrex") and on as
    many sentences of the pair's own main test set ("own"), in the order of `pairs`. Another pair's
    profiles are its committed ones where its run is the committed run."""
    return {p: cached_head_profiles(profile, p, seed,
                                    {"ntrex": ntrex, "own": list(load_split(p, main_test_set(p)).src[: len(ntrex)])})
            for p in pairs}


class CrossLingual(NamedTuple):
    layers: pd.DataFrame        # per model and layer: `layer_profile` of its NTREX heads, and "model" (the pair)
    agreement: pd.DataFrame     # level, a, b, rho: Spearman rho of head relevance or layer top shares
    shared_vocab: int | None    # the models' common vocabulary when all have the same shapes (so, with one
                                # seed, the same initial weights); None when their shapes differ


def compare_profiles(profiles: dict[str, PairProfiles]) -> CrossLingual:
    """The A5 study on `pair_profiles`: per model, the layer profile of its NTREX head relevance;
    and the agreements, in this order: per model, its heads on NTREX vs on its own test set (level
    "heads, ntrex vs own test set", a "<pair> ntrex", b "<pair> own"); the models' layer top-head
    shares ("layer top share"); and their NTREX head relevance head by head ("heads across pairs")."""
    layers, agree = [], []
    for p, cached in profiles.items():
        layers.append(layer_profile(cached.tables["ntrex"]).assign(model=p))
        domain = agreement({"ntrex": cached.tables["ntrex"]["relevance"], "own": cached.tables["own"]["relevance"]})
        agree.append(domain.assign(level="heads, ntrex vs own test set", a=f"{p} ntrex", b=f"{p} own"))
    layers = pd.concat(layers, ignore_index=True)
    tops = {p: layers[layers["model"] == p].set_index("layer")["top share"] for p in profiles}   # (layers,) each
    agree.append(agreement(tops).assign(level="layer top share"))
    heads = {p: c.tables["ntrex"]["relevance"] for p, c in profiles.items()}   # (layers * heads,) each
    agree.append(agreement(heads).assign(level="heads across pairs"))
    agree = pd.concat(agree, ignore_index=True)[["level", "a", "b", "rho"]]
    shapes = {(c.vocab_size, json.dumps(c.model, sort_keys=True)) for c in profiles.values()}
    return CrossLingual(layers, agree, next(iter(shapes))[0] if len(shapes) == 1 else None)

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

import itertools

import pandas as pd
from scipy.stats import spearmanr

from .heads import confidence, encoder_attention, importance_table
from .lrp import head_relevance


def head_profile(model, bpe, sentences, rule: str = "conservative") -> pd.DataFrame:
    """One row per encoder head: LRP relevance (per-sentence normalisation), confidence, rank."""
    relevance, _ = head_relevance(model, bpe, sentences, rule, normalize="sentence")
    return importance_table(relevance, confidence(encoder_attention(model, bpe, sentences)))


def layer_profile(table: pd.DataFrame) -> pd.DataFrame:
    """Per layer: the top head's relevance share, and the effective number of heads
    1 / sum_h p_h^2 with p the layer's non-negative relevances normalised to sum to one."""
    def summary(g):
        p = g["relevance"].clip(lower=0)
        p = p / p.sum()
        return pd.Series({"top share": float(p.max()), "effective heads": float(1 / (p ** 2).sum()),
                          "max confidence": float(g["confidence"].max())})
    return table.groupby("layer")[["relevance", "confidence"]].apply(summary).reset_index()


def agreement(values: dict[str, pd.Series]) -> pd.DataFrame:
    """Spearman rho between every two named series (aligned by index), one row per pair."""
    return pd.DataFrame([{"a": a, "b": b, "rho": float(spearmanr(values[a], values[b]).statistic)}
                         for a, b in itertools.combinations(values, 2)])

"""Sec. 5's head functions of a pruned model's open encoder heads (Fig. 8: what the heads that
survive pruning do, measured on the pruned model itself).

A `FunctionProbe` holds what the functions are measured on — held-out sentences, their spaCy
parses (made once, on the first call) and the training corpus' piece frequencies — and, called
on a model, returns the functions (`heads.head_functions`) of that model's open encoder heads,
each judged among the open heads only (a closed head contributes nothing, so it is not a
baseline for the rare-word head either).
"""
from __future__ import annotations

from collections import Counter
from functools import cached_property

import pandas as pd

from headlib.analysis.heads import (SPACY_MODEL, encoder_attention, head_functions, parse_spacy, positional_heads,
                                    rare_word_rates, syntactic_accuracy)
from headlib.data.bpe import piece_frequencies
from headlib.data.corpora import analysis_sentences, load_split


class FunctionProbe:
    def __init__(self, bpe, sentences: list[str], train_sources: list[str], eos_mode: str = "exclude-both",
                 margin: float = 0.10):
        self.bpe, self.sentences, self.train_sources = bpe, list(sentences), train_sources
        self.eos_mode, self.margin = eos_mode, margin   # as Sec. 5's page: positional EOS handling, syntactic margin

    @classmethod
    def for_pair(cls, pair: str, bpe, n: int) -> FunctionProbe:
        """Sec. 5's setting: the pair's first `n` held-out analysis sentences (`Grids.function_sentences`)
        and its training sources (rarity)."""
        return cls(bpe, analysis_sentences(pair, n), load_split(pair, "train").src)

    @cached_property
    def parsed(self):
        import spacy
        return parse_spacy(self.sentences, spacy.load(SPACY_MODEL))

    @cached_property
    def freq(self) -> Counter:
        return piece_frequencies(self.bpe, self.train_sources)

    def tables(self, model) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """Positional, syntactic (every head, with the positional baseline) and rare-word tables of
        `model`'s open encoder heads (one row per open head)."""
        maps = encoder_attention(model, self.bpe, self.sentences)
        syntactic, baseline = syntactic_accuracy(maps, self.parsed, self.bpe)
        positional = positional_heads(maps, eos_mode=self.eos_mode)
        rates = rare_word_rates(maps, self.bpe.encode_batch(self.sentences), self.freq)
        open_heads = open_encoder_heads(model)
        keep = lambda t: t.merge(open_heads, on=["layer", "head"])   # noqa: E731
        return keep(positional), keep(syntactic), baseline, keep(rates)

    def __call__(self, model) -> dict:
        """The functions of `model`'s open encoder heads (one record per head with a function:
        layer, head, functions) and, per open head, the measures behind them (`head_stats`)."""
        positional, syntactic, baseline, rates = self.tables(model)
        functions = head_functions(positional, syntactic, baseline, rates, self.margin)
        return {"functions": functions.to_dict("records"),
                "head_stats": head_stats(positional, syntactic, baseline, rates).to_dict("records"),
                "function_sentences": len(self.sentences)}


def head_stats(positional: pd.DataFrame, syntactic: pd.DataFrame, baseline: pd.DataFrame,
               rates: pd.DataFrame) -> pd.DataFrame:
    """Per head, how close it comes to each function: its most frequent offset and that offset's
    share of its argmaxes, its best relation-direction and accuracy minus that relation's
    positional baseline (`syntactic_margin`), and how often it attends most to the rarest token."""
    margins = syntactic.merge(baseline[["relation", "direction", "accuracy"]], on=["relation", "direction"],
                              suffixes=("", "_baseline"))
    margins["syntactic_margin"] = margins["accuracy"] - margins["accuracy_baseline"]
    best = margins.loc[margins.groupby(["layer", "head"])["syntactic_margin"].idxmax(),
                       ["layer", "head", "relation", "direction", "syntactic_margin"]]
    return (positional[["layer", "head", "offset", "fraction"]].rename(columns={"fraction": "positional_share"})
            .merge(best, on=["layer", "head"], how="left").merge(rates[["layer", "head", "rarest"]],
                                                                 on=["layer", "head"]))


def open_encoder_heads(model) -> pd.DataFrame:
    """The (layer, head) pairs, 1-based, of the encoder's open self-attention heads."""
    mask = model.head_mask("enc-self")                                     # (L, H)
    return pd.DataFrame([(l + 1, h + 1) for l, h in mask.nonzero().tolist()], columns=["layer", "head"])

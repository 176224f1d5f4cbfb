"""Corpus statistics and training summaries for the book (Sec. 3), as tidy DataFrames.

    split_sizes()              sentence pairs of every split of every pair (line counts only)
    corpus_stats(pair, bpe)    per split: pairs, mean sentence length in words and BPE pieces
    origin_table(pair)         the en-ru pool by source set and domain (news / conversational)
    results_table(results)     test BLEU (greedy, beam) and chrF of one trained run
    training_table(results)    minutes, steps, tokens/s, parameters of one trained run
    dev_curve(results)         dev BLEU against training minutes, one row per evaluation
"""
from __future__ import annotations

import pandas as pd

from .data import PAIRS, load_split, test_sets

# Quoted from the pre-project measurement note (../shared/reference/cpu-notes.md, "Quality per
# minute"): Multi30k en-de, d_model 256, 6+6 layers, ~4k-token batches, bf16, 2 cores, warmup 400,
# peak lr 1e-3. Dev BLEU after 15 minutes of training. A single throwaway measurement made before
# the project, not a result of this study: the book quotes it as such.
NORM_MEASUREMENT = {"source": "shared/reference/cpu-notes.md", "minutes": 15,
                    "post": 7.7, "pre": 26.4}


def splits(pair: str) -> tuple[str, ...]:
    return ("train", "dev") + test_sets(pair)


def origin_domain(origin: str) -> str:
    """The en-ru pool's domain of a source set: news (WMT), conversational (Tatoeba) or other."""
    if origin.startswith("tatoeba"):
        return "conversational"
    if origin.startswith(("newstest", "generaltest")):
        return "news"
    return "other"


def split_sizes(pairs=PAIRS) -> pd.DataFrame:
    """Sentence pairs per split: one row per pair, one column per split role (train, dev, tests)."""
    rows = []
    for pair in pairs:
        tests = {name: len(load_split(pair, name)) for name in test_sets(pair)}
        rows.append({"pair": pair, "train": len(load_split(pair, "train")), "dev": len(load_split(pair, "dev")),
                     "test sets": len(tests), "test pairs": sum(tests.values())})
    return pd.DataFrame(rows).set_index("pair")


def _mean(xs) -> float:
    return float(sum(xs) / len(xs)) if len(xs) else 0.0


def mean_words(sentences) -> float:
    """Mean words (whitespace tokens) per sentence; 0 for none."""
    return _mean([len(s.split()) for s in sentences])


def corpus_stats(pair: str, bpe) -> pd.DataFrame:
    """One row per split of `pair`: sentence pairs, mean words (whitespace tokens) and mean BPE
    pieces per sentence on each side, and the size of the (joint) BPE vocabulary."""
    rows = []
    for split in splits(pair):
        c = load_split(pair, split)
        rows.append({
            "pair": pair, "split": split, "pairs": len(c),
            "words (src)": mean_words(c.src),
            "words (tgt)": mean_words(c.tgt),
            "BPE pieces (src)": _mean([len(ids) for ids in bpe.encode_batch(c.src)]),
            "BPE pieces (tgt)": _mean([len(ids) for ids in bpe.encode_batch(c.tgt)]),
            "BPE vocab": bpe.vocab_size,
        })
    return pd.DataFrame(rows)


def origin_table(pair: str = "en-ru", split: str = "train") -> pd.DataFrame:
    """Pairs per source set (`origin`) and its domain, for a corpus that keeps origins."""
    c = load_split(pair, split)
    if not c.origin:
        raise ValueError(f"{pair} {split} has no origin column")
    df = pd.DataFrame({"origin": c.origin})
    df["domain"] = df["origin"].map(origin_domain)
    out = df.groupby(["domain", "origin"]).size().rename("pairs").reset_index()
    return out.sort_values(["domain", "pairs"], ascending=[True, False], ignore_index=True)


def results_table(results: dict) -> pd.DataFrame:
    """One row per test set: BLEU greedy, BLEU beam, chrF (beam), sentences."""
    rows = []
    for name, r in results["test"].items():
        rows.append({"pair": results["pair"], "test set": name, "sentences": r["beam"]["n"],
                     "BLEU greedy": float(r["greedy"]["bleu"]), "BLEU beam": float(r["beam"]["bleu"]),
                     "chrF beam": float(r["beam"]["chrf"]), "beam": int(r["beam"]["beam"]),
                     "length alpha": float(r["beam"]["len_alpha"])})
    return pd.DataFrame(rows)


def training_table(results: dict) -> pd.DataFrame:
    """One row: what training cost and what it stopped on."""
    return pd.DataFrame([{
        "pair": results["pair"], "seed": results["config"]["train"]["seed"],
        "parameters": int(results["parameters"]), "steps": int(results["steps"]),
        "epochs": int(results["epochs"]), "training minutes": float(results["train_minutes"]),
        "tokens/s": float(results["tokens_per_second"]), "stopped by": results["stopped"],
        "weights": results["chosen_weights"],
    }])


def dev_curve(results: dict) -> pd.DataFrame:
    """Dev BLEU (greedy) at each evaluation, against training minutes and updates."""
    df = pd.DataFrame(results["history"])
    df.insert(0, "pair", results["pair"])
    return df

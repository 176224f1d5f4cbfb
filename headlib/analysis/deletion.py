"""Deletion curves for source-token explanations (as used by Chen et al. 2024, "Better Explain
Transformers by Illuminating Important Information", to compare LRP variants).

Source tokens are replaced by UNK in the order an explanation ranks them (most relevant first),
a growing fraction at a time (EOS is never deleted), and the model's score of its own original
translation is recorded: the mean log-probability per target token, teacher forced. The faster
the curve falls, the better the ranking found what the translation depends on; a curve is
summarised by its mean over the fractions (lower is better).

Refined LRP: relevance allowed to flow only through the important encoder heads of Sec. 4
(`lrp.relevance_only_through`); plain LRP: through every head.
"""
from __future__ import annotations

import random

import pandas as pd
import torch

from headlib.analysis.lrp import own_translations, source_relevance_batch
from headlib.data.batching import source_tensor
from headlib.data.bpe import PAD_ID, UNK_ID

FRACTIONS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0)


def deletion_curve(score, src: torch.Tensor, order: list[int], fractions=FRACTIONS) -> list[float]:
    """score(srcs (F, S)) -> (F,); src (S,) with EOS last; order: positions 0..S-2, first deleted
    first. Returns the score at each fraction of the S-1 tokens deleted."""
    n = src.numel() - 1
    if sorted(order) != list(range(n)):
        raise ValueError(f"order must be a permutation of the {n} source positions before EOS, got {order}")
    variants = src.repeat(len(fractions), 1)                                 # (F, S)
    for i, f in enumerate(fractions):
        variants[i, order[:round(f * n)]] = UNK_ID
    return [float(v) for v in score(variants).detach()]


@torch.no_grad()
def translation_logprob(model, tgt_in: torch.Tensor, tgt_out: torch.Tensor):
    """score(srcs) for `deletion_curve`: mean log-probability of the fixed translation tgt_out (1, T)."""
    def score(srcs):
        F = srcs.size(0)
        logp = model(srcs, tgt_in.expand(F, -1)).float().log_softmax(-1)      # (F, T, V)
        tok = logp.gather(-1, tgt_out.expand(F, -1)[..., None]).squeeze(-1)   # (F, T)
        valid = tgt_out.ne(PAD_ID).expand(F, -1)
        return (tok * valid).sum(1) / valid.sum(1)
    return score


def compare_orderings(model, bpe, sentences, keep: torch.Tensor, seed: int = 1, fractions=FRACTIONS) -> pd.DataFrame:
    """One row per sentence and ordering (plain LRP, refined LRP, random): the deletion curve's
    mean over `fractions` and its values."""
    rng = random.Random(seed)
    rows = []
    model.eval()
    for i, text in enumerate(sentences):
        src = source_tensor(bpe.encode_batch([text]))
        n = src.size(1) - 1
        if n < 2:
            continue
        tgt_in, tgt_out = own_translations(model, src)
        score = translation_logprob(model, tgt_in, tgt_out)
        orders = {"plain LRP": source_relevance_batch(model, src, tgt_in, tgt_out)[0, :n],
                  "refined LRP": source_relevance_batch(model, src, tgt_in, tgt_out, keep)[0, :n]}
        orders = {name: r.argsort(descending=True).tolist() for name, r in orders.items()}
        orders["random"] = rng.sample(range(n), n)
        for name, order in orders.items():
            curve = deletion_curve(score, src[0], order, fractions)
            rows.append({"sentence": i, "ordering": name, "area": sum(curve) / len(curve),
                         **{f"{f:g}": c for f, c in zip(fractions, curve)}})
    return pd.DataFrame(rows)

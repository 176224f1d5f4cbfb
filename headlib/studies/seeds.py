"""Across training seeds: how much of the study is the seed? BLEU spread, the structure of head
importance, and the claims' verdicts, for every seed of a (profile, pair) with results.

Heads are exchangeable between seeds: head h of layer l in one model has no counterpart in
another model trained from other initial weights (permuting a layer's heads is the same
function). So seeds are compared on what does not depend on head order: each layer's relevance
and confidence sorted from the largest head down (the layer's profile), the share of the layer's
relevance taken by its top head, and the verdicts.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from headlib.claims import verdicts as claims_verdicts
from headlib.settings import results_dir
from headlib.studies.crosslingual import agreement, layer_profile
from headlib.train.records import seeds_with


def bleu_spread_text(training: pd.DataFrame) -> str:
    """What `training_table` says about the seed: mean, standard deviation, range and spread of test
    BLEU (beam), and whether the runs' update counts differ (time-capped runs on a loaded machine)."""
    beam, updates = training["BLEU (beam)"], training["updates"]
    if len(beam) < 2:
        return "Only one seed has been trained, so there is no spread to report yet."
    budget = ("" if updates.nunique() == 1 else
              f" The time-capped runs made {updates.min():,}–{updates.max():,} updates in their training time, so part "
              "of the spread is the budget, not the seed.")
    return (f"Over {len(beam)} seeds, test BLEU (beam) is **{beam.mean():.2f} ± {beam.std():.2f}** (mean ± standard "
            f"deviation; range {beam.min():.2f}–{beam.max():.2f}, a spread of {beam.max() - beam.min():.2f}). Differences "
            "between methods smaller than this spread, measured on one seed, are within what the seed alone moves."
            + budget)


def importance_tables(profile: str, pair: str) -> dict[int, pd.DataFrame]:
    """Sec. 4's head table (relevance, confidence per head) of every seed that has one."""
    return {s: pd.read_csv(results_dir(profile, pair, s) / "head_importance.csv")
            for s in seeds_with(profile, pair, "head_importance.csv")}


def sorted_within_layers(table: pd.DataFrame, column: str) -> pd.Series:
    """`column` of each layer's heads sorted from the largest down, indexed by (layer, position):
    the layer's profile, which does not depend on the order of its heads."""
    ranked = table.sort_values(["layer", column], ascending=[True, False]).copy()
    ranked["position"] = ranked.groupby("layer").cumcount() + 1
    return ranked.set_index(["layer", "position"])[column]


def structure_agreement(tables: dict[int | str, pd.DataFrame], top_share=None, n_null: int = 500,
                        null_seed: int = 0) -> pd.DataFrame:
    """Spearman rho between every two models (seeds, or any named models): the sorted layer
    profiles of relevance and of confidence (all heads), and each layer's top-head share of
    relevance (one value per layer; `top_share(table)` -> a Series by layer, default
    `crosslingual.layer_profile`'s).

    Sorting alone makes two profiles agree (the largest head of every layer comes first), so each
    rho comes with a permutation null: the second model's heads shuffled across layers (its values
    kept, its layer structure destroyed; `n_null` draws from `null_seed`) and the same statistic
    recomputed. `null mean`, `null 95%` and `p` (the share of draws at or above the observed rho,
    add-one smoothed) say how much of the agreement is layer structure rather than sorting. A draw
    whose statistic is undefined (a shuffled layer left with no positive relevance has no top
    share) is left out of the null, not counted as a draw below the observed rho."""
    named = {s if isinstance(s, str) else f"seed {s}": t for s, t in tables.items()}
    top_share = top_share or (lambda t: layer_profile(t).set_index("layer")["top share"])
    statistics = {f"{col}, layer profiles": (lambda t, col=col: sorted_within_layers(t, col))
                  for col in ("relevance", "confidence")}
    statistics["top-head share per layer"] = top_share
    rng = np.random.default_rng(null_seed)
    rows = []
    for what, stat in statistics.items():
        for row in agreement({n: stat(t) for n, t in named.items()}).itertuples():
            a, b = stat(named[row.a]), named[row.b]
            null = np.array([spearmanr(a, stat(_shuffled_heads(b, rng)).reindex(a.index)).statistic
                             for _ in range(n_null)])
            null = null[np.isfinite(null)]   # a draw that leaves a layer no positive relevance has no top share
            lo, hi = np.quantile(null, [0.025, 0.975])
            p = ((null >= row.rho).sum() + 1) / (len(null) + 1)
            rows.append({"what": what, "a": row.a, "b": row.b, "rho": row.rho, "null mean": float(null.mean()),
                         "null 95%": f"{lo:.2f} to {hi:.2f}", "p": float(p)})
    return pd.DataFrame(rows, columns=["what", "a", "b", "rho", "null mean", "null 95%", "p"])


def agreement_summary(agree: pd.DataFrame, between: str) -> str:
    """One sentence per statistic of `structure_agreement`: mean rho against the null's mean, and
    how many of the compared pairs agree beyond the null (p < 0.05)."""
    parts = [f"{what}: rho {g['rho'].mean():.2f} (null {g['null mean'].mean():.2f}), beyond the null for "
             f"{int((g['p'] < 0.05).sum())} of {len(g)} pairs"
             for what, g in agree.groupby("what", sort=False)]
    return f"Mean Spearman rho between {between}: " + "; ".join(parts) + "."


def _shuffled_heads(table: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """`table` with its heads' values (every column but layer and head) moved to random positions
    across all layers: the same values without the model's layer structure."""
    order = rng.permutation(len(table))
    values = [c for c in table.columns if c not in ("layer", "head")]
    out = table.copy()
    out[values] = table[values].to_numpy()[order]
    return out


def verdicts(profile: str, pair: str, seeds: list[int]) -> pd.DataFrame:
    """The claims' verdicts (rows) for each seed (columns), from each seed's own tables."""
    return claims_verdicts({f"seed {s}": results_dir(profile, pair, s) for s in seeds})

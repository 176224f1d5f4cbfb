"""The Sec. 4 page (important heads): head confidence and LRP relevance of the encoder's heads, their
agreement, each layer's most important head, and LRP's two rules compared.

    importance(model, bpe, sentences, eos_mode, rule, out)   both measures; writes head_importance.csv
    timed_relevance(model, bpe, sentences, rule)             LRP relevance and its wall time
    correlation_values(table)                                Spearman between relevance and confidence
    layer_values(per_layer, heads)                           the top head's share of its layer
    rule_comparison(table, other, rule, other_rule, out)     the two LRP rules; writes lrp_rules.csv
    initial_relevance(run, model, bpe, sentences, out)       both rules at initialisation; writes null_head_importance.csv
    heatmaps(rel, conf), scatter(data, x, y, labels)         the page's figures
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from scipy.stats import spearmanr

from headlib.analysis.heads import confidence, encoder_attention, importance_table, relevance_by_rule, top_shares
from headlib.analysis.lrp import RULES, head_relevance


@dataclass
class Importance:
    table: pd.DataFrame      # one row per encoder head: layer, head (1-based), relevance, confidence, ranks
    relevance: torch.Tensor  # (layers, heads)
    confidence: torch.Tensor  # (layers, heads)
    steps: int               # decoder steps LRP propagated from
    seconds: float           # LRP's wall time


def importance(model, bpe, sentences: list[str], eos_mode: str, rule: str, out: Path) -> Importance:
    """Confidence (Sec. 4.1) and LRP relevance (Sec. 4.2, `rule`) of every encoder head on
    `sentences`, as `importance_table`, also written to `out/head_importance.csv`."""
    conf = confidence(encoder_attention(model, bpe, sentences), eos_mode)
    rel, steps, seconds = timed_relevance(model, bpe, sentences, rule)
    table = importance_table(rel, conf)
    table.to_csv(out / "head_importance.csv", index=False)
    return Importance(table, rel, conf, steps, seconds)


def timed_relevance(model, bpe, sentences: list[str], rule: str) -> tuple[torch.Tensor, int, float]:
    """`head_relevance` with its wall time in seconds: (relevance (layers, heads), steps, seconds)."""
    t0 = time.time()
    rel, steps = head_relevance(model, bpe, sentences, rule)
    return rel, steps, time.time() - t0


def correlation_values(table: pd.DataFrame) -> dict:
    """Spearman's rank correlation between the heads' relevance and confidence, with its p-value."""
    rho, p = spearmanr(table["relevance"], table["confidence"])
    return {"sec4-n-heads": len(table), "sec4-spearman": float(rho), "sec4-spearman-p": float(p)}


def layer_values(per_layer: pd.DataFrame, heads: int) -> dict:
    """The range of the top head's share of its layer's relevance (`layer_summary`), and the share
    of a head when all `heads` of a layer are equally relevant."""
    return {"sec4-top-share-min": float(per_layer["top share"].min()),
            "sec4-top-share-max": float(per_layer["top share"].max()), "sec4-uniform-share": 1 / heads}


def rule_comparison(table: pd.DataFrame, other: torch.Tensor, rule: str, other_rule: str,
                    out: Path) -> tuple[pd.DataFrame, dict]:
    """The page's relevance (`table`, by `rule`) against the other rule's (`other`, (layers, heads)):
    one row per head (`relevance`, `other`), written to `out/lrp_rules.csv` under the rules' names,
    and how much they agree: Spearman over all heads, its mean within layers, and the layers whose
    most relevant head is the same under both."""
    rules = table[["layer", "head", "relevance"]].assign(other=other.flatten().numpy())
    rules.rename(columns={"relevance": rule, "other": other_rule}).to_csv(out / "lrp_rules.csv", index=False)
    by_layer = rules.groupby("layer")
    same_top = by_layer.apply(lambda g: g["relevance"].idxmax() == g["other"].idxmax(), include_groups=False)
    within = by_layer.apply(lambda g: spearmanr(g["relevance"], g["other"]).statistic, include_groups=False)
    return rules, {"sec4-rule-rho": float(spearmanr(rules["relevance"], rules["other"]).statistic),
                   "sec4-rule-same-top": int(same_top.sum()), "sec4-n-layers": len(same_top),
                   "sec4-rule-rho-layer": float(within.mean())}


def initial_relevance(run: dict, model, bpe, sentences: list[str], out: Path) -> tuple[pd.DataFrame, dict]:
    """LRP relevance of the run's model at initialisation under every rule, on the same sentences
    and steps as the trained `model` (`relevance_by_rule`): C2's null, written to
    `out/null_head_importance.csv`; and the largest top-head share of |relevance| of any layer
    at initialisation under each rule (`sec4-null-top-share-<rule>`)."""
    from headlib.config import Config
    from headlib.train import initial_model
    initial = initial_model(Config.from_dict(run["config"]), bpe.vocab_size, keep_rng=True).eval()
    table = relevance_by_rule(initial, bpe, sentences, translator=model)
    table.to_csv(out / "null_head_importance.csv", index=False)
    return table, {f"sec4-null-top-share-{rule}": float(top_shares(table, rule).max()) for rule in RULES}


def heatmaps(rel: torch.Tensor, conf: torch.Tensor):
    """LRP relevance and confidence as two annotated (layer x head) heatmaps, numbered from 1."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    layers, heads = conf.shape
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, values, title in zip(axes, (rel, conf), ("LRP relevance", "confidence")):
        sns.heatmap(pd.DataFrame(values.numpy(), index=range(1, layers + 1), columns=range(1, heads + 1)),
                    ax=ax, cmap="Blues", annot=True, fmt=".2f", cbar=False, annot_kws={"size": 7})
        ax.set(title=title, xlabel="head", ylabel="layer")
    fig.tight_layout()
    plt.close(fig)
    return fig


def scatter(data: pd.DataFrame, x: str, y: str, labels: dict | None = None):
    """One point per head, coloured by layer."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, ax = plt.subplots(figsize=(5, 4))
    sns.scatterplot(data=data, x=x, y=y, hue="layer", palette="viridis", ax=ax)
    ax.set(**(labels or {}))
    fig.tight_layout()
    plt.close(fig)
    return fig

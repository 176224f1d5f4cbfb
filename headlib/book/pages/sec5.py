"""The Sec. 5 page (what heads do): positional (5.1), syntactic (5.2) and rare-word (5.3) heads of the
encoder, the functions beside each head's importance, example attention maps, and the heads'
statistics over training (protocol v2, item 8).

Each function writes the page's result table it names into `out` (the page's results directory)
and returns the frames and glue values the page shows.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from headlib.analysis.heads import (NULL_TABLES, RARE_MARGIN, emergence_rate, emergence_summary,
                                    encoder_attention, function_tables, heads_over_training, parse_conllu, parse_spacy,
                                    parser_agreement, positional_heads, rare_word_rates,
                                    syntactic_accuracy, syntactic_heads)
from headlib.data.bpe import piece_frequencies
from headlib.data.corpora import data_root, load_split

IMPORTANCE = ["layer", "head", "relevance", "rank_in_layer"]   # what the tables take from head_importance.csv


def positional(maps, eos_mode: str, importance: pd.DataFrame, out: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Positional heads (Sec. 5.1; `positional_heads`, written to positional_heads.csv): all heads,
    the ones to show (the positional heads with their importance, else the three most positional),
    and the counts the prose cites (positional heads, heads, diagonal heads and their best share)."""
    pos = positional_heads(maps, eos_mode=eos_mode)
    pos.to_csv(out / "positional_heads.csv", index=False)
    found = pos[pos["positional"]].merge(importance[IMPORTANCE], on=["layer", "head"])
    diagonal = pos[pos["offset"] == 0]
    shown = found if len(found) else pos.sort_values("fraction", ascending=False).head(3)
    return pos, shown, {"sec5-n-positional": len(found), "sec5-n-heads": len(pos), "sec5-n-diagonal": len(diagonal),
                        "sec5-diagonal-max": float(diagonal["fraction"].max()) if len(diagonal) else 0.0}


def syntax_table(best: pd.DataFrame) -> pd.DataFrame:
    """`syntactic_heads` as the paper's Table 1: relation, direction, the best head ("layer.head"),
    its accuracy, the positional baseline and its offset, the number of arcs and the verdicts."""
    t = best.assign(head=best["layer"].astype(str) + "." + best["head"].astype(str))
    t = t[["relation", "direction", "head", "accuracy", "accuracy_baseline", "offset", "n", "syntactic",
           "syntactic_relative"]]
    return t.rename(columns={"accuracy": "best head", "accuracy_baseline": "baseline", "offset": "baseline offset"})


def syntactic(maps, parsed, bpe, margin: float, out: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    """Syntactic heads (Sec. 5.2) on spaCy's parses: each head's accuracy per relation and the
    positional baseline (syntactic_accuracy.csv), the best head per relation (syntactic_best.csv),
    and the counts the prose cites."""
    syn, base = syntactic_accuracy(maps, parsed, bpe)
    best = syntactic_heads(syn, base, margin)
    syn.to_csv(out / "syntactic_accuracy.csv", index=False)
    best.to_csv(out / "syntactic_best.csv", index=False)
    return syn, base, best, {"sec5-n-parsed": len(parsed), "sec5-n-syntactic": int(best["syntactic"].sum()),
                             "sec5-n-syntactic-rel": int(best["syntactic_relative"].sum()),
                             "sec5-n-relations": len(best), "sec5-margin-points": 100 * margin}


def gold_vs_spacy(model, bpe, nlp, margin: float, out: Path, limit: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Sec. 5.2 on gold trees: UD English EWT's dev set (the first `limit` non-empty sentences, 0 =
    all) parsed by spaCy too; the parser's agreement with gold, and the best head per relation under
    either parse side by side (syntactic_gold_vs_spacy.csv); and the number of sentences."""
    gold = [g for g in parse_conllu(data_root() / "ud" / "en_ewt-ud-dev.conllu") if g.text.strip()]
    gold = gold[:limit or len(gold)]
    texts = [g.text for g in gold]
    predicted = parse_spacy(texts, nlp)
    ud_maps = encoder_attention(model, bpe, texts)
    best = {name: syntax_table(syntactic_heads(*syntactic_accuracy(ud_maps, trees, bpe), margin))
            for name, trees in (("gold", gold), ("spaCy", predicted))}
    both = best["gold"].merge(best["spaCy"], on=["relation", "direction"], suffixes=(" (gold)", " (spaCy)"))
    both = both[["relation", "direction", *(f"{c} ({name})" for name in ("gold", "spaCy")
                                            for c in ("head", "best head", "baseline", "syntactic"))]]
    both.to_csv(out / "syntactic_gold_vs_spacy.csv", index=False)
    return parser_agreement(gold, predicted), both, len(gold)


def rare_words(maps, bpe, sentences: list[str], pair: str, importance: pd.DataFrame,
               out: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Rare-word heads (Sec. 5.3): every head's rate of attending to the sentence's rarest token
    (rarity from the training corpus' BPE pieces; rare_word_rates.csv), layer 1's heads with their
    importance (most often to the rarest first), and its best head's figures for the prose."""
    freq = piece_frequencies(bpe, load_split(pair, "train").src)
    rates = rare_word_rates(maps, bpe.encode_batch(sentences), freq)
    rates.to_csv(out / "rare_word_rates.csv", index=False)
    layer1 = (rates[rates["layer"] == 1].merge(importance[IMPORTANCE], on=["layer", "head"])
              .sort_values("rarest", ascending=False, ignore_index=True, kind="stable"))
    top = layer1.iloc[0]
    return rates, layer1, {
        "sec5-rare-n": int(top["n"]), "sec5-rare-head": f"1.{int(top['head'])}", "sec5-rare-rate": float(top["rarest"]),
        "sec5-rare-top2": float(top["top2"]), "sec5-rare-rank": int(top["rank_in_layer"]),
        "sec5-heads-per-layer": len(layer1), "sec5-rare-min": float(layer1["rarest"].min()),
        "sec5-rare-max": float(layer1["rarest"].max()), "sec5-rare-median": float(layer1["rarest"].median()),
        "sec5-rare-margin": round(RARE_MARGIN * 100)}


def initial_model_tables(run: dict, bpe, sentences: list[str], parsed, eos_mode: str, margin: float, pair: str,
                         out: Path) -> dict:
    """Sec. 5's tables of the run's model at initialisation (`heads.NULL_TABLES`, written to `out`:
    the null for taking the best of 48 heads) and the values the prose cites: its best head's share
    at one offset other than 0, its syntactic relation-directions, its best layer-1 rarest-token rate."""
    from headlib.config import Config
    from headlib.train import initial_model
    model = initial_model(Config.from_dict(run["config"]), bpe.vocab_size, keep_rng=True).eval()
    freq = piece_frequencies(bpe, load_split(pair, "train").src)
    pos, best, rates = function_tables(model, bpe, sentences, parsed, freq, eos_mode, margin)
    for table, name in zip((pos, best, rates), NULL_TABLES):
        table.to_csv(out / name, index=False)
    other = pos[pos["offset"] != 0]
    return {"sec5-null-positional-max": float(other["fraction"].max()) if len(other) else 0.0,
            "sec5-null-n-syntactic": int(best["syntactic"].sum()),
            "sec5-null-rare-max": float(rates[rates["layer"] == 1]["rarest"].max())}


def function_labels(functions: pd.DataFrame, importance: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each head's relevance as a (layer x head) grid, and its functions ("positional (+1)", ...,
    one per line; empty for none) as a grid of labels of the same shape."""
    grid = importance.pivot(index="layer", columns="head", values="relevance")
    named = functions.set_index(["layer", "head"])["functions"].str.replace(", ", "\n")
    labels = named.reindex(grid.stack().index).fillna("").unstack()
    return grid, labels.loc[grid.index, grid.columns]


def functions_figure(functions: pd.DataFrame, importance: pd.DataFrame):
    """Relevance heatmap of the encoder's heads, each annotated with its functions."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    grid, labels = function_labels(functions, importance)
    fig, ax = plt.subplots(figsize=(12, 5))
    sns.heatmap(grid, annot=labels.values, fmt="", cmap="Blues", ax=ax, annot_kws={"size": 6},
                cbar_kws={"label": "relevance"})
    ax.set(xlabel="head", ylabel="layer")
    fig.tight_layout()
    plt.close(fig)
    return fig


def most_relevant_per_layer(importance: pd.DataFrame) -> pd.DataFrame:
    """Each layer's most relevant head (one row per layer, in layer order)."""
    return importance.loc[importance.groupby("layer")["relevance"].idxmax()].sort_values("layer", ignore_index=True)


def example_maps(model, bpe, sentences: list[str]) -> tuple[list[list[str]], list]:
    """The BPE pieces (with </s>) and encoder attention maps ((layers, heads, T, T) arrays) of `sentences`."""
    return [bpe.pieces(s) + ["</s>"] for s in sentences], [m.numpy() for m in encoder_attention(model, bpe, sentences)]


def heads_figure(tokens: list[str], maps, heads: pd.DataFrame):
    """One sentence's attention in each head of `heads` (rows with 1-based layer, head), side by side."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, len(heads), figsize=(3.2 * len(heads), 3.4), squeeze=False)
    for ax, r in zip(axes[0], heads.itertuples()):
        sns.heatmap(maps[r.layer - 1, r.head - 1], ax=ax, cmap="Greys", vmin=0, vmax=1, cbar=False,
                    xticklabels=tokens, yticklabels=tokens if r.layer == 1 else False, square=True)
        ax.set_title(f"head {r.layer}.{r.head}")
        ax.tick_params(labelsize=6)
    fig.tight_layout()
    plt.close(fig)
    return fig


def over_training(history: list[dict]) -> tuple[pd.DataFrame, dict]:
    """The encoder heads' statistics at each dev evaluation of a run (`history`): the summary per
    update (`emergence_summary`) and the values the prose cites: the most positional head's share,
    head and offset at the first and last evaluation, the number of sentences, its peak, and how it
    moved over the second half (`emergence_rate`), said in words (`sec5-emerge-text`). The
    trajectory is shown, not extrapolated: the recipe stretched to 8,400 updates plateaued."""
    from IPython.display import Markdown
    if not any(h.get("heads") for h in history):
        return pd.DataFrame(), {"sec5-emerge-text": Markdown(
            "This model was imported, not trained here, so there is no training to follow.")}
    summary = emergence_summary(heads_over_training(history))
    rate = emergence_rate(summary)
    values = {key: value for name, row in (("first", summary.iloc[0]), ("last", summary.iloc[-1])) for key, value in (
        (f"sec5-emerge-{name}-step", int(row["step"])), (f"sec5-emerge-{name}-head", row["its head"]),
        (f"sec5-emerge-{name}-share", float(row["best positional share"])),
        (f"sec5-emerge-{name}-offset", int(row["its offset"])))}
    last = int(summary.iloc[-1]["step"])
    v = values | {"sec5-emerge-sentences": history[-1]["heads"]["sentences"], "sec5-emerge-from": rate["from_step"],
                  "sec5-emerge-slope": rate["slope_per_1000"], "sec5-emerge-peak-share": rate["peak_share"],
                  "sec5-emerge-peak-step": rate["peak_step"]}
    text = (f"On the first {v['sec5-emerge-sentences']:,} dev sentences, at the first evaluation (update "
            f"{v['sec5-emerge-first-step']:,}) the most positional head (a fixed offset other than 0), "
            f"{v['sec5-emerge-first-head']}, puts {v['sec5-emerge-first-share']:.0%} of its argmax at offset "
            f"{v['sec5-emerge-first-offset']:+d}; at the last (update {last:,}), {v['sec5-emerge-last-head']} puts "
            f"{v['sec5-emerge-last-share']:.0%} at offset {v['sec5-emerge-last-offset']:+d}. The paper's positional "
            f"heads do it at least 90% of the time. The share peaked at {v['sec5-emerge-peak-share']:.0%} (update "
            f"{v['sec5-emerge-peak-step']:,}); over the second half of training (from update "
            f"{v['sec5-emerge-from']:,}, "
            f"while the learning rate decays to 0) it changed by {v['sec5-emerge-slope']:+.3f} per 1,000 updates. "
            "The figure shows the whole trajectory; where it would go with more updates is not something these "
            "points can say, and a longer run of this recipe is not part of this study.")
    return summary, v | {"sec5-emerge-text": Markdown(text)}


def over_training_figure(history: list[dict]):
    """Three panels against updates: the most positional head's share at each offset (-2..+2, the
    paper's 90% dashed), the largest and mean head confidence, the largest layer-1 rare-token rate."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    if not any(h.get("heads") for h in history):
        fig, ax = plt.subplots(figsize=(6, 1))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "imported model: no training history", ha="center", va="center")
        plt.close(fig)
        return fig
    curves = heads_over_training(history)                      # one row per (update, layer, head)
    offsets = [c for c in curves.columns if c.startswith("offset ")]
    by_offset = curves.groupby("step")[offsets].max().reset_index().melt("step", var_name="offset", value_name="share")
    conf = (curves.groupby("step")["confidence"].agg(["max", "mean"]).reset_index()
            .melt("step", var_name="over heads", value_name="confidence"))
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    sns.lineplot(data=by_offset, x="step", y="share", hue="offset", marker="o", ax=axes[0])
    axes[0].axhline(0.9, ls="--", c="grey")
    sns.lineplot(data=conf, x="step", y="confidence", hue="over heads", marker="o", ax=axes[1])
    sns.lineplot(data=emergence_summary(curves), x="step", y="max layer-1 rare rate", marker="o", ax=axes[2])
    for ax, title in zip(axes, ("most positional head, by offset", "head confidence", "rare-token rate, layer 1")):
        ax.set(ylim=(0, 1), title=title, xlabel="update")
    fig.tight_layout()
    plt.close(fig)
    return fig

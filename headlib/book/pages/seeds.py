"""The Seeds page: every seed of a (profile, pair) with results, the spread of their BLEU, the
structure of head importance across them, and the claims' verdicts per seed."""
from __future__ import annotations

import pandas as pd

from headlib.studies.seeds import agreement_summary, sorted_within_layers, structure_agreement


def found_text(training: pd.DataFrame, tables: dict[int, pd.DataFrame]) -> str:
    """Which seeds have a trained model and which a Sec. 4 table."""
    return (f"trained models for seed(s) {', '.join(map(str, training['seed']))}; Sec. 4 tables for seed(s) "
            f"{', '.join(map(str, tables))}.")


def layer_profiles(tables: dict[int, pd.DataFrame]) -> pd.DataFrame:
    """Each seed's relevance per layer sorted from the largest head down (`sorted_within_layers`), stacked:
    columns layer, position (rank within the layer), relevance, seed ("seed 1", ...)."""
    return pd.concat([sorted_within_layers(t, "relevance").rename("relevance").reset_index().assign(seed=f"seed {s}")
                      for s, t in tables.items()], ignore_index=True)


def profiles_figure(profiles: pd.DataFrame):
    """One panel per layer: relevance against the head's rank within its layer, one line per seed."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    layers = sorted(profiles["layer"].unique())
    fig, axes = plt.subplots(1, len(layers), figsize=(11, 2.6), sharey=True, squeeze=False)
    for layer, ax in zip(layers, axes[0]):
        sns.lineplot(data=profiles[profiles["layer"] == layer], x="position", y="relevance", hue="seed", marker="o",
                     ms=3, ax=ax, legend=layer == layers[-1])
        ax.set(title=f"layer {layer}", xlabel="head, by rank")
        ax.xaxis.set_major_locator(plt.MaxNLocator(integer=True))
    fig.tight_layout()
    plt.close(fig)
    return fig


def agreement(tables: dict[int, pd.DataFrame]) -> tuple[pd.DataFrame | str, str]:
    """How far the seeds agree on the structure of importance (`structure_agreement`, rounded) and
    that in words; with one seed, a placeholder (Markdown) and a sentence saying so."""
    if len(tables) < 2:
        return "*(one seed: nothing to compare)*", "With one seed there is nothing to compare yet."
    agree = structure_agreement(tables)
    return agree.round(2), agreement_summary(agree, "seeds")

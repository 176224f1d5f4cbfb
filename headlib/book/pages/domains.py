"""The Domains and adaptation page (`12_domains`): the en-ru pool's two domain models (news,
Tatoeba) analysed side by side (`headlib.studies.domains.analyse`), and adapting the news model to
Tatoeba by updating all parameters, random heads or ALPS's heads (`adaptation`)."""
from __future__ import annotations

import json

import pandas as pd

from headlib.claims import CLAIMS_BY_KEY
from headlib.data.corpora import ENRU_DEV, load_split
from headlib.settings import results_dir
from headlib.studies.domains import (NEWS, TATOEBA, DomainConfig, function_counts, paper_models, shared_sources,
                                     training_size)

def intro_text(news: dict, tatoeba: dict, cfg: DomainConfig, profile: str, seed: int) -> str:
    """What the page analyses (Markdown): the held-out sentences of each domain."""
    return (f"Profile `{profile}`, seed {seed}; {news['n_sentences']:,} held-out news sentences ({ENRU_DEV}) and "
            f"{tatoeba['n_sentences']:,} held-out Tatoeba sentences for Sec. 5, the first {cfg.n_lrp:,} of each "
            "for LRP.")


def quality_text(news: dict, tatoeba: dict, beam: int) -> str:
    """How well each domain model translates, and why the news model's heads say little (Markdown)."""
    (n_news, words_news), (n_tatoeba, words_tatoeba) = training_size(NEWS), training_size(TATOEBA)
    return (f"Test BLEU (beam {beam}): the news model {news['bleu']['newstest2019-2020']:.2f} on newstest2019-2020 and "
            f"{news['bleu']['tatoeba-heldout']:.2f} on held-out Tatoeba; the Tatoeba model "
            f"{tatoeba['bleu']['tatoeba-heldout']:.2f} on held-out Tatoeba (the paper: {paper_models()}). The news "
            f"part holds {n_news:,} pairs of long sentences ({words_news:.1f} English words on average) and the "
            f"Tatoeba part {n_tatoeba:,} short ones ({words_tatoeba:.1f} words): far too little news for a model "
            "trained from scratch, so the news model's heads are those of a model that has not learned to translate "
            "news, and what this page says about the news domain is limited by that. Tatoeba repeats sentences with "
            f"other translations: {shared_sources(TATOEBA, 'tatoeba-heldout'):.0%} of the held-out Tatoeba English "
            "sentences also occur in the Tatoeba training data (the held-out pairs themselves do not).")


def functions_text(news: dict, tatoeba: dict, margin: float) -> str:
    """The heads with a function (Sec. 5) in each domain model (Markdown)."""
    (pos_n, syn_n, n_rel, rare_n), (pos_t, syn_t, _, rare_t) = function_counts(news), function_counts(tatoeba)
    return (f"Positional heads: {pos_n} in the news model and {pos_t} in the Tatoeba model (the paper finds them in "
            f"both domains). (Relation, direction) pairs whose best head beats the positional baseline by "
            f"{100 * margin:.0f} points: {syn_n} and {syn_t} of {n_rel}. The layer-1 head that most often attends to "
            f"the sentence's rarest token does so in {rare_n['rarest']:.0%} of the sentences (one of the two rarest: "
            f"{rare_n['top2']:.0%}) in the news model and {rare_t['rarest']:.0%} ({rare_t['top2']:.0%}) in the Tatoeba "
            f"model (the paper: {CLAIMS_BY_KEY['C5'].paper}).")


def relevance_grids(d: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A domain model's head relevance as a (layer x head) grid, and its heads' functions (one per
    line, empty for none) as labels of the same shape."""
    grid = pd.DataFrame(d["importance"]).pivot(index="layer", columns="head", values="relevance")
    named = pd.DataFrame(d["functions"], columns=["layer", "head", "functions"]).set_index(["layer", "head"])
    labels = named["functions"].str.replace(", ", "\n").reindex(grid.stack().index).fillna("").unstack()
    return grid, labels.loc[grid.index, grid.columns]


def heatmaps_figure(news: dict, tatoeba: dict):
    """Both models' head relevance on one colour scale, each head labelled with its functions."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    grids = {name: relevance_grids(d) for name, d in (("news", news), ("Tatoeba", tatoeba))}
    limit = max(float(grid.abs().max().max()) for grid, _ in grids.values())
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (name, (grid, labels)) in zip(axes, grids.items()):
        sns.heatmap(grid, annot=labels, fmt="", annot_kws={"fontsize": 6}, cmap="RdBu_r", center=0, ax=ax,
                    vmin=-limit, vmax=limit, cbar=name == "Tatoeba")
        ax.set_title(f"{name} model")
    fig.tight_layout()
    plt.close(fig)
    return fig


def adaptation_values(table: pd.DataFrame, cfg: DomainConfig) -> dict:
    """The adaptation's setting and its held-out Tatoeba BLEU per way (none, all, ALPS, the mean of
    the random draws), and the share of parameters ALPS updates."""
    by_way = table.set_index("way")
    alps = f"alps-k{cfg.adapt.k}"
    return {"adapt-steps": f"{cfg.adapt.steps:,}", "adapt-lr": f"{cfg.adapt.lr:g}", "adapt-k": f"{cfg.adapt.k}",
            "adapt-n-news": f"{cfg.n_forgetting:,}",
            "adapt-n-tatoeba": f"{len(load_split(TATOEBA, 'tatoeba-heldout').head(cfg.n_target)):,}",
            "adapt-bleu-none": float(by_way.loc["none", "tatoeba"]),
            "adapt-bleu-all": float(by_way.loc["all", "tatoeba"]),
            "adapt-bleu-alps": float(by_way.loc[alps, "tatoeba"]),
            "adapt-bleu-random": float(by_way.loc[by_way.index.str.startswith("random"), "tatoeba"].mean()),
            "adapt-alps-share": float(by_way.loc[alps, "updated share"])}


def weight_shift(profile: str, seed: int, cfg: DomainConfig) -> tuple[pd.DataFrame, set[tuple[str, int, int]]]:
    """The relative weight change of every head in the all-parameter adaptation (rows: kind, layer,
    head, shift) and the heads ALPS chose, as (kind, layer, head), from the adaptation's records."""
    out = results_dir(profile, NEWS, seed) / "adaptation"
    shift = pd.DataFrame(json.loads((out / "all.json").read_text())["shift"],
                         columns=["kind", "layer", "head", "shift"])
    chosen = {tuple(h) for h in json.loads((out / f"alps-k{cfg.adapt.k}.json").read_text())["heads"]}
    return shift, chosen


def kinds_text(shift: pd.DataFrame, chosen: set) -> str:
    """How many ALPS heads each attention kind has, and each kind's mean weight change (Markdown)."""
    per_kind = pd.Series([k for k, _, _ in chosen], dtype=str).value_counts()
    mean_shift = shift.groupby("kind", sort=False)["shift"].mean()
    return ("The ALPS heads by kind: " + ", ".join(f"{per_kind.get(k, 0)} {k}" for k in mean_shift.index) +
            ". Mean relative weight change per kind in the all-parameter run: " +
            ", ".join(f"{k} {v:.3f}" for k, v in mean_shift.items()) + ".")


def shift_figure(shift: pd.DataFrame, chosen: set):
    """Each head's weight change per kind (columns), the ALPS heads outlined."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, shift["kind"].nunique(), figsize=(12, 3.2), sharey=True, squeeze=False)
    for ax, (kind, rows) in zip(axes[0], shift.groupby("kind", sort=False)):
        grid = rows.pivot(index="layer", columns="head", values="shift")
        sns.heatmap(grid, ax=ax, cmap="Oranges", vmin=0, vmax=shift["shift"].max(), cbar=kind == "dec-enc",
                    xticklabels=range(1, grid.shape[1] + 1), yticklabels=range(1, grid.shape[0] + 1))
        for k, layer, head in sorted(chosen):
            if k == kind:
                ax.add_patch(plt.Rectangle((head, layer), 1, 1, fill=False, edgecolor="black", lw=1.5))
        ax.set(title=kind, xlabel="head", ylabel="layer")
    fig.tight_layout()
    plt.close(fig)
    return fig



def adaptation_verdict(profile: str, seed: int) -> pd.DataFrame:
    """Study A7's verdict (ALPS: a few heads adapt as well as all parameters), from the news model's results."""
    from headlib.claims import claims_table
    from headlib.studies.around import STUDIES
    table = claims_table(results_dir(profile, NEWS, seed), tuple(c for c in STUDIES if c.key == "A7"))
    return table.rename(columns={"section": "study"})

"""The Around page (`10_around`): studies around the paper on the (pair, seed)'s model, one function
per section. Each writes the section's result table into `out` (the page's results directory)
and returns its frames, the values the prose cites (glue keys "around-...") and its figure.

    ablation(...)        A1: every head of every kind ablated alone, and the heads' attention types
    constant(...)        A2: heads (and layers) whose attention is replaced by a constant pattern
    sparsity(...)        A3: attention thresholded to zero, and quantized
    rollout(...)         A4: rollout against LRP as source attributions
    crosslingual(...)    A5: the same sentences through the models of other pairs
    lottery(...)         A6: a lottery ticket of the encoder's heads
    refined_lrp(...)     A8: deletion curves of plain and refined LRP
    studies(...)         every study's verdict, and the other models the page read
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch

from headlib.analysis.ablation import change_by_type, head_types, single_head_ablation, teacher_forced_attention
from headlib.analysis.deletion import compare_orderings
from headlib.analysis.interventions import Counts, average_patterns
from headlib.analysis.rollout import source_attributions
from headlib.book.pages import OTHER_MODELS, other_models, other_models_note
from headlib.claims import VERDICT_KEYS
from headlib.data.corpora import load_ntrex, load_split
from headlib.nn.model import KINDS
from headlib.pruning.lottery import LotteryConfig, compared_points, comparison, ticket_summary
from headlib.pruning.lottery import run as lottery_point
from headlib.studies.around import adaptation_table, constant_attention_sweep, quantization_sweep, sparsity_sweep, studies_table
from headlib.studies.crosslingual import compare_profiles, pair_profiles
from headlib.train import pretrained


def _figure(*args, **kw):
    import matplotlib.pyplot as plt
    return plt.subplots(*args, **kw)


def _done(fig):
    import matplotlib.pyplot as plt
    fig.tight_layout()
    plt.close(fig)
    return fig


def ablation(model, bpe, dev, pair: str, n_maps: int, out: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict, object]:
    """A1 (Michel et al.): greedy dev BLEU with each head of each kind ablated alone
    (single_head_ablation.csv), each head's attention type on `n_maps` teacher-forced dev pairs
    (head_types.csv), the change by type, the figures the prose cites and a heatmap per kind."""
    import seaborn as sns
    table = single_head_ablation(model, bpe, dev)
    table.to_csv(out / "single_head_ablation.csv", index=False)
    maps = teacher_forced_attention(model, bpe, load_split(pair, "dev"), n=n_maps)
    types = head_types(maps)
    types.to_csv(out / "head_types.csv", index=False)
    table = table.merge(types[["kind", "layer", "head", "type"]], on=["kind", "layer", "head"])
    fig, axes = _figure(1, len(KINDS), figsize=(11, 3.4), sharey=True)
    lim = max(table["change"].abs().max(), 0.1)
    for ax, kind in zip(axes, KINDS):
        sns.heatmap(table[table["kind"] == kind].pivot(index="layer", columns="head", values="change"), cmap="RdBu",
                    center=0, vmin=-lim, vmax=lim, ax=ax, cbar=kind == KINDS[-1])
        ax.set_title(kind)
    from IPython.display import Markdown
    mean = table.groupby("kind")["change"].mean()
    return table, change_by_type(table), {
        "around-n-ablated": len(table), "around-worst": float(table["change"].min()),
        "around-n-improve": int((table["change"] >= 0.3).sum()), "around-n-maps": len(maps),
        "around-share-up": float((table["change"] > 0).mean()),
        "around-mean-change": Markdown(", ".join(f"{k} {v:+.2f}" for k, v in mean.items()))}, _done(fig)


def constant(model, bpe, dev, pair: str, n_train: int, full: float, out: Path) -> tuple[pd.DataFrame, dict, object]:
    """A2 (Raganato et al.; Hassid et al.): each encoder head, each layer and all heads given the
    average pattern of `n_train` training sentences (constant_attention.csv)."""
    import seaborn as sns
    counts, train = Counts(), list(load_split(pair, "train").src[:n_train])
    patterns = average_patterns(model, bpe, train)
    table = constant_attention_sweep(model, bpe, dev, patterns, full, counts)
    table.to_csv(out / "constant_attention.csv", index=False)
    fig, (a, b) = _figure(1, 2, figsize=(9, 3.4), gridspec_kw={"width_ratios": [3, 1]})
    sns.heatmap(table[table["what"] == "head"].pivot(index="layer", columns="head", values="change"),
                cmap="RdBu", center=0, annot=True, fmt=".1f", annot_kws={"size": 7}, ax=a)
    a.set_title("one head constant")
    per_layer = table[table["what"] == "layer"]
    b.barh(per_layer["layer"].astype(str), per_layer["change"])
    b.invert_yaxis()
    b.set(title="whole layer constant", xlabel="BLEU change", ylabel="layer")
    heads = table[table["what"] == "head"]
    return table, {"around-n-train": len(train), "around-fallbacks": counts.fallbacks,
                   "around-const-ok": int((heads["change"] > -0.5).sum()), "around-const-n": len(heads),
                   "around-const-all": float(table.loc[table["what"] == "all", "BLEU"].item())}, _done(fig)


def sparsity(model, bpe, dev, full: float, out: Path) -> tuple[dict, object]:
    """A3 (Ji et al.): attention values under a threshold set to zero (attention_sparsity.csv),
    and attention log-quantized to few bits (attention_quantization.csv)."""
    zeroed, quant = sparsity_sweep(model, bpe, dev), quantization_sweep(model, bpe, dev)
    zeroed.to_csv(out / "attention_sparsity.csv", index=False)
    quant.to_csv(out / "attention_quantization.csv", index=False)
    fig, (a, b) = _figure(1, 2, figsize=(9, 3.4))
    a.plot(zeroed["zeroed"], zeroed["BLEU"], marker="o")
    for r in zeroed.itertuples():
        a.annotate(f"{r.threshold:g}", (r.zeroed, r.BLEU), fontsize=7, xytext=(3, 3), textcoords="offset points")
    a.axhline(0.99 * full, ls=":", c="grey")
    a.set(xlabel="attention values set to zero", ylabel="greedy BLEU")
    b.plot(quant["bits"], quant["BLEU"], marker="o")
    b.axhline(full, ls=":", c="grey")
    b.set(xlabel="bits (log scale, floor 1e-4)", ylabel="greedy BLEU", xticks=quant["bits"])
    best = zeroed.loc[zeroed["BLEU"].idxmax()]
    return {"around-zeroed": float(zeroed[zeroed["BLEU"] >= 0.99 * full]["zeroed"].max()),
            "around-3bit": float(quant.loc[quant["bits"] == 3, "BLEU"].item()),
            "around-4bit": float(quant.loc[quant["bits"] == 4, "BLEU"].item()),
            "around-best-threshold": float(best["threshold"]), "around-best-zeroed": float(best["zeroed"]),
            "around-best-bleu": float(best["BLEU"])}, _done(fig)


def rollout(model, bpe, pair: str, n: int, out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A4 (Abnar and Zuidema): attention rollout against LRP as source attributions on `n` dev
    sentences, one row per sentence (rollout.csv), and the summary the page shows."""
    table = source_attributions(model, bpe, list(load_split(pair, "dev").src[:n]))
    table.to_csv(out / "rollout.csv", index=False)
    return table, table.drop(columns="tokens").describe().loc[["mean", "std", "25%", "50%", "75%"]].round(2)


def crosslingual(profile: str, pairs: str, seed: int, n_ntrex: int, heads: int, out: Path) -> tuple[dict, dict, object]:
    """A5 (Voita et al.'s question across languages): the same `n_ntrex` NTREX English sentences through the
    models of the comma-separated `pairs`; head agreement (crosslingual_agreement.csv) and each layer's top head's
    share (crosslingual_layers.csv). Returns the pairs' profiles, the values and the figure."""
    import seaborn as sns
    from IPython.display import Markdown
    ntrex = list(load_ntrex("de").src[:n_ntrex])
    profiles = pair_profiles(profile, [p.strip() for p in pairs.split(",")], seed, ntrex)
    cross = compare_profiles(profiles)
    cross.agreement.to_csv(out / "crosslingual_agreement.csv", index=False)
    cross.layers.to_csv(out / "crosslingual_layers.csv", index=False)
    fig, ax = _figure(figsize=(6, 3.4))
    sns.barplot(data=cross.layers, x="layer", y="top share", hue="model", ax=ax)
    ax.axhline(1 / heads, ls=":", c="grey")
    ax.set(ylabel="top head's share of relevance")
    if profile == pretrained.PROFILE:
        same = ("they were imported, not trained here, so nothing here makes them start from the same weights "
                "(their fingerprints, below, say whether they are one model).")
    elif cross.shared_vocab is not None:
        same = (f"all {len(profiles)} were trained with seed {seed} and have the same shapes (vocabulary "
                f"{cross.shared_vocab:,}), so they start from **identical weights**.")
    else:
        same = ("their shapes differ, so they do **not** start from the same weights and head-by-head agreement is "
                "chance-level.")
    return profiles, {"around-agreement": cross.agreement.round(2), "around-n-ntrex": len(ntrex),
                      "around-compare": ", ".join(profiles), "around-same-init": Markdown(same)}, _done(fig)


def lottery(profile: str, pair: str, seed: int, k: int, model, run: dict,
            out: Path) -> tuple[dict, dict | None, dict, object]:
    """A6 (Frankle and Carbin; Prasanna et al.): a ticket of `k` encoder heads chosen by confidence early
    in training, rewound and retrained, against Hard Concrete's point with as many heads and its mask
    from scratch (lottery.csv). Returns the ticket, the scratch run (or None), values and figure; an
    imported model (the pretrained profile) has no training here to rewind: no ticket (None), and A6
    is not measured."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from IPython.display import Markdown
    if run["stopped"] == "imported":
        fig, ax = _figure(figsize=(6, 1))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "imported model: no ticket", ha="center", va="center")
        none = Markdown("An imported model has no training run here to rewind to, so no ticket was drawn and A6 "
                        "is not measured.")
        return None, None, {"around-lottery": Markdown("(no ticket)"), "around-lottery-setup": none,
                            "around-lottery-text": Markdown("")}, _done(fig)
    ticket = lottery_point(profile, pair, seed, LotteryConfig(k=k))
    hc, scratch, full = compared_points(profile, pair, seed, ticket["k"], model)
    table = comparison(ticket, run, hc, scratch, full, list(load_split(pair, ticket["test_set"]).tgt))
    table.to_csv(out / "lottery.csv", index=False)
    layers, heads = model.head_mask("enc-self").shape
    summary = ticket_summary(ticket, table, hc, model.layer_counts(), heads)
    fig, axes = _figure(1, 2, figsize=(9, 3.2))
    sns.heatmap(torch.tensor(ticket["confidence_at_prune"]).numpy(), ax=axes[0], cmap="viridis", annot=True, fmt=".2f",
                annot_kws={"size": 6}, xticklabels=range(1, heads + 1), yticklabels=range(1, layers + 1), cbar=False)
    for layer, head in summary.kept.nonzero().tolist():
        axes[0].add_patch(plt.Rectangle((head, layer), 1, 1, fill=False, ec="red", lw=2))
    axes[0].set(title="confidence at pruning; ticket outlined", xlabel="head", ylabel="layer")
    if summary.hc_kept is not None:
        sns.heatmap(summary.hc_kept.numpy(), ax=axes[1], cmap="Greys", vmin=0, vmax=1, cbar=False, linewidths=0.5,
                    linecolor="lightgrey", xticklabels=range(1, heads + 1), yticklabels=range(1, layers + 1))
        axes[1].set(title=f"Hard Concrete keeps {int(summary.hc_kept.sum())}", xlabel="head", ylabel="layer")
    else:
        axes[1].set_axis_off()
    setup = (f"Here the baseline recipe is trained for {ticket['prune_at']:,} of its {ticket['baseline_updates']:,} "
             f"updates (dev BLEU {ticket['early']['dev_bleu']:.1f} at that point), the {ticket['k']} most confident of "
             "the encoder's heads over all layers are kept (one shot), and training rewinds to its whole state at "
             f"update {ticket['rewind_to']} (weights, Adam moments, schedule, data position: \"late resetting\") and "
             "runs again to the baseline's number of updates with the other heads masked. The ticket is scored like "
             "every Sec. 6 model (beam, test set, length penalty tuned on dev); speed is the encoder's forward pass "
             "over the test set on one thread with the removed heads sliced out of the weights "
             "(`headlib.pruning.shrink`), measured in one process beside the unpruned model. \"vs. unpruned\" is "
             "each model's BLEU minus the unpruned model's, with its 95% paired bootstrap interval over the test "
             "sentences (low, high).")
    return ticket, scratch, {"around-lottery": table.round(2), "around-lottery-setup": Markdown(setup),
                             "around-lottery-text": Markdown(summary.text)}, _done(fig)


def top_heads(importance: pd.DataFrame, per_layer: int, shape: tuple[int, int]) -> torch.Tensor:
    """A (layers, heads) 0/1 mask of each layer's `per_layer` most relevant heads (`rank_in_layer`)."""
    keep = torch.zeros(shape)
    top = importance[importance["rank_in_layer"] <= per_layer]
    keep[torch.tensor(top["layer"].to_numpy()) - 1, torch.tensor(top["head"].to_numpy()) - 1] = 1.0
    return keep


def refined_lrp(model, bpe, pair: str, n: int, importance: pd.DataFrame, per_layer: int,
                out: Path) -> tuple[dict, object]:
    """A8 (Chefer et al.-style refinement): source tokens deleted in the order of plain LRP, of LRP
    through each layer's `per_layer` most relevant heads only, and at random; the curves
    (refined_lrp.csv) and their mean areas."""
    import seaborn as sns
    keep = top_heads(importance, per_layer, tuple(model.head_mask("enc-self").shape))
    table = compare_orderings(model, bpe, list(load_split(pair, "dev").src[:n]), keep)
    table.to_csv(out / "refined_lrp.csv", index=False)
    curves = table.melt(id_vars=["sentence", "ordering", "area"], var_name="fraction", value_name="log-prob")
    curves["fraction"] = curves["fraction"].astype(float)
    fig, ax = _figure(figsize=(6, 3.4))
    sns.lineplot(data=curves, x="fraction", y="log-prob", hue="ordering", marker="o", ax=ax,
                 errorbar=("ci", 95), seed=0)   # the bands bootstrapped with a fixed seed: the same figure on every run
    ax.set(xlabel="fraction of source tokens replaced by UNK", ylabel="mean log-prob of the translation")
    area = table.groupby("ordering")["area"].mean()
    return {"around-keep": per_layer, "around-refined": float(area["refined LRP"]),
            "around-plain": float(area["plain LRP"]), "around-random": float(area["random"])}, _done(fig)


def domains_note(profile: str, out: Path) -> str:
    """Where A7 runs: a link to the Domains page once its adaptation table is computed (the link's
    target exists only then), else the command that computes it; an imported model has no domains."""
    a7 = "Head-restricted domain adaptation (A7, ALPS) needs models of two domains"
    if profile == pretrained.PROFILE:
        return f"{a7} trained here, so it is not run for an imported model."
    where = "two en-ru models of its own, trained on the pool's news and Tatoeba parts, on the page"
    if adaptation_table(out).is_file():
        return (f"{a7}: it runs on {where} {{doc}}`Domains and adaptation (en-ru) <../../en-ru/seed1/12_domains>`, "
                "together with the paper's comparison of heads across domains.")
    return (f"{a7}: it runs on {where} Domains and adaptation (en-ru), not computed on this generation's releases "
            f"yet (`python -m headlib.studies.domains --profile {profile}`), so A7 is not measured.")


def studies(profile: str, out: Path, pair: str, profiles: dict, ticket: dict | None, scratch: dict | None
            ) -> tuple[pd.DataFrame, dict]:
    """Every study's verdict (around_studies.csv), how many got each verdict, the models the page
    read besides its own (other pairs', the ticket's, Hard Concrete's mask from scratch), and where
    A7 runs (`domains_note`)."""
    from IPython.display import Markdown
    table = studies_table(out)
    table.to_csv(out / "around_studies.csv", index=False)
    others = [p.record for name, p in profiles.items() if name != pair]
    models = (other_models(others, "another pair's model (cross-lingual)")
              + other_models([ticket["results"]] if ticket else [], "lottery ticket")
              + other_models([scratch["results"]] if scratch else [], "trained from scratch with Hard Concrete's mask"))
    counts = {f"around-n-{key}": int((table["verdict"] == verdict).sum()) for key, verdict in VERDICT_KEYS.items()}
    return table, counts | {OTHER_MODELS: json.dumps(models), "around-domains": Markdown(domains_note(profile, out)),
                            "around-other-models": Markdown(other_models_note(models))}

"""The paper's claims C1-C9, each with the paper's value, ours (from this study's result tables)
and a verdict by a stated criterion. The Claims page of the book is this table.

The criteria are ours (the paper states its claims in words); each is written next to its claim
so that a reader can disagree with it. A claim whose tables are missing (e.g. a pair that was not
pruned) is "not measured".
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

import pandas as pd
from scipy.stats import spearmanr

HOLDS, FAILS, PARTLY, MISSING = "holds", "does not hold", "partly", "not measured"
VERDICT_STYLE = {HOLDS: "background-color: #d9f2d9", PARTLY: "background-color: #fff2cc",
                 FAILS: "background-color: #f8d7da", MISSING: "color: #888"}


@dataclass(frozen=True)
class Claim:
    key: str
    section: str
    claim: str
    paper: str                     # the paper's number (Voita et al. 2019), as reported there
    criterion: str                 # how we decide
    measure: Callable[[Path], tuple[str, str]]   # results dir -> (our value, verdict)


def _csv(out: Path, name: str) -> pd.DataFrame:
    path = out / name
    if not path.is_file():
        raise FileNotFoundError(path)
    return pd.read_csv(path)


def c1_lrp_vs_confidence(out):
    imp = _csv(out, "head_importance.csv")
    rho = spearmanr(imp["relevance"], imp["confidence"])
    holds = rho.statistic > 0.3 and rho.pvalue < 0.01
    return f"Spearman rho = {rho.statistic:.2f} (p = {rho.pvalue:.1e}, {len(imp)} heads)", HOLDS if holds else FAILS


def c2_few_heads_per_layer(out):
    imp = _csv(out, "head_importance.csv").assign(a=lambda d: d["relevance"].abs())
    share = imp.groupby("layer")["a"].agg(lambda a: a.max() / a.sum())
    uniform = 1 / imp.groupby("layer").size().iloc[0]
    n = int((share >= 2 * uniform).sum())
    verdict = HOLDS if n == len(share) else PARTLY if n >= len(share) / 2 else FAILS
    return (f"top head's share of its layer's |relevance|: {share.min():.2f}-{share.max():.2f} "
            f"(uniform {uniform:.3f}); >= 2x uniform in {n} of {len(share)} layers"), verdict


def c3_positional(out):
    pos = _csv(out, "positional_heads.csv")
    found = pos[pos["positional"]]
    best = pos.loc[pos["fraction"].idxmax()]
    if len(found) == 0:
        return (f"no positional head; closest: {int(best.layer)}.{int(best['head'])} at offset "
                f"{int(best.offset):+d} {best.fraction:.0%} of the time"), FAILS
    confident = found[found["confidence"] > 0.8]
    heads = ", ".join(f"{int(r.layer)}.{int(r.head)} ({int(r.offset):+d}, conf {r.confidence:.2f})" for r in found.itertuples())
    return f"{len(found)} positional: {heads}", HOLDS if len(confident) else PARTLY


def c4_syntactic(out):
    best = _csv(out, "syntactic_best.csv")
    n, n_rel = int(best["syntactic"].sum()), int(best["syntactic_relative"].sum())
    verdict = HOLDS if n >= len(best) / 2 else PARTLY if n or n_rel else FAILS
    return (f"{n} of {len(best)} relation-directions have a head >= 10 points above the positional "
            f"baseline ({n_rel} by the relative criterion)"), verdict


def c5_rare_word(out):
    rates = _csv(out, "rare_word_rates.csv")
    imp = _csv(out, "head_importance.csv")
    layer1 = rates[rates["layer"] == 1]
    top = layer1.loc[layer1["rarest"].idxmax()]
    margin = top["rarest"] - layer1["rarest"].median()
    rank = int(imp[(imp["layer"] == 1) & (imp["head"] == top["head"])]["rank_in_layer"].iloc[0])
    verdict = HOLDS if top["rarest"] >= 0.5 and rank == 1 else PARTLY if top["top2"] > 0.5 else FAILS
    return (f"head 1.{int(top['head'])}: rarest {top['rarest']:.0%}, one of two rarest {top['top2']:.0%} "
            f"({margin * 100:+.1f} points over the median layer-1 head), LRP rank {rank} in layer 1"), verdict


def c6_few_heads_suffice(out):
    table = _csv(out, "pruning_encoder.csv")
    full = table["BLEU"].iloc[0] - table["vs. full"].iloc[0]
    within = table[table["BLEU"] >= full - 0.5]["enc-self heads"].min()
    tuned = table["BLEU"].iloc[0]
    within_tuned = table[table["BLEU"] >= tuned - 0.5]["enc-self heads"].min()
    value = (f"{int(within)} encoder heads within 0.5 BLEU of the unpruned model ({full:.2f}); "
             f"{int(within_tuned)} within 0.5 of the fine-tuned 48-head model ({tuned:.2f})")
    return value, HOLDS if within_tuned <= 12 else PARTLY if within <= 12 else FAILS


def c7_pruned_beats_scratch(out):
    diffs = []
    for name in ("pruning_encoder_scratch.csv", "pruning_all_attention.csv"):
        if (out / name).is_file():
            diffs += _csv(out, name)["pruned - scratch"].dropna().tolist()
    if not diffs:
        raise FileNotFoundError(out / "pruning_encoder_scratch.csv")
    wins = sum(d > 0 for d in diffs)
    verdict = HOLDS if wins == len(diffs) else FAILS if wins == 0 else PARTLY
    return f"pruned - scratch: {', '.join(f'{d:+.2f}' for d in diffs)} BLEU ({wins} of {len(diffs)} ahead)", verdict


def c8_pruning_order(out):
    from .sweep import encoder_first_cross_last, pruning_order
    table = _csv(out, "pruning_all_attention.csv")
    order = pruning_order(table)
    holds = encoder_first_cross_last(order)
    return "half of the heads gone first in " + " < ".join(f"{k} (lambda {lam:g})" for k, lam in order), HOLDS if holds else FAILS


def c9_specialized_survive(out):
    enrich = _csv(out, "pruning_enrichment.csv")
    surv = _csv(out, "pruning_survival.csv")
    rho = spearmanr(surv["survives_to_lambda"], surv["relevance"])
    sig_rel = int((enrich["Mann-Whitney p"] < 0.05).sum())
    sig_fun = int((enrich["Fisher p"] < 0.05).sum())
    value = (f"open heads more relevant (Mann-Whitney p < 0.05) in {sig_rel} of {len(enrich)} pruned models, "
             f"enriched in functions (Fisher p < 0.05) in {sig_fun}; survival vs relevance rho = {rho.statistic:.2f}")
    verdict = HOLDS if sig_rel == len(enrich) and sig_fun else PARTLY if sig_rel else FAILS
    return value, verdict


CLAIMS: tuple[Claim, ...] = (
    Claim("C1", "4", "LRP relevance and confidence agree on which heads matter", "qualitative (Figs. 1-2)",
          "Spearman rho > 0.3, p < 0.01 over encoder heads", c1_lrp_vs_confidence),
    Claim("C2", "4", "In each layer one or two heads are much more important than the rest", "Fig. 1",
          "top head's share of |relevance| >= 2x uniform in every layer (partly: in half)", c2_few_heads_per_layer),
    Claim("C3", "5.1", "Positional heads attend to a neighbour and are confident", ">= 90% on one offset, confidence > 0.8",
          "a head >= 90% on one offset (holds with confidence > 0.8)", c3_positional),
    Claim("C4", "5.2", "Syntactic heads beat the positional baseline", "Table 1: heads for all 4 relations",
          "a head >= 10 points over the baseline for half the relation-directions (partly: any)", c4_syntactic),
    Claim("C5", "5.3", "A layer-1 head attends to the rarest token and is the layer's most important",
          "66% rarest, 83% top-2 (OpenSubtitles); top-2 > 50% (WMT)",
          ">= 50% rarest and LRP rank 1 (partly: top-2 > 50%)", c5_rare_word),
    Claim("C6", "6.2", "Most encoder heads can be pruned at little cost", "10 of 48 heads within 0.15 BLEU (WMT)",
          "<= 12 heads within 0.5 BLEU of the fine-tuned model (partly: of the unpruned one)", c6_few_heads_suffice),
    Claim("C7", "6.3", "Pruned models beat the same configuration trained from scratch", "+0.2 to +0.6 BLEU (Table 2)",
          "pruned ahead at every configuration (partly: at some)", c7_pruned_beats_scratch),
    Claim("C8", "6.3", "Encoder self-attention is pruned first, decoder-encoder attention last", "Fig. 9",
          "order of the lambda at which half of a kind's heads are closed", c8_pruning_order),
    Claim("C9", "6.2", "Specialized (important) heads are the last to be pruned", "Fig. 8",
          "open heads more relevant in every pruned model and enriched in functions (partly: relevance only)",
          c9_specialized_survive),
)


# What Sec. 4-5 measure on a trained model, without pruning (C6-C9 need the Sec. 6 sweeps).
ANALYSIS_CLAIMS = tuple(c for c in CLAIMS if c.key in ("C1", "C2", "C3", "C4", "C5"))
# A verdict said of one claim and of several ("C1 holds", "C3/C4 do not hold").
VERDICT_WORDS = {HOLDS: ("holds", "hold"), PARTLY: ("holds in part", "hold in part"),
                 FAILS: ("does not hold", "do not hold"), MISSING: ("is not measured", "are not measured")}


def claims_table(out: Path, claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """One row per claim for the results dir of one (profile, pair, seed)."""
    rows = []
    for c in claims:
        try:
            ours, verdict = c.measure(Path(out))
        except FileNotFoundError as e:
            ours, verdict = f"({Path(e.args[0]).name} not computed for this pair)", MISSING
        rows.append({"claim": c.key, "section": c.section, "the paper says": c.claim, "paper": c.paper,
                     "ours": ours, "criterion": c.criterion, "verdict": verdict})
    return pd.DataFrame(rows)


def verdicts(dirs: dict[str, Path], claims: tuple[Claim, ...] = CLAIMS) -> pd.DataFrame:
    """The verdicts (rows: claims) for each named results dir (columns), e.g. pairs or seeds."""
    tables = {name: claims_table(d, claims) for name, d in dirs.items()}
    first = next(iter(tables.values()))
    index = pd.Index(first["claim"] + " " + first["the paper says"], name="claim")
    return pd.DataFrame({name: t["verdict"].to_numpy() for name, t in tables.items()}, index=index)


def styled(table: pd.DataFrame, wide=()):
    """A verdict table for the book: verdicts (columns named `verdict` or `<model>: verdict`)
    coloured, a `verdict` column moved next to the first (a table wider than the text column
    scrolls, and the verdict stays in view), text left-aligned and wrapped, the `wide` text
    columns 8-22em wide."""
    if "verdict" in table.columns:
        rest = [c for c in table.columns[1:] if c != "verdict"]
        table = table[[table.columns[0], "verdict", *rest]]
    verdict_columns = [c for c in table.columns if str(c) == "verdict" or str(c).endswith(": verdict")]
    return (table.style.map(lambda v: VERDICT_STYLE.get(v, ""), subset=verdict_columns).hide(axis="index")
            .set_properties(**{"text-align": "left", "vertical-align": "top", "white-space": "normal"})
            .set_properties(subset=list(wide), **{"min-width": "8em", "max-width": "22em"}))

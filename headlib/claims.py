"""The paper's claims C1-C9, each with the paper's value, ours (from this study's result tables)
and a verdict by a stated criterion. The Claims page of the book is this table.

The criteria are ours (the paper states its claims in words); each is written next to its claim
so that a reader can disagree with it. A claim whose tables are missing (e.g. a pair that was not
pruned) is "not measured"; a claim about a model that does not translate (`MIN_BLEU`), or with
nothing to measure, is "not assessable": its heads say nothing of the paper's claims either way.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import rankdata, spearmanr

from headlib.analysis.heads import RARE_MARGIN, layer_summary, rare_word_candidate
from headlib.tables import read_table
from headlib.train.records import pair_training_table

HOLDS, FAILS, PARTLY, MISSING, UNASSESSABLE = "holds", "does not hold", "partly", "not measured", "not assessable"
VERDICT_STYLE = {HOLDS: "background-color: #d9f2d9", PARTLY: "background-color: #fff2cc",
                 FAILS: "background-color: #f8d7da", MISSING: "color: #888", UNASSESSABLE: "color: #888"}
# The pages' glue keys of the verdicts (`claims-n-holds`, `around-n-unassessable`, ...).
VERDICT_KEYS = {"holds": HOLDS, "partly": PARTLY, "fails": FAILS, "missing": MISSING, "unassessable": UNASSESSABLE}

# A model under this BLEU (beam, on its pair's main test set) does not translate: what its heads do is
# no test of the paper's claims, so its verdicts are "not assessable" (under 10 BLEU a translation is
# "almost useless": Google Cloud Translation's guide to BLEU scores). Every cpu-profile model trained so
# far is under 3 or over 20 BLEU (Sec. 3; the Domains page), so no verdict hangs on where the line is.
MIN_BLEU = 10.0


@dataclass(frozen=True)
class Claim:
    key: str
    section: str
    claim: str
    paper: str                     # the paper's number (Voita et al. 2019), as reported there
    criterion: str                 # how we decide
    measure: Callable[[Path], tuple[str, str]]   # results dir -> (our value, verdict)
    pages: tuple[str, ...] = ()    # the notebooks that write the tables `measure` reads

    def judge(self, out: Path) -> tuple[str, str]:
        """Our value and verdict for the results dir `out`: `measure`'s, unless the model behind it
        does not translate (`model_bleu` under `MIN_BLEU`)."""
        ours, verdict = self.measure(Path(out))
        bleu = model_bleu(out)
        if bleu is not None and bleu < MIN_BLEU:
            return f"{ours}; the model scores {bleu:.2f} BLEU, under {MIN_BLEU:g}: it does not translate", UNASSESSABLE
        return ours, verdict


def not_assessable(out: Path) -> str | None:
    """Why no verdict can be drawn from the model whose results dir is `out` ("not assessable: ..."),
    or None where it translates (or has no record)."""
    bleu = model_bleu(out)
    if bleu is None or bleu >= MIN_BLEU:
        return None
    return f"not assessable: the model scores {bleu:.2f} BLEU, under {MIN_BLEU:g}, so it does not translate."


def model_bleu(out: Path) -> float | None:
    """Beam BLEU on its pair's main test set of the model whose results dir is `out` (its
    training_results.json), or None where there is no record (tables without a model)."""
    import json

    from headlib.data.corpora import main_test_set
    path = Path(out) / "training_results.json"
    if not path.is_file():
        return None
    run = json.loads(path.read_text())
    return float(run["test"][main_test_set(run["pair"])]["beam"]["bleu"])


WITHIN_LAYER_DRAWS = 10_000   # permutations of confidence within each layer (C1's null)


def within_layer_rho(imp: pd.DataFrame, draws: int = WITHIN_LAYER_DRAWS,
                     seed: int = 0) -> tuple[float, float, pd.Series]:
    """Fig. 1's comparison: heads ranked within their layer by LRP relevance and by confidence. The
    mean over layers of the within-layer Spearman rho, its one-sided permutation p-value (confidence
    permuted within each layer, `draws` times), and each layer's rho."""
    per_layer = imp.groupby("layer").apply(lambda g: spearmanr(g["relevance"], g["confidence"]).statistic)
    rel = [rankdata(g["relevance"]) for _, g in imp.groupby("layer")]
    conf = [rankdata(g["confidence"]) for _, g in imp.groupby("layer")]
    rng = np.random.default_rng(seed)
    null = np.zeros(draws)
    for r, c in zip(rel, conf):   # Spearman rho = Pearson correlation of the ranks
        perms = rng.permuted(np.tile(c - c.mean(), (draws, 1)), axis=1)               # (draws, heads), centred
        r = r - r.mean()
        null += perms @ r / (np.linalg.norm(perms, axis=1) * np.linalg.norm(r) + 1e-12)
    null /= len(rel)
    observed = float(per_layer.mean())
    return observed, float((1 + (null >= observed - 1e-12).sum()) / (draws + 1)), per_layer


def c1_lrp_vs_confidence(out):
    """Within-layer rank agreement of relevance and confidence (Fig. 1), judged without the layer-1
    rare-word head, the paper's exception (important by LRP despite low confidence), which is tested
    on its own: its LRP rank in layer 1 above its confidence rank."""
    imp = read_table(out, "head_importance.csv")
    top, _, _ = rare_word_candidate(read_table(out, "rare_word_rates.csv"))
    layer1 = imp[imp["layer"] == 1].assign(conf_rank=lambda t: t["confidence"].rank(ascending=False))
    rare = layer1[layer1["head"] == top["head"]].iloc[0]
    exception = rare["rank_in_layer"] < rare["conf_rank"]
    rest = imp[~((imp["layer"] == 1) & (imp["head"] == top["head"]))]
    rho, p, per_layer = within_layer_rho(rest)
    rho_all, _, _ = within_layer_rho(imp, draws=0)
    verdict = HOLDS if rho > 0.3 and p < 0.01 else PARTLY if p < 0.05 else FAILS
    return (f"mean within-layer Spearman rho = {rho:.2f} (permutation p = {p:.1e}; layers {per_layer.min():.2f} to "
            f"{per_layer.max():.2f}) without the rare-word head 1.{int(top['head'])}, {rho_all:.2f} with it; "
            f"that head ranks {int(rare['rank_in_layer'])} by LRP and {int(rare['conf_rank'])} by confidence in "
            f"layer 1: the exception is {'seen' if exception else 'not seen'}"), verdict


def c2_few_heads_per_layer(out):
    imp = read_table(out, "head_importance.csv")
    share = layer_summary(imp)["top share"]
    uniform = 1 / imp.groupby("layer").size().iloc[0]
    n = int((share >= 2 * uniform).sum())
    verdict = HOLDS if n == len(share) else PARTLY if n >= len(share) / 2 else FAILS
    return (f"top head's share of its layer's |relevance|: {share.min():.2f}-{share.max():.2f} "
            f"(uniform {uniform:.3f}); >= 2x uniform in {n} of {len(share)} layers"), verdict


def c3_positional(out):
    """Positional heads attend to a neighbour (offset -1 or +1 in the paper): a head whose argmax
    is most often the token itself (offset 0) is a diagonal head, not a positional one here; and a
    head counts only above the best of the model's heads at initialisation (the null for taking
    the best of 48: position embeddings alone may make a head positional)."""
    pos = read_table(out, "positional_heads.csv")
    init = read_table(out, "null_positional_heads.csv")
    init_other = init[init["offset"] != 0]
    null = float(init_other["fraction"].max()) if len(init_other) else 0.0
    at_init = f"; at initialisation the best head's share at one offset other than 0 is {null:.0%}"
    pos = pos.assign(positional=pos["positional"] & (pos["fraction"] > null))
    neighbour = pos[pos["offset"] != 0]
    found = neighbour[neighbour["positional"]]
    itself = pos[pos["offset"] == 0]
    diagonal = (f"; {len(itself)} of {len(pos)} heads attend most often to the token itself "
                f"(at most {itself['fraction'].max():.0%} of the time)") if len(itself) else ""
    if len(found) == 0:
        if len(neighbour) == 0:
            return f"no head's most frequent offset is another token{diagonal}{at_init}", FAILS
        best = neighbour.loc[neighbour["fraction"].idxmax()]
        return (f"no positional head; closest: {int(best.layer)}.{int(best['head'])} at offset "
                f"{int(best.offset):+d} {best.fraction:.0%} of the time{diagonal}{at_init}"), FAILS
    confident = found[found["confidence"] > 0.8]
    heads = ", ".join(f"{int(r.layer)}.{int(r.head)} ({int(r.offset):+d}, conf {r.confidence:.2f})" for r in found.itertuples())
    return f"{len(found)} positional: {heads}{diagonal}{at_init}", HOLDS if len(confident) else PARTLY


def c4_syntactic(out):
    """A relation-direction has a syntactic head when its best head beats the positional baseline
    by 10 points and the best head of the model at initialisation (the null for the best of 48)."""
    best = read_table(out, "syntactic_best.csv")
    init = read_table(out, "null_syntactic_best.csv")[["relation", "direction", "accuracy"]]
    t = best.merge(init, on=["relation", "direction"], suffixes=("", "_init"))
    above_init = t["accuracy"] > t["accuracy_init"]
    n, n_rel = int((t["syntactic"] & above_init).sum()), int((t["syntactic_relative"] & above_init).sum())
    verdict = HOLDS if n >= len(t) / 2 else PARTLY if n or n_rel else FAILS
    return (f"{n} of {len(t)} relation-directions have a head >= 10 points above the positional baseline and "
            f"above the best head at initialisation ({n_rel} by the relative criterion; "
            f"{int(t['syntactic'].sum())} above the baseline alone)"), verdict


def c5_rare_word(out):
    """The top layer-1 head by rarest-token rate, judged against the other layer-1 heads: on short
    sentences every head hits one of the two rarest tokens often (chance is high), so a rate alone
    says little; the head must stand out (`heads.rare_word_candidate`) and beat the best layer-1 head
    of the model at initialisation (the null for taking the best head)."""
    rates = read_table(out, "rare_word_rates.csv")
    imp = read_table(out, "head_importance.csv")
    layer1 = rates[rates["layer"] == 1]
    if not layer1["n"].max():
        return "no sentence's rarest token is outside the most frequent ones: nothing to measure", UNASSESSABLE
    top, margin, stands_out = rare_word_candidate(rates)
    init = read_table(out, "null_rare_word_rates.csv")
    null = float(init[init["layer"] == 1]["rarest"].max())
    stands_out = stands_out and top["rarest"] > null
    rank = int(imp[(imp["layer"] == 1) & (imp["head"] == top["head"])]["rank_in_layer"].iloc[0])
    verdict = HOLDS if stands_out and top["rarest"] >= 0.5 and rank == 1 else PARTLY if stands_out else FAILS
    return (f"head 1.{int(top['head'])}: rarest {top['rarest']:.0%} ({margin * 100:+.1f} points over the median "
            f"layer-1 head; layer 1 ranges {layer1['rarest'].min():.0%}-{layer1['rarest'].max():.0%}; the best "
            f"layer-1 head at initialisation {null:.0%}), one of "
            f"two rarest {top['top2']:.0%} (layer 1: {layer1['top2'].min():.0%}-{layer1['top2'].max():.0%}), "
            f"LRP rank {rank} in layer 1"), verdict


# The paper's en-ru models (Sec. 3): full-model test BLEU and training pairs, per domain.
PAPER_ENRU_MODELS = {"WMT": {"BLEU": 29.6, "pairs": 2_500_000}, "OpenSubtitles": {"BLEU": 32.4, "pairs": 6_000_000}}

TOLERANCE, PAPER_TOLERANCE = 0.5, 0.15   # BLEU: ours (1,000-sentence test sets); the paper's (Sec. 6.2)


def fewest_heads_within(table: pd.DataFrame, reference: float, tolerance: float) -> int:
    """The fewest encoder heads of a pruning sweep point scoring within `tolerance` BLEU of `reference`."""
    return int(table[table["BLEU"] >= reference - tolerance - 1e-9]["enc-self heads"].min())


def no_intervals(table: pd.DataFrame, column: str, name: str) -> tuple[str, str] | None:
    """"not measured", with why, when `table` lacks the 95% intervals of `column` (its points or runs
    kept no translations to resample); None when every row has them."""
    bounds = [f"{column} low", f"{column} high"]
    if all(b in table for b in bounds) and not table[bounds].isna().any().any():
        return None
    return f"({name} has no 95% intervals: its points kept no translations)", MISSING


def c6_few_heads_suffice(out):
    """The fewest encoder heads whose point is within TOLERANCE BLEU of the smallest lambda's point
    (fine-tuned like every point, no or few heads closed) with 95% confidence (its paired bootstrap interval of the difference lies above
    -TOLERANCE), and the fewest whose interval still reaches above -TOLERANCE (a cost beyond it not
    shown); the point estimates against the unpruned model and at the paper's tolerance as context."""
    table = read_table(out, "pruning_encoder.csv")
    if (missing := no_intervals(table, "vs. smallest lambda", "pruning_encoder.csv")) is not None:
        return missing
    full = table["BLEU"].iloc[0] - table["vs. full"].iloc[0]
    tuned = table["BLEU"].iloc[0]
    heads = table["enc-self heads"]
    sure = heads[table["vs. smallest lambda low"] > -TOLERANCE]
    possible = heads[table["vs. smallest lambda high"] > -TOLERANCE]
    fewest = lambda h: int(h.min()) if len(h) else None
    best = table.loc[heads == fewest(possible)].iloc[0] if len(possible) else None
    value = (f"{fewest(sure)} encoder heads are within {TOLERANCE} BLEU of the fine-tuned "
             f"{int(heads.iloc[0])}-head point ({tuned:.2f}) with 95% confidence; {fewest(possible)} are not shown "
             f"to cost more" + (f" ({best['vs. smallest lambda']:+.2f}, interval {best['vs. smallest lambda low']:+.2f} to "
                                f"{best['vs. smallest lambda high']:+.2f})" if best is not None else "") +
             f"; point estimates: {fewest_heads_within(table, full, TOLERANCE)} heads within {TOLERANCE} of the "
             f"unpruned model ({full:.2f}), {fewest_heads_within(table, tuned, PAPER_TOLERANCE)} within the paper's "
             f"{PAPER_TOLERANCE} of the fine-tuned point")
    verdict = (HOLDS if len(sure) and fewest(sure) <= 12 else
               PARTLY if len(possible) and fewest(possible) <= 12 else FAILS)
    return value, verdict


def seed_spread(out: Path) -> float | None:
    """Range (max - min) of the main test set's beam BLEU over the seeds trained with this
    profile and pair (the directories next to `out`); None with fewer than two seeds."""
    if not out.name.startswith("seed"):            # not a results/<profile>/<pair>/seed<seed> directory
        return None
    beam = pair_training_table(out.parent)["BLEU (beam)"]
    return float(beam.max() - beam.min()) if len(beam) >= 2 else None


SCRATCH_TABLES = (("pruning_encoder_scratch.csv", "encoder"), ("pruning_all_attention.csv", "all attention"))


def c7_pruned_beats_scratch(out):
    """Pruned minus from-scratch BLEU (main test set, beam) at each configuration (encoder-only,
    Sec. 6.2; all attention, Sec. 6.3), budgets matched, each difference with its 95% paired
    bootstrap interval: pruned is ahead where the interval lies above 0, behind where it lies below."""
    from headlib.pruning.readout import sides
    tables = {}
    for name, label in SCRATCH_TABLES:
        if (out / name).is_file():
            t = read_table(out, name).dropna(subset=["pruned - scratch"])
            t = t[~t["control"].astype(bool)] if "control" in t else t   # more updates, not fewer heads
            if (missing := no_intervals(t, "pruned - scratch", name)) is not None:
                return missing
            if len(t):
                tables[label] = t
    if not tables:
        raise FileNotFoundError(out / "pruning_encoder_scratch.csv")
    every = pd.concat(tables.values())
    ahead, behind = sides(every)
    verdict = HOLDS if ahead == len(every) else FAILS if ahead == 0 else PARTLY
    listed = "; ".join(f"{label} " + ", ".join(f"{d:+.2f} [{low:+.2f}, {high:+.2f}]" for d, low, high in
                                               zip(t["pruned - scratch"], t["pruned - scratch low"], t["pruned - scratch high"]))
                       for label, t in tables.items())
    return (f"pruned - scratch (95% interval): {listed} BLEU; pruned ahead at {ahead} of {len(every)}, "
            f"scratch ahead at {behind}"), verdict


def c8_pruning_order(out):
    from headlib.pruning.readout import encoder_first_cross_last, order_text, pruning_order
    order = pruning_order(read_table(out, "pruning_all_attention.csv"))
    return "half of the heads gone first in " + order_text(order), HOLDS if encoder_first_cross_last(order) else FAILS


def c9_specialized_survive(out):
    enrich = read_table(out, "pruning_enrichment.csv")
    surv = read_table(out, "pruning_survival.csv")
    rho = spearmanr(surv["survives_to_lambda"], surv["relevance"])
    sig_rel = int((enrich["Mann-Whitney p"] < 0.05).sum())
    sig_fun = int((enrich["Fisher p"] < 0.05).sum())
    value = (f"open heads more relevant (Mann-Whitney p < 0.05) in {sig_rel} of {len(enrich)} pruned models, "
             f"enriched in functions (Fisher p < 0.05) in {sig_fun}; survival vs relevance rho = {rho.statistic:.2f}")
    verdict = HOLDS if sig_rel == len(enrich) and sig_fun else PARTLY if sig_rel else FAILS
    return value, verdict


# the notebooks whose tables a claim reads
SEC4, SEC5 = ("04_important_heads",), ("05_head_functions",)
SEC62, SEC63 = ("06_pruning_encoder",), ("07_pruning_all_attention",)

CLAIMS: tuple[Claim, ...] = (
    Claim("C1", "4", "LRP relevance and confidence agree on which heads matter, but for the rare-word head",
          "qualitative (Figs. 1-2)",
          "mean within-layer Spearman rho > 0.3 with permutation p < 0.01 without the layer-1 rare-word head "
          "(partly: p < 0.05); that head's LRP rank above its confidence rank is reported",
          c1_lrp_vs_confidence, SEC4 + SEC5),
    Claim("C2", "4", "In each layer one or two heads are much more important than the rest", "Fig. 1",
          "top head's share of |relevance| >= 2x uniform in every layer (partly: in half)", c2_few_heads_per_layer,
          SEC4),
    Claim("C3", "5.1", "Positional heads attend to a neighbour and are confident",
          ">= 90% on offset -1 or +1, confidence > 0.8",
          "a head >= 90% on one offset other than 0 and above the best head at initialisation "
          "(holds with confidence > 0.8)", c3_positional, SEC5),
    Claim("C4", "5.2", "Syntactic heads beat the positional baseline", "Table 1: heads for all 4 relations",
          "a head >= 10 points over the baseline and above the best head at initialisation for half the "
          "relation-directions (partly: any)", c4_syntactic, SEC5),
    Claim("C5", "5.3", "A layer-1 head attends to the rarest token and is the layer's most important",
          "66% rarest, 83% top-2 (OpenSubtitles); top-2 > 50% (WMT)",
          f"a layer-1 head >= {RARE_MARGIN * 100:.0f} points above the median layer-1 head and above the best "
          f"layer-1 head at initialisation on the rarest token, with >= 50% and LRP rank 1 (partly: standing out "
          f"only)", c5_rare_word, SEC4 + SEC5),
    Claim("C6", "6.2", "Most encoder heads can be pruned at little cost", "10 of 48 heads within 0.15 BLEU (WMT)",
          f"<= 12 heads within {TOLERANCE} BLEU of the fine-tuned smallest-lambda point with 95% confidence (paired "
          f"bootstrap interval above -{TOLERANCE}; partly: the interval reaches above -{TOLERANCE})",
          c6_few_heads_suffice, SEC62),
    Claim("C7", "6.2-6.3", "Pruned models beat the same configuration trained from scratch",
          "+0.2 to +0.6 BLEU (Sec. 6.2, footnote 8); Table 2: +0.15 to +0.50 (WMT), +0.01 to +0.43 (OpenSubtitles)",
          "pruned ahead at every configuration, budgets matched in updates and tokens per update: the 95% "
          "paired bootstrap interval of pruned - scratch above 0 (partly: at some)",
          c7_pruned_beats_scratch, SEC62 + SEC63),
    Claim("C8", "6.3", "Encoder self-attention is pruned first, decoder-encoder attention last", "Fig. 9",
          "order of the lambda at which half of a kind's heads are closed", c8_pruning_order, SEC63),
    Claim("C9", "6.2", "Specialized (important) heads are the last to be pruned", "Fig. 8",
          "open heads more relevant in every pruned model and enriched in functions (partly: relevance only)",
          c9_specialized_survive, SEC62),
)


def scale_note(out: Path) -> str:
    """Two sentences on the scale of the model behind `out` (its training_results.json) against the
    paper's Transformer-base (`ModelConfig()`), and on how well it translates, for reading the verdicts."""
    import json

    from headlib.config import ModelConfig
    from headlib.data.corpora import load_split, main_test_set
    run = json.loads((Path(out) / "training_results.json").read_text())
    d_model, paper = run["config"]["model"]["d_model"], ModelConfig().d_model
    pair = run["pair"]
    test = main_test_set(pair)
    beam = run["test"][test]["beam"]
    here = (f"was imported from `{run['source']}`, not trained here" if run["stopped"] == "imported" else
            f"was trained for {run['steps']:,} updates ({run['train_minutes']:.0f} minutes) on "
            f"{len(load_split(pair, 'train')):,} sentence pairs")
    return (f"Scale matters when reading the verdicts: the paper's models are Transformer-base (d_model {paper}) "
            f"trained on millions of sentence pairs (WMT, OpenSubtitles); the {pair} model here has d_model "
            f"{d_model} and {here} (Sec. 3). It scores {beam['bleu']:.2f} BLEU on {test} (beam {beam['beam']}); "
            "the paper's en-ru models score "
            + " and ".join(f"{m['BLEU']:g} ({name})" for name, m in PAPER_ENRU_MODELS.items()) + ".")


CLAIMS_BY_KEY = {c.key: c for c in CLAIMS}
# What Sec. 4-5 measure on a trained model, without pruning (C6-C9 need the Sec. 6 sweeps).
ANALYSIS_CLAIMS = tuple(c for c in CLAIMS if c.key in ("C1", "C2", "C3", "C4", "C5"))
# A verdict said of one claim and of several ("C1 holds", "C3/C4 do not hold").
VERDICT_WORDS = {HOLDS: ("holds", "hold"), PARTLY: ("holds in part", "hold in part"),
                 FAILS: ("does not hold", "do not hold"), MISSING: ("is not measured", "are not measured"),
                 UNASSESSABLE: ("is not assessable", "are not assessable")}


def claims_table(out: Path, claims: tuple[Claim, ...] = CLAIMS, runs: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per claim for the results dir of one (profile, pair, seed). With `runs` (the trained
    run each executed page read, `headlib.book.keys.page_runs`), a column `model` names the run(s) behind
    each claim's tables."""
    rows = []
    for c in claims:
        try:
            ours, verdict = c.judge(Path(out))
        except FileNotFoundError as e:
            ours, verdict = f"({Path(getattr(e, 'path', None) or e.args[0]).name} not computed for this pair)", MISSING
        rows.append({"claim": c.key, "section": c.section, "the paper says": c.claim, "paper": c.paper,
                     "ours": ours, "criterion": c.criterion, "verdict": verdict})
        if runs is not None:
            rows[-1]["model"] = ", ".join(sorted({runs[p] for p in c.pages if p in runs})) or "-"
    return pd.DataFrame(rows)


def other_models_note(table: pd.DataFrame, run: str) -> str:
    """A sentence naming the claims whose tables come from another run than `run` (this page's
    model), e.g. pages not yet re-executed after the model changed; empty when there are none."""
    other = table[(table["model"] != "-") & (table["model"] != run)]
    if other.empty:
        return ""
    by_run = other.groupby("model", sort=False)["claim"].apply(list)
    listed = "; ".join(f"{'/'.join(claims)} from `{model}`" for model, claims in by_run.items())
    return (f"Not every claim comes from this page's model (`{run}`, Sec. 3): {listed}. Those values are the "
            "previous model's, read from section pages that have not been executed with the current one yet "
            "(`python -m headlib.book status` lists them).")


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

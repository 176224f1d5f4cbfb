"""The paper's two domains (WMT news vs. OpenSubtitles, Sec. 3-5) on the en-ru pool, and
head-restricted adaptation from one to the other (Chen et al. 2025, ALPS; `headlib.studies.adapt`).

Two models are trained with the cpu recipe on the pool's news part (`en-ru.news`) and on its
conversational Tatoeba part (`en-ru.tatoeba`) for the same number of updates
(`DomainConfig.updates`, the recipe's decay ending there), so that both domains get the same
training. On held-out English of each model's own domain we run Sec. 4-5 (confidence, LRP
relevance, positional, syntactic and rare-word heads), and set the two side by side as the paper
sets WMT beside OpenSubtitles. Heads of separately trained models have
no counterparts, so importance is compared on what does not depend on head order
(`headlib.studies.seeds.structure_agreement`).

Then the news model is adapted to Tatoeba with the same budget three ways (all parameters, the
ALPS heads, random heads) and scored on held-out Tatoeba (the target) and on newstest2019-2020
(what it forgets).

    python -m headlib.studies.domains --profile cpu     # train both if needed, analyse, adapt
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from headlib.analysis.heads import (NULL_TABLES, SPACY_MODEL, confidence, encoder_attention, function_tables,
                                    head_functions, importance_table, parse_spacy, positional_heads, relevance_by_rule,
                                    rare_word_rates, syntactic_accuracy, syntactic_heads)
from headlib.analysis.lrp import head_relevance
from headlib.claims import ANALYSIS_CLAIMS, CLAIMS, PAPER_ENRU_MODELS, VERDICT_WORDS, claims_table
from headlib.config import Config
from headlib.data.bpe import piece_frequencies
from headlib.data.corpora import analysis_sentences, load_split, main_test_set, mean_words
from headlib.files import file_digest, write_json, write_text
from headlib.nn.decode import evaluate_bleu
from headlib.profiles import DomainConfig, profile
from headlib.settings import results_dir
from headlib.studies import adapt
from headlib.studies.seeds import structure_agreement
from headlib.train import encode_corpus, initial_model, trained_model
from headlib.train.records import model_id

NEWS, TATOEBA = "en-ru.news", "en-ru.tatoeba"


ANALYSIS_FIELDS = ("updates", "test_limit", "n_functions", "n_lrp", "eos_mode", "margin")   # what `analyse` depends on
# The Sec. 4-5 result tables that `headlib.claims` reads, in the section pages' format (not their
# sentence counts: `n_functions` held-out sentences here, LRP on the first `n_lrp`).
TABLES = ("head_importance.csv", "positional_heads.csv", "syntactic_best.csv", "rare_word_rates.csv", *NULL_TABLES,
          "lrp_rules.csv", "null_head_importance.csv")


def domain_model(profile: str, pair: str, seed: int, cfg: DomainConfig):
    """The trained model of one domain (trained first if not cached), its BPE and results; the
    results are also written to the domain's results folder."""
    model, bpe, run = trained_model(profile, pair, seed, cfg.overrides())
    write_json(results_dir(profile, pair, seed) / "training_results.json", run)
    return model, bpe, run


def _as_json(obj):
    """`obj` as it reads back from JSON (tuples become lists), for comparing fingerprints."""
    return json.loads(json.dumps(obj))


def _cached(path: Path, fingerprint: dict):
    """The cached row at `path` if it was computed with `fingerprint`."""
    if path.is_file() and (row := json.loads(path.read_text())).get("fingerprint") == fingerprint:
        return row
    return None


def _digests(folder: Path) -> dict[str, str | None]:
    return {t: file_digest(folder / t) if (folder / t).is_file() else None for t in TABLES}


def analyse(profile: str, pair: str, seed: int, cfg: DomainConfig, nlp) -> dict:
    """Sec. 4-5 for one domain model; cached in the domain's results folder as `domain_heads.json`,
    with `TABLES` beside it (the JSON records their digests: a cache hit needs the very tables it wrote)."""
    model, bpe, run = domain_model(profile, pair, seed, cfg)
    folder = results_dir(profile, pair, seed)
    path = folder / "domain_heads.json"
    fingerprint = _as_json({"model": model.fingerprint(), **{k: getattr(cfg, k) for k in ANALYSIS_FIELDS}})
    if (row := _cached(path, fingerprint)) and row.get("tables") == _digests(folder) and "trained" in row:
        return row
    sentences = analysis_sentences(pair, cfg.n_functions)
    maps = encoder_attention(model, bpe, sentences)
    relevance, steps = head_relevance(model, bpe, sentences[:cfg.n_lrp])
    importance = importance_table(relevance, confidence(maps, cfg.eos_mode))
    positional = positional_heads(maps, eos_mode=cfg.eos_mode)
    parsed = parse_spacy(sentences, nlp)
    syntactic, baseline = syntactic_accuracy(maps, parsed, bpe)
    best = syntactic_heads(syntactic, baseline, cfg.margin)
    freq = piece_frequencies(bpe, load_split(pair, "train").src)
    rates = rare_word_rates(maps, bpe.encode_batch(sentences), freq)
    rare = rates[rates["layer"] == 1].merge(importance[["layer", "head", "rank_in_layer"]], on=["layer", "head"])
    untrained = initial_model(Config.from_dict(run["config"]), bpe.vocab_size, keep_rng=True).eval()
    nulls = function_tables(untrained, bpe, sentences, parsed, freq, cfg.eos_mode, cfg.margin)   # C3-C5's null
    rules = relevance_by_rule(model, bpe, sentences[:cfg.n_lrp])                                 # C1-C2 by rule
    null_relevance = relevance_by_rule(untrained, bpe, sentences[:cfg.n_lrp], translator=model)  # C2's null
    for name, table in zip(TABLES, (importance, positional, best, rates, *nulls, rules, null_relevance)):
        write_text(folder / name, table.to_csv(index=False))
    row = {"fingerprint": fingerprint, "tables": _digests(folder), "pair": pair, "n_sentences": len(sentences),
           "lrp_steps": steps, "bleu": {name: t["beam"]["bleu"] for name, t in run["test"].items()},
           "updates": run["steps"], "trained": model_id(run),
           "importance": importance.to_dict("records"),
           "positional": positional[positional["positional"]].to_dict("records"),
           "syntactic": best.to_dict("records"),
           "rare": rare.loc[[rare["rarest"].idxmax()]].to_dict("records")[0],
           "functions": head_functions(positional, syntactic, baseline, rates, cfg.margin).to_dict("records")}
    write_json(path, row)
    return row


def shared_sources(pair: str, split: str) -> float:
    """Share of the English sentences of `split` that also occur, with some translation, in the
    pair's train (Tatoeba repeats sentences: its held-out pairs are unique pairs, not unique sources)."""
    train = set(load_split(pair, "train").src)
    held = load_split(pair, split).src
    return sum(s in train for s in held) / len(held)


def training_size(pair: str) -> tuple[int, float]:
    """(training pairs, mean English words per training sentence: `stats.mean_words`) of a pair."""
    train = load_split(pair, "train")
    return len(train), mean_words(train.src)


class FunctionCounts(NamedTuple):
    positional: int       # positional heads
    syntactic: int        # (relation, direction) pairs whose best head beats the positional baseline by the margin
    relations: int        # (relation, direction) pairs measured
    rare: dict            # the layer-1 rare-word head's row: layer, head, rarest, top2, rank_in_layer, ...


def function_counts(d: dict) -> FunctionCounts:
    """The Sec. 5 head functions found in one domain model (an `analyse` row), counted."""
    syn = pd.DataFrame(d["syntactic"])
    return FunctionCounts(len(d["positional"]), int(syn["syntactic"].sum()), len(syn), d["rare"])


def paper_models() -> str:
    """The paper's two en-ru models (`claims.PAPER_ENRU_MODELS`) in words: their BLEU by domain,
    then their training pairs ("<BLEU> WMT, <BLEU> OpenSubtitles, with <n>M and <n>M pairs")."""
    bleu = ", ".join(f"{m['BLEU']:g} {name}" for name, m in PAPER_ENRU_MODELS.items())
    pairs = " and ".join(f"{m['pairs'] / 1e6:g}M" for m in PAPER_ENRU_MODELS.values())
    return f"{bleu}, with {pairs} pairs"


def comparison(news: dict, tatoeba: dict) -> pd.DataFrame:
    """The two domains side by side, one row per measure."""
    def summary(d):
        imp, syn = pd.DataFrame(d["importance"]), pd.DataFrame(d["syntactic"])
        pos = sorted(f"{int(r['layer'])}.{int(r['head'])} ({int(r['offset']):+d})" for r in d["positional"])
        return {"training pairs": len(load_split(d["pair"], "train")),
                "test BLEU, own domain (beam)": d["bleu"][main_test_set(d["pair"])],
                "positional heads (offset)": ", ".join(pos) or "none",
                "syntactic relations and directions (>= margin over baseline)": f"{int(syn['syntactic'].sum())} of {len(syn)}",
                "rare-word head (layer 1): rarest / one of two rarest": (
                    f"{int(d['rare']['layer'])}.{int(d['rare']['head'])}: {d['rare']['rarest']:.2f} / {d['rare']['top2']:.2f}"),
                "its LRP rank in layer 1": int(d["rare"]["rank_in_layer"]),
                "top-head share of |relevance|, mean over layers": float(top_shares(imp).mean()),
                "mean confidence": float(imp["confidence"].mean())}
    return pd.DataFrame({"news": summary(news), "Tatoeba": summary(tatoeba)}).rename_axis("measure").reset_index()


def syntax_side_by_side(news: dict, tatoeba: dict) -> pd.DataFrame:
    """Table 1 for both domains: best head's accuracy / positional baseline per relation and direction."""
    def cols(d, name):
        t = pd.DataFrame(d["syntactic"])
        return t.assign(**{name: t["accuracy"].map("{:.2f}".format) + " / " + t["accuracy_baseline"].map("{:.2f}".format)}
                        )[["relation", "direction", name]]
    return cols(news, "news: head / baseline").merge(cols(tatoeba, "Tatoeba: head / baseline"), on=["relation", "direction"])


def top_shares(table: pd.DataFrame) -> pd.Series:
    """Per layer, the share of the layer's |relevance| taken by its top head (defined also for a
    layer whose heads all have negative relevance)."""
    magnitude = table["relevance"].abs().groupby(table["layer"])
    return magnitude.max() / magnitude.sum()


def importance_agreement(news: dict, tatoeba: dict) -> pd.DataFrame:
    """Spearman rho between the domains on order-free importance structure: the sorted layer
    profiles of relevance and confidence, and the top-head share of |relevance| per layer."""
    return structure_agreement({"news": pd.DataFrame(news["importance"]), "Tatoeba": pd.DataFrame(tatoeba["importance"])},
                               top_share=top_shares)


def claims_side_by_side(profile: str, seed: int) -> pd.DataFrame:
    """The paper's Sec. 4-5 claims (`claims.ANALYSIS_CLAIMS`) on both domain models: our value and
    verdict for each (the criteria are those of the Claims page)."""
    tables = {name: claims_table(results_dir(profile, pair, seed), ANALYSIS_CLAIMS)
              for name, pair in (("news", NEWS), ("Tatoeba", TATOEBA))}
    both = next(iter(tables.values()))[["claim", "the paper says", "paper"]]
    for name, t in tables.items():
        both = both.assign(**{f"{name}: ours": t["ours"], f"{name}: verdict": t["verdict"]})
    return both


def claims_summary(claims: pd.DataFrame) -> str:
    """`claims_side_by_side` in one line: "news model: C2 holds in part, C1/C3 do not hold; Tatoeba
    model: ..." (verdicts in the order of `claims.VERDICT_WORDS`)."""
    def part(name):
        verdicts = claims[f"{name}: verdict"]
        groups = [(v, list(claims.loc[verdicts == v, "claim"])) for v in VERDICT_WORDS if (verdicts == v).any()]
        return f"{name} model: " + ", ".join(f"{'/'.join(keys)} {VERDICT_WORDS[v][len(keys) > 1]}" for v, keys in groups)
    return "; ".join(part(name) for name in ("news", "Tatoeba"))


def claims_note(pairs: list[str]) -> str:
    """What the Claims page says of the domain models among `pairs` (empty if none)."""
    found = [p for p in pairs if p in (NEWS, TATOEBA)]
    if not found:
        return ""
    analysed = {c.key for c in ANALYSIS_CLAIMS}
    rest = ", ".join(c.key for c in CLAIMS if c.key not in analysed)
    which = " and ".join(f"`{p}`" for p in found)
    return (f"{which} {'are the en-ru models' if len(found) > 1 else 'is an en-ru model'} of the Domains and "
            "adaptation page (one per domain of the en-ru pool), analysed there on their own held-out sentences "
            f"and not pruned, so {rest} are not measured for {'them' if len(found) > 1 else 'it'}.")


def _scores(model, bpe, alpha: float, beam: int, cfg: DomainConfig) -> dict:
    tatoeba = load_split(TATOEBA, "tatoeba-heldout").head(cfg.n_target)
    news = load_split(NEWS, "newstest2019-2020").head(cfg.n_forgetting)
    return {"tatoeba": evaluate_bleu(model, bpe, tatoeba, beam, alpha)["bleu"],
            "news": evaluate_bleu(model, bpe, news, beam, alpha)["bleu"]}


def adaptation(profile: str, seed: int, cfg: DomainConfig, progress: bool = False) -> pd.DataFrame:
    """The news model adapted to Tatoeba three ways with one budget; each way cached as JSON in
    the news results folder, `adaptation/<way>.json`; the table is `adaptation.csv` there."""
    base, bpe, run = domain_model(profile, NEWS, seed, cfg)
    train_cfg = run["config"]
    out = results_dir(profile, NEWS, seed) / "adaptation"
    fingerprint = _as_json({"model": base.fingerprint(), "adapt": asdict(cfg.adapt), "n_target": cfg.n_target,
                            "n_forgetting": cfg.n_forgetting})
    train = encode_corpus(bpe, load_split(TATOEBA, "train"), train_cfg["data"]["max_len"])
    beam, alpha = train_cfg["train"]["beam"], run["len_alpha"]
    total = sum(p.numel() for p in base.parameters())

    def cached(name: str, compute) -> dict:
        if row := _cached(out / f"{name}.json", fingerprint):
            return row
        row = {"fingerprint": fingerprint, "way": name, **compute()}
        write_json(out / f"{name}.json", row)
        return row

    def tuned(heads: list | None) -> dict:
        """Fine-tune (all parameters if `heads` is None) and score; the `all` run keeps the shifts."""
        model, info = adapt.finetune(base, train, cfg.adapt, None if heads is None else adapt.head_masks(base, heads),
                                     progress)
        row = {"heads": heads, **info, **_scores(model, bpe, alpha, beam, cfg)}
        if heads is None:
            row["shift"] = [[*h, s] for h, s in adapt.weight_shift(base, model).items()]
        return row

    k = cfg.adapt.k
    ways = [cached("none", lambda: {"heads": [], "updated": 0, "minutes": 0.0, **_scores(base, bpe, alpha, beam, cfg)}),
            full := cached("all", lambda: tuned(None))]
    shift = {(kind, int(l), int(h)): value for kind, l, h, value in full["shift"]}
    ways.append(cached(f"alps-k{k}", lambda: tuned(adapt.top_heads(shift, k))))
    ways += [cached(f"random-k{k}-s{s}", lambda s=s: tuned(adapt.random_heads(base, k, s))) for s in cfg.random_seeds]
    table = pd.DataFrame([{"way": r["way"], "heads": "all" if r["heads"] is None else len(r["heads"]),
                           "updated": r["updated"], "minutes": r["minutes"], "tatoeba": r["tatoeba"],
                           "news": r["news"]} for r in ways])
    table["updated share"] = table["updated"] / total
    write_text(results_dir(profile, NEWS, seed) / "adaptation.csv", table.to_csv(index=False))
    return table


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-adaptation", action="store_true")
    args = ap.parse_args(argv)
    import spacy
    cfg, nlp = profile(args.profile).domains, spacy.load(SPACY_MODEL)
    news, tatoeba = (analyse(args.profile, p, args.seed, cfg, nlp) for p in (NEWS, TATOEBA))
    print(comparison(news, tatoeba).to_string(index=False))
    print(syntax_side_by_side(news, tatoeba).to_string(index=False))
    print(importance_agreement(news, tatoeba).to_string(index=False))
    print(claims_summary(claims_side_by_side(args.profile, args.seed)))
    if not args.skip_adaptation:
        print(adaptation(args.profile, args.seed, cfg, progress=True).to_string(index=False))


if __name__ == "__main__":
    main()

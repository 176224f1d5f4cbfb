"""Corpus statistics and training summaries for the book (Sec. 3), as tidy DataFrames.

    split_sizes()              sentence pairs of every split of every pair (line counts only)
    corpus_stats(pair, bpe)    per split: pairs, mean sentence length in words and BPE pieces
    origin_table(pair)         the en-ru pool by source set and domain (news / conversational)
    results_table(results)     test BLEU (greedy, beam) and chrF of one trained run
    training_table(results)    minutes, steps, tokens/s, parameters of one trained run
    dev_curve(results)         dev BLEU against training minutes, one row per evaluation
    recipe_table(records)      the training recipes tried for the cpu profile, one row per run
                               (`recipe_records()`: the runs that chose it)
    norm_trial(records)        pre-LN against post-LN at equal updates: dev BLEU and the encoder
                               heads' statistics at each evaluation (`NORM_RUNS`); `norm_choice`
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from headlib.analysis.heads import emergence_summary, heads_over_training
from headlib.data.corpora import PAIRS, load_split, main_test_set, mean_words, test_sets
from headlib.settings import settings

# Quoted from the pre-project measurement note (../shared/reference/cpu-notes.md, "Quality per
# minute"): Multi30k en-de, d_model 256, 6+6 layers, ~4k-token batches, bf16, 2 cores, warmup 400,
# peak lr 1e-3. Dev BLEU after 15 minutes of training. A single throwaway measurement made before
# the project, not a result of this study: the book quotes it as such.
NORM_MEASUREMENT = {"source": "shared/reference/cpu-notes.md", "minutes": 15,
                    "post": 7.7, "pre": 26.4}


def splits(pair: str) -> tuple[str, ...]:
    return ("train", "dev") + test_sets(pair)


def origin_domain(origin: str) -> str:
    """The en-ru pool's domain of a source set: news (WMT), conversational (Tatoeba) or other."""
    if origin.startswith("tatoeba"):
        return "conversational"
    if origin.startswith(("newstest", "generaltest")):
        return "news"
    return "other"


def split_sizes(pairs=PAIRS) -> pd.DataFrame:
    """Sentence pairs per split: one row per pair, one column per split role (train, dev, tests)."""
    rows = []
    for pair in pairs:
        tests = {name: len(load_split(pair, name)) for name in test_sets(pair)}
        rows.append({"pair": pair, "train": len(load_split(pair, "train")), "dev": len(load_split(pair, "dev")),
                     "test sets": len(tests), "test pairs": sum(tests.values())})
    return pd.DataFrame(rows).set_index("pair")


def _mean(xs) -> float:
    return float(sum(xs) / len(xs)) if len(xs) else 0.0


def corpus_stats(pair: str, bpe) -> pd.DataFrame:
    """One row per split of `pair`: sentence pairs, mean words (whitespace tokens) and mean subword
    pieces per sentence on each side (of `bpe`: a trained run's BPE, or an imported model's
    SentencePiece tokenizer)."""
    rows = []
    for split in splits(pair):
        c = load_split(pair, split)
        rows.append({
            "pair": pair, "split": split, "pairs": len(c),
            "words (src)": mean_words(c.src),
            "words (tgt)": mean_words(c.tgt),
            "pieces (src)": _mean([len(ids) for ids in bpe.encode_batch(c.src)]),
            "pieces (tgt)": _mean([len(ids) for ids in bpe.encode_targets(c.tgt)]),
        })
    return pd.DataFrame(rows)


def origin_table(pair: str = "en-ru", split: str = "train") -> pd.DataFrame:
    """Pairs per source set (`origin`) and its domain, for a corpus that keeps origins."""
    c = load_split(pair, split)
    if not c.origin:
        raise ValueError(f"{pair} {split} has no origin column")
    df = pd.DataFrame({"origin": c.origin})
    df["domain"] = df["origin"].map(origin_domain)
    out = df.groupby(["domain", "origin"]).size().rename("pairs").reset_index()
    return out.sort_values(["domain", "pairs"], ascending=[True, False], ignore_index=True)


def results_table(results: dict) -> pd.DataFrame:
    """One row per test set: BLEU greedy, BLEU beam, chrF (beam), sentences."""
    rows = []
    for name, r in results["test"].items():
        rows.append({"pair": results["pair"], "test set": name, "sentences": r["beam"]["n"],
                     "BLEU greedy": float(r["greedy"]["bleu"]), "BLEU beam": float(r["beam"]["bleu"]),
                     "chrF beam": float(r["beam"]["chrf"]), "beam": int(r["beam"]["beam"]),
                     "length alpha": float(r["beam"]["len_alpha"])})
    return pd.DataFrame(rows)


def training_table(results: dict) -> pd.DataFrame:
    """One row: what training cost and what it stopped on."""
    return pd.DataFrame([{
        "pair": results["pair"], "seed": results["config"]["train"]["seed"],
        "parameters": int(results["parameters"]), "steps": int(results["steps"]),
        "epochs": int(results["epochs"]), "training minutes": float(results["train_minutes"]),
        "tokens/s": float(results["tokens_per_second"]), "stopped by": results["stopped"],
        "weights": results["chosen_weights"],
    }])


def dev_curve(results: dict) -> pd.DataFrame:
    """Dev BLEU (greedy) at each evaluation, against training minutes and updates (no rows for an
    imported model, which was not trained here)."""
    df = pd.DataFrame(results["history"], columns=None if results["history"] else ["step", "dev_bleu", "minutes"])
    df.insert(0, "pair", results["pair"])
    return df


# The 45-minute en-de runs that chose the cpu profile's recipe (README, "The cpu profile's recipe"),
# under results/cpu/: the previous profile's committed run, the runs on a 2-core AVX512-BF16 CPU
# without AMX (benchmarks/; the fixed linear decay of 12-01 and, retrained for the book on 12-02, seeds
# 1 and 3), then the clock-aimed decay on a 2-core CPU with AMX; each with the CPU to itself.
RECIPE_RUNS = ("en-de/seed1/training_results.inverse-sqrt-bf16.json",
               "benchmarks/en-de_45min_no_amx_fp32.json",
               "benchmarks/en-de_45min_no_amx_fp32_lr2e-3.json",
               "benchmarks/en-de_45min_no_amx_fp32_lr2e-3_seed2.json",
               "benchmarks/en-de_45min_no_amx_fp32_lr2e-3_linear.json",
               "benchmarks/en-de_45min_no_amx_fp32_lr2e-3_linear_tok2048.json",
               "benchmarks/en-de_45min_no_amx_fp32_lr2e-3_linear_tok2048_seed2.json",
               "benchmarks/en-de_45min_no_amx_fp32_lr2e-3_linear_tok2048_retrained.json",
               "benchmarks/en-de_45min_no_amx_fp32_lr2e-3_linear_tok2048_seed3.json",
               "benchmarks/en-de_45min_amx_bf16_lr2e-3_clock_tok2048.json",
               "benchmarks/en-de_45min_amx_bf16_lr2e-3_clock_tok2048_seed2.json")


# The first clock-aimed run, finalized with the length normalisation tuned on dev over 0.6-2.2
# instead of the profile's 0.6-1.4 (the same training; Sec. 3 says what each grid chose).
WIDE_ALPHA_RUN = "benchmarks/en-de_45min_amx_bf16_lr2e-3_clock_tok2048_alpha-to-2.2.json"


# benchmarks/train_throughput.py on the cpu profile's batch (2,048 tokens), 2 cores, one record per
# kind of CPU: what decided that the CPU profiles train in fp32 on every machine.
PRECISION_RUNS = ("benchmarks/train_throughput_amx_tok2048.json",
                  "benchmarks/train_throughput_no_amx_epyc_tok2048.json",
                  "benchmarks/train_throughput_avx2_tok2048.json")


def precision_table(records: list[dict], system: str = "headlib fast (pre-LN)") -> pd.DataFrame:
    """Training throughput of `system` in fp32 and under bf16 autocast, one row per benchmark
    record (one kind of CPU): its bf16 instructions, tokens/s of each precision and their ratio."""
    rows = []
    for r in records:
        speed = {dtype: r["results"][dtype]["systems"][system]["tok_per_s_median"] for dtype in ("fp32", "bf16")}
        rows.append({"CPU's bf16 instructions": r["kernels"]["bf16"], "tokens per batch": r["max_tokens"],
                     "fp32 tokens/s": speed["fp32"], "bf16 autocast tokens/s": speed["bf16"],
                     "bf16 / fp32": speed["bf16"] / speed["fp32"]})
    return pd.DataFrame(rows)


def recipe_records(root: Path | None = None, names: tuple[str, ...] = RECIPE_RUNS) -> list[dict]:
    """The run records `names` (by default `RECIPE_RUNS`) under `root` (the cpu profile's results),
    in that order."""
    root = root or settings().results / "cpu"
    return [json.loads((root / name).read_text()) for name in names]


def wide_alpha_choice(record: dict, grid: tuple[float, ...]) -> dict:
    """What a finalization over a wider length-normalization grid (`record`) chose on dev against
    the best alpha of `grid`: both alphas, the dev margin (beam BLEU) and the test BLEU it got."""
    by_alpha = {float(a): b for a, b in record["dev_beam_by_alpha"].items()}
    narrow = max((a for a in by_alpha if a <= max(grid)), key=by_alpha.get)
    test = main_test_set(record["pair"])
    return {"low": min(by_alpha), "high": max(by_alpha), "chosen": record["len_alpha"], "grid_best": narrow,
            "dev_margin": by_alpha[record["len_alpha"]] - by_alpha[narrow], "test_set": test,
            "test_bleu": record["test"][test]["beam"]["bleu"]}


def recipe_table(records: list[dict]) -> pd.DataFrame:
    """One row per run record (`training_results.json` of one run), in the order given: the recipe
    (schedule, peak learning rate, tokens per batch, precision), the machine's bf16 instructions,
    and what the run made of its budget: updates, target tokens, tokens/s, main-test BLEU (beam)."""
    rows = []
    for r in records:
        t, machine = r["config"]["train"], r.get("machine", {})
        test = main_test_set(r["pair"])
        name = t.get("schedule", "inverse_sqrt")
        schedule = {"linear": f"linear to 0 at {t['max_steps']:,}", "inverse_sqrt": "inverse square root"
                    }.get(name, f"{name} (a v1 wall-clock recipe)")
        rows.append({"pair": r["pair"], "schedule": schedule,
                     "peak lr": f"{t['lr']:g}", "tokens per batch": t["max_tokens"] * t["accum"],
                     "precision": "bf16 autocast" if r.get("bf16_autocast", t["bf16"]) else "fp32", "seed": t["seed"],
                     "machine": machine.get("bf16", "not recorded"), "updates": int(r["steps"]),
                     "target tokens (M)": r["train_tokens"] / 1e6, "tokens/s": float(r["tokens_per_second"]),
                     "minutes": float(r["train_minutes"]), "length alpha": float(r["len_alpha"]),
                     "dev BLEU beam": float(r.get("dev_beam_by_alpha", {}).get(f"{r['len_alpha']:g}", "nan")),
                     f"BLEU beam ({test})": float(r["test"][test]["beam"]["bleu"])})
    return pd.DataFrame(rows)


def recipe_choice(table: pd.DataFrame) -> dict:
    """Which run of a `recipe_table` dev chooses (highest dev BLEU, beam) and which test would
    have: their row numbers (0-based) and scores. Rows without a dev score are not candidates."""
    test_column = next(c for c in table.columns if c.startswith("BLEU beam ("))
    scored = table.dropna(subset=["dev BLEU beam"])
    by_dev, by_test = int(scored["dev BLEU beam"].idxmax()), int(scored[test_column].idxmax())
    return {"dev_row": by_dev, "test_row": by_test, "dev_bleu": float(table.loc[by_dev, "dev BLEU beam"]),
            "dev_choice_test_bleu": float(table.loc[by_dev, test_column]),
            "test_choice_test_bleu": float(table.loc[by_test, test_column]), "candidates": len(scored)}


# The layer-normalization trial of protocol v2 (Sec. 3), under results/cpu/: the cpu profile's
# pre-LN en-de seed 1 (peak lr 2e-3, warmup 800) and post-LN, the paper's placement, with a recipe of
# its own (peak lr 1e-3, warmup 1,400: post-LN needs a longer warmup and a lower rate, Xiong et al.
# 2020), both 2,800 updates of 2,048 tokens, fp32, seed 1.
NORM_RUNS = ("en-de/seed1/training_results.json",
             "benchmarks/en-de_2800_post-ln_lr1e-3_warmup1400.json")


def norm_trial(records: list[dict]) -> pd.DataFrame:
    """One row per (run, dev evaluation): the layer-norm placement and its recipe, the update, dev
    BLEU (greedy) and the encoder heads' statistics there (`emergence_summary`: the most positional
    head's share at one offset, the largest confidence, the largest layer-1 rare-token rate)."""
    frames = []
    for r in records:
        m, t = r["config"]["model"], r["config"]["train"]
        dev = pd.DataFrame(r["history"])[["step", "dev_bleu"]]
        heads = emergence_summary(heads_over_training(r["history"]))
        df = dev.merge(heads, on="step", how="left")
        df.insert(0, "layer norm", f"{m['norm']}-LN")
        df.insert(1, "peak lr", f"{t['lr']:g}")
        df.insert(2, "warmup", int(t["warmup"]))
        frames.append(df.rename(columns={"step": "update", "dev_bleu": "dev BLEU greedy"}))
    return pd.concat(frames, ignore_index=True)


def norm_choice(trial: pd.DataFrame) -> dict:
    """The placement dev chooses from a `norm_trial`: the higher dev BLEU (greedy) at the last
    update that every run reached (equal updates), its margin, and that update."""
    common = trial.groupby("layer norm")["update"].max().min()
    at = trial[trial["update"] == common].set_index("layer norm")["dev BLEU greedy"]
    chosen = str(at.idxmax())
    return {"chosen": chosen, "update": int(common), "dev": at.to_dict(),
            "margin": float(at[chosen] - at.drop(chosen).max()) if len(at) > 1 else float("nan")}


# The page's own tables, values and figures: each a pure function of configs and records, so the
# notebook only calls, styles and glues.

def schedule_text(train: dict | object) -> str:
    """A training config's learning-rate schedule in words."""
    t = train if isinstance(train, dict) else vars(train)
    return f"linear decay to 0 at update {t['max_steps']:,}" if t["schedule"] == "linear" else "inverse square root"


MODEL_ROWS = ("layers (encoder + decoder)", "heads per layer", "d_model / d_ff", "layer normalization", "dropout",
              "joint vocabulary (subword pieces)", "beam size")   # the rest of `config_table` is the recipe


def config_table(cfg, paper, profile: str, trained_here: bool = True) -> pd.DataFrame:
    """The page's model and recipe (`cfg`, a Config) beside the paper's Transformer-base (`paper`),
    one row per setting, as text; an imported model's recipe rows say it was not trained here."""
    def row(setting, get):
        recipe = setting not in MODEL_ROWS and not trained_here
        return setting, "not trained here" if recipe else get(cfg), get(paper)
    rows = [row("layers (encoder + decoder)", lambda c: f"{c.model.enc_layers} + {c.model.dec_layers}"),
            row("heads per layer", lambda c: c.model.n_heads),
            row("d_model / d_ff", lambda c: f"{c.model.d_model} / {c.model.d_ff}"),
            row("layer normalization", lambda c: f"{c.model.norm}-LN"),
            row("dropout", lambda c: c.model.dropout),
            row("joint vocabulary (subword pieces)", lambda c: c.data.bpe_vocab),
            row("target tokens per update", lambda c: c.train.max_tokens * c.train.accum),
            row("peak learning rate / warmup", lambda c: f"{c.train.lr:g} / {c.train.warmup}"),
            row("learning-rate schedule", lambda c: schedule_text(c.train)),
            row("label smoothing", lambda c: c.train.label_smoothing),
            row("updates (the schedule's end)", lambda c: f"{c.train.max_steps:,}"),
            row("precision", lambda c: "bf16 autocast" if c.train.bf16 else "fp32"),
            row("beam size", lambda c: c.train.beam)]
    return pd.DataFrame(rows, columns=["setting", f"this page ({profile})", "paper (base)"]).astype(str)


def config_values(cfg, paper) -> dict:
    """The glue keys of the page's model facts (`sec3-enc-layers`, ...; Markdown where marked up)."""
    from IPython.display import Markdown
    m = cfg.model
    return {"sec3-enc-layers": m.enc_layers, "sec3-dec-layers": m.dec_layers, "sec3-heads": m.n_heads,
            "sec3-enc-heads": m.enc_layers * m.n_heads,
            "sec3-paper-enc-heads": paper.model.enc_layers * paper.model.n_heads,
            "sec3-d-model": m.d_model, "sec3-d-ff": m.d_ff,
            "sec3-bpe-vocab": cfg.data.bpe_vocab, "sec3-norm-name": f"{m.norm}-LN",
            "sec3-norm": Markdown(f"**{m.norm}-LN**" + (" as the paper does" if m.norm == paper.model.norm else "")),
            "sec3-quoted-minutes": NORM_MEASUREMENT["minutes"], "sec3-quoted-post-bleu": NORM_MEASUREMENT["post"],
            "sec3-quoted-pre-bleu": NORM_MEASUREMENT["pre"]}


def recipe_row_text(recipes: pd.DataFrame, row: int) -> str:
    """One row of a `recipe_table` in words (Markdown), numbered from 1 as the page shows it."""
    r = recipes.loc[row]
    test = next(c for c in recipes.columns if c.startswith("BLEU beam ("))
    return (f"row {row + 1} of the table ({r['schedule']}, peak lr {r['peak lr']}, {r['tokens per batch']:,} tokens "
            f"per batch, seed {r['seed']}): dev {r['dev BLEU beam']:.2f}, test {r[test]:.2f}")


def recipe_values(recipes: pd.DataFrame, cpu_train, wide: dict) -> dict:
    """The glue keys of the recipe section: the frozen recipe's updates and batch, the runs that dev
    and test would choose (`recipe_choice`), the fixed-linear runs' BLEU, and the wide alpha grid's
    choice (`wide_alpha_choice`)."""
    from IPython.display import Markdown
    choice = recipe_choice(recipes)
    test = next(c for c in recipes.columns if c.startswith("BLEU beam ("))
    fixed = recipes[recipes["schedule"].str.startswith("linear to 0 at")
                    & (recipes["tokens per batch"] == cpu_train.max_tokens)]
    return {"sec3-cpu-updates": cpu_train.max_steps, "sec3-cpu-tokens": cpu_train.max_tokens * cpu_train.accum,
            "sec3-recipe-dev-choice": Markdown(recipe_row_text(recipes, choice["dev_row"])),
            "sec3-recipe-test-choice": Markdown("the same run" if choice["test_row"] == choice["dev_row"]
                                                else recipe_row_text(recipes, choice["test_row"])),
            "sec3-recipe-fixed": ", ".join(f"{b:.2f}" for b in fixed[test]),
            "sec3-recipe-wide-alpha": f"over {wide['low']:g} to {wide['high']:g}, dev chose alpha {wide['chosen']:g} "
                                      f"over {wide['grid_best']:g}, and {wide['test_set']} then scored "
                                      f"{wide['test_bleu']:.2f}",
            "sec3-recipe-wide-alpha-margin": wide["dev_margin"]}


def split_values(sizes: pd.DataFrame) -> dict:
    """`sec3-train-pairs-<pair>`: the training pairs of each pair of a `split_sizes` table."""
    return {f"sec3-train-pairs-{pair}": int(n) for pair, n in sizes["train"].items()}


def norm_values(trial: pd.DataFrame, norm: str, trained_here: bool = True) -> dict:
    """The glue keys of the layer-norm trial: what dev chose (`norm_choice`) and whether the profile's
    placement `norm` ("pre" or "post") is that choice; an imported model's (not `trained_here`)
    placement is its own, chosen by no trial here."""
    from IPython.display import Markdown
    chosen = norm_choice(trial)
    ranked = sorted(chosen["dev"].items(), key=lambda kv: -kv[1])
    scores = " against ".join(f"{bleu:.2f} ({name})" for name, bleu in ranked)
    if not trained_here:
        verdict = (f"The trial chose the cpu profile's recipe; this page's model was imported with its own "
                   f"placement, {norm}-LN.")
    elif chosen["chosen"] == f"{norm}-LN":
        verdict = "The profile's placement is the one dev chooses, and the recipe is frozen with it."
    else:
        verdict = f"The profile's {norm}-LN is not the placement dev chooses."
    return {"sec3-norm-choice": Markdown(f"**{chosen['chosen']}**: {scores} dev BLEU (greedy) at update "
                                         f"{chosen['update']:,}"),
            "sec3-norm-verdict": Markdown(verdict)}


def test_values(results: dict[str, dict]) -> dict:
    """Per pair and test set, BLEU and chrF of greedy and beam search (`sec3-<pair>-bleu-beam-<test>`,
    ...), and per pair its main test set, that set's beam BLEU and its sacreBLEU signature."""
    values = {}
    for pair, r in results.items():
        for name, t in r["test"].items():
            for kind in ("greedy", "beam"):
                values[f"sec3-{pair}-bleu-{kind}-{name}"] = float(t[kind]["bleu"])
                values[f"sec3-{pair}-chrf-{kind}-{name}"] = float(t[kind]["chrf"])
        main = main_test_set(pair)
        beam = r["test"][main]["beam"]
        values |= {f"sec3-{pair}-main-test-set": main, f"sec3-{pair}-bleu-beam-main": float(beam["bleu"]),
                   f"sec3-{pair}-signature": beam["bleu_signature"]}
    return values


def signatures(results: dict[str, dict]) -> str:
    """The distinct sacreBLEU signatures of every beam score of the runs, sorted, as Markdown code."""
    return " / ".join(f"`{s}`" for s in sorted({t["beam"]["bleu_signature"] for r in results.values()
                                                  for t in r["test"].values()}))


def imported(record: dict) -> bool:
    """Whether a run record is of an imported model (the pretrained profile), not trained here."""
    return record["stopped"] == "imported"


def model_config(results: dict[str, dict]):
    """The Config of the page's model (its first pair's record): the profile's for a model trained here,
    the import's architecture and vocabulary for an imported one."""
    from headlib.config import Config
    return Config.from_dict(next(iter(results.values()))["config"])


# The page's prose where a model trained here and an imported one differ (`origin_values`).
ORIGIN_TEXT = {
    "trained": {
        "sec3-origin": "Each model of this page was trained here, from scratch, with the profile's recipe.",
        "sec3-cost-intro": "What training took on the machine that trained it (minutes and tokens/s differ from "
                           "machine to machine; the updates do not), and what it stopped on (the profile's number "
                           "of updates, early stopping on dev BLEU, or a user's wall-clock cap). The weights used "
                           "downstream are the best dev checkpoint or the average of the last ones, whichever "
                           "scores higher on dev.",
    },
    "imported": {
        "sec3-origin": "The model of this page was **not trained here**: it is {sources}, imported with its own "
                       "tokenizer (the profile's default, `Helsinki-NLP/opus-mt-en-<tgt>`, is Marian's "
                       "Transformer-base trained on millions of OPUS pairs, OpenSubtitles among them; Tiedemann "
                       "and Thottingal 2020). This page gives its facts and its BLEU on this study's test sets; "
                       "what it says of training recipes is about the cpu profile's models, not this one.",
        "sec3-cost-intro": "The model was imported, so nothing was trained here: the table shows 0 updates and "
                           "there is no dev curve. Only beam search's length normalization was chosen here, on dev.",
    },
}


def scale_text(model, paper, trained_here: bool) -> str:
    """What the page's model (`model`, a Config) scales down from the paper's (`paper`): its depth, heads,
    width and vocabulary where smaller, and its data when it was trained here on this study's corpora."""
    m, p = model.model, paper.model
    smaller = [name for name, ours, theirs in (("depth", m.enc_layers + m.dec_layers, p.enc_layers + p.dec_layers),
                                               ("heads per layer", m.n_heads, p.n_heads),
                                               ("width", m.d_model, p.d_model),
                                               ("vocabulary", model.data.bpe_vocab, paper.data.bpe_vocab))
               if ours < theirs] + (["data"] if trained_here else [])
    if not smaller:
        return "nothing is scaled down: the model has the paper's size, and its training data are its own"
    names = f"{', '.join(smaller[:-1])} and {smaller[-1]}" if len(smaller) > 1 else smaller[0]
    return f"{names} {'are' if len(smaller) > 1 else 'is'} scaled down to fit the compute"


def origin_values(results: dict[str, dict], paper) -> dict:
    """The glue keys of the page's prose that depend on where its models come from (`ORIGIN_TEXT`:
    `sec3-origin`, `sec3-cost-intro`; `sec3-scale-summary`, `scale_text`)."""
    from IPython.display import Markdown
    origin = "imported" if any(imported(r) for r in results.values()) else "trained"
    sources = ", ".join(f"`{r['source']}` ({pair})" for pair, r in results.items() if imported(r))
    return {key: Markdown(text.format(sources=sources)) for key, text in ORIGIN_TEXT[origin].items()} | {
        "sec3-scale-summary": scale_text(model_config(results), paper, origin == "trained")}


def training_values(results: dict[str, dict]) -> dict:
    """Per pair: training minutes, tokens/s, updates and parameters (`sec3-<pair>-steps`, ...)."""
    return {key: value for pair, r in results.items() for key, value in (
        (f"sec3-{pair}-train-minutes", float(r["train_minutes"])),
        (f"sec3-{pair}-tokens-per-second", float(r["tokens_per_second"])),
        (f"sec3-{pair}-steps", int(r["steps"])), (f"sec3-{pair}-parameters", int(r["parameters"])))}


def release_values(results: dict[str, dict]) -> dict:
    """Which model each pair's pages read (`sec3-release`, Markdown; `sec3-<pair>-fingerprint` and
    `sec3-<pair>-release`, for the introduction): its release, with its weights' fingerprint, dtype and
    size and the largest test-BLEU shift from the training copy, or the run trained here."""
    from IPython.display import Markdown
    lines, values = [], {}
    for pair, r in results.items():
        values[f"sec3-{pair}-fingerprint"] = r["fingerprint"]
        if rel := r.get("release"):
            shift = max(map(abs, r["training_copy"]["bleu_shift"].values()))
            values[f"sec3-{pair}-release"] = rel["path"]
            lines.append(f"- `{pair}`: the release `{rel['path']}`, weights `{r['fingerprint']}` ({rel['dtype']}, "
                         f"{rel['bytes'] / 2 ** 20:.1f} MiB) of run `{r['run_dir']}`; every test score on these pages "
                         "is "
                         f"the released weights' own, at most {shift:.2f} BLEU from the training copy's "
                         f"(`{r['training_copy']['fingerprint']}`).")
        else:
            values[f"sec3-{pair}-release"] = "none"
            lines.append(f"- `{pair}`: no release; run `{r['run_dir']}` (weights `{r['fingerprint']}`) "
                         f"{'was imported' if imported(r) else 'was trained on this machine'}.")
    return values | {"sec3-release": Markdown("\n".join(lines))}


def train_and_record(configs: dict, profile: str, seed: int) -> dict[str, dict]:
    """Each pair's model record: its release's card, else its run's (trained, or read from the
    cache), kept with the result tables (`results/<profile>/<pair>/seed<seed>/training_results.json`;
    the runs are not committed)."""
    from headlib.files import write_json
    from headlib.settings import results_dir
    from headlib.train.records import run_record
    from headlib.train.release import release_of
    from headlib.train import train
    results = {pair: run_record(cfg) if release_of(cfg) else train(cfg, progress=False)
               for pair, cfg in configs.items()}
    for pair, r in results.items():
        write_json(results_dir(profile, pair, seed) / "training_results.json", r)
    return results


def line_figure(data: pd.DataFrame, x: str, ys: tuple[str, ...], hue: str, title: str, labels=None):
    """One seaborn line plot per column of `ys` side by side, against `x`, one line per `hue`."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, axes = plt.subplots(1, len(ys), figsize=(4.5 * len(ys) if len(ys) > 1 else 6, 3.3), squeeze=False)
    for ax, column in zip(axes[0], ys):
        if data.empty:   # an imported model's dev curve
            ax.text(0.5, 0.5, "no evaluations: not trained here", ha="center", transform=ax.transAxes)
        sns.lineplot(data=data, x=x, y=column, hue=hue, marker="o", ax=ax)
        ax.set(**(labels or {}))
        ax.grid(alpha=0.3)
    (fig.suptitle if len(ys) > 1 else axes[0][0].set_title)(title)
    fig.tight_layout()
    plt.close(fig)
    return fig


def page_configs(profile: str, pairs: str, seed: int) -> dict:
    """The page's parameters as configs: {pair: Config} for the comma-separated `pairs`."""
    from headlib.config import get_config
    return {pair: get_config(profile, [f"train.seed={seed}"], pair=pair)
            for pair in (p.strip() for p in pairs.split(",")) if pair}


def per_pair(table, results: dict[str, dict]) -> pd.DataFrame:
    """`table(record)` (`results_table`, `training_table`, `dev_curve`) of every pair's record, stacked."""
    return pd.concat([table(r) for r in results.values()], ignore_index=True)


def corpus_tables(configs: dict) -> pd.DataFrame:
    """`corpus_stats` of every pair, with the tokenizer of its model (its release's or run's BPE, or an
    imported model's)."""
    from headlib.train import model_tokenizer
    return pd.concat([corpus_stats(pair, model_tokenizer(cfg)) for pair, cfg in configs.items()],
                     ignore_index=True)

"""Reading a pruning sweep (Sec. 6 and the Beyond page): the tables and verdicts the pages show,
pure functions of the points of `headlib.pruning.points` (rows: their JSON records) or of tables
made from them. Nothing here trains or scores a model.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

from headlib.analysis.heads import short_functions
from headlib.nn.decode import bleu_difference
from headlib.nn.masks import canonical, kind_mask
from headlib.pruning.points import fixed_masks


def interval(system: dict, baseline: dict | None, refs: list[str] | None) -> tuple[float, float]:
    """The 95% paired bootstrap interval of BLEU(system) - BLEU(baseline) on the main test set
    (`bleu_difference` of their "test_hypotheses"); NaNs where a row has no translations kept."""
    if refs is None or baseline is None or "test_hypotheses" not in system or "test_hypotheses" not in baseline:
        return math.nan, math.nan
    d = bleu_difference(system["test_hypotheses"], baseline["test_hypotheses"], refs)
    return d["low"], d["high"]


def sweep_table(rows: list[dict], full: dict, tuned: dict | None = None, refs: list[str] | None = None) -> pd.DataFrame:
    """One row per point: lambda, heads per kind, BLEU, and the change against the unpruned model
    (`full`) and against `tuned`, the point fine-tuned with the smallest lambda (same updates,
    no head closed), which separates the effect of pruning from that of the extra updates; each
    change with its 95% paired bootstrap interval ("... low", "... high") given the test set's
    references `refs` and rows that kept their translations."""
    table = pd.DataFrame([{"lambda": r["lam"], **{f"{k} heads": r["retained"][k] for k in r["kinds"]},
                           "BLEU": r["test_beam"], "BLEU greedy": r["test_greedy"]} for r in rows])
    for name, reference in (("vs. full", full), ("vs. smallest lambda", tuned)):
        if reference is not None:
            table[name] = table["BLEU"] - reference["test_beam"]
            table[[f"{name} low", f"{name} high"]] = [interval(r, reference, refs) for r in rows]
    return table


def pruned_vs_scratch(rows: list[dict], scratch: list[dict], refs: list[str] | None = None) -> pd.DataFrame:
    """Each pruned point beside the from-scratch run trained with its head mask (Table 2's question):
    one row per point of `rows`, in order, with "mask" (the point's `canonical`), "lambda",
    "pruned" (its test BLEU, beam), "from scratch" (the run's; NaN where no run of `scratch` has the
    point's mask), "pruned - scratch" with its 95% paired bootstrap interval ("... low", "... high",
    as `interval` gives it) and "scratch device" (missing where no run). Masks compare as `canonical`s (kinds
    with every head open left out), so a run trained with an encoder-only spec matches a point that
    closed encoder heads only; runs with one spec are one run."""
    by_spec = {canonical(s["mask"]): s for s in scratch}
    table = []
    for r in rows:
        spec = canonical(r["mask"])
        s = by_spec.get(spec)
        low, high = interval(r, s, refs)
        table.append({"mask": spec, "lambda": r["lam"], "pruned": r["test_beam"],
                      "from scratch": s["test_beam"] if s is not None else None,
                      "pruned - scratch low": low, "pruned - scratch high": high,
                      "scratch device": s["device"] if s is not None else None})
    table = pd.DataFrame(table, columns=["mask", "lambda", "pruned", "from scratch", "pruned - scratch low",
                                         "pruned - scratch high", "scratch device"])
    table["from scratch"] = table["from scratch"].astype(float)                 # None -> NaN
    table.insert(4, "pruned - scratch", table["pruned"] - table["from scratch"])
    return table                                                                 # (len(rows), 8)


def sides(table: pd.DataFrame) -> tuple[int, int]:
    """At how many rows of a pruned-vs-scratch table pruned is ahead (its "pruned - scratch" 95%
    interval above 0) and at how many from scratch is (below 0); a row without an interval is neither."""
    return int((table["pruned - scratch low"] > 0).sum()), int((table["pruned - scratch high"] < 0).sum())


BUDGET_COLUMNS = ["pruned kinds", "heads kept (enc-self/dec-self/dec-enc)", "lambda", "pruned", "from scratch",
                  "pruned - scratch", "pruned - scratch low", "pruned - scratch high", "pruned updates",
                  "scratch updates", "pruned tokens", "scratch tokens", "scratch device", "control"]


def budget_table(rows: list[dict], scratch: list[dict], control: dict | None, full: dict, baseline: dict,
                 refs: list[str] | None = None) -> pd.DataFrame:
    """Table 2 with both budgets: one row per from-scratch run of `scratch` beside the first point of
    `rows` with its mask (masks compared as `pruned_vs_scratch` compares them): the attention kinds
    pruned, the heads kept per kind, the point's lambda, pruned and from-scratch BLEU (main test
    set, beam), pruned - scratch with its 95% paired bootstrap interval, and each side's budget in
    updates and target tokens (pruned: the `baseline` run's training plus the path's fine-tuning up
    to the point; scratch: its training).
    Last, the all-heads `control` trained from scratch on the first run's budget, beside the
    unpruned model `full` (the baseline's budget): more updates without fewer heads (`control`
    True; it is not a configuration C7 judges). A run that no point has the mask of is an error."""
    out = []
    for s in scratch:
        point = next((r for r in rows if canonical(r["mask"]) == canonical(s["mask"])), None)
        if point is None:
            raise ValueError(f"no pruned point has the mask {canonical(s['mask'])!r} of a from-scratch run")
        out.append(_budget_row(", ".join(point["kinds"]), point, s, refs,
                               baseline["steps"] + point.get("path_updates", 0),
                               baseline["train_tokens"] + point.get("path_tokens", 0)))
    if control is not None:
        out.append(_budget_row("none (all heads: the control)", full, control, refs, baseline["steps"],
                               baseline["train_tokens"]) | {"control": True})
    return pd.DataFrame(out, columns=BUDGET_COLUMNS)                             # (runs + 1, 14)


def _budget_row(kinds: str, pruned: dict, scratch: dict, refs, updates: int, tokens: int) -> dict:
    low, high = interval(pruned, scratch, refs)
    return {"pruned kinds": kinds, "heads kept (enc-self/dec-self/dec-enc)":
            "/".join(str(scratch["retained"][k]) for k in ("enc-self", "dec-self", "dec-enc")),
            "lambda": pruned.get("lam"), "pruned": pruned["test_beam"], "from scratch": scratch["test_beam"],
            "pruned - scratch": round(pruned["test_beam"] - scratch["test_beam"], 2),
            "pruned - scratch low": low, "pruned - scratch high": high,
            "pruned updates": updates, "scratch updates": scratch["steps"], "pruned tokens": tokens,
            "scratch tokens": scratch.get("tokens"), "scratch device": scratch.get("device"), "control": False}


def method_gaps(methods: pd.DataFrame) -> pd.DataFrame:
    """Per head count k of a method comparison (rows: k, method, BLEU; several rows for the random
    draws): the best fine-tuned method and its mean BLEU, the spread between the best and worst
    fine-tuned method means, and how far the random draws' mean falls behind the best method.
    Training from scratch is a different budget and is left out."""
    means = (methods[methods["method"] != "from scratch"]
             .groupby(["k", "method"])["BLEU"].mean().reset_index())
    rows = []
    for k, at in means.groupby("k"):
        at = at.set_index("method")["BLEU"]
        rows.append({"k": int(k), "best": at.idxmax(), "best BLEU": float(at.max()),
                     "spread": float(at.max() - at.min()),
                     "random gap": float(at.max() - at["random"]) if "random" in at else float("nan")})
    return pd.DataFrame(rows)


# The fine-tuned methods of the Beyond page: fixed-mask labels (`fixed_masks`, less a random draw's
# "-s<seed>") as the page names them, and the order its figure and table show the methods in.
METHOD_NAMES = {"lrp": "LRP", "confidence": "confidence", "michel": "gradient (Michel)"}
METHOD_ORDER = ("Hard Concrete", "DSP", "random", "LRP", "confidence", "gradient (Michel)", "from scratch")


def method_comparison(ks, hard_concrete: list[dict], dsp: dict[int, dict], fine_tune, measures: pd.DataFrame,
                      labels, random_seeds, scratch: list[dict], heads_per_kind: int) -> pd.DataFrame:
    """The fine-tuned methods at each encoder head count k of `ks` (same budget), one row per point:
    k, method, BLEU (test, beam) and the device it ran on. At each k, in this order: the first
    Hard Concrete point of `hard_concrete` (by lambda) that kept exactly k encoder heads, if any;
    DSP's point `dsp[k]`; the fixed masks of `fixed_masks(measures, k, random_seeds)` whose label
    (a random draw's without "-s<seed>") is in `labels`, fine-tuned by `fine_tune(method="fixed",
    mask=spec, label=label)` (a cached point: `prune_point`); and the from-scratch runs of `scratch`
    with k encoder heads and all `heads_per_kind` heads of both decoder kinds. Methods are named as
    the page names them (`METHOD_NAMES`; every random draw is "random")."""
    rows = []
    for k in ks:
        hc = [r for r in hard_concrete if r["retained"]["enc-self"] == k]
        picked = [("Hard Concrete", hc[0])] if hc else []
        picked += [("DSP", dsp[k])]
        picked += [(label, fine_tune(method="fixed", mask=spec, label=label))
                   for label, spec in fixed_masks(measures, k, random_seeds).items() if label.split("-s")[0] in labels]
        picked += [("from scratch", r) for r in scratch if r["retained"]["enc-self"] == k
                   and r["retained"]["dec-self"] == r["retained"]["dec-enc"] == heads_per_kind]
        rows += [{"k": k, "method": m, "BLEU": r["test_beam"], "device": r["device"]} for m, r in picked]
    names = lambda m: "random" if m.startswith("random") else METHOD_NAMES.get(m, m)
    return pd.DataFrame(rows, columns=["k", "method", "BLEU", "device"]).assign(      # (points, 4)
        method=lambda d: d["method"].map(names))


def method_table(methods: pd.DataFrame) -> pd.DataFrame:
    """A `method_comparison` as text, methods (rows, in `METHOD_ORDER`) x head counts (columns
    "<k> heads"): the mean BLEU, and for several points (the random draws) "mean ± std (n=count)";
    empty where a method has no point at k."""
    summary = methods.groupby(["method", "k"])["BLEU"].agg(["mean", "std", "count"]).reset_index()
    summary["cell"] = summary.apply(lambda r: f"{r['mean']:.2f}" + (f" ± {r['std']:.2f} (n={int(r['count'])})"
                                                                    if r["count"] > 1 else ""), axis=1)
    table = summary.pivot(index="method", columns="k", values="cell").reindex(
        [m for m in METHOD_ORDER if m in set(summary["method"])])
    table.columns = [f"{k} heads" for k in table.columns]
    return table.fillna("")                                                      # (methods, head counts)


def mean_open_layer(rows: list[dict], kind: str, per_kind: int) -> float:
    """The mean layer (1-based) of the heads of `kind` left open, over the sweep points that closed
    some but not all of its `per_kind` heads (Fig. 10: do a kind's survivors sit in low or high
    layers?); NaN when no point did."""
    total = weighted = 0
    for r in rows:
        if 0 < r["retained"][kind] < per_kind:
            total += sum(r["per_layer"][kind])
            weighted += sum((i + 1) * n for i, n in enumerate(r["per_layer"][kind]))
    return weighted / total if total else float("nan")


def choice_of_heads_verdict(methods: pd.DataFrame, spread: float | None) -> str:
    """Whether the choice of heads matters once the model is fine-tuned (Budhraja et al. 2020):
    at a head count k it does if the best method beats every random draw and the draws' mean by
    more than `spread` (the seed spread of BLEU: a smaller gap, measured on one seed, is what another
    seed could give; None: not measured, so a gap is not assessable). Training from scratch is left out."""
    gaps = method_gaps(methods).set_index("k")
    random = methods[methods["method"] == "random"].groupby("k")["BLEU"]
    margin = spread or 0.0
    matters = [int(k) for k, g in gaps.iterrows()
               if k in random.groups and g["best BLEU"] > random.get_group(k).max() and g["random gap"] > margin]
    against = f"the seed spread of {spread:.2f} BLEU" if spread is not None else "zero"
    at = ", ".join(map(str, matters))
    if not matters:
        return (f"at no head count does the best method beat every random draw by more than {against}: knowing "
                "which heads matter buys little once the model is fine-tuned, as Budhraja et al. found.")
    if spread is None:
        return (f"not assessable on one seed: at {at} heads the best method is above every "
                "random draw, but it is the best of several methods picked after their scores were seen, and "
                "without the other seeds' releases there is no seed spread to tell such a gap from noise.")
    return (f"the choice of heads matters beyond the fine-tuning budget at {at} heads "
            f"(the best method above every random draw, and the draws' mean more than {against} behind).")


def survival(rows: list[dict], kind: str = "enc-self") -> pd.DataFrame:
    """Per head: the largest lambda at which it is still open (0 if closed at every lambda),
    i.e. how hard the head is to prune."""
    last = torch.zeros_like(kind_mask(rows[0]["mask"], kind), dtype=torch.float64)
    for r in sorted(rows, key=lambda r: r["lam"]):
        last = torch.where(kind_mask(r["mask"], kind).bool(), torch.full_like(last, r["lam"]), last)
    return pd.DataFrame([{"layer": i + 1, "head": j + 1, "survives_to_lambda": float(last[i, j])}
                         for i in range(last.shape[0]) for j in range(last.shape[1])])


def pruning_order(table: pd.DataFrame) -> list[tuple[str, float]]:
    """Attention kinds of an all-kinds sweep table (a "<kind> heads" column per kind, "lambda"),
    ordered by the smallest lambda at which at most half of the kind's heads are open (the
    kind's heads at the smallest lambda count as all of them)."""
    kinds = [c.removesuffix(" heads") for c in table.columns if c.endswith(" heads") and c != "total heads"]
    table = table.sort_values("lambda")
    def half_life(kind):
        col = table[f"{kind} heads"]
        below = table.loc[col <= col.iloc[0] / 2, "lambda"]
        return float(below.min()) if len(below) else float("inf")
    return sorted(((k, half_life(k)) for k in kinds), key=lambda t: (t[1], kinds.index(t[0])))


def order_text(order: list[tuple[str, float]]) -> str:
    """A `pruning_order` as text: "enc-self (lambda 0.005) < dec-self (lambda 0.05) = dec-enc (lambda 0.05)"."""
    text = f"{order[0][0]} (lambda {order[0][1]:g})"
    for (_, before), (kind, lam) in zip(order, order[1:]):
        text += f" {'=' if lam == before else '<'} {kind} (lambda {lam:g})"
    return text


def encoder_first_cross_last(order: list[tuple[str, float]]) -> bool:
    """The paper's Fig. 9 claim on a `pruning_order`: enc-self loses half its heads at a finite
    lambda, before dec-enc, with dec-self in between (ties allowed)."""
    lam = dict(order)
    return (math.isfinite(lam["enc-self"]) and lam["enc-self"] < lam["dec-enc"]
            and lam["enc-self"] <= lam["dec-self"] <= lam["dec-enc"])


def strictly(order: list[tuple[str, float]], kind: str, place: str) -> bool:
    """Whether `kind` loses half its heads at a finite lambda strictly before ("first") or strictly
    after ("last") every other kind of a `pruning_order`: a tie at the grid's resolution is no order."""
    lam = dict(order)
    others = [v for k, v in lam.items() if k != kind]
    if place == "first":
        return math.isfinite(lam[kind]) and all(lam[kind] < v for v in others)
    return all(lam[kind] > v for v in others)


def function_counts(rows: list[dict], kind: str = "enc-self") -> pd.DataFrame:
    """Fig. 8 in numbers: per point, its open heads of `kind`, how many of them the point's own
    functions (`analysis.probe`, measured on the pruned model) call positional, syntactic and
    rare-word (a head with several functions counts once in each), and how close its closest open
    head comes to each (`head_stats`: the largest positional share, syntactic margin over the
    positional baseline and layer-1 rarest-token rate; NaN without open heads)."""
    out = []
    for r in rows:
        codes = [short_functions(h["functions"]).split() for h in r["functions"]]   # per head: "p-1", "s", "r"
        stats = pd.DataFrame(r["head_stats"], columns=["layer", "positional_share", "syntactic_margin", "rarest"])
        out.append({"lambda": r["lam"], "heads": r["retained"][kind],
                    "positional": sum(any(c.startswith("p") for c in cs) for cs in codes),
                    "syntactic": sum("s" in cs for cs in codes),
                    "rare-word": sum("r" in cs for cs in codes),
                    "best positional share": stats["positional_share"].max(),
                    "best syntactic margin": stats["syntactic_margin"].max(),
                    "best layer-1 rare rate": stats.loc[stats["layer"] == 1, "rarest"].max()})
    return pd.DataFrame(out, columns=["lambda", "heads", "positional", "syntactic", "rare-word", "best positional share",
                                      "best syntactic margin", "best layer-1 rare rate"])


WITHIN_LAYER_DRAWS = 10_000   # permutations of each point's mask within layers (C9's relevance half)


def enrichment(rows: list[dict], heads: pd.DataFrame, kind: str = "enc-self", draws: int = WITHIN_LAYER_DRAWS,
               seed: int = 0) -> pd.DataFrame:
    """Per point, are the retained heads the specialized / important ones?

    `heads` has one row per (layer, head) with a boolean `specialized` and a `relevance`. Fisher's
    exact test (one-sided: retained heads are more often specialized) and the Mann-Whitney U test
    (one-sided: retained heads have higher relevance), as the paper would read them; and, because
    relevance is normalised per layer (a layer whose heads all survive says nothing of which heads
    survive), `within_layer_p`: the open heads' relevance against the closed heads' of the same
    layers, the mask permuted within layers (NaN where no layer has both). The "(Holm)" columns
    correct both over the points (`holm`)."""
    from scipy.stats import fisher_exact, mannwhitneyu
    out = []
    for r in rows:
        grid = kind_mask(r["mask"], kind)
        kept = heads.apply(lambda h: bool(grid[h["layer"] - 1, h["head"] - 1]), axis=1)
        n_kept = int(kept.sum())
        if n_kept in (0, len(heads)):
            continue
        spec = heads["specialized"].astype(bool)
        table = [[int((kept & spec).sum()), int((kept & ~spec).sum())],
                 [int((~kept & spec).sum()), int((~kept & ~spec).sum())]]
        out.append({"lambda": r["lam"], "retained": n_kept, "specialized retained": table[0][0],
                    "specialized pruned": table[1][0],
                    "Fisher p": fisher_exact(table, alternative="greater").pvalue,
                    "relevance retained": heads.loc[kept, "relevance"].mean(),
                    "relevance pruned": heads.loc[~kept, "relevance"].mean(),
                    "Mann-Whitney p": mannwhitneyu(heads.loc[kept, "relevance"], heads.loc[~kept, "relevance"],
                                                   alternative="greater").pvalue,
                    "within-layer p": within_layer_p(heads["layer"].to_numpy(), heads["relevance"].to_numpy(),
                                                     kept.to_numpy(), draws, seed)})
    table = pd.DataFrame(out, columns=["lambda", "retained", "specialized retained", "specialized pruned", "Fisher p",
                                       "relevance retained", "relevance pruned", "Mann-Whitney p", "within-layer p"])
    return table.assign(**{"within-layer p (Holm)": holm(table["within-layer p"]), "Fisher p (Holm)": holm(table["Fisher p"])})


def within_layer_p(layer, relevance, kept, draws: int = WITHIN_LAYER_DRAWS, seed: int = 0) -> float:
    """One-sided permutation p-value that the `kept` heads (bool, one per head) are more relevant
    than the closed heads of their own layer: the statistic sums, over the layers with both open and
    closed heads, the open heads' mean relevance minus the closed heads' mean; each draw permutes
    which heads are open within every layer (as many open per layer). NaN where no layer has both."""
    rng = np.random.default_rng(seed)
    observed, null = 0.0, np.zeros(draws)
    mixed = [l for l in np.unique(layer) if 0 < kept[layer == l].sum() < (layer == l).sum()]
    if not mixed:
        return math.nan
    for l in mixed:
        rel, open_ = relevance[layer == l], kept[layer == l].astype(float)      # (heads,)
        k, n = open_.sum(), len(open_)
        weights = open_ / k - (1 - open_) / (n - k)                             # mean(open) - mean(closed) = w @ rel
        observed += weights @ rel
        null += rng.permuted(np.tile(weights, (draws, 1)), axis=1) @ rel        # (draws,)
    return float((1 + (null >= observed - 1e-12).sum()) / (draws + 1))


def holm(p: pd.Series) -> pd.Series:
    """Holm's step-down correction of the p-values `p` for their number (NaNs are not tests and stay NaN):
    the i-th smallest of m is multiplied by m - i + 1, kept monotone, capped at 1."""
    valid = p.dropna().sort_values()
    m = len(valid)
    adjusted = np.minimum(1.0, np.maximum.accumulate(valid.to_numpy() * (m - np.arange(m))))
    return pd.Series(adjusted, index=valid.index).reindex(p.index)


def dev_choice(runs: list[tuple[int, float, dict]]) -> dict:
    """The setting dev prefers among points that differ in one setting (e.g. DSP's logit learning
    rate): `runs` is [(head count, setting, point)]; per head count, the setting whose point has the
    higher dev BLEU (greedy); returned: the wins of each setting and the one with most wins."""
    by_k: dict[int, list[tuple[float, float]]] = {}
    for k, setting, row in runs:
        by_k.setdefault(k, []).append((row["dev_greedy"], setting))
    wins: dict[float, int] = {setting: 0 for _, setting, _ in runs}
    for scored in by_k.values():
        wins[max(scored)[1]] += 1
    return {"wins": wins, "chosen": max(wins, key=wins.get), "head_counts": len(by_k)}


def dev_choice_note(choice: dict, used, what: str, show=lambda s: f"{s:g}") -> str:
    """One sentence (Markdown) on what dev chose (`dev_choice`) against the setting `used` on the
    page, `what` naming it (e.g. "the logits' learning rate"), each setting written by `show`."""
    chosen = choice["chosen"]
    said = (f"On dev (greedy BLEU), {what} {show(chosen)} scores higher at {choice['wins'][chosen]} of "
            f"{choice['head_counts']} head counts")
    if chosen == used:
        return said + ", so dev agrees with the setting used above."
    return (said + f": dev would choose {show(chosen)}, not the {show(used)} used above, which was chosen before "
            "this protocol, with test scores in view.")

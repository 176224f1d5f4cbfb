"""The Sec. 6 pages: pruning the encoder (6.2, `06_pruning_encoder`) and all attention (6.3,
`07_pruning_all_attention`). Both compute one `Sweep`: the unpruned model, the BLEU-vs-heads points
of the setting's lambda grid, the path's check against independent fine-tunings, and the
from-scratch runs with matched budgets; then each page tabulates and plots its own questions.

Glue keys start with the page's prefix ("sec6" for the encoder, "sec63" for all attention).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from scipy.stats import spearmanr

from headlib.analysis.heads import short_functions
from headlib.analysis.probe import FunctionProbe
from headlib.book.pages import OTHER_MODELS, other_models, other_models_note
from headlib.claims import MARGIN, PAPER_TOLERANCE, fewest_heads_within, not_assessable, order_verdict
from headlib.config import get_config
from headlib.data.corpora import load_split, main_test_set
from headlib.nn.masks import kind_mask
from headlib.nn.model import KINDS
from headlib.profiles import grids
from headlib.pruning.points import (SETTINGS, full_point, pruning_curve, scratch_plan, scratch_point,
                                    validate_curve, validation_lambdas)
from headlib.pruning.readout import (budget_table, enrichment, function_counts, interval,
                                     mean_open_layer, order_text, pruned_vs_scratch, pruning_order, sides, survival,
                                     sweep_table)
from headlib.settings import results_dir
from headlib.train import prepare_data, pretrained
from headlib.train.records import recorded_model

PREFIX = {"encoder": "sec6", "all": "sec63"}
DATA_NOTE = ("**This model was imported, not trained here** (the `pretrained` profile): it is fine-tuned with gates "
             "on the pair's shared training data, which is not the data it was trained on, and it has no "
             "recipe to train from scratch with, so this page has no from-scratch runs.")


@dataclass
class Sweep:
    setting: str              # "encoder" (Sec. 6.2) or "all" (Sec. 6.3)
    run: dict                 # the pruned model's training record
    out: Path                 # results/<profile>/<pair>/seed<seed>/pruning
    steps: int                # updates of one independent fine-tuning
    curve: str                # "path" or "independent"
    full: dict                # the unpruned model, scored here
    rows: list[dict]          # one point per lambda, in grid order
    validation: dict | None   # the path against independent fine-tunings (None for independent points)
    budgets: list[int]        # the from-scratch runs' matched budgets (updates)
    scratch: list[dict]       # from scratch with the masks of the plan's points
    control: dict | None      # from scratch with all heads, at the first run's budget (None: an imported model,
                              # which has no recipe to train from scratch with)
    refs: list[str]           # the main test set's references (paired bootstrap intervals of BLEU differences)


def _numbers(text: str, kind=float) -> list | None:
    return [kind(x) for x in text.split(",")] if text else None


def sweep(profile: str, pair: str, seed: int, setting: str, lambdas: str = "", finetune_steps: int = 0,
          scratch_heads: str = "", curve: str = "path", validate: str = "") -> Sweep:
    """Every point a Sec. 6 page shows, read from results/ or computed (the model's weights are
    loaded only for a point not cached). Empty parameters take the profile's grids
    (`headlib.profiles.Grids`): comma-separated lambdas, fine-tuning updates, head counts trained
    from scratch and the lambdas that check the path."""
    grid = grids(profile)
    lams = _numbers(lambdas) or list(grid.lambdas(setting))
    steps = finetune_steps or grid.finetune_steps
    model, run = recorded_model(profile, pair, seed)
    data = prepare_data(get_config(profile, [f"train.seed={seed}"], pair=pair))
    out = results_dir(profile, pair, seed) / "pruning"
    beam, alpha = run["config"]["train"]["beam"], run["len_alpha"]
    probe = FunctionProbe.for_pair(pair, data.bpe, grid.function_sentences)                 # Fig. 8
    full = full_point(model, data, pair, alpha, beam, out, describe=probe)
    rows = pruning_curve(model, data, SETTINGS[setting], lams, steps, seed, pair, alpha, beam, out, method=curve,
                         path_share=grid.path_share, describe=probe)
    checked = _numbers(validate) or validation_lambdas(lams, grid.validation_points)
    validation = (validate_curve(model, data, rows, checked, steps, seed, pair, alpha, beam, out)
                  if curve == "path" else None)
    refs = list(load_split(pair, main_test_set(pair)).tgt)
    if profile == pretrained.PROFILE:
        return Sweep(setting, run, out, steps, curve, full, rows, validation, [], [], None, refs)
    plan = scratch_plan(rows, _numbers(scratch_heads, int) or list(grid.scratch_heads(setting)), run["steps"], setting)
    scratch = [scratch_point(profile, pair, seed, spec, budget, out) for spec, budget in plan[:-1]]
    control = scratch_point(profile, pair, seed, *plan[-1], out)
    return Sweep(setting, run, out, steps, curve, full, rows, validation, [b for _, b in plan[:-1]], scratch, control,
                 refs)


def trained_from_scratch(s: Sweep) -> list[dict]:
    """The sweep's from-scratch runs, the all-heads control last (none for an imported model)."""
    return [*s.scratch, s.control] if s.control is not None else []


def setup_values(s: Sweep) -> dict:
    """What both pages say of their sweep: updates, devices, the curve's method, the scratch runs'
    budgets, and the models they read besides their own (names, fingerprints: `OTHER_MODELS`)."""
    from IPython.display import Markdown
    p = PREFIX[s.setting]
    models = other_models([r["results"] for r in trained_from_scratch(s)], "trained from scratch with a fixed head mask")
    curve = ("the continuation path: one fine-tuning whose lambda steps up the grid, "
             f"{s.rows[0]['path_updates']} updates at each lambda, each lambda starting from the previous lambda's "
             "gated model" if s.curve == "path" else
             f"one independent fine-tuning of {s.steps} updates per lambda from the converged model")
    return {f"{p}-steps": s.steps, f"{p}-budget": s.run["steps"],
            f"{p}-devices": ", ".join(sorted({r["device"] for r in [s.full, *s.rows, *trained_from_scratch(s)]})),
            f"{p}-curve": Markdown(curve), f"{p}-scratch-budgets": ", ".join(f"{b:,}" for b in s.budgets) or "none",
            f"{p}-full-bleu": s.full["test_beam"],
            f"{p}-control-bleu": s.control["test_beam"] if s.control is not None else float("nan"),
            f"{p}-data": Markdown(DATA_NOTE if s.control is None else ""),
            OTHER_MODELS: json.dumps(models), f"{p}-other-models": Markdown(other_models_note(models))}


def validation_values(s: Sweep) -> tuple[pd.DataFrame | None, dict]:
    """The path's check (protocol v2, item 3): one row per checked lambda, and the updates both
    ways, their ratio and the verdict; for independent points, none (zeros and a sentence)."""
    from IPython.display import Markdown
    p = PREFIX[s.setting]
    if s.validation is None:
        return None, {f"{p}-validation-verdict": Markdown("This page's points are independent fine-tunings."),
                      **{f"{p}-{key}": 0
                         for key in ("path-updates", "independent-updates", "update-ratio", "n-validated")}}
    checks = pd.DataFrame(s.validation["points"])
    failed = checks[~(checks["heads_agree"] & checks["bleu_agrees"])]
    verdict = (f"**The path agrees with the independent fine-tunings at all {len(checks)} lambdas**, so the curve "
               "above stands for the paper's." if failed.empty else
               f"**The path does not agree at lambda {', '.join(f'{x:g}' for x in failed['lam'])}**: there the cheap "
               "curve is not the paper's curve, and the points of this page should be read as the path's, not as "
               "independent fine-tunings'.")
    return checks, {f"{p}-path-updates": s.validation["path_updates"],
                    f"{p}-independent-updates": s.validation["independent_updates"],
                    f"{p}-update-ratio": s.validation["update_ratio"], f"{p}-n-validated": len(checks),
                    f"{p}-validation-verdict": Markdown(verdict)}


# --- Sec. 6.2: the encoder ---

def encoder_table(s: Sweep) -> pd.DataFrame:
    """The encoder sweep (`sweep_table` against the unpruned model and the smallest lambda's point,
    which closed no head), written to pruning_encoder.csv."""
    table = sweep_table(s.rows, s.full, s.rows[0], s.refs)
    table.to_csv(s.out.parent / "pruning_encoder.csv", index=False)
    return table


def encoder_values(s: Sweep, table: pd.DataFrame) -> dict:
    """The fewest heads within our and the paper's tolerance of the unpruned and of the fine-tuned
    48-head model, and what no encoder head at all scores."""
    tuned = s.rows[0]
    zero = table[table["enc-self heads"] == 0]
    values = {"sec6-n-points": len(s.rows), "sec6-n-heads": s.full["retained"]["enc-self"],
              "sec6-tuned-heads": tuned["retained"]["enc-self"], "sec6-tuned-bleu": tuned["test_beam"],
              "sec6-tolerance": MARGIN, "sec6-paper-tolerance": PAPER_TOLERANCE, "sec6-n-zero": len(zero),
              "sec6-zero-bleu": float(zero["BLEU"].mean()) if len(zero) else float("nan"),
              "sec6-zero-delta": float(zero["BLEU"].mean() - s.full["test_beam"]) if len(zero) else float("nan"),
              "sec6-zero-first": zero_point(zero)}
    for name, reference in (("full", s.full["test_beam"]), ("tuned", tuned["test_beam"])):
        values[f"sec6-within-{name}"] = fewest_heads_within(table, reference, MARGIN)
        values[f"sec6-within-{name}-paper"] = fewest_heads_within(table, reference, PAPER_TOLERANCE)
    return values


def zero_point(zero: pd.DataFrame) -> str:
    """The smallest lambda that closes every encoder head, against the unpruned model with its 95%
    interval (`zero`: those rows of the encoder table)."""
    if zero.empty:
        return "no point closes every head"
    z = zero.sort_values("lambda").iloc[0]
    return f"{z['vs. full']:+.2f} [{z['vs. full low']:+.2f}, {z['vs. full high']:+.2f}] at lambda {z['lambda']:g}"


def bleu_vs_heads_figure(s: Sweep, table: pd.DataFrame):
    """Fig. 7: BLEU against the encoder heads left, with the unpruned and fine-tuned references and
    the from-scratch runs."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(table["enc-self heads"], table["BLEU"], "o-", label="pruned (fine-tuned with gates)")
    ax.axhline(s.full["test_beam"], color="k", ls="--", lw=1, label="unpruned")
    ax.axhline(s.rows[0]["test_beam"], color="grey", ls=":", lw=1, label="fine-tuned, no head closed")
    if s.control is not None:
        ax.plot([r["retained"]["enc-self"] for r in s.scratch], [r["test_beam"] for r in s.scratch], "s", color="C3",
                label="from scratch with the mask")
        ax.plot([s.control["retained"]["enc-self"]], [s.control["test_beam"]], "D", color="C2",
                label="from scratch, all heads")
    ax.set(xlabel="encoder heads left", ylabel=f"BLEU ({s.full['test_set']})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)
    return fig


def encoder_scratch(s: Sweep, spread: float | None) -> tuple[pd.DataFrame, dict]:
    """Table 2 for the encoder (footnote 8; pruning_encoder_scratch.csv): each from-scratch run
    beside its pruned point with both budgets, the all-heads control last (`budget_table`), judged
    as C7 judges it, by each difference's 95% paired bootstrap interval; the seeds' spread of test
    BLEU (`spread`, None with one seed) beside it for scale."""
    from IPython.display import Markdown
    versus = budget_table(s.rows, s.scratch, s.control, s.full, s.run, s.refs)
    if s.control is None:
        return versus, {"sec6-seed-spread": "not measured", "sec6-control-diff": "not measured",
                        "sec6-fewer-heads": "not measured",
                        "sec6-scratch-verdict": Markdown(
                            "not measured: an imported model has no recipe to train from scratch with.")}
    versus.to_csv(s.out.parent / "pruning_encoder_scratch.csv", index=False)
    judged, control = versus[~versus["control"]], versus[versus["control"]].iloc[0]
    ahead, behind = sides(judged)
    reproduces = ("reproduces here for the encoder" if ahead == len(judged) > 0 else
                  "does not reproduce here for the encoder" + (": every interval contains 0, so neither side is shown ahead"
                                                               if judged["pruned - scratch low"].le(0).all() and
                                                               judged["pruned - scratch high"].ge(0).all() else ""))
    return versus, {
        "sec6-seed-spread": f"{spread:.2f} BLEU (range over the trained seeds)" if spread is not None
                            else "an amount not measured yet (one seed trained)",
        "sec6-control-diff": f"{control['pruned - scratch']:+.2f} [{control['pruned - scratch low']:+.2f}, "
                             f"{control['pruned - scratch high']:+.2f}]",
        "sec6-fewer-heads": "; ".join(f"{r['retained']['enc-self']} heads {s.control['test_beam'] - r['test_beam']:+.2f} "
                                      f"[{low:+.2f}, {high:+.2f}]" for r in s.scratch
                                      for low, high in [interval(s.control, r, s.refs)]),
        "sec6-scratch-verdict": Markdown(
            f"pruned ahead (its 95% interval above 0) at {ahead} of {len(judged)} configurations, from scratch ahead "
            f"at {behind} ({', '.join(f'{d:+.2f}' for d in judged['pruned - scratch'])} BLEU); the paper's footnote 8 "
            f"({(not_assessable(s.out.parent) or reproduces).removesuffix('.')}).")}


def budget_style(table: pd.DataFrame):
    """A `budget_table` as the pages show it: BLEU to 2 decimals, budgets with thousands separators."""
    counts = ["pruned updates", "scratch updates", "pruned tokens", "scratch tokens"]
    return (table.drop(columns=["control"]).style.format(precision=2, na_rep="")
            .format("{:,.0f}", subset=counts).format("{:g}", subset=["lambda"], na_rep="").hide(axis="index"))


def head_table(importance: pd.DataFrame, functions: pd.DataFrame) -> pd.DataFrame:
    """Each encoder head's importance (Sec. 4) with its functions (Sec. 5) and whether it has any
    (`specialized`)."""
    heads = importance.merge(functions, on=["layer", "head"], how="left")
    heads["specialized"] = heads["functions"].notna() & heads["functions"].astype(str).str.len().gt(0)
    return heads


def survivors_figure(s: Sweep, heads: pd.DataFrame):
    """Fig. 8: at each distinct number of open encoder heads, the open heads' relevance in the
    unpruned model (closed ones grey), each head labelled with the functions it has in that pruned
    model (the point's `functions`, `analysis.probe`)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    relevance = heads.pivot(index="layer", columns="head", values="relevance")
    panels = list({r["retained"]["enc-self"]: r for r in s.rows if r["retained"]["enc-self"] > 0}.values())
    if not panels:
        fig, ax = plt.subplots(figsize=(6, 1))
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no point keeps an encoder head open", ha="center", va="center")
        plt.close(fig)
        return fig
    cols = min(4, len(panels))
    fig, axes = plt.subplots(-(-len(panels) // cols), cols, figsize=(2.6 * cols, 2.4 * -(-len(panels) // cols)),
                             squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    limit = float(relevance.abs().max().max())
    for ax, r in zip(axes.flat, panels):
        kept = kind_mask(r["mask"], "enc-self").numpy().astype(bool)
        labels = pd.DataFrame("", index=relevance.index, columns=relevance.columns)
        for h in r["functions"]:
            labels.loc[h["layer"], h["head"]] = short_functions(h["functions"])
        ax.set_facecolor("0.8")                                  # closed heads (NaN cells) show the background
        sns.heatmap(relevance.where(kept), ax=ax, cmap="RdBu", center=0, vmin=-limit, vmax=limit, cbar=False,
                    annot=labels.values, fmt="", linewidths=0.3, linecolor="0.9",
                    xticklabels=False, yticklabels=True)
        ax.set(title=f"{r['retained']['enc-self']} heads", xlabel="head", ylabel="layer")
    fig.tight_layout()
    plt.close(fig)
    return fig


def functions_through_pruning(s: Sweep) -> tuple[pd.DataFrame, dict]:
    """Fig. 8 in numbers (`function_counts`, pruning_functions.csv): per point, its open heads with
    each kind of function measured on the pruned model, the unpruned model first (measured the same
    way: Sec. 5's functions)."""
    table = pd.concat([function_counts([s.full]).assign(model="unpruned"),
                       function_counts(s.rows).assign(model="pruned")], ignore_index=True)
    table.to_csv(s.out.parent / "pruning_functions.csv", index=False)
    pruned = table[table["model"] == "pruned"]
    return table, {"sec6-function-sentences": s.rows[0]["function_sentences"],
                   "sec6-max-positional": int(pruned["positional"].max()),
                   "sec6-max-syntactic": int(pruned["syntactic"].max()),
                   "sec6-max-rare": int(pruned["rare-word"].max())}


def specialization(s: Sweep, heads: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Are the survivors the specialized, important heads? Per point, Fisher's and Mann-Whitney's
    tests (`enrichment`, pruning_enrichment.csv); per head, the largest lambda it survives
    (`survival`, pruning_survival.csv) and its Spearman correlation with relevance and confidence."""
    enrich = enrichment(s.rows, heads)
    enrich.to_csv(s.out.parent / "pruning_enrichment.csv", index=False)
    surv = survival(s.rows).merge(heads[["layer", "head", "relevance", "confidence"]], on=["layer", "head"])
    surv.to_csv(s.out.parent / "pruning_survival.csv", index=False)
    rho = {m: spearmanr(surv["survives_to_lambda"], surv[m]) for m in ("relevance", "confidence")}
    return enrich, {"sec6-survival-rho-lrp": float(rho["relevance"].statistic),
                    "sec6-survival-p-lrp": float(rho["relevance"].pvalue),
                    "sec6-survival-rho-conf": float(rho["confidence"].statistic),
                    "sec6-survival-p-conf": float(rho["confidence"].pvalue),
                    "sec6-n-specialized": int(heads["specialized"].sum())}


# --- Sec. 6.3: all attention ---

def all_table(s: Sweep) -> pd.DataFrame:
    """The all-kinds sweep with total heads and each point against its from-scratch run (NaN where
    none), written to pruning_all_attention.csv."""
    table = sweep_table(s.rows, s.full, refs=s.refs)
    table.insert(4, "total heads", table[[f"{k} heads" for k in KINDS]].sum(axis=1))
    versus = pruned_vs_scratch(s.rows, s.scratch, s.refs)
    compared = ["from scratch", "pruned - scratch", "pruned - scratch low", "pruned - scratch high"]
    table[compared] = versus[compared]
    table.to_csv(s.out.parent / "pruning_all_attention.csv", index=False)
    return table


def all_values(table: pd.DataFrame) -> dict:
    """Pruned against from scratch, judged as C7 judges it: at how many configurations each side is
    ahead by its 95% interval, the differences, and the best scratch run."""
    compared = table.dropna(subset=["pruned - scratch"])
    best = compared.loc[compared["from scratch"].idxmax()] if len(compared) else None
    ahead, behind = sides(compared)
    return {"sec63-pruned-wins": ahead, "sec63-scratch-wins": behind, "sec63-n-scratch": len(compared),
            "sec63-differences": ", ".join(f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]" for d, lo, hi in
                                           compared[["pruned - scratch", "pruned - scratch low",
                                                     "pruned - scratch high"]].itertuples(index=False)),
            "sec63-best-scratch-heads": int(best["total heads"]) if best is not None else 0,
            "sec63-best-scratch-bleu": float(best["from scratch"]) if best is not None else float("nan")}


def all_budget_table(s: Sweep) -> pd.DataFrame:
    """Table 2 with both budgets for all attention (`budget_table`; pruning_all_budgets.csv)."""
    table = budget_table(s.rows, s.scratch, s.control, s.full, s.run, s.refs)
    if s.control is not None:
        table.to_csv(s.out.parent / "pruning_all_budgets.csv", index=False)
    return table


def open_fractions(s: Sweep) -> pd.DataFrame:
    """Per point and attention kind, the fraction of its heads left open."""
    per_kind = s.full["retained"]["enc-self"]
    return pd.DataFrame([{"lambda": r["lam"], "kind": k, "fraction open": r["retained"][k] / per_kind}
                         for r in s.rows for k in KINDS])


def by_kind_figure(fractions: pd.DataFrame):
    """Fig. 9: the fraction of each kind's heads left open against lambda."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, ax = plt.subplots(figsize=(6, 3.5))
    sns.lineplot(data=fractions, x="lambda", y="fraction open", hue="kind", marker="o", ax=ax)
    ax.set_xscale("log")
    fig.tight_layout()
    plt.close(fig)
    return fig


def by_layer_figure(s: Sweep):
    """Fig. 10: heads left open per layer of each kind (columns) at each lambda (rows)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    per_kind, layers = s.full["retained"]["enc-self"], len(s.full["per_layer"]["enc-self"])
    fig, axes = plt.subplots(1, len(KINDS), figsize=(12, 3.2), sharey=True)
    for ax, k in zip(axes, KINDS):
        grid = pd.DataFrame([r["per_layer"][k] for r in s.rows], index=[f"{r['lam']:g}" for r in s.rows],
                            columns=range(1, layers + 1))
        sns.heatmap(grid, annot=True, fmt="d", cmap="Greens", vmin=0, vmax=per_kind // layers, cbar=False, ax=ax)
        ax.set(title=k, xlabel="layer", ylabel="lambda" if k == KINDS[0] else "")
    fig.tight_layout()
    plt.close(fig)
    return fig


def order_values(s: Sweep, table: pd.DataFrame) -> dict:
    """Fig. 9-10's claims: the order in which the kinds lose half their heads (C8: the encoder's
    first, the decoder-encoder's last), heads per layer, and the mean layer of the decoder's open
    heads of each kind."""
    per_kind, layers = s.full["retained"]["enc-self"], len(s.full["per_layer"]["enc-self"])
    order = pruning_order(table)
    c8 = order_verdict(order)[1]
    return {"sec63-heads-per-kind": per_kind, "sec63-heads-per-layer": per_kind // layers,
            "sec63-order": order_text(order),
            "sec63-c8": (not_assessable(s.out.parent) or c8).removesuffix("."),
            "sec63-layer-dec-self": mean_open_layer(s.rows, "dec-self", per_kind),
            "sec63-layer-dec-enc": mean_open_layer(s.rows, "dec-enc", per_kind)}

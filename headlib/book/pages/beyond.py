"""The Beyond page (`08_beyond`): other ways of choosing the heads to prune, against Sec. 6's Hard
Concrete gates. Importance measures and their agreement, pruning without retraining (Michel et
al.'s ablation curves), fine-tuned methods at the same budget (DSP, fixed masks of random or top
heads; Budhraja et al.), DSP's settings as dev chooses them, and the speed of a physically smaller model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from headlib.analysis.importance import (bleu_without_retraining, gradient_importance, keep_top, michel_schedule,
                                        random_mask)
from headlib.claims import not_assessable
from headlib.config import get_config
from headlib.data.batching import Encoded
from headlib.data.corpora import Corpus, load_split, main_test_set
from headlib.profiles import grids
from headlib.pruning.points import points, prune_point, scratch_rows
from headlib.pruning.prune import DSP_TAU, PruneConfig
from headlib.pruning.readout import (METHOD_ORDER, choice_of_heads_verdict, dev_choice, dev_choice_note,
                                     method_comparison, method_gaps)
from headlib.pruning.subset import OVERLAP_DRAWS, subset_overlap
from headlib.settings import results_dir
from headlib.tables import read_table
from headlib.train import Prepared, prepare_data, trained_model


def _ints(text: str, default) -> list[int]:
    return [int(k) for k in text.split(",")] if text else list(default)


def _at_most(counts, n: int) -> list[int]:
    """The head counts of a grid that a model of `n` heads has."""
    return [k for k in counts if k <= n]


@dataclass
class Beyond:
    model: object
    bpe: object
    run: dict                 # the model's training record
    out: Path                 # results/<profile>/<pair>/seed<seed>
    seed: int
    pair: str
    data: Prepared            # the training batches the fine-tuned methods use
    dev: Corpus               # dev pairs for gradient importance
    test: Corpus              # the pair's main test set
    ks: list[int]             # encoder heads kept by the ablation curves
    ft_ks: list[int]          # ... by the fine-tuned methods
    dsp_lr_ks: list[int]      # ... where DSP also runs with other logit rates and temperatures
    ft_steps: int             # fine-tuning updates of every fine-tuned method (Sec. 6's budget)
    random_seeds: int         # random masks per head count

    def dev_pairs(self) -> Encoded:
        """The dev pairs as ids, for gradient importance."""
        return Encoded(self.bpe.encode_batch(self.dev.src), self.bpe.encode_targets(self.dev.tgt))

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.model.head_mask("enc-self").shape)

    def fine_tuned(self, **kw) -> dict:
        """One cached fine-tuning point (Sec. 6 budget: encoder only, `ft_steps` updates, same batches)."""
        return prune_point(self.model, self.data, PruneConfig(steps=self.ft_steps, seed=self.seed, **kw), self.pair,
                           self.run["len_alpha"], self.run["config"]["train"]["beam"], self.out / "pruning")


def setup(profile: str, pair: str, seed: int, n_dev: int = 0, head_counts: str = "", finetune_heads: str = "",
          dsp_lr_heads: str = "", finetune_steps: int = 0, random_seeds: int = 0) -> Beyond:
    """The page's model and data; empty parameters take the profile's grids (`headlib.profiles.Grids`:
    the head counts the model has, for an imported model of another size) and sample sizes (500 dev
    pairs, 20 for smoke)."""
    grid = grids(profile)
    model, bpe, run = trained_model(profile, pair, seed)
    layers, heads = model.head_mask("enc-self").shape
    dev = load_split(pair, "dev").head(n_dev or (20 if profile == "smoke" else 500))
    return Beyond(model, bpe, run, results_dir(profile, pair, seed), seed, pair,
                  prepare_data(get_config(profile, [f"train.seed={seed}"], pair=pair)), dev,
                  load_split(pair, main_test_set(pair)),
                  _ints(head_counts, range(layers * heads, -1, -grid.ablation_step)),
                  _ints(finetune_heads, _at_most(grid.method_heads, layers * heads)),
                  _ints(dsp_lr_heads, _at_most(grid.dsp_lr_heads, layers * heads)),
                  finetune_steps or grid.finetune_steps, random_seeds or grid.random_masks)


def _per_head(table: pd.DataFrame, values: torch.Tensor) -> list[float]:
    """A (layers, heads) tensor's value for each row (1-based layer, head) of `table`."""
    return values[torch.tensor(table["layer"].to_numpy()) - 1, torch.tensor(table["head"].to_numpy()) - 1].tolist()


def importance_measures(b: Beyond) -> tuple[pd.DataFrame, dict[int, dict], int]:
    """Every encoder head's importance by each measure (importance_measures.csv): confidence and
    LRP (Sec. 4; LRP's paper rule where the Sec. 4 page computed it), Michel et al.'s gradient
    importance on dev, Hard Concrete survival (Sec. 6.2, where computed) and DSP's logits at the
    fine-tuned head count nearest half the heads. Returns the table, DSP's points by head count
    and that head count."""
    importance = read_table(b.out, "head_importance.csv")
    measures = importance[["layer", "head", "confidence", "relevance"]].rename(columns={"relevance": "LRP"})
    measures["gradient (Michel)"] = _per_head(measures, gradient_importance(b.model, b.dev_pairs())["enc-self"])
    rules = b.out / "lrp_rules.csv"
    if rules.is_file() and "paper" in (paper := pd.read_csv(rules)).columns:
        measures = measures.merge(paper[["layer", "head", "paper"]].rename(columns={"paper": "LRP (paper rule)"}),
                                  on=["layer", "head"])
    if (survival := b.out / "pruning_survival.csv").is_file():
        survives = pd.read_csv(survival)[["layer", "head", "survives_to_lambda"]]
        measures = measures.merge(survives.rename(columns={"survives_to_lambda": "Hard Concrete survival"}),
                                  on=["layer", "head"])
    dsp = {k: b.fine_tuned(method="dsp", k=k) for k in b.ft_ks}
    k_dsp = min(b.ft_ks, key=lambda k: abs(k - b.shape[0] * b.shape[1] / 2))
    measures[f"DSP logit (k={k_dsp})"] = _per_head(measures, torch.tensor(dsp[k_dsp]["logits"]["enc-self"]))
    measures.to_csv(b.out / "importance_measures.csv", index=False)
    return measures, dsp, k_dsp


def agreement_figure(measures: pd.DataFrame):
    """Spearman's rank correlation between every two measures."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, ax = plt.subplots(figsize=(6, 5))
    sns.heatmap(measures.drop(columns=["layer", "head"]).corr(method="spearman"), annot=True, fmt=".2f", cmap="RdBu_r",
                vmin=-1, vmax=1, ax=ax)
    fig.tight_layout()
    plt.close(fig)
    return fig


def ablation_curves(b: Beyond, measures: pd.DataFrame) -> pd.DataFrame:
    """Greedy test BLEU with only the top k heads by confidence, LRP, Michel's iterative gradient
    schedule, or random heads, kept without retraining, beside Hard Concrete's fine-tuned points
    (pruning_orders.csv): one row per (method, heads[, draw])."""
    layers, heads = b.shape
    ordered = measures.sort_values(["layer", "head"])
    scores = {m: torch.tensor(ordered[m].to_numpy(), dtype=torch.float).view(layers, heads)
              for m in ("confidence", "LRP")}
    masks = [(m, keep_top(s, k)) for m, s in scores.items() for k in b.ks]
    masks += [(f"random {r}", random_mask((layers, heads), k, seed=r))
              for r in range(1, b.random_seeds + 1) for k in b.ks]
    schedule = michel_schedule(b.model, b.dev_pairs(), step=step(b) / (layers * heads))
    masks += [("gradient (Michel)", m["enc-self"]) for m in schedule if int(m["enc-self"].sum()) in b.ks]
    curves = pd.DataFrame(bleu_without_retraining(b.model, b.bpe, b.test, masks))
    curves["method"] = curves["method"].str.replace(r"random \d+", "random", regex=True)
    hc = [{"method": "Hard Concrete (fine-tuned)", "heads": r["retained"]["enc-self"], "BLEU": r["test_greedy"]}
          for r in points(b.out / "pruning", ("enc-self",), b.model)]
    curves = pd.concat([curves, pd.DataFrame(hc)], ignore_index=True)
    curves.to_csv(b.out / "pruning_orders.csv", index=False)
    return curves


def step(b: Beyond) -> int:
    """Heads between two points of the ablation curves."""
    return b.ks[0] - b.ks[1] if len(b.ks) > 1 else 1


def curves_values(b: Beyond, curves: pd.DataFrame) -> dict:
    """Each method's BLEU at the head count nearest 12 (the paper's Sec. 6.2 point), and all heads."""
    k_mid = min(b.ks, key=lambda k: abs(k - 12))
    at = curves[curves["heads"] == k_mid].groupby("method")["BLEU"].mean()
    full = curves[(curves["heads"] == b.shape[0] * b.shape[1]) & (curves["method"] == "LRP")]["BLEU"].iloc[0]
    methods = {"lrp": "LRP", "conf": "confidence", "michel": "gradient (Michel)", "random": "random"}
    return {"beyond-step": step(b), "beyond-random-seeds": b.random_seeds, "beyond-k-mid": k_mid,
            "beyond-full": float(full),
            **{f"beyond-{key}-mid": float(at.get(m, float("nan"))) for key, m in methods.items()}}


def curves_figure(curves: pd.DataFrame, test_set: str):
    import matplotlib.pyplot as plt
    import seaborn as sns
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(data=curves, x="heads", y="BLEU", hue="method", marker="o", errorbar=("pi", 100), ax=ax)
    ax.set(xlabel="encoder heads kept", ylabel=f"greedy BLEU ({test_set})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)
    return fig


def fine_tuned_methods(b: Beyond, measures: pd.DataFrame, dsp: dict[int, dict], labels: list[str]) -> pd.DataFrame:
    """The fine-tuned methods at each head count (`method_comparison`, pruning_methods.csv)."""
    layers, heads = b.shape
    ft = method_comparison(b.ft_ks, points(b.out / "pruning", ("enc-self",), b.model), dsp, b.fine_tuned, measures,
                           labels, range(1, b.random_seeds + 1), scratch_rows(b.out / "pruning"), layers * heads)
    ft.to_csv(b.out / "pruning_methods.csv", index=False)
    return ft


def methods_figure(b: Beyond, ft: pd.DataFrame):
    """Each fine-tuned method's beam BLEU per head count, the unpruned model dotted."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    full = json.loads((b.out / "pruning" / "full.json").read_text())["test_beam"]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    sns.pointplot(data=ft.assign(heads=ft["k"].map("{} heads".format)), x="method", y="BLEU", hue="heads",
                  order=[m for m in METHOD_ORDER if m in set(ft["method"])], palette="colorblind",
                  errorbar=("pi", 100), dodge=0.3 if len(b.ft_ks) > 1 else False, linestyle="none", ax=ax)
    ax.axhline(full, ls=":", c="grey")
    ax.set(xlabel="", ylabel=f"beam BLEU ({b.test.name})")
    ax.tick_params(axis="x", labelsize=8, rotation=20)
    fig.tight_layout()
    plt.close(fig)
    return fig


def methods_values(b: Beyond, ft: pd.DataFrame, spread: float | None) -> dict:
    """Where the choice of heads matters most (the head count with the largest gap between the best
    method and the random draws), each head count's gap, the devices, and the verdict against the
    seeds' `spread`."""
    from IPython.display import Markdown
    gaps = method_gaps(ft)
    worst = gaps.loc[gaps["random gap"].idxmax()]
    devices = ft.groupby("device")["method"].agg(
        lambda m: ", ".join(f"{n} {name}" for name, n in m.value_counts(sort=False).items()))
    return {"beyond-ft-steps": b.ft_steps, "beyond-ft-k": int(worst["k"]), "beyond-ft-best": worst["best"],
            "beyond-ft-spread": float(worst["spread"]), "beyond-ft-random-gap": float(worst["random gap"]),
            "beyond-ft-devices": Markdown("; ".join(f"{device}: {pts}" for device, pts in devices.items())),
            "beyond-ft-gaps": Markdown("; ".join(f"{k} heads: {g:.2f} BLEU"
                                                 for k, g in zip(gaps["k"], gaps["random gap"]))),
            "beyond-ft-verdict": Markdown(not_assessable(b.out) or choice_of_heads_verdict(ft, spread))}


def show_tau(tau) -> str:
    return " to ".join(f"{t:g}" for t in tau)


def dsp_settings(b: Beyond) -> tuple[pd.DataFrame, dict]:
    """DSP at the `dsp_lr_ks` head counts with the gates' and its own logit learning rate, and with
    our and Li et al.'s temperature: what dev chooses of each (item 5: choices on dev), and how far
    each DSP subset overlaps the others' (`subset_overlap`) against random subsets."""
    from IPython.display import Markdown
    layers, heads = b.shape
    slow = PruneConfig.gate_lr   # the Hard Concrete gates' learning rate, on DSP's logits
    lr_runs = [(k, lr, b.fine_tuned(method="dsp", k=k, logit_lr=lr))
               for k in b.dsp_lr_ks for lr in (slow, PruneConfig.logit_lr)]
    overlap = pd.DataFrame([{"k": k, "logit lr": lr, "DSP dev BLEU (greedy)": r["dev_greedy"],
                             "DSP BLEU": r["test_beam"],
                             "overlap": subset_overlap(torch.tensor(r["logits"]["enc-self"]), k),
                             "overlap of random subsets": k / (layers * heads)} for k, lr, r in lr_runs])
    tau_runs = [(k, tau, b.fine_tuned(method="dsp", k=k, tau=tau))
                for k in b.dsp_lr_ks for tau in (PruneConfig.tau, DSP_TAU)]
    return overlap.round(2).set_index(["k", "logit lr"]), {
        "beyond-dsp-lr": PruneConfig.logit_lr, "beyond-dsp-slow-lr": slow, "beyond-dsp-draws": OVERLAP_DRAWS,
        "beyond-dsp-lr-dev": Markdown(dev_choice_note(dev_choice(lr_runs), PruneConfig.logit_lr, "the logits' rate")),
        "beyond-dsp-tau-dev": Markdown(dev_choice_note(dev_choice(tau_runs), PruneConfig.tau, "the temperature",
                                                       show_tau)),
        "beyond-dsp-paper-tau": show_tau(DSP_TAU), "beyond-dsp-tau": show_tau(PruneConfig.tau)}


def speed(out: Path, model) -> tuple[pd.DataFrame, dict]:
    """The committed shrink benchmark of the profile (`benchmarks/shrink_speed.py`, one thread) if it
    measured `model`: one row per model, and the speed-ups of the 12-head encoder the prose cites."""
    from IPython.display import Markdown
    bench = out.parents[1] / "benchmarks" / "shrink_speed_1thread.json"
    record = json.loads(bench.read_text()) if bench.is_file() else {}
    if record.get("model") != model.fingerprint():
        return pd.DataFrame({"model": ["(no benchmark of this model)"]}), {
            "beyond-speed-source": Markdown("not measured on this model: run `benchmarks/shrink_speed.py`"),
            "beyond-speed-set": "-", "beyond-speed-k": 0, "beyond-speed-of": 0,
            "beyond-speed-enc": float("nan"), "beyond-speed-beam": float("nan")}
    rows = record["results"]
    table = pd.DataFrame([{"model": r["config"], **{f"{k} heads": v for k, v in r["heads"].items()},
                           "parameters": f"{r['parameters'] / 1e6:.2f}M",
                           "encoder forward": f"{r['encode_speedup']:.2f}x", "beam search": f"{r['beam_speedup']:.2f}x",
                           "same as masked": r["same_translations_as_masked"]} for r in rows])
    at12 = next(r for r in rows if r["config"] == "enc-self 12")
    return table, {"beyond-speed-source": Markdown(f"`benchmarks/shrink_speed.py`, {record.get('threads', 1)} thread, "
                                                   f"`{bench.relative_to(out.parents[3])}`"),
                   "beyond-speed-set": record.get("test_set", "the test set"),
                   "beyond-speed-k": at12["heads"]["enc-self"],
                   "beyond-speed-of": rows[0]["heads"]["enc-self"], "beyond-speed-enc": at12["encode_speedup"],
                   "beyond-speed-beam": at12["beam_speedup"]}

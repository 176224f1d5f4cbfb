"""The studies around the paper (the "Around the paper" chapter): the sweeps of edited models that
some of them run, and each original claim, our number from this study's result tables, and a
verdict by a stated criterion (as `headlib.claims`).

BLEU here is greedy BLEU on the first `n` dev sentences (the notebook's parameter), edits at
inference only; "minimal loss" is at most 1% of the intact model's BLEU.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from scipy.stats import wilcoxon

from headlib.analysis.interventions import Counts, constant_attention, edit_attention, log_quantize, threshold
from headlib.claims import FAILS, HOLDS, PARTLY, Claim, claims_table
from headlib.nn.decode import evaluate_bleu
from headlib.nn.model import KINDS
from headlib.tables import read_table

THRESHOLDS = (0.0, 0.001, 0.01, 0.03, 0.05, 0.1, 0.2, 0.3)   # A3: attention values below t set to 0
BITS = (1, 2, 3, 4)                                          # A3: log quantization to 2^bits levels


def constant_attention_sweep(model, bpe, dev, patterns, full: float, counts: Counts | None = None) -> pd.DataFrame:
    """A2: greedy BLEU on `dev` with encoder heads made constant (`interventions.constant_attention`
    with the average `patterns`, {source length S: (L, H, S, S)}), one row per setting, in this
    order: each head alone ("what" "head", 1-based "layer" and "head", 1 head), each layer's heads
    together ("layer", head 0), and every head ("all", layer 0, head 0); "heads" counts the constant
    heads, "change" is BLEU minus `full`, the intact model's. `counts` gathers the sentences whose
    length no training sentence had."""
    L, H = model.head_mask("enc-self").shape              # encoder layers, heads per layer

    def bleu(heads: set[tuple[int, int]]) -> float:   # 0-based (layer, head)
        with edit_attention(model, "enc-self", constant_attention(patterns, heads, counts)):
            return evaluate_bleu(model, bpe, dev)["bleu"]

    rows = [{"what": "head", "layer": l + 1, "head": h + 1, "heads": 1, "BLEU": bleu({(l, h)})}
            for l in range(L) for h in range(H)]
    rows += [{"what": "layer", "layer": l + 1, "head": 0, "heads": H, "BLEU": bleu({(l, h) for h in range(H)})}
             for l in range(L)]
    rows.append({"what": "all", "layer": 0, "head": 0, "heads": L * H,
                 "BLEU": bleu({(l, h) for l in range(L) for h in range(H)})})
    return pd.DataFrame(rows).assign(change=lambda d: d["BLEU"] - full)     # (L * H + L + 1, 6)


def edit_sweep(model, bpe, dev, edits, name: str) -> pd.DataFrame:
    """Greedy BLEU on `dev` with each edit of `edits` applied to every head of all three attention
    kinds. `edits`: (setting, make) pairs, where make(counts) returns the edit, fn(weights (B, H, Tq,
    Tk), layer) -> weights. One row per setting, in order: "BLEU", "zeroed" (the share of real
    attention values the edit set to zero, `Counts.zeroed_fraction`) and `name` (the setting)."""
    rows = []
    for setting, make in edits:
        counts = Counts()
        with edit_attention(model, KINDS, make(counts)):
            bleu = evaluate_bleu(model, bpe, dev)["bleu"]
        rows.append({"BLEU": bleu, "zeroed": counts.zeroed_fraction, name: setting})
    return pd.DataFrame(rows)                                                # (len(edits), 3)


def sparsity_sweep(model, bpe, dev, thresholds=THRESHOLDS) -> pd.DataFrame:
    """A3: `edit_sweep` over `interventions.threshold` at each of `thresholds` (column "threshold")."""
    return edit_sweep(model, bpe, dev, [(t, lambda c, t=t: threshold(t, c)) for t in thresholds], "threshold")


def quantization_sweep(model, bpe, dev, bits=BITS) -> pd.DataFrame:
    """A3: `edit_sweep` over `interventions.log_quantize` at each number of `bits` (column "bits")."""
    return edit_sweep(model, bpe, dev, [(b, lambda c, b=b: log_quantize(b, counts=c)) for b in bits], "bits")


def a1_single_heads(out):
    t = read_table(out, "single_head_ablation.csv")
    worst, best = t.loc[t["change"].idxmin()], t.loc[t["change"].idxmax()]
    improve = int((t["change"] >= 0.3).sum())
    harmless = worst["change"] > -1.0
    verdict = HOLDS if harmless and improve else PARTLY if harmless or improve else FAILS
    return (f"worst single head {worst['kind']} {worst['layer']}.{worst['head']}: {worst['change']:+.2f} BLEU; "
            f"{improve} of {len(t)} heads improve BLEU by >= 0.3 when removed (best {best['kind']} "
            f"{best['layer']}.{best['head']}: {best['change']:+.2f})"), verdict


def a2_constant_attention(out):
    t = read_table(out, "constant_attention.csv")
    heads = t[t["what"] == "head"]
    every = t[t["what"] == "all"].iloc[0]
    ok = int((heads["change"] > -0.5).sum())
    relative = -every["change"] / (every["BLEU"] - every["change"])
    verdict = HOLDS if relative <= 0.10 else PARTLY if ok >= len(heads) / 2 else FAILS
    return (f"{ok} of {len(heads)} encoder heads lose < 0.5 BLEU when made constant; all "
            f"{int(every['heads'])} at once: {every['change']:+.2f} BLEU ({relative:.0%} of the intact model)"), verdict


def a3_sparsity_quantization(out):
    sp, qu = read_table(out, "attention_sparsity.csv"), read_table(out, "attention_quantization.csv")
    full = sp.loc[sp["threshold"] == 0, "BLEU"].item()
    fine = sp[sp["BLEU"] >= 0.99 * full]
    zeroed = float(fine["zeroed"].max())
    three = qu.loc[qu["bits"] == 3, "BLEU"].item()
    a, b = zeroed >= 0.8, three >= 0.99 * full
    verdict = HOLDS if a and b else PARTLY if a or b else FAILS
    return (f"{zeroed:.0%} of attention values zeroed within 1% of BLEU (threshold "
            f"{fine.loc[fine['zeroed'].idxmax(), 'threshold']:g}); 3-bit log quantization {three:.2f} vs {full:.2f}"), verdict


def a4_rollout(out):
    t = read_table(out, "rollout.csv")
    local, glob = t["LRP vs local"].mean(), t["LRP vs rollout"].mean()
    p = wilcoxon(t["LRP vs rollout"], t["LRP vs local"], alternative="greater").pvalue
    verdict = HOLDS if glob > local and p < 0.05 else FAILS
    return (f"Spearman with LRP input relevance: rollout {glob:.2f} vs local attention {local:.2f} "
            f"(mean over {len(t)} sentences; Wilcoxon p = {p:.1e}); local vs rollout {t['local vs rollout'].mean():.2f}"), verdict


def a5_crosslingual(out):
    t = read_table(out, "crosslingual_agreement.csv")
    rho = lambda level: t.loc[t["level"] == level, "rho"].mean()
    heads, layers, domain = rho("heads across pairs"), rho("layer top share"), rho("heads, ntrex vs own test set")
    verdict = HOLDS if heads >= 0.5 else PARTLY if heads > 0.2 or layers >= 0.6 else FAILS
    return (f"head relevance, head by head across target languages (same initial weights): rho {heads:.2f}; "
            f"per-layer top-head share: rho {layers:.2f}; same model, NTREX vs its own test set: rho {domain:.2f}"), verdict


def a6_lottery(out):
    t = read_table(out, "lottery.csv").set_index("method")
    full, ticket = t.loc["unpruned"], t.loc["lottery ticket"]
    change, speedup = ticket["BLEU"] - full["BLEU"], ticket["encoder speed-up"]
    a, b = change >= -0.5, speedup >= 1.2
    verdict = HOLDS if a and b else PARTLY if a or b else FAILS
    hc = t[t.index.str.startswith("Hard Concrete")]
    versus = f"; Hard Concrete at {int(hc['encoder heads'].iloc[0])} heads: {hc['BLEU'].iloc[0]:.2f}" if len(hc) else ""
    ci = (f" [{ticket['vs. unpruned low']:+.2f}, {ticket['vs. unpruned high']:+.2f}]"
          if pd.notna(ticket.get("vs. unpruned low", float("nan"))) else "")
    return (f"{int(ticket['encoder heads'])} of {int(full['encoder heads'])} encoder heads: {ticket['BLEU']:.2f} vs "
            f"{full['BLEU']:.2f} BLEU ({change:+.2f}{ci}), encoder {speedup:.2f}x faster, {int(ticket['updates']):,} "
            f"updates vs {int(full['updates']):,}{versus}"), verdict


def adaptation_table(out: Path) -> Path:
    """A7's table beside the results dir `out`: the en-ru news model's of the same profile and seed
    (`headlib.studies.domains`)."""
    return out.parent.parent / "en-ru.news" / out.name / "adaptation.csv"


def a7_head_adaptation(out):
    t = read_table(adaptation_table(out).parent, "adaptation.csv").set_index("way")
    start, full = t.loc["none", "tatoeba"], t.loc["all", "tatoeba"]
    alps = t.loc[t.index.str.startswith("alps")].iloc[0]
    rand = t.loc[t.index.str.startswith("random"), "tatoeba"]
    recovered = (alps["tatoeba"] - start) / (full - start) if full > start else float("nan")
    a, b = recovered >= 0.9, alps["tatoeba"] > rand.max()      # random draws vary: beat every one
    verdict = HOLDS if a and b else PARTLY if a or b else FAILS
    return (f"held-out Tatoeba BLEU of the news model {start:.2f}; adapted, all parameters {full:.2f}; only the "
            f"{int(alps['heads'])} most shifted heads ({alps['updated share']:.1%} of the parameters) "
            f"{alps['tatoeba']:.2f} ({recovered:.0%} of the gain); {int(alps['heads'])} random heads "
            f"{rand.mean():.2f} (mean of {len(rand)} draws, {rand.min():.2f}-{rand.max():.2f})"), verdict


def a8_refined_lrp(out):
    t = read_table(out, "refined_lrp.csv").pivot(index="sentence", columns="ordering", values="area")
    p = wilcoxon(t["refined LRP"], t["plain LRP"], alternative="less").pvalue
    verdict = HOLDS if t["refined LRP"].mean() < t["plain LRP"].mean() and p < 0.05 else FAILS
    return (f"deletion-curve area (mean log-prob, lower is better): refined {t['refined LRP'].mean():.3f}, plain "
            f"{t['plain LRP'].mean():.3f}, random {t['random'].mean():.3f} ({len(t)} sentences; Wilcoxon p = {p:.1e})"), verdict


STUDIES = (
    Claim("A1", "Kovaleva et al. 2019", "Disabling single heads does not hurt, and some heads improve the model when removed",
          "BERT on GLUE: up to +3.2% accuracy",
          "worst single-head loss < 1 BLEU and >= 1 head improves by >= 0.3 (partly: one of the two)", a1_single_heads),
    Claim("A2", "Hassid et al. 2022", "Attention can be replaced by constant, input-independent patterns at a small cost",
          "PAPA: ~8% relative drop with all heads constant (BERT)",
          "all encoder heads constant cost <= 10% of BLEU (partly: half the single heads lose < 0.5)", a2_constant_attention),
    Claim("A3", "Ji et al. 2021", "~80% of attention values can be pruned, and 3-bit log quantization suffices",
          "80% zeros, 3 bits, minimal loss", "both within 1% of BLEU (partly: one)", a3_sparsity_quantization),
    Claim("A4", "Pascual et al. 2021", "Global (rollout) attribution differs from local attention and explains more",
          "BERT: local and global views disagree", "rollout agrees better with LRP input relevance (Wilcoxon p < 0.05)", a4_rollout),
    Claim("A5", "Ma et al. 2021", "The same heads matter across languages", "mBERT: shared important heads",
          "Spearman of head relevance across target languages >= 0.5 (partly: > 0.2, or layer top-head shares >= 0.6)",
          a5_crosslingual),
    Claim("A6", "Behnke and Heafield 2020", "Heads pruned early by confidence (lottery) give a faster model at little cost",
          "3/4 of heads, -0.1 BLEU, 1.5x faster",
          "the ticket keeping 1/4 of the encoder heads loses <= 0.5 test BLEU (beam) and its encoder is >= 1.2x "
          "faster (partly: one of the two)", a6_lottery),
    Claim("A7", "Chen et al. 2025 (ALPS)", "Updating only task-sensitive heads adapts a model across domains",
          "10% of attention parameters, +2% over baselines",
          "the most shifted 10% of heads recover >= 90% of the all-parameter fine-tune's BLEU gain on the new "
          "domain and beat every draw of as many random heads (partly: one of the two)", a7_head_adaptation),
    Claim("A8", "Chen et al. 2024", "LRP restricted to important heads gives better explanations", "+3 to +33% on explanation metrics",
          "refined LRP's deletion curve falls faster than plain LRP's (Wilcoxon p < 0.05)", a8_refined_lrp),
)


def studies_table(out) -> pd.DataFrame:
    return claims_table(out, STUDIES).rename(columns={"section": "study"})

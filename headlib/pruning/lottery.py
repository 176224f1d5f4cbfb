"""Lottery-ticket head pruning (Behnke and Heafield 2020, "Losing Heads in the Lottery"), on the
baseline's own recipe and update budget.

    1. train the baseline recipe for `prune_at` updates (a fraction of the baseline's updates);
    2. rank the encoder heads by confidence (Sec. 4) on dev sentences, keep the `k` most confident
       over all layers (one shot);
    3. rewind to the training state at update `rewind_to` (weights, Adam moments, schedule step,
       data position and RNG: "late resetting", Frankle et al. 2019);
    4. retrain from there with the other heads masked, to the baseline's number of updates.

The retrained model is the "ticket". Its training cost is `prune_at` + (updates - `rewind_to`)
updates; with `k` equal to every head, step 4 resumes the baseline run exactly (tested).

    python -m headlib.pruning.lottery --profile cpu --pair en-de --k 12

writes `results/<profile>/<pair>/seed<seed>/lottery/lottery-k<k>-p<prune_at>-r<rewind_to>.json`
(read back, not recomputed, while the baseline model is the same); the runs live under
`artifacts/lottery/`.
"""
from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import torch

from headlib.analysis.heads import confidence, encoder_attention
from headlib.analysis.importance import keep_top
from headlib.config import get_config
from headlib.data.corpora import load_split, main_test_set
from headlib.files import artifacts_dir, load_checkpoint, write_json
from headlib.nn.decode import evaluate_bleu
from headlib.nn.masks import canonical, parse_spec, to_spec
from headlib.profiles import LotteryConfig
from headlib.pruning.points import (beam_translations, device_name, matched_budget, nearest, points, read_point,
                                    scratch_config, scratch_rows)
from headlib.pruning.readout import interval
from headlib.pruning.shrink import encoder_batches, encoder_seconds, shrink, with_masks
from headlib.settings import results_dir
from headlib.train import Trainer, finalize, load_model, run_dir, start_from, trained_model


def point_name(cfg: LotteryConfig, total: int) -> str:
    prune_at, rewind_to = cfg.updates(total)
    return f"lottery-k{cfg.k}-p{prune_at}-r{rewind_to}.json"


def confidence_mask(model, bpe, sentences, k: int, eos_mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(mask, confidence): the `k` most confident encoder heads over all layers, (layers, heads)."""
    conf = confidence(encoder_attention(model, bpe, sentences), eos_mode)
    return keep_top(conf, k), conf


def _trainer(cfg, out: Path, progress: bool) -> Trainer:
    trainer = Trainer(cfg, out, progress)
    trainer.state["stopped"] = ""  # a finished phase is continued by a later phase's max_steps
    return trainer


def early_phase(cfg, work: Path, prune_at: int, rewind_to: int, progress: bool) -> Trainer:
    """Phase 1: the baseline's recipe `cfg` trained to `prune_at` updates in work/early, its whole
    training state at `rewind_to` kept as work/rewind.pt; the baseline's learning rates throughout
    (its decay to 0 at its last update, not at `prune_at`). Resumable."""
    early_dir, rewind = work / "early", work / "rewind.pt"
    if not rewind.is_file():
        shutil.rmtree(early_dir, ignore_errors=True)
        trainer = _trainer(cfg, early_dir, progress)
        early_dir.mkdir(parents=True)
        if rewind_to:
            trainer.fit(stop_after=rewind_to)
        trainer.save()   # rewind_to = 0: the initial weights
        shutil.copyfile(early_dir / "last.pt", rewind)
    trainer = _trainer(cfg, early_dir, progress)
    if trainer.state["step"] < prune_at:
        trainer.fit(stop_after=prune_at)
        trainer.save()
    return trainer


def run(profile: str, pair: str, seed: int, cfg: LotteryConfig, progress: bool = False) -> dict:
    """The lottery point of the (profile, pair, seed) baseline; resumable at every phase."""
    model, bpe, base = trained_model(profile, pair, seed)
    total = base["steps"]
    prune_at, rewind_to = cfg.updates(total)
    out = results_dir(profile, pair, seed) / "lottery"
    path = out / point_name(cfg, total)
    fingerprint = model.fingerprint()
    hard_concrete = compared_points(profile, pair, seed, cfg.k, model)[0]
    if path.is_file() and (row := json.loads(path.read_text())).get("model") == fingerprint:
        final = artifacts_dir() / row["ticket_run"] / "final.pt"
        if row["speed"]["hard_concrete_lam"] != (hard_concrete or {}).get("lam") and final.is_file():
            # Hard Concrete's points changed since the ticket was timed: time the three again
            row["speed"] = encoder_speed(model, bpe, pair, load_model(final)[0], hard_concrete)
            write_json(path, row)
        if "test_hypotheses" not in row and final.is_file():   # a record from before they were kept
            write_json(path, row := row | {"test_hypotheses": ticket_translations(row, pair)})
        return row
    early_cfg = get_config(profile, [f"train.seed={seed}"], pair=pair)   # the baseline's recipe and rates
    work = artifacts_dir() / "lottery" / f"{run_dir(early_cfg).name}-k{cfg.k}-p{prune_at}-r{rewind_to}"
    rewind = work / "rewind.pt"
    trainer = early_phase(early_cfg, work, prune_at, rewind_to, progress)             # 1.
    history = trainer.state["history"]
    early = {"steps": prune_at, "minutes": round(trainer.state["elapsed"] / 60, 2),
             "dev_bleu": history[-1]["dev_bleu"] if history and history[-1]["step"] == prune_at
             else evaluate_bleu(trainer.model.eval(), trainer.data.bpe, trainer.data.dev)["bleu"]}
    # 2. the k most confident encoder heads at `prune_at`
    dev = list(load_split(pair, "dev").src[: cfg.n_confidence])
    mask, conf = confidence_mask(trainer.model, trainer.data.bpe, dev, cfg.k, cfg.eos_mode)
    spec = to_spec({"enc-self": mask})
    # 3-4. rewind and retrain with the mask, to the baseline's number of updates
    ticket_cfg = scratch_config(profile, pair, seed, spec, total)
    ticket_dir = work / "ticket"
    if not (ticket_dir / "last.pt").is_file():
        start_from(rewind, ticket_dir, ticket_cfg, {"enc-self": mask})
    trainer = _trainer(ticket_cfg, ticket_dir, progress)
    if trainer.state["step"] < total:
        trainer.fit()
    rewind_minutes = load_checkpoint(rewind, "rewind checkpoint")["state"]["elapsed"] / 60
    results = finalize(trainer)
    speed = encoder_speed(model, bpe, pair, trainer.model.eval(), hard_concrete)
    test = main_test_set(pair)
    row = {"k": cfg.k, "prune_at": prune_at, "rewind_to": rewind_to, "baseline_updates": total,
           "mask": spec, "retained": {"enc-self": int(mask.sum())}, "confidence_at_prune": conf.tolist(),
           "early": early, "ticket_updates": results["steps"] - rewind_to,
           "ticket_minutes": round(results["train_minutes"] - rewind_minutes, 2),
           "total_updates": prune_at + results["steps"] - rewind_to,
           "test_beam": results["test"][test]["beam"]["bleu"], "test_greedy": results["test"][test]["greedy"]["bleu"],
           "test_set": test, "model": fingerprint, "ticket_run": str(ticket_dir.relative_to(artifacts_dir())),
           "lottery_config": asdict(cfg), "device": device_name(), "speed": speed, "results": results}
    write_json(path, row := row | {"test_hypotheses": ticket_translations(row, pair)})
    return row


def ticket_translations(row: dict, pair: str) -> list[str]:
    """The ticket's beam translations of the main test set (its length penalty chosen on dev), for
    paired bootstraps against the unpruned model."""
    return beam_translations(artifacts_dir() / row["ticket_run"] / "final.pt", load_split(pair, row["test_set"]),
                             row["results"]["config"]["train"]["beam"], row["results"]["len_alpha"])


def encoder_speed(model, bpe, pair: str, ticket, hard_concrete: dict | None) -> dict:
    """Encoder seconds over the main test set on one thread: the unpruned model, and the ticket
    and Hard Concrete's point with the same number of heads, both with their heads removed."""
    models = {"unpruned": model, "lottery": shrink(ticket).eval()}
    if hard_concrete is not None:
        models["Hard Concrete"] = shrink(with_masks(model, hard_concrete["mask"])).eval()
    batches = encoder_batches(bpe, load_split(pair, main_test_set(pair)).src)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seconds = encoder_seconds(models, batches)
    finally:
        torch.set_num_threads(threads)
    return {"threads": 1, "encode_seconds": {k: round(v, 3) for k, v in seconds.items()},
            "hard_concrete_lam": hard_concrete["lam"] if hard_concrete else None}


def comparison(row: dict, baseline: dict, hard_concrete: dict | None, scratch: dict | None,
               unpruned: dict | None = None, refs: list[str] | None = None) -> pd.DataFrame:
    """The ticket beside the unpruned baseline, Hard Concrete's point (fine-tuned from the trained
    model, Sec. 6.2) and training from scratch with Hard Concrete's mask: encoder heads kept,
    training updates in all (for Hard Concrete, its fine-tuning or its path's updates up to it),
    test BLEU (beam) and encoder speed-up on one thread. The from-scratch model has Hard Concrete's
    shapes, so its speed is that of Hard Concrete's point. "vs. unpruned" is each BLEU minus the
    unpruned model's, with its 95% paired bootstrap interval ("... low", "... high") against the
    unpruned model's scored point `unpruned` (Sec. 6's full.json) given the test references `refs`;
    NaN where a model's translations were not kept."""
    seconds, test = row["speed"]["encode_seconds"], row["test_set"]
    speedup = {name: seconds["unpruned"] / s for name, s in seconds.items()}
    heads = sum(len(r) for r in row["confidence_at_prune"])
    rows = [("unpruned", heads, baseline["steps"], baseline["test"][test]["beam"]["bleu"], 1.0),
            ("lottery ticket", row["retained"]["enc-self"], row["total_updates"], row["test_beam"], speedup["lottery"])]
    systems = [unpruned, row]                  # whose translations each row's interval resamples
    if hard_concrete is not None:
        hc_heads = hard_concrete["retained"]["enc-self"]
        rows.append((f"Hard Concrete (lambda {hard_concrete['lam']:g})", hc_heads,
                     matched_budget(baseline["steps"], hard_concrete), hard_concrete["test_beam"],
                     speedup.get("Hard Concrete")))
        systems.append(hard_concrete)
        if scratch is not None:
            rows.append(("from scratch, Hard Concrete's mask", hc_heads, scratch["steps"], scratch["test_beam"],
                         speedup.get("Hard Concrete")))
            systems.append(scratch)
    table = pd.DataFrame(rows, columns=["method", "encoder heads", "updates", "BLEU", "encoder speed-up"])
    table["vs. unpruned"] = table["BLEU"] - table.loc[0, "BLEU"]
    table[["vs. unpruned low", "vs. unpruned high"]] = [interval(s or {}, unpruned, refs) for s in systems]
    return table


class TicketSummary(NamedTuple):
    kept: torch.Tensor                  # (layers, heads) 0/1: the encoder heads the ticket keeps
    hc_kept: torch.Tensor | None        # (layers, heads) 0/1: those of Hard Concrete's point; None without one
    text: str                           # the page's paragraph (Markdown) on the ticket against the others


def ticket_summary(row: dict, table: pd.DataFrame, hard_concrete: dict | None, layer_counts: dict[str, int],
                   n_heads: int) -> TicketSummary:
    """The ticket (`run`'s row) read against its `comparison` table: the encoder masks of the ticket
    and of Hard Concrete's point (`compared_points`), parsed with the model's `layer_counts` and
    `n_heads`, and a paragraph: the ticket's BLEU against the unpruned model's, its updates in all and
    retraining minutes; with a Hard Concrete point, that point's heads and BLEU, the heads the two
    masks share, and in how many encoder layers each keeps a head."""
    kept = parse_spec(row["mask"], layer_counts, n_heads)["enc-self"]
    hc_kept = parse_spec(hard_concrete["mask"], layer_counts, n_heads)["enc-self"] if hard_concrete else None
    t = table.set_index("method")
    ours, full = t.loc["lottery ticket"], t.loc["unpruned", "BLEU"]
    text = (f"The ticket scores **{ours['BLEU']:.2f}** BLEU against {full:.2f} for the unpruned model "
            f"({ours['BLEU'] - full:+.2f}), after {row['total_updates']:,} updates in all "
            f"({row['ticket_minutes']:.0f} minutes for the retraining on {row['device']}).")
    if hard_concrete is not None:
        hc_name = t.index[t.index.str.startswith("Hard Concrete")][0]
        text += (f" Hard Concrete's point with {int(t.loc[hc_name, 'encoder heads'])} heads scores "
                 f"{t.loc[hc_name, 'BLEU']:.2f}; the two masks share {int((kept * hc_kept).sum())} heads, and the "
                 f"ticket keeps heads in {int((kept.sum(1) > 0).sum())} of {kept.shape[0]} layers "
                 f"(Hard Concrete: {int((hc_kept.sum(1) > 0).sum())}).")
    return TicketSummary(kept, hc_kept, text)


def compared_points(profile: str, pair: str, seed: int, k: int, model
                    ) -> tuple[dict | None, dict | None, dict | None]:
    """Hard Concrete's encoder point nearest to `k` heads (of `model`), the from-scratch run with
    its mask and the unpruned model's scored point (Sec. 6.2's full.json), where they exist."""
    out = results_dir(profile, pair, seed) / "pruning"
    full = read_point(out / "full.json", model.fingerprint())
    hc = points(out, ("enc-self",), model)
    if not hc:
        return None, None, full
    hc = nearest(hc, k)
    scratch = [r for r in scratch_rows(out) if r["mask"] == canonical(hc["mask"])]
    return hc, (scratch[0] if scratch else None), full


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--pair", default="en-de")
    ap.add_argument("--seed", type=int, default=1)
    for name, value in asdict(LotteryConfig()).items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = vars(ap.parse_args(argv))
    profile, pair, seed = args.pop("profile"), args.pop("pair"), args.pop("seed")
    row = run(profile, pair, seed, LotteryConfig(**args), progress=True)
    print(json.dumps({k: v for k, v in row.items() if k not in ("results", "confidence_at_prune", "test_hypotheses")}, indent=1))


if __name__ == "__main__":
    main()

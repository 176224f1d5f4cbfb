"""`python -m headlib.pruning curve|scratches|prune|dsp|fixed|scratch|pick ...`: one process's share of
a sweep (`headlib.pruning.points`; the book's notebooks run the same functions, this entry point lets
several processes share a GPU). One function per command; `main` reads the arguments and runs one."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import torch

from headlib.analysis.probe import FunctionProbe
from headlib.config import get_config
from headlib.profiles import grids
from headlib.pruning.points import (SETTINGS, all_heads_control, fixed_masks, full_point, independent_steps, lambda_grid, nearest,
                                    points, prune_point, pruning_curve, scratch_head_counts, scratch_plan,
                                    scratch_point, validate_curve, validation_lambdas)
from headlib.pruning.prune import PruneConfig
from headlib.settings import results_dir
from headlib.train import Prepared, prepare_data, release
from headlib.train.records import recorded_model, run_record, weights


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m headlib.pruning")
    p.add_argument("what", choices=["curve", "scratches", "prune", "dsp", "fixed", "scratch", "pick"],
                   help="curve: a setting's continuation path and its validation, as its page computes them; "
                        "scratches: that page's from-scratch runs, planned from the finished curve")
    p.add_argument("--setting", default="encoder", choices=list(SETTINGS), help="curve, scratches")
    p.add_argument("--no-validate", action="store_true", help="curve: the path alone")
    p.add_argument("--method", default="path", choices=["path", "independent"],
                   help="curve: the continuation path, or one fine-tuning per lambda from the release (the paper's)")
    p.add_argument("--profile", default="cpu")
    p.add_argument("--pair", default="en-de")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kinds", default="enc-self", help="comma-separated attention kinds to gate")
    p.add_argument("--lams", default="", help="comma-separated lambdas (prune: default 0.01; curve: the grid's)")
    p.add_argument("--steps", type=int, default=PruneConfig.steps, help="fine-tuning updates (prune)")
    p.add_argument("--k", default="12", help="comma-separated head counts (dsp, fixed)")
    p.add_argument("--labels", default="random-s1,random-s2,random-s3,michel,confidence,lrp",
                   help="fixed: which masks (random-s<seed> or an importance measure)")
    p.add_argument("--spec", default="", help="fixed head mask (scratch), as model.head_mask")
    p.add_argument("--totals", default="17,10", help="pick: print the masks of the points nearest these head counts")
    p.add_argument("--full", action="store_true", help="also score the unpruned model (full.json)")
    p.add_argument("--max-steps", type=int, default=0, help="updates of a scratch run (default: the baseline's)")
    return p


# -- commands that need no model ---------------------------------------------------------------

def pick(a: argparse.Namespace, out: Path) -> None:
    """The masks of the finished points nearest the head counts `--totals`, one a line."""
    rows = points(out, tuple(a.kinds.split(",")))
    print("\n".join(dict.fromkeys(nearest(rows, int(n))["mask"] for n in a.totals.split(","))) if rows else "")


def scratches(a: argparse.Namespace, out: Path) -> None:
    """A setting's from-scratch runs, planned from its finished curve (needs the committed curve and
    the baseline's release or record, not a trained run's weights)."""
    cfg = get_config(a.profile, [f"train.seed={a.seed}"], pair=a.pair)
    if release.release_of(cfg) is None and run_record(cfg) is None:
        raise SystemExit(f"scratches: no release and no record of the {a.profile} {a.pair} seed {a.seed} baseline: "
                         f"train it first (python -m headlib train --profile {a.profile} --pair {a.pair} --seed {a.seed})")
    model, base = recorded_model(a.profile, a.pair, a.seed)
    rows = points(out, SETTINGS[a.setting], model)
    if not rows:
        raise SystemExit(f"scratches: no finished {a.setting} curve of this baseline under {out}")
    for spec, steps in scratch_plan(rows, scratch_head_counts(a.profile, a.setting), base["steps"], a.setting):
        row = scratch_point(a.profile, a.pair, a.seed, spec, steps, out, progress=True)
        print(json.dumps({k: row[k] for k in ("retained", "test_beam", "steps", "device")}), flush=True)


def scratch(a: argparse.Namespace, out: Path) -> None:
    """One from-scratch run with the mask `--spec` (needs the baseline itself only when its number of
    updates, `--max-steps`, is not given)."""
    steps = a.max_steps or recorded_model(a.profile, a.pair, a.seed)[1]["steps"]
    row = scratch_point(a.profile, a.pair, a.seed, a.spec, steps, out, progress=True)
    print(json.dumps({k: row[k] for k in ("retained", "test_beam", "steps", "device")}))


# -- commands that fine-tune the baseline ------------------------------------------------------

class Baseline(NamedTuple):
    """The trained model with its data and the decoding settings its points are scored with."""
    model: object
    data: Prepared
    len_alpha: float
    beam: int


def baseline(a: argparse.Namespace) -> Baseline:
    model, base = recorded_model(a.profile, a.pair, a.seed)
    if torch.cuda.is_available():
        model = weights(model).cuda()
    data = prepare_data(get_config(a.profile, [f"train.seed={a.seed}"], pair=a.pair))
    return Baseline(model, data, base["len_alpha"], base["config"]["train"]["beam"])


def curve(a: argparse.Namespace, out: Path, b: Baseline) -> None:
    """A setting's curve over its lambda grid (`--lams` where given, e.g. to run some lambdas first):
    the continuation path and (unless `--no-validate`) its validation, or independent fine-tunings
    and their all-heads control."""
    lams = [float(x) for x in a.lams.split(",")] if a.lams else lambda_grid(a.profile, a.setting)
    steps = independent_steps(a.profile)
    probe = FunctionProbe.for_pair(a.pair, b.data.bpe, grids(a.profile).function_sentences)   # Fig. 8
    full_point(b.model, b.data, a.pair, b.len_alpha, b.beam, out, describe=probe)
    rows = pruning_curve(b.model, b.data, SETTINGS[a.setting], lams, steps, a.seed, a.pair, b.len_alpha,
                         b.beam, out, a.method, progress=True, describe=probe)
    if a.method == "independent":
        control = all_heads_control(b.model, b.data, SETTINGS[a.setting], steps, a.seed, a.pair, b.len_alpha, b.beam,
                                    out, describe=probe)
        print(json.dumps({"all-heads control": control["test_beam"], "lambdas": len(rows)}))
    elif not a.no_validate:
        checked = validate_curve(b.model, b.data, rows, validation_lambdas(lams), steps, a.seed, a.pair,
                                 b.len_alpha, b.beam, out, progress=True)
        print(json.dumps({k: checked[k] for k in ("update_ratio", "agrees")}))


def prune_configs(a: argparse.Namespace, out: Path) -> list[PruneConfig]:
    """prune: one Hard Concrete fine-tuning per lambda of `--lams`."""
    return [PruneConfig(kinds=tuple(a.kinds.split(",")), lam=lam, steps=a.steps, seed=a.seed)
            for lam in map(float, (a.lams or "0.01").split(","))]


def dsp_configs(a: argparse.Namespace, out: Path) -> list[PruneConfig]:
    """dsp: one exactly-k fine-tuning per head count of `--k`."""
    return [PruneConfig(kinds=tuple(a.kinds.split(",")), method="dsp", k=k, steps=a.steps, seed=a.seed)
            for k in map(int, a.k.split(","))]


def fixed_configs(a: argparse.Namespace, out: Path) -> list[PruneConfig]:
    """fixed: per head count of `--k`, one fine-tuning per fixed mask of `--labels`."""
    measures = pd.read_csv(out.parent / "importance_measures.csv")
    return [PruneConfig(kinds=tuple(a.kinds.split(",")), method="fixed", mask=spec, label=label, steps=a.steps,
                        seed=a.seed)
            for k in map(int, a.k.split(",")) for label, spec in fixed_masks(measures, k).items()
            if label in a.labels.split(",")]


def run_points(cfgs: list[PruneConfig], a: argparse.Namespace, out: Path, b: Baseline) -> None:
    """prune, dsp, fixed: the point of each of `cfgs` (cached: `prune_point`), a JSON line each."""
    for cfg in cfgs:
        row = prune_point(b.model, b.data, cfg, a.pair, b.len_alpha, b.beam, out)
        print(json.dumps({k: row.get(k) for k in ("label", "lam", "retained", "test_beam", "prune_minutes", "device")}),
              flush=True)


WITHOUT_MODEL = {"pick": pick, "scratches": scratches, "scratch": scratch}
CONFIGS = {"prune": prune_configs, "dsp": dsp_configs, "fixed": fixed_configs}


def main(argv=None) -> None:
    """Run the command `argv` names (default: the command line's) on its profile, pair and seed's sweep."""
    a = parser().parse_args(argv)
    out = results_dir(a.profile, a.pair, a.seed) / "pruning"
    if a.what in WITHOUT_MODEL:
        return WITHOUT_MODEL[a.what](a, out)
    b = baseline(a)
    if a.full:
        full_point(b.model, b.data, a.pair, b.len_alpha, b.beam, out)
    if a.what == "curve":
        return curve(a, out, b)
    run_points(CONFIGS[a.what](a, out), a, out, b)


if __name__ == "__main__":
    main()

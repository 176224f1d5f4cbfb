"""What a Sec. 6 pruning sweep costs on this machine: seconds per Hard Concrete fine-tuning update
(encoder only, all kinds) and per hard-mask evaluation, and the sweep time they imply.

    python benchmarks/prune_cost.py [--profile cpu --pair en-de --steps 20] [--json OUT]

Times `--steps` updates of each kind set (after 2 untimed ones) and one `evaluate_masked` (dev
greedy, test greedy, test beam) of the unpruned model, in one process, with the threads torch
has (set OMP_NUM_THREADS). The sweep estimate is points x (steps per point x seconds per update
+ one evaluation), for the lambdas of notebooks 06 and 07.
"""
from __future__ import annotations

import argparse
import time

import torch

from headlib.config import get_config
from headlib.files import write_json
from headlib.nn.model import KINDS
from headlib.pruning.prune import PruneConfig, prune
from headlib.pruning.points import evaluate_masked
from headlib.train import prepare_data, trained_model

SWEEP = {"enc-self": 13, "all": 8}   # lambdas in notebooks 06 and 07


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--pair", default="en-de")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--points-steps", type=int, default=PruneConfig.steps, help="updates per sweep point")
    ap.add_argument("--json", help="write the results here (atomically)")
    args = ap.parse_args(argv)
    model, _, run = trained_model(args.profile, args.pair)
    data = prepare_data(get_config(args.profile, pair=args.pair))
    out = {"threads": torch.get_num_threads(), "profile": args.profile, "pair": args.pair}
    for name, kinds in (("enc-self", ("enc-self",)), ("all", KINDS)):
        prune(model, data, PruneConfig(kinds=kinds, steps=2))                      # warm-up
        t0 = time.perf_counter()
        prune(model, data, PruneConfig(kinds=kinds, steps=args.steps))
        out[f"seconds_per_update_{name}"] = (time.perf_counter() - t0) / args.steps
    t0 = time.perf_counter()
    evaluate_masked(model, data, args.pair, run["len_alpha"], run["config"]["train"]["beam"])
    out["seconds_per_evaluation"] = time.perf_counter() - t0
    out["sweep_hours"] = sum(n * (args.points_steps * out[f"seconds_per_update_{k}"] + out["seconds_per_evaluation"])
                             for k, n in SWEEP.items()) / 3600
    out["scratch_run_hours_each"] = run["train_minutes"] / 60
    for k, v in out.items():
        print(f"{k:28s} {v:.3f}" if isinstance(v, float) else f"{k:28s} {v}")
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

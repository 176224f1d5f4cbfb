"""Same numbers before and after a refactoring: the smoke profile's training run, a Hard Concrete
continuation path, an independent point, an all-kinds point, a DSP point, a fixed-mask point, an
adaptation (all parameters and ALPS heads) and a lottery ticket, each as its record (timings,
machine and paths left out) and its model's fingerprint.

    python benchmarks/same_numbers.py OUT.json                 # this checkout's numbers
    python benchmarks/same_numbers.py --compare A.json B.json  # equal? (exit 1 with the keys that differ)

Runs in a scratch artifacts and results folder (about a minute on 2 cores); the same CPU gives the
same bits, another CPU may round differently (compare on one machine). Issue 42's before/after
comparison is `results/cpu/benchmarks/same_numbers_issue42.json`: its "before" ran these computations
through the API of 4a4b8f9 (`headlib.train.trainer`, `headlib.pruning.sweep`), which this script
no longer imports; records written since keep fields added later (tokens, test translations),
which a comparison with that file reports as differences.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

TOKENS = 4096   # PruneConfig.max_tokens when issue 42 was compared (issue 43 made the default the recipe's 2,048)
TIMINGS = {"minutes", "train_minutes", "tokens_per_second", "prune_minutes", "score_minutes", "machine", "device",
           "ticket_minutes", "speed", "elapsed", "run_dir", "ticket_run", "version"}


def without_timings(x):
    if isinstance(x, dict):
        return {k: without_timings(v) for k, v in x.items() if k not in TIMINGS}
    return [without_timings(v) for v in x] if isinstance(x, list) else x


def numbers() -> dict:
    from headlib.config import get_config
    from headlib.pruning import lottery
    from headlib.pruning.points import path_points, prune_point
    from headlib.pruning.prune import PruneConfig
    from headlib.studies import adapt
    from headlib.train import load_model, train, trained_model, prepare_data
    from headlib.files import artifacts_dir
    cfg = get_config("smoke", ["train.seed=1"], pair="en-de")
    out = {"train": train(cfg, progress=False)}
    model, _, _ = trained_model("smoke", "en-de", 1)
    out["train"]["fingerprint"] = model.fingerprint()
    data, points = prepare_data(cfg), Path(tempfile.mkdtemp())
    out["path"] = path_points(model, data, PruneConfig(kinds=("enc-self",), steps=4, max_tokens=TOKENS), [0.01, 1.0], "en-de",
                              1.0, 2, points)
    for name, prune in {"independent": PruneConfig(lam=1.0, steps=10, max_tokens=TOKENS),
                        "all-kinds": PruneConfig(kinds=("enc-self", "dec-self", "dec-enc"), lam=0.5, steps=10,
                                                 max_tokens=TOKENS),
                        "dsp": PruneConfig(method="dsp", k=3, steps=10, max_tokens=TOKENS),
                        "fixed": PruneConfig(method="fixed", mask="enc-self:1100/0011", label="x", steps=10,
                                             max_tokens=TOKENS)}.items():
        out[name] = prune_point(model, data, prune, "en-de", 1.0, 2, points)
    settings = adapt.AdaptConfig(steps=12, k=5)
    tuned, tuned_info = adapt.finetune(model, data.train, settings)
    heads = adapt.top_heads(adapt.weight_shift(model, tuned), settings.k)
    alps, alps_info = adapt.finetune(model, data.train, settings, adapt.head_masks(model, heads))
    out["adapt"] = {"all": {"fingerprint": tuned.fingerprint(), **tuned_info},
                    "alps": {"heads": [list(h) for h in heads], "fingerprint": alps.fingerprint(), **alps_info}}
    ticket = lottery.run("smoke", "en-de", 1, lottery.LotteryConfig(k=3, prune_fraction=0.5, rewind_fraction=0.2,
                                                                    n_confidence=20))
    out["lottery"] = ticket | {"ticket_fingerprint": load_model(artifacts_dir() / ticket["ticket_run"] / "final.pt")[0]
                               .fingerprint()}
    return without_timings(out)


def differences(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in differences(a.get(k), b.get(k), f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [path or "/"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--compare", action="store_true")
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (json.loads(p.read_text()) for p in args.paths)
        diff = differences(a, b)
        print("equal" if not diff else "differ at:\n" + "\n".join(diff))
        return 1 if diff else 0
    scratch = Path(tempfile.mkdtemp(prefix="same-numbers-"))
    os.environ["HEADLIB_ARTIFACTS"], os.environ["HEADLIB_RESULTS"] = str(scratch / "artifacts"), str(scratch / "results")
    args.paths[0].write_text(json.dumps(numbers(), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

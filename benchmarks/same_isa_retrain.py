"""Does a model retrained on another machine of the same instruction set come out the same?

Trains the cpu recipe of (pair, seed) for `--updates` updates (default 400: warmup only, so the
learning rates are those of the full run whatever its length) in a scratch directory and compares
its first dev evaluation (dev BLEU and every encoder head's statistics, `history[0]`) with that of a
committed training record, read from git (`REV:PATH`) or a file. Equal statistics on two machines
say that fp32 training there is deterministic, so that retraining reproduces a committed model's
weights (its fingerprint) on a machine of the record's ISA.

    python benchmarks/same_isa_retrain.py --record 035f827:results/cpu/en-de/seed1/training_results.json

Prints the two machines, the differences and the fingerprint reached (about 13 min on 2 cores).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np


from headlib.config import get_config
from headlib.train import Trainer, machine


def read_record(spec: str) -> dict:
    if Path(spec).is_file():
        return json.loads(Path(spec).read_text())
    return json.loads(subprocess.check_output(["git", "show", spec]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--record", required=True, help="a committed training record: REV:PATH or a file")
    p.add_argument("--updates", type=int, default=400)
    a = p.parse_args()
    ref = read_record(a.record)
    theirs = next(h for h in ref["history"] if h["step"] == a.updates)
    cfg = get_config(ref["profile"], [f"train.seed={ref['config']['train']['seed']}"], pair=ref["pair"])
    print("recorded machine", ref["machine"], "this machine", machine(), flush=True)
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(cfg, Path(out) / "run", progress=False)
        mine = trainer.fit(stop_after=a.updates)["history"][-1]
        print("step", mine["step"], theirs["step"], "dev_bleu", mine["dev_bleu"], theirs["dev_bleu"])
        for k in theirs["heads"]:
            diff = np.abs(np.array(mine["heads"][k]) - np.array(theirs["heads"][k])).max()
            print(k, "max |diff|", float(diff))
        print(f"fingerprint at {a.updates}:", trainer.model.fingerprint())


if __name__ == "__main__":
    main()

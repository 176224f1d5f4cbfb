"""Does a model retrained on another machine of the same instruction set come out the same?

Trains the cpu recipe of (pair, seed) for `--updates` updates (default 400: warmup only, so the
learning rates are those of the full run whatever its length) in a scratch directory and compares
its first dev evaluation (dev BLEU and every encoder head's statistics, `history[0]`) with that of a
committed training record, read from git (`REV:PATH`) or a file. Equal statistics on two machines
say that fp32 training there is deterministic, so that retraining reproduces a committed model's
weights (its fingerprint) on a machine of the record's ISA.

    python benchmarks/same_isa_retrain.py --record 035f827:results/cpu/en-de/seed1/training_results.json

Prints the two machines, the differences and the fingerprint reached (about 13 min on 2 cores).
`--out FILE` writes what this machine reached (its first evaluation and the fingerprint, with the
kernel-selecting environment variables it ran under) as a record that a run elsewhere can be given
as `--record`: with the same variables set, equal fingerprints say that the two machines train the
same model.

    MKL_CBWR=AVX2,STRICT MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2 \
        python benchmarks/same_isa_retrain.py --record HEAD:results/cpu/benchmarks/portable_400.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from headlib.config import get_config
from headlib.files import write_json
from headlib.train.machine import machine
from headlib.train import Trainer

# What selects the CPU kernels (and so the rounding) besides the machine itself.
KERNEL_VARIABLES = ("MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")


def read_record(spec: str) -> dict:
    if Path(spec).is_file():
        return json.loads(Path(spec).read_text())
    return json.loads(subprocess.check_output(["git", "show", spec]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--record", required=True, help="a committed training record: REV:PATH or a file")
    p.add_argument("--updates", type=int, default=400)
    p.add_argument("--out", help="write this machine's first evaluation and fingerprint here (JSON)")
    a = p.parse_args()
    ref = read_record(a.record)
    theirs = next(h for h in ref["history"] if h["step"] == a.updates)
    cfg = get_config(ref["profile"], [f"train.seed={ref['config']['train']['seed']}"], pair=ref["pair"])
    kernels = {k: os.environ[k] for k in KERNEL_VARIABLES if k in os.environ}
    print("recorded machine", ref["machine"], ref.get("kernels", {}), "this machine", machine(), kernels, flush=True)
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(cfg, Path(out) / "run", progress=False)
        mine = trainer.fit(stop_after=a.updates)["history"][-1]
        print("step", mine["step"], theirs["step"], "dev_bleu", mine["dev_bleu"], theirs["dev_bleu"])
        for k in theirs["heads"]:
            diff = np.abs(np.array(mine["heads"][k]) - np.array(theirs["heads"][k])).max()
            print(k, "max |diff|", float(diff))
        print(f"fingerprint at {a.updates}:", trainer.model.fingerprint(),
              "recorded:", ref.get("fingerprint_at", {}).get(str(a.updates), "not recorded"))
        if a.out:
            write_json(a.out, {"profile": ref["profile"], "pair": ref["pair"], "config": cfg.to_dict(),
                               "machine": machine(), "kernels": kernels, "history": [mine],
                               "fingerprint_at": {str(a.updates): trainer.model.fingerprint()}})


if __name__ == "__main__":
    main()

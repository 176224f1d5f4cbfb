"""The whole default study from an empty artifacts/, timed: clone the repository's HEAD into a new
directory (no artifacts/, no .venv), set up the environment, execute every page of the pair
(forced, so that every notebook runs and is timed, as on a fresh machine whose outputs changed),
build the book strictly, and write the seconds of each phase and of each notebook as JSON.

    python benchmarks/full_study_time.py [--dir DIR] [--pairs en-de] [--json OUT]   # hours on 2 cores

A clone reads the data of this checkout ($HEADLIB_DATA, else ../shared/data beside it). The
training phase trains the profile's recipe (a fixed number of updates) from scratch; the Sec. 6
points under results/ are reused only when the new model's fingerprint matches theirs, which on
another machine it does not, so every sweep is recomputed.
`--summarize DIR` only writes the JSON of a clone whose run finished (phase seconds from its log).
`--from-records` sums what the committed records of each released (pair, seed) of the profile say
each unit took, for a study computed in units over several sessions (a release, the Sec. 6 paths,
validations and from-scratch runs, the pages executed from them), and lists the units still to
compute (keys "pair/seedN"):

    python benchmarks/full_study_time.py --from-records --json results/cpu/benchmarks/full_study_time.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from pathlib import Path

from headlib.book.pages.claims import done_units, pending_units
from headlib.config import get_config
from headlib.files import write_json
from headlib.profiles import grids
from headlib.settings import settings
from headlib.train.machine import machine
from headlib.train.records import run_record
from headlib.train.release import CARD, release_dir

REPO = settings().root

LOG = "full_study_time.log"
PHASES = (("install", "make .venv/.installed"),
          ("study", ".venv/bin/python -m headlib.book run --profile cpu --pairs {pairs} --force"),
          ("build", ".venv/bin/jupyter-book build book/ -W -n --keep-going"))


def run_phases(clone: Path, pairs: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HEADLIB_ARTIFACTS"}
    env["HEADLIB_DATA"] = str(settings().data)
    with open(clone / LOG, "w") as log:
        for name, command in PHASES:
            t0 = time.time()
            print(f"[phase {name}] {command.format(pairs=pairs)}", file=log, flush=True)
            rc = subprocess.call(command.format(pairs=pairs), shell=True, cwd=clone, env=env, stdout=log,
                                 stderr=subprocess.STDOUT)
            print(f"{name}_rc {rc} {name}_s {time.time() - t0:.0f}", file=log, flush=True)
            if rc:
                raise SystemExit(f"{name} failed (rc {rc}); see {clone / LOG}")


def summarize(clone: Path, pairs: str, log_text: str) -> dict:
    """Seconds per phase (from the log), per notebook (its manifest) and of the training (the
    runner's clock when the first notebook started executing)."""
    phases = {m[1]: int(m[2]) for m in re.finditer(r"\b(install|study|build)_s (\d+)", log_text)}
    notebooks = {}
    for pair in pairs.split(","):
        for path in sorted((clone / "book" / "executed" / pair / "seed1").glob("*.manifest.json")):
            m = json.loads(path.read_text())
            notebooks[f"{pair}/{m['notebook']}"] = {"seconds": m["seconds"], "executed_at": m["executed_at"]}
    clock = re.search(r"\[book (\d+):(\d\d):(\d\d)\] 1/\d+ \S+ \[[^]]+\]: executing", log_text)
    training = int(clock[1]) * 3600 + int(clock[2]) * 60 + int(clock[3]) if clock else None
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                            text=True).stdout.strip()
    return {"commit": commit, "pairs": pairs, "cores": os.cpu_count(), "phases_seconds": phases,
            "training_and_final_scoring_seconds": training, "notebooks": notebooks,
            "total_seconds": sum(phases.values())}


def from_records(pair: str, seed: int = 1) -> dict:
    """Minutes of each unit of (pair, seed) as its committed records give them
    (`headlib.book.pages.claims.done_units`: the release card's training and release, each executed
    page's manifest, each Sec. 6 path, validation and from-scratch run), their sum, and the units
    still to compute with their commands (`pending_units`)."""
    out = settings().book
    done, pending = done_units("cpu", pair, seed, out), pending_units("cpu", pair, seed, out)
    card = run_record(get_config("cpu", [f"train.seed={seed}"], pair=pair)) or {}
    return {"pair": pair, "seed": seed, "model": card.get("fingerprint"), "training_machine": card.get("machine"),
            "summarized_on": machine(), "units": done.to_dict("records"),
            "total_minutes": round(float(done["minutes"].sum()), 1), "pending": pending.to_dict("records"),
            "how": "summed from committed records, unit by unit over sessions (not one run); each unit's minutes "
                   "as measured where it ran"}


def released_units(profile: str) -> list[tuple[str, int]]:
    """The profile's (pair, seed) units (`Grids.units`) whose model is released."""
    units = [(pair, int(seed)) for pair, seed in (u.split("/") for u in grids(profile).units)]
    return [(pair, seed) for pair, seed in units if (release_dir(profile, pair, seed) / CARD).is_file()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="the new clone (default: full-study beside this checkout)")
    parser.add_argument("--pairs", default="en-de",
                        help="the pairs a clone executes (not with --from-records: it sums every released unit)")
    parser.add_argument("--summarize", help="only summarize this finished clone")
    parser.add_argument("--from-records", action="store_true", help="sum the committed records' phases instead")
    parser.add_argument("--log", help="its log (default: DIR/full_study_time.log)")
    parser.add_argument("--json", default=str(REPO / "artifacts" / "bench" / "full_study_time.json"))
    args = parser.parse_args()
    if args.from_records:
        summary = {f"{pair}/seed{seed}": from_records(pair, seed) for pair, seed in released_units("cpu")}
        write_json(Path(args.json), summary)
        print(json.dumps(summary, indent=1))
        return
    if args.summarize:
        clone = Path(args.summarize)
    else:
        clone = Path(args.dir or REPO.parent / "full-study")
        if clone.exists():
            raise SystemExit(f"{clone} exists; give a new --dir")
        subprocess.check_call(["git", "clone", "-q", str(REPO), str(clone)])
        run_phases(clone, args.pairs)
    summary = summarize(clone, args.pairs, Path(args.log or clone / LOG).read_text(errors="replace"))
    write_json(Path(args.json), summary)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()

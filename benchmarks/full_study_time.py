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
`--from-records` sums what the committed records of (pair, seed 1) say each phase took, for a study
computed in units over several sessions (a training, the Sec. 6 points and from-scratch runs, the
pages executed from them): measured phase by phase, on the machines each record names, not in one go.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from pathlib import Path

from headlib.files import write_json
from headlib.settings import settings

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


def same_recipe(scratch: dict, baseline: dict) -> bool:
    """A from-scratch run's config is the baseline's but for its fixed mask and its budget."""
    def recipe(cfg):
        return {**cfg, "model": {**cfg["model"], "head_mask": ""}, "train": {**cfg["train"], "max_steps": 0}}
    return recipe(scratch) == recipe(baseline)


def from_records(pair: str, results: Path = REPO / "results" / "cpu", book: Path = REPO / "book" / "executed"
                 ) -> dict:
    """Minutes of each phase of (pair, seed 1) as its committed records give them: the training
    (train_minutes: the update loop with its evaluations, not the final scoring), every Sec. 6
    point (fine-tuning and scoring; a path as one unit), every from-scratch
    run (less the `paused_minutes` its record notes, when its process was stopped by hand), and
    every executed page (its manifest's seconds; a page run from cached points does not include
    them). Missing minutes are listed, not guessed."""
    seed = results / pair / "seed1"
    training = json.loads((seed / "training_results.json").read_text())
    units, missing = {}, []
    for path in sorted((seed / "pruning").glob("*.json")):
        row = json.loads(path.read_text())
        if "points" in row:          # a continuation path: prune_minutes counts the path's fine-tuning so far
            mine = [p for p in row["points"] if p.get("model") == training["fingerprint"]]
            if mine:
                units[path.stem] = mine[-1]["prune_minutes"] + sum(p.get("score_minutes", 0) for p in mine)
                if not row["finished"]:
                    missing.append(f"{path.stem}: unfinished ({len(mine)} of {len(row['lams'])} lambdas)")
        elif row.get("model") == training["fingerprint"] and "prune_minutes" in row:
            units[path.stem] = row["prune_minutes"] + row.get("score_minutes", 0)
            if "score_minutes" not in row:
                missing.append(f"{path.stem}: scoring")
        elif path.stem.startswith("scratch-") and same_recipe(row["results"]["config"], training["config"]):
            units[path.stem] = row["train_minutes"] - row.get("paused_minutes", 0)   # a run stopped by hand
    pages = {}
    for path in sorted((book / pair / "seed1").glob("*.manifest.json")):
        m = json.loads(path.read_text())
        if m.get("model", {}) and m["model"].get("fingerprint") == training["fingerprint"]:
            pages[m["notebook"]] = round(m["seconds"] / 60, 2)
        else:
            missing.append(f"{m['notebook']}: executed on another model")
    total = training["train_minutes"] + sum(units.values()) + sum(pages.values())
    return {"pair": pair, "model": training["run_dir"], "fingerprint": training["fingerprint"],
            "training_machine": training["machine"], "training_minutes": training["train_minutes"],
            "unit_minutes": {k: round(v, 2) for k, v in units.items()}, "page_minutes": pages,
            "total_minutes": round(total, 1), "not_counted": missing,
            "how": "summed from committed records, phase by phase (not one run)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="the new clone (default: full-study beside this checkout)")
    parser.add_argument("--pairs", default="en-de")
    parser.add_argument("--summarize", help="only summarize this finished clone")
    parser.add_argument("--from-records", action="store_true", help="sum the committed records' phases instead")
    parser.add_argument("--log", help="its log (default: DIR/full_study_time.log)")
    parser.add_argument("--json", default=str(REPO / "artifacts" / "bench" / "full_study_time.json"))
    args = parser.parse_args()
    if args.from_records:
        summary = {pair: from_records(pair) for pair in args.pairs.split(",")}
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

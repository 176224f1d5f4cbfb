"""`python -m headlib.book`: the book's command line.

    python -m headlib.book run    --profile cpu [--pairs en-de,en-fr,en-ru] [--seeds 1,2,3] [--out DIR]
    python -m headlib.book status   which pages a run would execute, and an estimate of the time
    python -m headlib.book check  [--out DIR]   is the book one consistent whole (`checks`)?
    python -m headlib.book verify [--pair en-de --seed 1]   re-execute the unit's pages from its release
                                               into a scratch folder and compare every glued value
    python -m headlib.book build  [--out DIR]   strict Jupyter Book build (-W -n --keep-going)
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from headlib.book.checks import check
from headlib.book.keys import estimate, status
from headlib.book.plan import NOTEBOOKS, BookError, clock, default_out, select
from headlib.book.runner import run
from headlib.book.toc import build
from headlib.book.verification import committed_units, report, verification_record, verify
from headlib.files import write_json


def parser() -> argparse.ArgumentParser:
    from headlib.config import PROFILES
    from headlib.data.corpora import PAIRS
    parser = argparse.ArgumentParser(prog="python -m headlib.book", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "status", "check", "verify", "build"):
        p = sub.add_parser(name)
        p.add_argument("--profile", default="cpu", choices=list(PROFILES))
        p.add_argument("--out", help="book directory (default: book/ for cpu, artifacts/book-<profile>/ otherwise)")
        if name in ("run", "status"):
            p.add_argument("--pairs", default="en-de", help=f"comma-separated, from {', '.join(PAIRS)}")
            p.add_argument("--seeds", default="1", help="comma-separated training seeds")
        if name == "run":
            p.add_argument("--notebooks", default="", help="comma-separated notebook names to run (default: all); "
                           "the others' outputs must exist where these read them")
            p.add_argument("--force", action="store_true", help="execute even when nothing changed")
            p.add_argument("--log-output", action="store_true", help="stream the notebooks' outputs")
            p.add_argument("--no-progress", action="store_true")
        if name == "verify":
            p.add_argument("--pair", help="the unit's pair (default: every unit with pages in the book)")
            p.add_argument("--seed", type=int, default=1)
            p.add_argument("--json", help="also write each page's check, the wall-clock seconds and the machine here "
                           "(the timing of `make pages`)")
    return parser


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    out = Path(args.out) if args.out else default_out(args.profile)
    try:
        if args.command == "run":
            chosen = select(args.notebooks.split(",")) if args.notebooks else NOTEBOOKS
            run(args.profile, [p for p in args.pairs.split(",") if p], [int(s) for s in args.seeds.split(",") if s],
                out, force=args.force, progress=not args.no_progress, log_output=args.log_output, notebooks=chosen,
                toc=NOTEBOOKS)
            problems = check(out)
            for p in problems:
                print(f"warning: {p}", file=sys.stderr)
            return 0
        if args.command == "status":
            plan = status(args.profile, [p for p in args.pairs.split(",") if p],
                          [int(s) for s in args.seeds.split(",") if s], out)
            for task, why in plan:
                print(f"{task.label}: {'would execute: ' + '; '.join(why) if why else 'current'}")
            seconds, _ = estimate(plan, out)
            print(f"estimate: about {clock(seconds)} (pages and trainings at their measured times)")
            return 0
        if args.command == "check":
            problems = check(out)
            for p in problems:
                print(p, file=sys.stderr)
            return 1 if problems else 0
        if args.command == "verify":
            units = [(args.pair, args.seed)] if args.pair else committed_units(out)
            t0 = time.perf_counter()
            checks = [c for pair, seed in units for c in verify(args.profile, pair, seed, out)]
            print(report(checks))
            if args.json:
                write_json(Path(args.json), verification_record(checks, units, time.perf_counter() - t0))
            return 0 if all(c.ok for c in checks) else 1
        result = build(out)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        return result.returncode
    except (BookError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1

"""Command line: python -m headlib train|translate|evaluate|grids --profile cpu --pair en-de [--set k=v]

    train      train (or resume) and evaluate; prints the results JSON path and test BLEU
    translate  sentences on stdin (or --input FILE) -> one translation a line on stdout
    evaluate   --checkpoint PATH --src FILE --ref FILE -> BLEU, chrF and signatures as JSON
    grids      the profile's experiment grids (headlib.config.Grids) as JSON, for scripts
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from headlib.config import PROFILES, get_config, grids


def _config(args):
    return get_config(args.profile, args.set or (), pair=args.pair)


def _checkpoint(args):
    from headlib.train.trainer import run_dir
    return args.checkpoint or str(run_dir(_config(args)) / "final.pt")


def cmd_train(args) -> int:
    from headlib.train.trainer import run_dir, train
    cfg = _config(args)
    results = train(cfg, progress=not args.quiet)
    if results:
        summary = {name: {k: v["bleu"] for k, v in t.items()} for name, t in results["test"].items()}
        print(json.dumps({"run": str(run_dir(cfg)), "test_bleu": summary}, indent=2))
    return 0


def cmd_translate(args) -> int:
    from headlib.nn.decode import translate
    from headlib.train.trainer import load_model
    model, bpe, ckpt = load_model(_checkpoint(args))
    lines = open(args.input, encoding="utf-8").read().splitlines() if args.input else sys.stdin.read().splitlines()
    beam = args.beam if args.beam is not None else ckpt["config"]["train"]["beam"]
    for hyp in translate(model, bpe, lines, beam=beam, alpha=ckpt["len_alpha"]):
        print(hyp)
    return 0


def cmd_evaluate(args) -> int:
    from headlib.data.corpora import read_parallel
    from headlib.nn.decode import score, translate
    from headlib.train.trainer import load_model
    model, bpe, ckpt = load_model(_checkpoint(args))
    corpus = read_parallel(args.src, args.ref)
    beam = args.beam if args.beam is not None else ckpt["config"]["train"]["beam"]
    hyps = translate(model, bpe, corpus.src, beam=beam, alpha=ckpt["len_alpha"])
    print(json.dumps(score(hyps, list(corpus.tgt)) | {"beam": beam, "len_alpha": ckpt["len_alpha"]}, indent=2))
    return 0


def cmd_grids(args) -> int:
    grid = dataclasses.asdict(grids(args.profile))
    if not args.key:
        print(json.dumps(grid, indent=2))
        return 0
    if args.key not in grid:
        raise ValueError(f"grids: unknown key {args.key!r}; valid keys: {', '.join(grid)}")
    value = grid[args.key]
    if not isinstance(value, tuple):
        print(value)
        return 0
    size = args.groups or len(value)   # for shell scripts: comma-joined values, space-separated groups
    print(" ".join(",".join(map(str, value[i:i + size])) for i in range(0, len(value), size)))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlib", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    grid = sub.add_parser("grids")
    grid.set_defaults(fn=cmd_grids)
    grid.add_argument("--profile", default="cpu", choices=list(PROFILES))
    grid.add_argument("--key", help="print one grid, comma-joined (e.g. lambdas_encoder)")
    grid.add_argument("--groups", type=int, help="with --key: groups of this many values, space-separated")
    for name, fn in (("train", cmd_train), ("translate", cmd_translate), ("evaluate", cmd_evaluate)):
        p = sub.add_parser(name)
        p.set_defaults(fn=fn)
        p.add_argument("--profile", default="cpu", choices=list(PROFILES))
        p.add_argument("--pair", default="en-de")
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key, e.g. train.lr=5e-4")
        if name == "train":
            p.add_argument("--quiet", action="store_true")
        else:
            p.add_argument("--checkpoint", help="final.pt of a run (default: the run of --profile/--pair/--set)")
            p.add_argument("--beam", type=int, help="beam size (default: the config's)")
        if name == "translate":
            p.add_argument("--input", help="file with one sentence a line (default: stdin)")
        if name == "evaluate":
            p.add_argument("--src", required=True)
            p.add_argument("--ref", required=True)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except ValueError as e:  # config and data errors: one clear line
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""Command line: python -m headlib train|release|translate|evaluate|grids --profile cpu --pair en-de --seed 1

    train      train (or resume) and evaluate; prints the results JSON path and test BLEU
    release    release a trained run into models/<profile>/<pair>/seed<seed>/ (headlib.train.release)
    translate  sentences on stdin (or --input FILE) -> one translation a line on stdout
    evaluate   --src FILE --ref FILE -> BLEU, chrF and signatures as JSON
    grids      the whole profile (headlib.profiles: config, grids, per-study settings) as JSON, for scripts

translate and evaluate read --checkpoint (a run's final.pt or a release folder), else the release
of (--profile, --pair, --seed), else that run's final.pt under artifacts/; they name on stderr
which model they read.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from headlib.config import PROFILES, get_config
from headlib.profiles import profile


def _config(args):
    return get_config(args.profile, [f"train.seed={args.seed}", *(args.set or ())], pair=args.pair)


@dataclasses.dataclass
class Loaded:
    model: object
    tokenizer: object
    len_alpha: float
    beam: int
    source: str           # what was read, for the user


def _model(args) -> Loaded:
    """--checkpoint (a final.pt or a release folder), else the release of the config, else its run."""
    from pathlib import Path

    from headlib.train import release
    from headlib.train import load_model, run_dir
    cfg = _config(args)
    path = Path(args.checkpoint) if args.checkpoint else release.release_of(cfg)
    if path is not None and path.is_dir():
        r = release.load_release(path)
        train = r.card["config"]["train"]
        return Loaded(r.model, r.tokenizer, r.card["len_alpha"], train["beam"],
                      f"release {path} (fingerprint {r.fingerprint})")
    path = path or run_dir(cfg) / "final.pt"
    if not args.checkpoint and not path.is_file():
        seed = f" --seed {args.seed}" + "".join(f" --set {s}" for s in args.set or ())
        raise ValueError(f"no trained model for --profile {args.profile} --pair {args.pair}{seed}: no release in "
                         f"{release.release_dir(args.profile, args.pair, args.seed)} and no run in {path.parent}; "
                         f"train one: python -m headlib train --profile {args.profile} --pair {args.pair}{seed}")
    model, tokenizer, ckpt = load_model(path, user_file=bool(args.checkpoint))
    return Loaded(model, tokenizer, ckpt["len_alpha"], ckpt["config"]["train"]["beam"], f"checkpoint {path}")


def _lines(path: str | None) -> list[str]:
    """The lines of --input `path` (stdin when None) as UTF-8; one error naming the file (or stdin)
    and the line otherwise."""
    from pathlib import Path
    if path is not None and not Path(path).is_file():
        raise ValueError(f"--input {path}: no such file")
    data = Path(path).read_bytes() if path is not None else sys.stdin.buffer.read()
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{path or 'stdin'}: line {line} is not valid UTF-8 (byte 0x{data[e.start]:02x}); "
                         "translate reads UTF-8 text") from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (1 = greedy), got {value}")
    return value


def cmd_train(args) -> int:
    from headlib.train import run_dir, train
    cfg = _config(args)
    results = train(cfg, progress=not args.quiet)
    if results:
        summary = {name: {k: v["bleu"] for k, v in t.items()} for name, t in results["test"].items()}
        print(json.dumps({"run": str(run_dir(cfg)), "test_bleu": summary}, indent=2))
    return 0


def cmd_release(args) -> int:
    from headlib.train import release
    from headlib.train import load_model, run_dir
    cfg = _config(args)
    run = run_dir(cfg)
    if not (run / "results.json").is_file():
        raise ValueError(f"{run}: no finished run of --profile {args.profile} --pair {args.pair} --seed {args.seed} "
                         f"to release; train it first: python -m headlib train --profile {args.profile} "
                         f"--pair {args.pair} --seed {args.seed}")
    model, bpe, _ = load_model(run / "final.pt")
    dest = release.release_dir(args.profile, args.pair, args.seed)
    card = release.write_release(model, bpe, json.loads((run / "results.json").read_text()), dest,
                                 log=lambda m: print(m, file=sys.stderr))
    print(json.dumps({"release": str(dest), "fingerprint": card["fingerprint"], "dtype": card["release"]["dtype"],
                      "bytes": card["release"]["bytes"], "bleu_shift": card["training_copy"]["bleu_shift"]}, indent=2))
    return 0


def cmd_translate(args) -> int:
    from headlib.nn.decode import translate
    lines = _lines(args.input)
    loaded = _model(args)
    print(f"translate: {loaded.source}", file=sys.stderr)
    beam = args.beam or loaded.beam
    for hyp in translate(loaded.model, loaded.tokenizer, lines, beam=beam, alpha=loaded.len_alpha):
        print(hyp)
    return 0


def cmd_evaluate(args) -> int:
    from headlib.data.corpora import read_parallel
    from headlib.nn.decode import score, translate
    corpus = read_parallel(args.src, args.ref)
    if len(corpus) == 0:
        raise ValueError(f"{args.src} and {args.ref} are empty: nothing to evaluate")
    loaded = _model(args)
    print(f"evaluate: {loaded.source}", file=sys.stderr)
    beam = args.beam or loaded.beam
    hyps = translate(loaded.model, loaded.tokenizer, corpus.src, beam=beam, alpha=loaded.len_alpha)
    print(json.dumps(score(hyps, list(corpus.tgt)) | {"beam": beam, "len_alpha": loaded.len_alpha}, indent=2))
    return 0


def flat(settings: dict, prefix: str = "") -> dict:
    """Nested settings as {"section.key": value} ("config.train.lr", "prune.steps", ...)."""
    out = {}
    for key, value in settings.items():
        out |= flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {prefix + key: value}
    return out


def cmd_grids(args) -> int:
    """The whole profile as JSON (`headlib.profiles.Profile`: config, grids, per-study settings);
    `--key` prints one value for shell scripts: a grid by its name (`lambdas_encoder`) or any
    setting by its dotted path (`prune.steps`, `config.train.lr`)."""
    settings = profile(args.profile).to_dict()
    if not args.key:
        print(json.dumps(settings, indent=2))
        return 0
    values = flat(settings) | settings["grids"]
    if args.key not in values:
        raise ValueError(f"grids: unknown key {args.key!r}; valid keys: {', '.join(settings['grids'])}, or a "
                         f"setting's dotted path such as prune.steps (python -m headlib grids lists them)")
    value = values[args.key]
    if not isinstance(value, (tuple, list)):
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
    grid.add_argument("--key", help="print one value, comma-joined: a grid (lambdas_encoder) or a dotted setting (prune.steps)")
    grid.add_argument("--groups", type=int, help="with --key: groups of this many values, space-separated")
    for name, fn in (("train", cmd_train), ("release", cmd_release), ("translate", cmd_translate),
                     ("evaluate", cmd_evaluate)):
        p = sub.add_parser(name)
        p.set_defaults(fn=fn)
        p.add_argument("--profile", default="cpu", choices=list(PROFILES))
        p.add_argument("--pair", default="en-de")
        p.add_argument("--seed", type=positive_int, default=1, help="training seed (train.seed)")
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key, e.g. train.lr=5e-4")
        if name == "train":
            p.add_argument("--quiet", action="store_true")
        elif name != "release":
            p.add_argument("--checkpoint", help="a run's final.pt or a release folder (default: the release of "
                           "--profile/--pair/--seed, else its run)")
            p.add_argument("--beam", type=positive_int, help="beam size (default: the model's)")
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

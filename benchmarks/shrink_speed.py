"""Does removing heads make translation faster? Encoder forward and full beam decoding of the main
test set with the unpruned model and with physically shrunk models (`headlib.pruning.shrink`) of several
pruned configurations from the committed sweep, in one process, as ratios to the unpruned model.

    python benchmarks/shrink_speed.py [--profile cpu --pair en-de] [--json OUT]

Each shrunk model is also checked to translate the first 200 sentences exactly as its masked
counterpart.
"""
from __future__ import annotations

import argparse
import time

import torch

from headlib.data.corpora import load_split, main_test_set
from headlib.files import write_json
from headlib.nn.decode import translate
from headlib.nn.model import KINDS
from headlib.pruning.shrink import encode_seconds, encoder_batches, shrink, with_masks
from headlib.pruning.points import points
from headlib.settings import results_dir
from headlib.train import trained_model


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--pair", default="en-de")
    ap.add_argument("--json", help="write the results here (atomically)")
    args = ap.parse_args(argv)
    model, bpe, run = trained_model(args.profile, args.pair)
    beam, alpha = run["config"]["train"]["beam"], run["len_alpha"]
    test = load_split(args.pair, main_test_set(args.pair))
    batches = encoder_batches(bpe, test.src)
    out = results_dir(args.profile, args.pair, 1) / "pruning"
    rows = {r["retained"]["enc-self"]: r for r in points(out, ("enc-self",), model)}
    configs = [("unpruned", None)] + [(f"enc-self {n}", rows[n]) for n in sorted(rows, reverse=True) if n < 48]
    configs += [(f"all kinds {sum(r['retained'].values())}", r) for r in points(out, KINDS, model)[3:6]]
    results, base = [], None
    for name, row in configs:
        masked = with_masks(model, row["mask"]) if row is not None else model
        small = shrink(masked).eval() if row is not None else masked
        encode_seconds(small, batches[:2])                                   # warm-up
        enc = encode_seconds(small, batches)
        t0 = time.perf_counter()
        translate(small, bpe, test.src, beam=beam, alpha=alpha)
        dec = time.perf_counter() - t0
        same = row is None or (translate(small, bpe, test.src[:200], beam=beam, alpha=alpha)     # same batches:
                               == translate(masked, bpe, test.src[:200], beam=beam, alpha=alpha))  # padding moves fp
        base = base or (enc, dec)
        results.append({"config": name, "heads": {k: int(masked.head_mask(k).sum()) for k in KINDS},
                        "parameters": small.num_parameters(), "encode_seconds": round(enc, 3),
                        "beam_seconds": round(dec, 2), "encode_speedup": round(base[0] / enc, 3),
                        "beam_speedup": round(base[1] / dec, 3), "same_translations_as_masked": same})
        print(f"{name:18s} params {small.num_parameters():>10,}  encode {enc:7.3f}s ({base[0] / enc:.2f}x)  "
              f"beam {dec:7.2f}s ({base[1] / dec:.2f}x)  same={same}", flush=True)
    if args.json:
        write_json(args.json, {"model": model.fingerprint(), "threads": torch.get_num_threads(), "test_set": test.name,
                               "beam": beam, "sentences": len(test.src), "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What the Sec. 6 pages cost on an opus-mt model on this machine, measured on its shape.

Two Transformers with random weights, in one process, taking turns round by round: one of
opus-mt-en-de's shape (Marian's Transformer-base: 6+6 layers of 8 heads, d_model 512, d_ff 2048,
swish, a vocabulary of 58,101 pieces; the `pretrained` profile's model) and one of the cpu
profile's. For each: seconds per Hard Concrete fine-tuning update (encoder self-attention gated,
Sec. 6.2; all three kinds, Sec. 6.3) on the same Multi30k batches (`PruneConfig.max_tokens`
target tokens, the cpu profile's BPE ids: opus-mt's SentencePiece cuts Multi30k into about as
many pieces), and seconds per sentence of greedy and beam search on the pair's main test set,
each sentence decoded for as many steps as its reference has pieces (random weights do not stop
by themselves; a translating model stops near there). A teacher-forced update's cost does not
depend on the weights, so these are measurements of the real model's cost, not of its quality.

From them, and from the profile's grids (`headlib.profiles.grids`: lambdas, updates, the path's
share, validation points), an estimate of each Sec. 6 page on the opus-mt model: its fine-tuning
updates, plus one scoring per point (dev greedy, test greedy and beam: `evaluate_masked`).

    python benchmarks/pretrained_cost.py [--pair en-de --steps 6 --rounds 3 --sentences 120] [--json OUT]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from headlib.config import PROFILES, get_config
from headlib.profiles import grids
from headlib.data.batching import source_tensor
from headlib.data.corpora import load_split, main_test_set
from headlib.files import write_json
from headlib.nn.decode import beam_search, greedy, length_batches
from headlib.nn.model import KINDS, Transformer
from headlib.pruning.prune import Pruning, PruneConfig
from headlib.pruning.points import SETTINGS
from headlib.train.machine import machine
from headlib.train import prepare_data

OPUS_MT_VOCAB = 58101   # Helsinki-NLP/opus-mt-en-de's config.json (vocab_size); the import adds one id


def shapes(bpe_vocab: int) -> dict[str, Transformer]:
    """The two models, random weights (seed 0)."""
    torch.manual_seed(0)
    return {"opus-mt (pretrained)": Transformer(PROFILES["pretrained"].model, OPUS_MT_VOCAB + 1),
            "cpu profile": Transformer(PROFILES["cpu"].model, bpe_vocab)}


def update_seconds(run: Pruning, steps: int) -> float:
    """Seconds per update of `steps` more updates of a gated fine-tuning (lambda 0.01)."""
    t0 = time.perf_counter()
    run.train(steps, 0.01)
    return (time.perf_counter() - t0) / steps


def decode_batches(bpe, corpus, beam: int) -> list[tuple[torch.Tensor, int]]:
    """Length batches of `corpus` as `translate` makes them, each with its longest reference (+ EOS)."""
    src, ref = bpe.encode_batch(corpus.src), bpe.encode_targets(corpus.tgt)
    return [(source_tensor([src[i] for i in idx]), max(len(ref[i]) for i in idx) + 1)
            for idx in length_batches(src, beam, 6000)]


def decode_seconds(model, batches, beam: int) -> float:
    model.eval()
    t0 = time.perf_counter()
    for src, steps in batches:
        greedy(model, src, max_len=steps) if beam <= 1 else beam_search(model, src, beam, 1.0, max_len=steps)
    return time.perf_counter() - t0


def page_estimate(seconds: dict, setting: str, n_dev: int, n_test: int) -> dict:
    """A Sec. 6 page's updates and scorings from the pretrained profile's grids, and its hours."""
    grid = grids("pretrained")
    lams = len(grid.lambdas(setting))
    updates = lams * max(1, grid.finetune_steps // grid.path_share) + grid.validation_points * grid.finetune_steps
    scorings = 1 + lams + grid.validation_points        # the full model, each lambda, each validation
    scoring = seconds["greedy"] * (n_dev + n_test) + seconds["beam"] * n_test
    kind = "enc-self" if setting == "encoder" else "all"
    hours = (updates * seconds[f"update {kind}"] + scorings * scoring) / 3600
    return {"updates": updates, "scorings": scorings, "seconds per scoring": scoring, "hours": hours}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pair", default="en-de")
    ap.add_argument("--steps", type=int, default=6, help="timed updates per model, kind set and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=120, help="test sentences decoded per model and round")
    ap.add_argument("--json", help="write the results here (atomically)")
    args = ap.parse_args(argv)
    data = prepare_data(get_config("cpu", pair=args.pair))
    test = load_split(args.pair, main_test_set(args.pair))
    sample = test.head(args.sentences)
    models = shapes(data.bpe.vocab_size)
    kind_sets = {"enc-self": SETTINGS["encoder"], "all": KINDS}
    batches = {beam: decode_batches(data.bpe, sample, beam) for beam in (1, 4)}
    times: dict[str, dict[str, list[float]]] = {name: {} for name in models}
    runs = {(name, label): Pruning(model, data, PruneConfig(kinds=kinds)) for name, model in models.items()
            for label, kinds in kind_sets.items()}      # each model sees the same batches, in the same order
    for name, model in models.items():                  # warm-up: oneDNN builds kernels per shape
        for label in kind_sets:
            update_seconds(runs[name, label], 2)
        decode_seconds(model, batches[1][:2], 1)
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(reversed(models))
        for name in order:
            model = models[name]
            for label in kind_sets:
                times[name].setdefault(f"update {label}", []).append(update_seconds(runs[name, label], args.steps))
            for beam, label in ((1, "greedy"), (4, "beam")):
                seconds = decode_seconds(model, batches[beam], beam) / len(sample)
                times[name].setdefault(label, []).append(seconds)
            print(f"round {r + 1}: {name}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times[name].items()),
                  flush=True)
    median = {name: {k: statistics.median(v) for k, v in t.items()} for name, t in times.items()}
    opus, cpu = median["opus-mt (pretrained)"], median["cpu profile"]
    n_dev = min(PROFILES["pretrained"].data.dev_limit or 10**9, len(load_split(args.pair, "dev")))
    out = {"pair": args.pair, "machine": machine(), "threads": torch.get_num_threads(), "steps": args.steps,
           "rounds": args.rounds, "sentences": args.sentences, "max_tokens": PruneConfig.max_tokens,
           "seconds": median, "rounds_seconds": times, "opus_over_cpu": {k: opus[k] / cpu[k] for k in opus},
           "estimate": {setting: page_estimate(opus, setting, n_dev, len(test)) for setting in SETTINGS}}
    print("median seconds (per update; per sentence decoded):")
    for k in opus:
        print(f"  {k:16s} opus-mt {opus[k]:.3f}  cpu {cpu[k]:.3f}  ratio {opus[k] / cpu[k]:.1f}")
    for setting, e in out["estimate"].items():
        print(f"Sec. 6 {setting}: {e['updates']:,} updates + {e['scorings']} scorings of "
              f"{e['seconds per scoring'] / 60:.1f} min: about {e['hours']:.1f} hours on this machine")
    if args.json:
        write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

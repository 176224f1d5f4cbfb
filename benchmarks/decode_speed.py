"""Decoding speed of a headlib model: greedy and beam search (sentences/s) on a Multi30k test set,
and the key/value cache against full recomputation of the decoder at every step.

With `--checkpoint PATH` (a run's final.pt, beside its bpe.json) the trained model is timed; without
it a randomly initialised model of the profile is built with the pair's cached joint BPE. A random
model almost never emits EOS, so every sentence runs to the maximum output length
(1.5 x longest source in the batch + 10): its speeds are a worst case, not what a trained model
gets, and `--limit` (default 100 for a random model) keeps the run short.

    PYTHONPATH=. python benchmarks/decode_speed.py --checkpoint artifacts/runs/<run>/final.pt \
        --json artifacts/bench/decode_speed.json

Everything runs in fp32 (as `headlib.nn.decode.translate` does), in one process, after a warm-up.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import torch

from headlib.config import get_config
from headlib.data.batching import source_tensor
from headlib.data.bpe import PAD_ID, cached_bpe
from headlib.data.corpora import load_split, main_test_set
from headlib.files import write_json  # atomic: temp file + os.replace
from headlib.nn.decode import greedy, length_batches, score, translate
from headlib.nn.model import Transformer
from headlib.train import load_model


class FullRecompute:
    """Stands in for the model inside `headlib.nn.decode.greedy`: `decode_step` re-runs the whole
    (teacher-forced) decoder, `model.decode`, over the prefix so far instead of using the
    key/value cache. Everything else (stopping rule, banned tokens, output format) is greedy's
    own code, so the two runs differ only in cache vs. recomputation."""

    def __init__(self, model):
        self.model = model

    def __getattr__(self, name):  # cfg, decoder, padding_bias, ... come from the model
        return getattr(self.model, name)

    def encode(self, src, gates=None):
        self._src = src
        return self.model.encode(src, gates)

    def decode_step(self, token, memory, src_bias, cache, step, gates=None):
        state = cache[0]  # greedy gives one dict per decoder layer; the prefix lives in the first
        state["prefix"] = torch.cat([state["prefix"], token], dim=1) if "prefix" in state else token
        hidden = self.model.decode(state["prefix"], memory, self._src, gates)  # (B, step + 1, D)
        return self.model.logits(hidden[:, -1])


def greedy_full(model, src: torch.Tensor) -> list[list[int]]:
    """`headlib.nn.decode.greedy` without the key/value cache."""
    return greedy(FullRecompute(model), src)


def decode_ids(model, ids, fn, max_tokens: int) -> list[list[int]]:
    """Output ids of each sentence (in input order) with greedy function `fn`."""
    out: list = [None] * len(ids)
    for idx in length_batches(ids, 1, max_tokens):
        src = source_tensor([ids[i] for i in idx])
        for i, h in zip(idx, fn(model, src)):
            out[i] = h
    return out


def timed(fn):
    """fn()'s result and its wall time in seconds."""
    t0 = time.perf_counter()
    res = fn()
    return res, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", help="a run's final.pt (default: a random model of --profile)")
    ap.add_argument("--profile", default="cpu", help="profile of the random model")
    ap.add_argument("--pair", default="en-de", help="pair of the random model")
    ap.add_argument("--test-set", default="", help="default: the pair's first test set (test_2016_flickr)")
    ap.add_argument("--limit", type=int, default=None,
                    help="decode only the first N sentences (default: all with a checkpoint, 100 without)")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=None, help="length normalisation (default: the checkpoint's)")
    ap.add_argument("--compare", type=int, default=200, help="sentences for cached vs. full recomputation (0 = skip)")
    ap.add_argument("--max-tokens", type=int, default=6000, help="batch cap of translate()")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed repeats of every method, median reported (default: 3 with a checkpoint, 1 without)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the results here (atomically)")
    args = ap.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    t_start = time.perf_counter()

    if args.checkpoint:
        model, bpe, ckpt = load_model(args.checkpoint)
        pair, profile = ckpt["config"]["data"]["pair"], ckpt["config"]["profile"]
        alpha = args.alpha if args.alpha is not None else float(ckpt.get("len_alpha", 1.0))
        source = f"checkpoint {args.checkpoint}"
        random_model = False
    else:
        cfg = get_config(args.profile, pair=args.pair)
        train = load_split(cfg.data.pair, "train").head(cfg.data.train_limit)
        bpe = cached_bpe(train.src, train.tgt, cfg.data.bpe_vocab)  # as headlib.train.prepare_data
        torch.manual_seed(args.seed)
        model = Transformer(cfg.model, bpe.vocab_size).eval()
        pair, profile = cfg.data.pair, cfg.profile
        alpha = args.alpha if args.alpha is not None else cfg.train.len_alpha
        source = f"RANDOM {profile} model (seed {args.seed})"
        random_model = True
    model.eval()

    test_name = args.test_set or main_test_set(pair)
    test = load_split(pair, test_name)
    limit = args.limit if args.limit is not None else (0 if not random_model else 100)
    src_text = list(test.src[:limit] if limit else test.src)
    refs = list(test.tgt[:len(src_text)])
    n = len(src_text)
    mc = model.cfg
    log(f"model: {source}; {mc.d_model}/{mc.n_heads}/{mc.d_ff}, {mc.enc_layers}+{mc.dec_layers} layers, "
        f"{model.num_parameters():,} params, vocab {bpe.vocab_size}")
    log(f"data: {pair} {test_name}, {n} of {len(test)} sentences; {torch.get_num_threads()} threads")
    if random_model:
        log("NOTE: random weights -> outputs run to the maximum length (1.5 x longest source + 10); "
            "speeds are a worst case and BLEU is meaningless.")

    # warm-up (allocator, kernels) on a few sentences, every method
    warm = src_text[:min(32, n)]
    translate(model, bpe, warm, beam=1, max_tokens=args.max_tokens)
    if args.beam > 1:
        translate(model, bpe, warm, beam=args.beam, alpha=alpha, max_tokens=args.max_tokens)
    sub = src_text[:min(args.compare, n)]
    sub_ids = bpe.encode_batch(sub)
    if sub:
        decode_ids(model, sub_ids[:8], greedy_full, args.max_tokens)

    repeats = args.repeats if args.repeats is not None else (1 if random_model else 3)
    results = {"benchmark": "decode_speed", "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "torch": torch.__version__, "python": platform.python_version(), "cpu_count": os.cpu_count(),
               "threads": torch.get_num_threads(), "load_avg_start": os.getloadavg(),
               "model": source, "random_model": random_model, "pair": pair, "profile": profile,
               "test_set": test_name, "sentences": n, "max_tokens": args.max_tokens, "repeats": repeats,
               "dtype": "fp32", "runs": {}}

    # Each repeat runs every method once, in turn; the median time per method is reported.
    methods = {"greedy": lambda: translate(model, bpe, src_text, beam=1, max_tokens=args.max_tokens)}
    if args.beam > 1:
        methods[f"beam{args.beam}"] = lambda: translate(model, bpe, src_text, beam=args.beam, alpha=alpha,
                                                        max_tokens=args.max_tokens)
    if sub:
        methods["cached"] = lambda: decode_ids(model, sub_ids, greedy, args.max_tokens)
        methods["full"] = lambda: decode_ids(model, sub_ids, greedy_full, args.max_tokens)
    times: dict[str, list[float]] = {k: [] for k in methods}
    outputs: dict = {}
    for r in range(repeats):
        for name, fn in methods.items():
            outputs[name], sec = timed(fn)
            times[name].append(sec)
            log(f"repeat {r + 1}/{repeats}: {name:<8} {sec:7.1f} s  load {os.getloadavg()[0]:.2f}")

    def record(name, key, extra=None):
        hyps, secs = outputs[key], times[key]
        sec = statistics.median(secs)
        row = {"sentences": len(hyps), "seconds_median": round(sec, 2), "seconds_all": [round(x, 2) for x in secs],
               "sentences_per_s": round(len(hyps) / sec, 2),
               "mean_output_words": round(sum(len(h.split()) for h in hyps) / max(len(hyps), 1), 2)}
        if not random_model:
            row.update({k: v for k, v in score(hyps, refs[:len(hyps)]).items() if k in ("bleu", "chrf", "bp")})
        row.update(extra or {})
        results["runs"][name] = row
        log(f"{name:<22} {row['sentences_per_s']:8.1f} sent/s  {sec:7.1f} s  "
            f"{row['mean_output_words']:6.1f} words/sent" + (f"  BLEU {row['bleu']}" if "bleu" in row else ""))

    log("")
    log(f"Decoding speed, median of {repeats} repeat(s), fp32, {torch.get_num_threads()} threads")
    record("greedy (kv cache)", "greedy", {"beam": 1})
    if args.beam > 1:
        record(f"beam {args.beam} (alpha {alpha:g})", f"beam{args.beam}", {"beam": args.beam, "alpha": alpha})

    if sub:
        cached, full = outputs["cached"], outputs["full"]
        t_cached, t_full = statistics.median(times["cached"]), statistics.median(times["full"])
        diff = [i for i in range(len(sub)) if cached[i] != full[i]]
        cmp = {"sentences": len(sub),
               "cached_seconds_all": [round(x, 2) for x in times["cached"]],
               "full_seconds_all": [round(x, 2) for x in times["full"]],
               "cached_sentences_per_s": round(len(sub) / t_cached, 2),
               "full_sentences_per_s": round(len(sub) / t_full, 2),
               "speedup_cached_over_full": round(t_full / t_cached, 2),
               "mean_output_tokens": round(sum(map(len, cached)) / len(sub), 2),
               "token_identical": not diff, "sentences_differing": len(diff),
               "differing_indices": diff[:20],
               "differing_with_pad_emitted": sum(PAD_ID in cached[i] or PAD_ID in full[i] for i in diff)}
        results["kv_cache_vs_full"] = cmp
        log(f"greedy on the first {len(sub)} sentences ({cmp['mean_output_tokens']:.1f} output tokens/sent): "
            f"kv cache {cmp['cached_sentences_per_s']:.1f} sent/s, full recomputation "
            f"{cmp['full_sentences_per_s']:.1f} sent/s -> kv cache {cmp['speedup_cached_over_full']:.2f}x faster; "
            f"token-identical: {'yes' if not diff else 'NO'}"
            + ("" if not diff else f" ({len(diff)} sentences differ, e.g. #{diff[0]})"))

    results["load_avg_end"] = os.getloadavg()
    results["seconds"] = round(time.perf_counter() - t_start, 1)
    log(f"load avg {results['load_avg_start'][0]:.2f} -> {results['load_avg_end'][0]:.2f}; "
        f"total {results['seconds']:.0f} s")
    if args.json:
        write_json(args.json, results)
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

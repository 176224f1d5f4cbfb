"""Time of LRP head relevance as a ratio to one teacher-forced forward+backward pass.

    python benchmarks/lrp_speed.py --checkpoint artifacts/runs/<run>/final.pt [--sentences 500]

All run over the same held-out sentences, teacher-forced on the model's own greedy translations
(decoded once beforehand, not timed), in fp32, in one process, in batches of similar translation
length as `head_relevance` makes them (per-step LRP also in batches of similar source length, as
before `headlib.analysis.lrp.teacher_forcing_batches`). Prints seconds and the ratios of both
normalizations (per step, the paper's; per sentence, one backward per batch) and the rank
correlation of the two head rankings; and the per-step time with the top-1 logits taken from the
full (B, T, V) logits, as before `headlib.analysis.lrp.top1_start` (the same relevances, checked); and the
per-step relevance with the batch's T backward passes done as one vectorised backward
(`torch.autograd.grad(..., is_grads_batched=True)`, `batched_steps` below; the same relevances,
checked), the obvious way to cut the per-step cost.

It also counts the floating-point operations of each (`torch.utils.flop_counter`), and estimates
the floor of any exact per-step LRP done with backward passes (`per_step_floor`), to say whether the
time ratio is overhead or arithmetic.
"""
from __future__ import annotations

import argparse
import sys
import time
from unittest.mock import patch

import torch
from torch.utils.flop_counter import FlopCounterMode

from headlib.analysis import lrp
from headlib.analysis.lrp import (NORMALIZE, _layer_normalized, capture_heads, conservative, head_relevance_batch,
                                  teacher_forcing_batches, top1_start)
from headlib.data.batching import pad
from headlib.data.bpe import PAD_ID
from headlib.data.corpora import analysis_sentences
from headlib.files import write_json
from headlib.train.machine import machine
from headlib.train import load_model
from headlib.nn.loss import token_loss


def batched_steps(model, src, tgt_in, tgt_out):
    """`head_relevance_batch` (conservative rule, per-step normalization) with the T backward passes
    vectorised: one `autograd.grad` call whose grad_outputs stack the T one-hot step selectors."""
    model.eval()
    with torch.enable_grad(), conservative(model), capture_heads(model, "enc-self") as heads:
        start = top1_start(model, src, tgt_in)                                        # (B, T)
        valid = tgt_out.ne(PAD_ID)                                                    # (B, T)
        steps = torch.eye(start.size(1))[:, None, :] * valid.T[:, :, None].float()   # (T, B, T)
        grads = torch.autograd.grad(start, heads, grad_outputs=steps, is_grads_batched=True)   # L x (T, B, H, S, dh)
        total = sum(_layer_normalized(heads, [g[t] for g in grads])[valid[:, t]].detach().double().sum(0)
                    for t in range(start.size(1)))
    return total, int(valid.sum())


def flops(fn) -> int:
    """Floating-point operations of the matrix products fn() runs (forward and backward)."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def forward_backward(model, batches):
    """One teacher-forced forward+backward of the training loss over every batch."""
    for src, tgt_in, tgt_out in batches:
        model.zero_grad(set_to_none=True)
        loss, _ = token_loss(model, src, tgt_in, tgt_out, 0.0)
        loss.backward()


def unpadded(batches):
    """Every sentence of `batches` alone and without padding: (src, tgt_in, tgt_out), B = 1."""
    for src, tgt_in, tgt_out in batches:
        for s, ti, to in zip(src, tgt_in, tgt_out):
            n, m = int(s.ne(PAD_ID).sum()), int(to.ne(PAD_ID).sum())
            yield s[None, :n], ti[None, :m], to[None, :m]


def by_source_length(batches, batch_size: int) -> list[tuple]:
    """The rows of `batches` regrouped into batches of similar source length, as `head_relevance`
    grouped them before `teacher_forcing_batches` (no second decoding: the same translations)."""
    rows = sorted(unpadded(batches), key=lambda row: row[0].size(1))
    return [tuple(pad([t[0].tolist() for t in column]) for column in zip(*rows[k:k + batch_size]))
            for k in range(0, len(rows), batch_size)]


def per_step_floor(model, src, tgt_in) -> int:
    """Estimated fewest FLOPs of exact per-step relevance by backward passes, for one unpadded
    sentence (B = 1).

    One forward pass (with the (V, D) output projection, for the argmax), then per target step t
    of T an input-gradient backward pass, which costs what the forward pass of the same products
    costs: through every encoder layer above the first (layer 0's heads are reached at its output
    projection) and through the decoder at positions <= t only (t/T of its forward: the ideal
    causal truncation). Weight gradients, padding and per-op overhead are left out. An estimate, not
    a bound: t/T over-counts the decoder's self-attention products (they shrink as (t/T)^2) and
    under-counts its projections of the encoder output (needed at every step); both are a few
    percent of a step's products at the cpu profile's sizes.
    """
    T, L = tgt_in.size(1), len(model.encoder)
    whole = flops(lambda: model.logits(model(src, tgt_in, hidden_only=True)))
    encoder = flops(lambda: model.encode(src))
    decoder = flops(lambda: model(src, tgt_in, hidden_only=True)) - encoder
    return whole + T * encoder * (L - 1) // L + decoder * (T + 1) // 2


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True, help="final.pt of a trained run")
    ap.add_argument("--pair", default="en-de")
    ap.add_argument("--sentences", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--json", help="write the results here (atomically)")
    args = ap.parse_args(argv)

    model, bpe, _ = load_model(args.checkpoint)
    sentences = analysis_sentences(args.pair, args.sentences)
    batches = teacher_forcing_batches(model, bpe, sentences, args.batch_size)   # by translation length
    by_source = by_source_length(batches, args.batch_size)   # before teacher_forcing_batches

    forward_backward(model, batches)   # warm-up: oneDNN creates its kernels per shape on first use
    t0 = time.perf_counter()
    forward_backward(model, batches)
    fwd_bwd = time.perf_counter() - t0

    relevance, seconds = {}, {}
    for normalize in NORMALIZE:
        t0 = time.perf_counter()
        total, steps = 0.0, 0
        for src, tgt_in, tgt_out in batches:
            t, n = head_relevance_batch(model, src, tgt_in, tgt_out, normalize=normalize)
            total, steps = total + t, steps + n
        seconds[normalize] = time.perf_counter() - t0
        relevance[normalize] = (total / steps).flatten()

    t0 = time.perf_counter()
    total = sum(head_relevance_batch(model, *batch)[0] for batch in by_source)
    seconds["by source"] = time.perf_counter() - t0
    assert torch.allclose(total / steps, relevance["step"].view_as(total).double(), atol=1e-5)

    # Before top1_start: each step's backward pass went through the (V, D) output projection.
    full_logits = lambda model, src, tgt_in: lrp.top1_logits(model(src, tgt_in).float())  # noqa: E731
    with patch.object(lrp, "top1_start", full_logits):
        t0 = time.perf_counter()
        total = sum(head_relevance_batch(model, *batch)[0] for batch in batches)
        seconds["full logits"] = time.perf_counter() - t0
    assert torch.allclose(total / steps, relevance["step"].view_as(total).double(), atol=1e-5)

    t0 = time.perf_counter()
    total = sum(batched_steps(model, *batch)[0] for batch in batches)
    seconds["batched"] = time.perf_counter() - t0
    assert torch.allclose(total / steps, relevance["step"].view_as(total).double(), atol=1e-5)

    # Arithmetic, counted after the timings (the counter slows what it counts).
    gflops = {"forward+backward": flops(lambda: forward_backward(model, batches))}
    for normalize in NORMALIZE:
        gflops[normalize] = flops(lambda: [head_relevance_batch(model, *b, normalize=normalize) for b in batches])
    alone = list(unpadded(batches))
    gflops["per-step floor"] = sum(per_step_floor(model, src, tgt_in) for src, tgt_in, _ in alone)
    gflops["forward+backward unpadded"] = flops(lambda: forward_backward(model, alone))
    gflops = {k: v / 1e9 for k, v in gflops.items()}

    from scipy.stats import spearmanr
    rho = float(spearmanr(relevance["step"], relevance["sentence"]).statistic)
    mean_len = steps / len(sentences)
    result = {"sentences": len(sentences), "target_steps": steps, "mean_target_length": round(mean_len, 1),
              "forward_backward_seconds": round(fwd_bwd, 2), "lrp_seconds": round(seconds["step"], 2),
              "ratio": round(seconds["step"] / fwd_bwd, 2),
              "lrp_by_source_length_seconds": round(seconds["by source"], 2),
              "ratio_by_source_length": round(seconds["by source"] / fwd_bwd, 2),
              "lrp_full_logits_seconds": round(seconds["full logits"], 2),
              "ratio_full_logits": round(seconds["full logits"] / fwd_bwd, 2),
              "lrp_batched_backward_seconds": round(seconds["batched"], 2),
              "ratio_batched_backward": round(seconds["batched"] / fwd_bwd, 2),
              "lrp_sentence_normalized_seconds": round(seconds["sentence"], 2),
              "ratio_sentence_normalized": round(seconds["sentence"] / fwd_bwd, 2),
              "spearman_step_vs_sentence": round(rho, 3), "threads": torch.get_num_threads(),
              "gflops": {k: round(v, 1) for k, v in gflops.items()},
              "flops_ratio": round(gflops["step"] / gflops["forward+backward"], 2),
              "flops_ratio_sentence_normalized": round(gflops["sentence"] / gflops["forward+backward"], 2),
              "flops_ratio_per_step_floor": round(gflops["per-step floor"] / gflops["forward+backward unpadded"], 2),
              "checkpoint": args.checkpoint, "pair": args.pair, "machine": machine()}
    print(f"{len(sentences)} sentences, {steps} target steps ({mean_len:.1f} per sentence)")
    print(f"teacher-forced forward+backward: {fwd_bwd:.1f} s")
    print(f"LRP, normalised per step (one backward per target step): {seconds['step']:.1f} s "
          f"({seconds['step'] / fwd_bwd:.1f}x)")
    print(f"  the same in batches of similar source length (before teacher_forcing_batches): "
          f"{seconds['by source']:.1f} s ({seconds['by source'] / fwd_bwd:.1f}x)")
    print(f"  the same with the top-1 logits from the full logits (before top1_start): {seconds['full logits']:.1f} s "
          f"({seconds['full logits'] / fwd_bwd:.1f}x)")
    print(f"  the same with each batch's backward passes vectorised (is_grads_batched): {seconds['batched']:.1f} s "
          f"({seconds['batched'] / fwd_bwd:.1f}x)")
    print(f"LRP, normalised per sentence (one backward per batch): {seconds['sentence']:.1f} s "
          f"({seconds['sentence'] / fwd_bwd:.1f}x); rank correlation with per step {rho:.3f}")
    print(f"FLOPs: forward+backward {gflops['forward+backward']:.0f} G; LRP per step {gflops['step']:.0f} G "
          f"({result['flops_ratio']:.1f}x), per sentence {gflops['sentence']:.0f} G "
          f"({result['flops_ratio_sentence_normalized']:.2f}x)")
    print(f"  floor of exact per-step LRP by backward passes (no padding, ideal causal truncation): "
          f"{result['flops_ratio_per_step_floor']:.1f}x an unpadded forward+backward")
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Training throughput: headlib's Transformer vs. transformers' MarianMTModel at the same config.

Both models get the cpu profile's shape (d_model 256, 8 heads, d_ff 1024, 6+6 layers, ReLU,
sqrt(d_model) embedding scale, one embedding shared by encoder input, decoder input and output,
dropout on embeddings and residuals, none on attention weights or inside the FFN), the same real
Multi30k training batches, the same autocast dtype, the same optimizer step (Adam(0.9, 0.98,
1e-9), gradient clipping at 1.0) and the same loss (label-smoothed cross-entropy, summed over the
non-pad target tokens, divided by their count; the output projection applied to non-pad positions
only, as `headlib.nn.loss.token_loss` does). headlib runs as the committed runs were trained and with
its fast kernels (fused loss, `headlib.nn.loss`; int16 dropout masks); Marian with eager attention and
with SDPA.

Each system is warmed up over every sampled batch (oneDNN builds kernels per shape), then
measured in rounds. Within a round the systems take turns batch by batch (the order rotates
from batch to batch; `--interleave pass` takes turns per pass instead), so that machine noise
hits all of them alike. Reported: target tokens/s per round, the median over rounds, and
headlib / Marian (against each Marian and against the faster one).

    PYTHONPATH=. python benchmarks/train_throughput.py --batches 12 --rounds 3 --dtype both \
        --json artifacts/bench/train_throughput.json
"""
from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from functools import partial

import torch
import torch.nn.functional as F

from headlib.config import get_config
from headlib.data.batching import collate, make_batches
from headlib.data.bpe import BOS_ID, EOS_ID, PAD_ID
from headlib.files import write_json  # atomic: temp file + os.replace
from headlib.nn.model import Transformer
from headlib.train.machine import machine
from headlib.train import prepare_data
from headlib.nn.loss import token_loss


def config_differences(cfg) -> list[str]:
    """What the benchmark does not make equal between the two models. None changes the matmul
    FLOPs of a step; all are small per-element costs or none at all."""
    norm = ("normalisation: headlib is pre-LN here (x + f(LN(x)), plus a final LayerNorm after the encoder "
            "and after the decoder); MarianMTModel is post-LN (LN(x + f(x))), no final LayerNorms "
            "(2 LayerNorms fewer)" if cfg.model.norm == "pre" else
            "normalisation: both post-LN (LN(x + f(x)))")
    return [
        norm,
        "output bias: headlib's out_bias is a trained parameter (V values); Marian's final_logits_bias is a "
        "buffer (added, not trained)",
        "positions: both sinusoidal and fixed; headlib interleaves sin/cos, Marian puts sin then cos halves "
        "(an embedding lookup in both)",
        "dropout: headlib draws masks with torch.rand (headlib fast: 16-bit integers compared with p * 2^16, "
        "four elements per 64-bit draw); Marian uses F.dropout",
        "loss: headlib computes the logits of the non-pad positions, then F.cross_entropy, as Marian here "
        "(headlib fast: the output projection fused with the cross-entropy chunk by chunk of rows, "
        "headlib.nn.loss; the same function)",
        "projections: headlib concatenates the q/k/v weights (k/v for cross-attention) and runs one matmul; "
        "Marian runs three separate Linear layers",
        "attention: headlib is explicit softmax(QK^T / sqrt(d_head) + bias) V; Marian eager is explicit too "
        "(QK^T * d_head^-0.5), Marian sdpa calls F.scaled_dot_product_attention",
        "head gates: headlib multiplies every head's output by a (fixed, all-ones) head mask and passes it "
        "through an identity hook module; Marian has neither",
        "initialisation: headlib Xavier-uniform, embeddings N(0, d^-1/2); Marian N(0, 0.02) (no effect on "
        "speed; it is why the first losses differ)",
    ]


MARIAN_KEYS = ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
               "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "activation_function", "dropout",
               "attention_dropout", "activation_dropout", "scale_embedding", "max_position_embeddings",
               "pad_token_id", "eos_token_id", "decoder_start_token_id", "share_encoder_decoder_embeddings",
               "tie_word_embeddings")


def marian_config(cfg, vocab_size: int):
    from transformers import MarianConfig
    m = cfg.model
    return MarianConfig(
        vocab_size=vocab_size, d_model=m.d_model,
        encoder_layers=m.enc_layers, decoder_layers=m.dec_layers,
        encoder_attention_heads=m.n_heads, decoder_attention_heads=m.n_heads,
        encoder_ffn_dim=m.d_ff, decoder_ffn_dim=m.d_ff,
        activation_function={"relu": "relu", "swish": "silu"}[m.activation],
        dropout=m.dropout, attention_dropout=m.attn_dropout, activation_dropout=0.0,
        scale_embedding=True, max_position_embeddings=m.max_positions,
        pad_token_id=PAD_ID, bos_token_id=BOS_ID, eos_token_id=EOS_ID, forced_eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID,
        share_encoder_decoder_embeddings=m.tied_embeddings, tie_word_embeddings=m.tied_embeddings,
    )


def build_marian(cfg, vocab_size: int, impl: str):
    from transformers import MarianMTModel
    model = MarianMTModel._from_config(marian_config(cfg, vocab_size), attn_implementation=impl)
    assert model.config._attn_implementation == impl, model.config._attn_implementation
    if cfg.model.tied_embeddings:
        assert model.lm_head.weight is model.model.shared.weight, "Marian output embedding not tied"
    return model


def marian_loss(model, src, tgt_in, tgt_out, label_smoothing: float):
    """Same computation as headlib.nn.loss.token_loss, for MarianMTModel."""
    out = model.model(input_ids=src, attention_mask=src.ne(PAD_ID), decoder_input_ids=tgt_in,
                      decoder_attention_mask=tgt_in.ne(PAD_ID), use_cache=False)
    keep = tgt_out.ne(PAD_ID)
    logits = model.lm_head(out.last_hidden_state[keep]) + model.final_logits_bias[0]
    loss = F.cross_entropy(logits.float(), tgt_out[keep], label_smoothing=label_smoothing, reduction="sum")
    return loss, int(keep.sum())


def headlib_systems(cfg, vocab_size: int, which: str) -> list[tuple[str, Transformer, object]]:
    """headlib as the committed runs train it (float32 dropout masks, unfused loss) and/or with
    the fast kernels (`model.dropout_masks=int16`, `train.fused_loss=true`)."""
    norm = f"{cfg.model.norm}-LN"
    systems = []
    if which in ("reference", "both"):
        systems.append((f"headlib ({norm})", Transformer(cfg.model, vocab_size), token_loss))
    if which in ("fast", "both"):
        model = Transformer(replace(cfg.model, dropout_masks="int16"), vocab_size)
        systems.append((f"headlib fast ({norm})", model, partial(token_loss, fused=True)))
    return systems


class System:
    """A model, its Adam optimizer and its loss function."""

    def __init__(self, name, model, loss_fn, cfg):
        self.name, self.model, self.loss_fn, self.cfg = name, model, loss_fn, cfg
        t = cfg.train
        params = [p for p in model.parameters() if p.requires_grad]
        self.n_params = sum(p.numel() for p in params)
        self.opt = torch.optim.Adam(params, lr=1e-4, betas=t.betas, eps=t.adam_eps)
        self.rounds: list[float] = []
        self.first_loss: float | None = None
        model.train()

    def step(self, batch, bf16: bool) -> int:
        src, tgt_in, tgt_out = batch
        cfg = replace(self.cfg, train=replace(self.cfg.train, bf16=bf16))
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.train.bf16):
            loss, n = self.loss_fn(self.model, src, tgt_in, tgt_out, cfg.train.label_smoothing)
        (loss / n).backward()
        if cfg.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.train.clip_norm)
        self.opt.step()
        if self.first_loss is None:
            self.first_loss = loss.item() / n
        return n

    def run(self, batches, bf16: bool) -> float:
        """One pass over `batches`; returns target tokens/s."""
        t0, tokens = time.perf_counter(), 0
        for b in batches:
            tokens += self.step(b, bf16)
        return tokens / (time.perf_counter() - t0)


def sample_batches(cfg, n: int, max_tokens: int):
    """`n` real training batches spread evenly over the (length-sorted) batch list."""
    prep = prepare_data(cfg)
    batches = make_batches(prep.train, max_tokens)
    if n >= len(batches):
        pick = list(range(len(batches)))
    elif n == 1:
        pick = [len(batches) // 2]
    else:
        pick = sorted({round(i * (len(batches) - 1) / (n - 1)) for i in range(n)})
    tensors = [collate(prep.train, batches[i]) for i in pick]
    shapes = [{"index": i, "rows": int(t[0].size(0)), "src_len": int(t[0].size(1)),
               "tgt_len": int(t[1].size(1)), "tgt_tokens": int(t[2].ne(PAD_ID).sum())}
              for i, t in zip(pick, tensors)]
    return prep.bpe.vocab_size, tensors, shapes, len(batches)


def measure(cfg, vocab_size, batches, bf16: bool, rounds: int, impls, seed: int, log,
            interleave: str = "batch", headlib: str = "both") -> list[System]:
    systems = []
    torch.manual_seed(seed)
    for name, model, loss_fn in headlib_systems(cfg, vocab_size, headlib):
        systems.append(System(name, model, loss_fn, cfg))
    for impl in impls:
        torch.manual_seed(seed)
        systems.append(System(f"Marian {impl} (post-LN)", build_marian(cfg, vocab_size, impl), marian_loss, cfg))
    dtype = "bf16" if bf16 else "fp32"
    for s in systems:  # warm-up: every shape once
        t0 = time.perf_counter()
        rate = s.run(batches, bf16)
        log(f"[{dtype}] warm-up {s.name:<24} {rate:8,.0f} tok/s ({time.perf_counter() - t0:.1f} s)")
    n = len(systems)
    for r in range(rounds):
        if interleave == "pass":  # each system runs the whole sample, order rotating per round
            for s in systems[r % n:] + systems[:r % n]:
                s.rounds.append(s.run(batches, bf16))
        else:  # batch by batch: every system takes the same batch in turn, order rotating per batch
            secs, toks = [0.0] * n, [0] * n
            for j, b in enumerate(batches):
                for i in [(r + j + k) % n for k in range(n)]:
                    t0 = time.perf_counter()
                    toks[i] += systems[i].step(b, bf16)
                    secs[i] += time.perf_counter() - t0
            for i, s in enumerate(systems):
                s.rounds.append(toks[i] / secs[i])
        for s in systems:
            log(f"[{dtype}] round {r + 1}/{rounds} {s.name:<24} {s.rounds[-1]:8,.0f} tok/s  "
                f"load {os.getloadavg()[0]:.2f}")
    return systems


def summarise(systems: list[System]) -> dict:
    rows = {s.name: {"tok_per_s_rounds": [round(x, 1) for x in s.rounds],
                     "tok_per_s_median": round(statistics.median(s.rounds), 1),
                     "trainable_params": s.n_params, "first_loss_per_token": round(s.first_loss, 4)}
            for s in systems}
    heads = [s for s in systems if s.name.startswith("headlib")]
    marians = [s for s in systems if not s.name.startswith("headlib")]
    out = {"systems": rows}
    if marians:
        best = max(marians, key=lambda s: statistics.median(s.rounds))
        out["fastest_marian"] = best.name
        out["ratio_vs"], out["ratio_over_fastest_marian"], out["ratio_per_round"] = {}, {}, {}
        for head in heads:
            h = statistics.median(head.rounds)
            out["ratio_vs"][head.name] = {m.name: round(h / statistics.median(m.rounds), 3) for m in marians}
            out["ratio_over_fastest_marian"][head.name] = round(h / statistics.median(best.rounds), 3)
            # per-round ratios against the same round's fastest Marian: how stable the ratio is
            out["ratio_per_round"][head.name] = [round(head.rounds[i] / max(m.rounds[i] for m in marians), 3)
                                                 for i in range(len(head.rounds))]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=12, help="training batches sampled over the length range")
    ap.add_argument("--rounds", type=int, default=3, help="measured passes per system (median reported)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--dtype", choices=("bf16", "fp32", "both"), default="both")
    ap.add_argument("--interleave", choices=("batch", "pass"), default="batch",
                    help="batch: systems take turns on every batch (default); pass: on every pass over the sample")
    ap.add_argument("--attn", default="eager,sdpa", help="Marian attention implementations, comma-separated")
    ap.add_argument("--headlib", choices=("reference", "fast", "both"), default="both",
                    help="headlib as the committed runs train it, with the fast kernels, or both")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--pair", default="en-de")
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the results here (atomically)")
    args = ap.parse_args(argv)

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = get_config(args.profile, pair=args.pair)
    impls = [a.strip() for a in args.attn.split(",") if a.strip()]
    log = lambda msg: print(msg, flush=True)  # noqa: E731

    t0 = time.perf_counter()
    vocab_size, batches, shapes, n_all = sample_batches(cfg, args.batches, args.max_tokens)
    log(f"data: {len(batches)} of {n_all} batches (max_tokens {args.max_tokens}), "
        f"{sum(s['tgt_tokens'] for s in shapes):,} target tokens per pass, vocab {vocab_size} "
        f"({time.perf_counter() - t0:.1f} s)")
    log("batch shapes (rows x src_len / tgt_len): "
        + ", ".join(f"{s['rows']}x{s['src_len']}/{s['tgt_len']}" for s in shapes))

    import transformers
    m = cfg.model
    results = {
        "benchmark": "train_throughput",
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "machine": platform.machine(), "kernels": machine(),
        "cpu_count": os.cpu_count(), "threads": torch.get_num_threads(),
        "load_avg_start": os.getloadavg(),
        "profile": args.profile, "pair": args.pair,
        "model": {"d_model": m.d_model, "n_heads": m.n_heads, "d_ff": m.d_ff, "enc_layers": m.enc_layers,
                  "dec_layers": m.dec_layers, "dropout": m.dropout, "attn_dropout": m.attn_dropout,
                  "activation": m.activation, "headlib_norm": m.norm, "marian_norm": "post",
                  "tied_embeddings": m.tied_embeddings, "vocab_size": vocab_size},
        "optimizer": {"name": "Adam", "lr": 1e-4, "betas": list(cfg.train.betas), "eps": cfg.train.adam_eps,
                      "clip_norm": cfg.train.clip_norm},
        "loss": f"label-smoothed CE ({cfg.train.label_smoothing}) summed over non-pad target tokens / count",
        "max_tokens": args.max_tokens, "rounds": args.rounds, "interleave": args.interleave, "batches": shapes,
        "marian_config": {k: v for k, v in marian_config(cfg, vocab_size).to_dict().items() if k in MARIAN_KEYS},
        "config_differences": config_differences(cfg),
        "results": {},
    }
    dtypes = {"bf16": [True], "fp32": [False], "both": [True, False]}[args.dtype]
    for bf16 in dtypes:
        name = "bf16" if bf16 else "fp32"
        systems = measure(cfg, vocab_size, batches, bf16, args.rounds, impls, args.seed, log, args.interleave,
                          args.headlib)
        results["results"][name] = summarise(systems)
        del systems
        gc.collect()
        if args.json:  # partial results survive an interrupted run
            write_json(args.json, results)
    results["load_avg_end"] = os.getloadavg()
    results["seconds"] = round(time.perf_counter() - t0, 1)

    print()
    print(f"Training throughput, target tokens/s (median of {args.rounds} round(s); "
          f"{len(batches)} batches, {torch.get_num_threads()} threads, load avg "
          f"{results['load_avg_start'][0]:.2f} -> {results['load_avg_end'][0]:.2f})")
    print(f"{'dtype':<6} {'system':<26} {'params':>11} {'tok/s':>9}  {'rounds':<30}")
    for dtype, res in results["results"].items():
        for sname, row in res["systems"].items():
            rounds = ", ".join(f"{x:,.0f}" for x in row["tok_per_s_rounds"])
            print(f"{dtype:<6} {sname:<26} {row['trainable_params']:>11,} {row['tok_per_s_median']:>9,.0f}  {rounds:<30}")
        for head, ratio in res.get("ratio_over_fastest_marian", {}).items():
            print(f"{dtype:<6} {head} / fastest Marian ({res['fastest_marian']}): {ratio:.3f}  (per round: "
                  f"{', '.join(f'{x:.3f}' for x in res['ratio_per_round'][head])})")
    extra = vocab_size + (4 * m.d_model if m.norm == "pre" else 0)
    print(f"Trainable parameters: headlib has {extra:,} more than Marian = out_bias ({vocab_size:,})"
          + (f" + 2 final LayerNorms ({4 * m.d_model:,})" if m.norm == "pre" else ""))
    print()
    print("Not matched between the two models (none changes the matmul FLOPs):")
    for d in results["config_differences"]:
        print(f"  - {d}")
    if args.json:
        write_json(args.json, results)
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

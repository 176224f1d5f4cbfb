"""Training: Adam + inverse-sqrt schedule, label smoothing, token-capped batches, gradient
accumulation, dev BLEU with early stopping, checkpoint averaging, atomic resumable checkpoints.

A run lives in `artifacts/runs/<pair>-<profile>-<hash>/` where the hash covers the config and the
results version (`headlib.RESULTS_VERSION`, bumped when code changes numbers); a finished run is
never retrained (`results.json` is the marker). A recipe is a number of updates, so a run is the
same model on every machine up to kernel rounding; reruns are reproducible within the seeds' spread.

    last.pt     model, optimizer, step, data-iterator position, RNG state, history (resume)
    best.pt     weights with the best dev BLEU
    snap-*.pt   weights at the last `average_last` evaluations (checkpoint averaging)
    final.pt    the model used downstream (best or averaged, whichever has higher dev BLEU)
    results.json  dev/test BLEU, chrF and sacrebleu signatures, training statistics, the
                encoder heads' statistics at each evaluation (`history[i]["heads"]`)

Distributed: under `torchrun`, each update's micro-batches are split across ranks
(DistributedDataParallel; gloo on CPU, nccl on GPU); the loss is normalised by the target
tokens of the whole update, so any world size computes the same gradient.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import torch
import torch.distributed as dist

from headlib import RESULTS_VERSION, __version__
from headlib.analysis.heads import head_statistics
from headlib.config import SPEED_ONLY, Config
from headlib.data.batching import collate, epoch_order, make_batches
from headlib.data.bpe import BPE
from headlib.data.corpora import load_split, test_sets
from headlib.files import load_checkpoint, torch_save, write_json
from headlib.nn.decode import evaluate_bleu
from headlib.nn.loss import token_loss
from headlib.nn.model import Transformer
from headlib.train import pretrained, release
from headlib.train.loop import Update, fine_tune
from headlib.train.machine import device, machine
from headlib.train.prepared import prepare_data
from headlib.train.runs import initial_model, load_model, run_dir


def lr_at(step: int, cfg: Config) -> float:
    """Linear warmup to `lr`, then the inverse-sqrt decay lr * sqrt(warmup / step) (App. B.3) or,
    with ``train.schedule=linear``, a linear decay that reaches 0 at `max_steps`."""
    t, step = cfg.train, max(step, 1)
    if step < t.warmup:
        return t.lr * step / t.warmup
    if t.schedule == "inverse_sqrt":
        return t.lr * math.sqrt(t.warmup / step)
    return t.lr * max(t.max_steps - step, 0) / max(t.max_steps - t.warmup, 1)


def average_weights(paths: list[Path]) -> dict:
    states = [load_checkpoint(p, "weight snapshot", weights_only=True) for p in paths]
    return {k: sum(s[k].double() for s in states).div(len(states)).to(states[0][k].dtype)
            if states[0][k].is_floating_point() else states[0][k] for k in states[0]}


class Trainer:
    """One training run; `fit()` resumes from `last.pt` if it exists."""

    def __init__(self, cfg: Config, out: Path | None = None, progress: bool = True):
        self.cfg, self.out, self.progress = cfg, Path(out or run_dir(cfg)), progress
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        if self.world > 1 and not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        self.rank = dist.get_rank() if self.world > 1 else 0
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        self.dev = device()
        self.data = prepare_data(cfg)
        self.batches = make_batches(self.data.train, cfg.train.max_tokens)
        self.model = initial_model(cfg, self.data.bpe.vocab_size).to(self.dev)
        self.net = self.model
        if self.world > 1:
            self.net = torch.nn.parallel.DistributedDataParallel(self.model)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.train.lr, betas=cfg.train.betas,
                                    eps=cfg.train.adam_eps)
        self.state = {"step": 0, "epoch": 0, "pos": 0, "best_bleu": -1.0, "bad_evals": 0,
                      "elapsed": 0.0, "tokens": 0, "history": [], "snapshots": [], "stopped": ""}
        if (self.out / "last.pt").is_file():
            self._load(self.out / "last.pt")

    # -- checkpoints --------------------------------------------------------------------------
    def save(self) -> None:
        """`last.pt`: the whole training state, from which `fit` goes on (rank 0 writes it)."""
        if self.rank == 0:
            torch_save(self.out / "last.pt", {
                "model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "state": self.state, "config": self.cfg.to_dict(), "version": __version__,
                "results_version": RESULTS_VERSION, "rng": {"torch": torch.get_rng_state(), "python": random.getstate()}})

    def _load(self, path: Path):
        ckpt = load_checkpoint(path, "training checkpoint", config=self.cfg.to_dict(), ignore=SPEED_ONLY,
                               results_version=RESULTS_VERSION, map_location=self.dev)
        self.model.load_state_dict(ckpt["model"])
        self.opt.load_state_dict(ckpt["optimizer"])
        self.state = ckpt["state"]
        torch.set_rng_state(ckpt["rng"]["torch"])
        random.setstate(ckpt["rng"]["python"])

    # -- loop ---------------------------------------------------------------------------------
    def _loss(self, batch):
        # Through self.net: DDP's gradient hooks fire only through the wrapper's forward.
        return token_loss(self.net, *batch, self.cfg.train.label_smoothing, fused=self.cfg.train.fused_loss)

    def _groups(self, epoch: int) -> list[list[int]]:
        """The batches of each update of `epoch`: `accum * world` of them, in the epoch's order."""
        n = self.cfg.train.accum * self.world
        order = epoch_order(len(self.batches), self.cfg.train.seed, epoch)
        return [order[i:i + n] for i in range(0, len(order) - n + 1, n)]

    def _updates(self) -> Iterator[Update]:
        """The run's updates from its saved position (epoch, pos) on, epoch after epoch: this rank's
        share of each group of batches and the target tokens of all of it. The position itself
        moves in `_after_update`."""
        s, data = self.state, self.data.train
        while True:
            groups = self._groups(s["epoch"])
            while s["pos"] < len(groups):
                group = groups[s["pos"]]
                yield Update([collate(data, self.batches[b]) for b in group[self.rank::self.world]],
                             sum(len(data.tgt[i]) + 1 for b in group for i in self.batches[b]))
            s["epoch"] += 1; s["pos"] = 0

    def _evaluate(self, snapshot: bool = True):
        s, cfg = self.state, self.cfg
        self.model.eval()
        dev = evaluate_bleu(self.model, self.data.bpe, self.data.dev)
        entry = {"step": s["step"], "epoch": s["epoch"], "minutes": round(s["elapsed"] / 60, 2),
                 "dev_bleu": dev["bleu"], "tokens": s["tokens"]}
        if cfg.train.head_stats_sentences:   # Sec. 5 over training: a fixed set of dev sentences
            sentences = list(self.data.dev.src[:cfg.train.head_stats_sentences])
            entry["heads"] = head_statistics(self.model, self.data.bpe, sentences, self.data.src_freq)
        self.model.train()
        s["history"].append(entry)
        if dev["bleu"] > s["best_bleu"]:
            s["best_bleu"], s["bad_evals"] = dev["bleu"], 0
            torch_save(self.out / "best.pt", self.model.state_dict())
        else:
            s["bad_evals"] += 1
        if cfg.train.average_last > 1 and snapshot:
            snap = self.out / f"snap-{s['step']:07d}.pt"
            torch_save(snap, self.model.state_dict())
            s["snapshots"] = (s["snapshots"] + [snap.name])[-cfg.train.average_last:]
            for old in self.out.glob("snap-*.pt"):
                if old.name not in s["snapshots"]:
                    old.unlink()
        return dev["bleu"]

    def _stop_reason(self) -> str:
        """Why training stops after this update ("" to go on): the budget of updates, a user's clock,
        or early stopping at an evaluation; under DDP every rank stops when rank 0 does."""
        s, t = self.state, self.cfg.train
        reason = ("max_steps" if s["step"] >= t.max_steps else
                  "max_minutes" if t.max_minutes and s["elapsed"] >= t.max_minutes * 60 else
                  "early stopping" if s["step"] % t.eval_every == 0 and s["bad_evals"] >= t.patience else "")
        if self.world > 1:
            flag = torch.tensor([1 if reason else 0], device=self.dev)
            dist.broadcast(flag, 0)
            reason = reason or ("rank 0" if flag.item() else "")
        return reason

    def _after_update(self, tokens: int, t0: float) -> None:
        """What follows an update: the counters, a dev evaluation every `eval_every` updates
        (rank 0), the stop decision, `last.pt` every `save_every` updates and at the end."""
        s, t = self.state, self.cfg.train
        s["step"] += 1; s["pos"] += 1; s["tokens"] += tokens
        s["elapsed"] = time.time() - t0
        if s["step"] % t.eval_every == 0 and self.rank == 0:
            self._evaluate()
        s["stopped"] = self._stop_reason()
        if s["step"] % (t.save_every or t.eval_every) == 0 or s["stopped"]:
            self.save()

    def fit(self, stop_after: int | None = None) -> dict:
        """Train until max_steps / early stopping (or a user's max_minutes), epoch by epoch from the
        saved position, through `headlib.train.loop.fine_tune`. `stop_after`: return once the run has
        made that many updates in all, without finishing it (a phase of the lottery; a crash in the
        resume test)."""
        s, t = self.state, self.cfg.train
        self.out.mkdir(parents=True, exist_ok=True)
        self.model.train()
        if s["stopped"]:
            return s
        t0 = time.time() - s["elapsed"]
        shown = self.progress and self.rank == 0
        with Progress(self.cfg, s["step"]) if shown else contextlib.nullcontext() as progress:
            for done in fine_tune(self.model, self.opt, self._updates(), self._loss, max(t.max_steps - s["step"], 1),
                                  start=s["step"], lr=lambda step: lr_at(step + 1, self.cfg), clip_norm=t.clip_norm,
                                  bf16=t.bf16, world=self.world, no_sync=self.net.no_sync if self.world > 1 else None):
                self._after_update(done.tokens, t0)
                if progress is not None:
                    progress.update(s, float(done.loss), done.tokens)
                if s["stopped"] or (stop_after is not None and s["step"] >= stop_after):
                    break
        return s


def start_from(checkpoint: Path, out: Path, cfg: Config, masks: dict[str, torch.Tensor]) -> None:
    """Make `out` a run of `cfg` that goes on from `checkpoint`'s whole training state (weights,
    optimizer, step, data position, RNG) with the head `masks` installed, the earlier run's
    evaluations (best weights, snapshots) and its stop forgotten: the lottery ticket's rewind."""
    ckpt = load_checkpoint(checkpoint, "rewind checkpoint") | {"config": cfg.to_dict()}
    for kind, m in masks.items():
        ckpt["model"][Transformer.mask_buffer_name(kind)] = m.clone()
    ckpt["state"] |= {"stopped": "", "best_bleu": -1.0, "bad_evals": 0, "snapshots": []}
    out.mkdir(parents=True, exist_ok=True)
    torch_save(out / "last.pt", ckpt)


class Progress:
    """The training bar (tqdm): loss and tokens/s every 10 updates, dev BLEU after each evaluation."""

    def __init__(self, cfg: Config, step: int):
        from tqdm.auto import tqdm
        self.name, self.eval_every = f"train {cfg.data.pair}/{cfg.profile}", cfg.train.eval_every
        self.bar = tqdm(total=cfg.train.max_steps, initial=step, desc=self.name, dynamic_ncols=True, mininterval=5)
        self.tokens, self.since = 0, time.time()

    def update(self, state: dict, loss: float, ntok: int) -> None:
        step = state["step"]
        if step % self.eval_every == 0 and state["history"]:
            self.bar.set_postfix_str(f"dev BLEU {state['history'][-1]['dev_bleu']:.1f} (best {state['best_bleu']:.1f})")
        self.bar.update(1)
        self.tokens += ntok
        if step % 10 == 0:
            rate = self.tokens / max(time.time() - self.since, 1e-9)
            self.bar.set_description(f"{self.name} loss {loss / ntok:.3f} {rate:,.0f} tok/s")
            self.tokens, self.since = 0, time.time()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def finalize(trainer: Trainer) -> dict:
    """Pick best vs. averaged weights on dev, tune length normalisation on dev, score the tests."""
    cfg, out, model, bpe = trainer.cfg, trainer.out, trainer.model, trainer.data.bpe
    s = trainer.state
    if s["history"] == [] or s["history"][-1]["step"] != s["step"]:
        # A run stopped just after an evaluation would add a near-copy of the last snapshot (and
        # weigh it twice in the average): snapshot only if the gap is real.
        gap = s["step"] - (s["history"][-1]["step"] if s["history"] else 0)
        trainer._evaluate(snapshot=gap >= cfg.train.eval_every // 2)
    model.eval()
    candidates = {"best": load_checkpoint(out / "best.pt", "best weights", weights_only=True)}
    if len(s["snapshots"]) > 1:
        candidates["averaged"] = average_weights([out / n for n in s["snapshots"]])
    dev_scores = {}
    for name, weights in candidates.items():
        model.load_state_dict(weights)
        dev_scores[name] = evaluate_bleu(model, bpe, trainer.data.dev)["bleu"]
    chosen = max(dev_scores, key=dev_scores.get)
    model.load_state_dict(candidates[chosen])
    alphas = {a: evaluate_bleu(model, bpe, trainer.data.dev, cfg.train.beam, a)["bleu"]
              for a in cfg.train.tune_len_alpha}
    alpha = max(alphas, key=alphas.get)
    torch_save(out / "final.pt", {"model": model.state_dict(), "config": cfg.to_dict(), "version": __version__,
                                  "results_version": RESULTS_VERSION, "vocab_size": bpe.vocab_size, "len_alpha": alpha})
    bpe.save(out / "bpe.json")
    tests = {}
    for name in test_sets(cfg.data.pair):
        corpus = load_split(cfg.data.pair, name).head(cfg.data.test_limit)
        tests[name] = {"greedy": evaluate_bleu(model, bpe, corpus),
                       "beam": evaluate_bleu(model, bpe, corpus, cfg.train.beam, alpha)}
    results = {"pair": cfg.data.pair, "profile": cfg.profile, "config": cfg.to_dict(), "version": __version__,
               "results_version": RESULTS_VERSION,
               "machine": machine(), "run_dir": out.name, "steps": s["step"], "epochs": s["epoch"],
               "train_minutes": round(s["elapsed"] / 60, 2),
               "train_tokens": s["tokens"], "tokens_per_second": round(s["tokens"] / max(s["elapsed"], 1e-9), 1),
               "stopped": s["stopped"], "parameters": model.num_parameters(), "fingerprint": model.fingerprint(),
               "history": s["history"],
               "dev_best_vs_averaged": dev_scores, "chosen_weights": chosen, "dev_beam_by_alpha": alphas,
               "averaged_snapshots": [int(n[5:12]) for n in s["snapshots"]] if "averaged" in candidates else [],
               "len_alpha": alpha, "test": tests}
    write_json(out / "results.json", results)
    return results


def train(cfg: Config, progress: bool = True) -> dict:
    """Train (or resume) and evaluate one config; a finished run is read from its cache."""
    out = run_dir(cfg)
    if (out / "results.json").is_file():
        return json.loads((out / "results.json").read_text())
    if cfg.profile == pretrained.PROFILE:     # an imported model, scored as a trained one
        out.mkdir(parents=True, exist_ok=True)
        return pretrained.import_run(cfg, out)
    trainer = Trainer(cfg, out, progress)
    trainer.fit()
    if trainer.rank != 0:
        return {}
    return finalize(trainer)


def trained_model(profile: str = "cpu", pair: str = "en-de", seed: int = 1, overrides=()) -> tuple[Transformer, BPE, dict]:
    """The final model of (profile, pair, seed) with its tokenizer and record: its release
    (`headlib.train.release`, the card as the record) if there is one, else the run's, trained
    first if it is not cached."""
    from headlib.config import get_config
    cfg = get_config(profile, [f"train.seed={seed}", *overrides], pair=pair)
    if (path := release.release_of(cfg)) is not None:
        r = release.load_release(path)
        return r.model, r.tokenizer, r.card
    results = train(cfg, progress=False)
    model, bpe, _ = load_model(run_dir(cfg) / "final.pt")
    return model, bpe, results

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
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from headlib import RESULTS_VERSION, __version__
from headlib.analysis.heads import head_statistics, piece_frequencies
from headlib.config import SPEED_ONLY, Config, ModelConfig
from headlib.data.batching import Encoded, collate, epoch_order, make_batches
from headlib.data.bpe import BPE, PAD_ID, cached_bpe
from headlib.data.corpora import Corpus, load_split, test_sets
from headlib.files import CheckpointError, artifacts_dir, first_line, load_checkpoint, torch_save, write_json
from headlib.nn.decode import evaluate_bleu
from headlib.nn.loss import linear_cross_entropy, reference_cross_entropy
from headlib.nn.model import Transformer
from headlib.train import pretrained, release
from headlib.train.machine import device, machine


@dataclass
class Prepared:
    bpe: BPE
    train: Encoded
    dev: Corpus
    src_freq: Counter   # training frequency of each source piece (rare-token rates, Sec. 5.3)


def prepare_data(cfg: Config) -> Prepared:
    """The pair's training pairs as ids (and its dev pairs, its tokenizer, the source pieces'
    frequencies): with the joint BPE learned on them, or the model's own tokenizer where it has a
    release or was imported (the pretrained profile, whose model must have been imported first)."""
    train = load_split(cfg.data.pair, "train").head(cfg.data.train_limit)
    dev = load_split(cfg.data.pair, "dev").head(cfg.data.dev_limit)
    bpe = (model_tokenizer(cfg) if cfg.profile == pretrained.PROFILE or release.release_of(cfg) else
           cached_bpe(train.src, train.tgt, cfg.data.bpe_vocab))
    return Prepared(bpe, encode_corpus(bpe, train, cfg.data.max_len), dev, piece_frequencies(bpe, train.src))


def encode_corpus(bpe: BPE, corpus: Corpus, max_len: int) -> Encoded:
    """The pairs of `corpus` as BPE ids, without pairs that have a side longer than `max_len`."""
    src, tgt = bpe.encode_batch(corpus.src), bpe.encode_targets(corpus.tgt)
    keep = [i for i in range(len(src)) if 0 < len(src[i]) <= max_len and 0 < len(tgt[i]) <= max_len]
    return Encoded([src[i] for i in keep], [tgt[i] for i in keep])


def run_dir(cfg: Config) -> Path:
    """A run's directory, keyed by its config and the results version (and an imported model's source)."""
    imported = cfg.profile == pretrained.PROFILE
    key = f"results-v{RESULTS_VERSION}" + (f" from {pretrained.source(cfg.data.pair)}" if imported else "")
    return artifacts_dir() / "runs" / f"{cfg.data.pair}-{cfg.profile}-{cfg.digest(key)}"


def initial_model(cfg: Config, vocab_size: int, keep_rng: bool = False) -> Transformer:
    """A run's model before its first update: the config's architecture initialised from its seed
    (the global RNG is seeded, as training needs it to be; `keep_rng`: restored afterwards)."""
    with torch.random.fork_rng(enabled=keep_rng):
        torch.manual_seed(cfg.train.seed)
        return Transformer(cfg.model, vocab_size)


def lr_at(step: int, cfg: Config) -> float:
    """Linear warmup to `lr`, then the inverse-sqrt decay lr * sqrt(warmup / step) (App. B.3) or,
    with ``train.schedule=linear``, a linear decay that reaches 0 at `max_steps`."""
    t, step = cfg.train, max(step, 1)
    if step < t.warmup:
        return t.lr * step / t.warmup
    if t.schedule == "inverse_sqrt":
        return t.lr * math.sqrt(t.warmup / step)
    return t.lr * max(t.max_steps - step, 0) / max(t.max_steps - t.warmup, 1)


def autocast(cfg: Config, dev: torch.device):
    return torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cfg.train.bf16)


def token_loss(model, src, tgt_in, tgt_out, label_smoothing: float, gates=None, fused: bool = False):
    """Summed label-smoothed cross-entropy over non-pad target tokens, and their count.

    The output projection is applied only at non-pad positions; `fused`: together with the
    cross-entropy, chunk by chunk (`headlib.nn.loss`: the same function, faster on CPU).
    """
    hidden = model(src, tgt_in, gates, hidden_only=True)                # (B, T, D)
    keep = tgt_out.ne(PAD_ID)
    out = getattr(model, "module", model)                              # the model inside a DDP wrapper
    loss_fn = linear_cross_entropy if fused else reference_cross_entropy
    loss = loss_fn(hidden[keep], out.tgt_embed.weight, out.out_bias, tgt_out[keep], label_smoothing)
    return loss, int(keep.sum())


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
    def _save_last(self):
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
    def _update(self, group: list[int]) -> tuple[float, int]:
        """One optimizer update over the micro-batches `group` (split across ranks)."""
        cfg, data = self.cfg, self.data.train
        lr = lr_at(self.state["step"] + 1, cfg)
        for g in self.opt.param_groups:
            g["lr"] = lr
        total = sum(len(data.tgt[i]) + 1 for b in group for i in self.batches[b])  # whole update
        mine = group[self.rank::self.world]
        self.opt.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for j, b in enumerate(mine):
            src, tgt_in, tgt_out = (t.to(self.dev) for t in collate(data, self.batches[b]))
            sync = j == len(mine) - 1 or self.world == 1
            ctx = contextlib.nullcontext() if sync else self.net.no_sync()
            with ctx:
                with autocast(cfg, self.dev):
                    loss = self._loss(src, tgt_in, tgt_out)
                (loss * self.world / total).backward()
            loss_sum += loss.item()
        if cfg.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.train.clip_norm)
        self.opt.step()
        return loss_sum, total

    def _loss(self, src, tgt_in, tgt_out):
        # Through self.net: DDP's gradient hooks fire only through the wrapper's forward.
        return token_loss(self.net, src, tgt_in, tgt_out, self.cfg.train.label_smoothing,
                          fused=self.cfg.train.fused_loss)[0]

    def _groups(self, epoch: int) -> list[list[int]]:
        n = self.cfg.train.accum * self.world
        order = epoch_order(len(self.batches), self.cfg.train.seed, epoch)
        return [order[i:i + n] for i in range(0, len(order) - n + 1, n)]

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

    def _step(self, group: list[int], t0: float, progress: "Progress | None") -> None:
        """One update, then what follows it: the counters, a dev evaluation every `eval_every`
        updates (rank 0), the stop decision, `last.pt` every `save_every` updates and at the end."""
        s, t = self.state, self.cfg.train
        loss, ntok = self._update(group)
        s["step"] += 1; s["pos"] += 1; s["tokens"] += ntok
        s["elapsed"] = time.time() - t0
        if s["step"] % t.eval_every == 0 and self.rank == 0:
            self._evaluate()
        s["stopped"] = self._stop_reason()
        if s["step"] % (t.save_every or t.eval_every) == 0 or s["stopped"]:
            self._save_last()
        if progress is not None:
            progress.update(s, loss, ntok)

    def fit(self, stop_after: int | None = None) -> dict:
        """Train until max_steps / early stopping (or a user's max_minutes), epoch by epoch from the
        saved position. `stop_after` simulates a crash after that many updates (for the resume
        test): it returns without finishing the run."""
        s = self.state
        self.out.mkdir(parents=True, exist_ok=True)
        self.model.train()
        t0 = time.time() - s["elapsed"]
        shown = self.progress and self.rank == 0
        with Progress(self.cfg, s["step"]) if shown else contextlib.nullcontext() as progress:
            while not s["stopped"]:
                groups = self._groups(s["epoch"])
                while s["pos"] < len(groups) and not s["stopped"]:
                    self._step(groups[s["pos"]], t0, progress)
                    if stop_after is not None and s["step"] >= stop_after:
                        return s
                if not s["stopped"]:
                    s["epoch"] += 1; s["pos"] = 0
        return s


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


def load_model(path: str | Path, map_location="cpu", user_file: bool = False) -> tuple[Transformer, BPE, dict]:
    """The final model of a run (its `final.pt`, beside `bpe.json`, or an imported model's
    tokenizer), in eval mode; `user_file`: a path the user named (`load_checkpoint`)."""
    path = Path(path)
    ckpt = load_checkpoint(path, "trained model", map_location=map_location, user_file=user_file)
    try:
        model = Transformer(ModelConfig(**ckpt["config"]["model"]), ckpt["vocab_size"])
        model.load_state_dict(ckpt["model"])
    except (KeyError, TypeError, RuntimeError) as e:   # another layout: saved by other code
        version = ckpt.get("version", "?") if isinstance(ckpt, dict) else "?"
        raise CheckpointError(f"{path}: not a trained model of this headlib (saved by version {version}): "
                              f"{first_line(e)}") from None
    model.eval()
    return model, run_tokenizer(path.parent), ckpt


def model_tokenizer(cfg: Config) -> BPE | pretrained.MarianTokenizerAdapter:
    """The tokenizer of a config's model: its release's, else its run's (`run_tokenizer`)."""
    if (path := release.release_of(cfg)) is not None:
        return BPE.load(path / release.TOKENIZER)
    return run_tokenizer(run_dir(cfg))


def run_tokenizer(run: Path) -> BPE | pretrained.MarianTokenizerAdapter:
    """A run's tokenizer: its joint BPE (`bpe.json`), or an imported model's own (`tokenizer/`)."""
    if (run / "tokenizer").is_dir():
        return pretrained.tokenizer_of(run)
    if not (run / "bpe.json").is_file():
        raise CheckpointError(f"{run}: no tokenizer beside the model (bpe.json, or tokenizer/ for an imported model)")
    return BPE.load(run / "bpe.json")


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

"""Head pruning by fine-tuning with Hard Concrete gates (Voita et al. 2019, Sec. 6).

Start from a converged model, add gates for the chosen attention kinds, and fine-tune with
L = L_xent + lambda * sum_h P(g_h != 0). Encoder pruning (Sec. 6.2) trains only the encoder and
its gates: the decoder is frozen so that functions cannot migrate into it (the joint embedding is
shared with the decoder, so it is frozen too). All-attention pruning (Sec. 6.3) gates enc-self,
dec-self and dec-enc and trains the whole model. After fine-tuning the gates are fixed to 0/1
(`HardConcreteGates.hard_masks`) and BLEU is measured with the hard mask, with no further
fine-tuning.

The follow-up methods use the same loop and budget (`PruneConfig.method`): `dsp` replaces the
gates by exactly-k subset gates (`headlib.pruning.subset`, Li et al. 2021) and `fixed` fine-tunes with a
given 0/1 mask (random heads, Budhraja et al. 2020, or the top heads of an importance measure).
"""
from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from headlib.data.batching import batch_stream
from headlib.files import load_checkpoint, torch_save
from headlib.nn.loss import token_loss
from headlib.nn.masks import parse_spec
from headlib.profiles import PruneConfig
from headlib.pruning.gates import HardConcreteGates
from headlib.pruning.subset import SubsetGates
from headlib.train import Prepared, fine_tune, one_batch_updates

DSP_TAU = (0.1, 1e-8)   # Li et al. (2021)'s temperature endpoints (annealed over 15k updates there); the
                        # Beyond page asks dev whether they beat PruneConfig.tau within our budget


@dataclass
class PruneResult:
    masks: dict[str, torch.Tensor]
    scores: dict[str, torch.Tensor]    # log_alpha (hard-concrete), logits (dsp); empty for fixed
    history: list[dict] = field(default_factory=list)
    minutes: float = 0.0               # of fine-tuning so far (on a path: since its first lambda)
    tokens: int = 0                    # target tokens of the fine-tuning's updates so far (on a path: since its first)

    def retained(self) -> dict[str, int]:
        return {k: int(m.sum()) for k, m in self.masks.items()}


def trainable_parameters(model, kinds) -> list[torch.nn.Parameter]:
    """Encoder-only pruning: encoder layers and the final encoder norm; otherwise everything."""
    if tuple(kinds) == ("enc-self",):
        return [p for n, p in model.named_parameters() if n.startswith(("encoder.", "enc_norm."))]
    return list(model.parameters())


def make_gates(cfg: PruneConfig, shapes: dict[str, tuple[int, int]]):
    if cfg.method == "hard-concrete":
        return HardConcreteGates(shapes)
    if cfg.method == "dsp":
        return SubsetGates(shapes, cfg.k, cfg.tau)
    if cfg.method == "fixed":
        return None
    raise ValueError(f"prune method must be hard-concrete, dsp or fixed, got {cfg.method!r}")


class Pruning:
    """One gated fine-tuning in progress: a copy of the model, its gates, the optimizer and the
    batch stream. `train(steps, lam)` fine-tunes on; `snapshot()` is the model as it would be
    pruned now (gates fixed to 0/1) without ending the fine-tuning, which may go on at another
    lambda: the continuation path of `prune_path`."""

    def __init__(self, model, data: Prepared, cfg: PruneConfig):
        torch.manual_seed(cfg.seed)
        self.cfg, self.step, self.history, self.seconds, self.tokens = cfg, 0, [], 0.0, 0
        self.model = model = copy.deepcopy(model).train()
        if cfg.fast_kernels:
            model.set_dropout_masks("int16")
        shapes = {k: tuple(model.head_mask(k).shape) for k in cfg.kinds}
        dev = next(model.parameters()).device
        gates = make_gates(cfg, shapes)
        if gates is None:
            fixed = parse_spec(cfg.mask, model.layer_counts(), model.cfg.n_heads)
            for k in cfg.kinds:
                if k not in fixed:
                    raise ValueError(f"prune: the fixed mask must name every pruned kind; {k} missing in {cfg.mask!r}")
                model.set_head_mask(k, fixed[k].to(dev) * model.head_mask(k))
        else:
            gates = gates.to(dev)
        self.gates = gates
        params = trainable_parameters(model, cfg.kinds)
        train_ids = {id(p) for p in params}
        for p in model.parameters():
            p.requires_grad_(id(p) in train_ids)
        groups = [{"params": params, "lr": cfg.lr}]
        if gates is not None:
            groups.append({"params": gates.parameters(), "lr": cfg.logit_lr if cfg.method == "dsp" else cfg.gate_lr})
        self.opt = torch.optim.Adam(groups, betas=(0.9, 0.98), eps=1e-9)
        self.train_data = data.train
        self.stream = batch_stream(data.train, cfg.max_tokens, cfg.seed)

    def train(self, steps: int, lam: float, progress: bool = False) -> None:
        """`steps` more updates of L = L_xent + lam * sum_h P(g_h != 0) (`headlib.train.fine_tune`)."""
        cfg, model, gates = self.cfg, self.model, self.gates
        t0, last = time.time(), self.step + steps - 1
        anneal = (lambda step: gates.anneal(step / max(cfg.steps - 1, 1))) if isinstance(gates, SubsetGates) else None
        loss = lambda batch: token_loss(model, *batch, cfg.label_smoothing, gates=None if gates is None else gates(),
                                        fused=cfg.fast_kernels)
        done = fine_tune(model, self.opt, one_batch_updates(self.stream), loss, steps, start=self.step,
                         penalty=None if gates is None else gates.penalty, weight=lam, bf16=cfg.bf16, before=anneal)
        if progress:
            from tqdm.auto import tqdm
            done = tqdm(done, total=steps, desc=f"prune {'+'.join(cfg.kinds)} {cfg.method} lambda={lam} k={cfg.k}",
                        leave=False)
        for d in done:
            self.tokens += d.tokens
            if d.step % 50 == 0 or d.step == last:
                self.history.append({"step": d.step, "xent": round((d.loss / d.tokens).item(), 4), **(
                    {"lam": lam, "expected_open": round(d.penalty.item(), 2)} if cfg.method == "hard-concrete" else {})})
        self.step += steps
        self.seconds += time.time() - t0

    def state(self) -> dict:
        """Everything `train` reads and changes: `load_state` of it goes on as if never stopped."""
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "step": self.step,
                "gates": None if self.gates is None else self.gates.state_dict(), "history": list(self.history),
                "seconds": self.seconds, "tokens": self.tokens, "rng": torch.get_rng_state()}

    def load_state(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        if self.gates is not None:
            self.gates.load_state_dict(state["gates"])
        self.step, self.history, self.seconds = state["step"], list(state["history"]), state["seconds"]
        self.tokens = state["tokens"]
        torch.set_rng_state(state["rng"])
        self.stream = batch_stream(self.train_data, self.cfg.max_tokens, self.cfg.seed, skip=self.step)

    def snapshot(self, copy_model: bool = True) -> tuple[torch.nn.Module, PruneResult]:
        """The model with the gates fixed to 0/1 (a copy, unless `copy_model` is False, which ends
        the fine-tuning), in eval mode, and what the fine-tuning so far learned."""
        model = copy.deepcopy(self.model) if copy_model else self.model
        for p in model.parameters():
            p.requires_grad_(True)
        if self.gates is not None:
            for k, m in self.gates.hard_masks().items():
                model.set_head_mask(k, m * model.head_mask(k))
        model.eval()
        masks = {k: model.head_mask(k).cpu() for k in self.cfg.kinds}
        scores = {} if self.gates is None else self.gates.scores()
        return model, PruneResult(masks, scores, list(self.history), round(self.seconds / 60, 2), self.tokens)


def prune(model, data: Prepared, cfg: PruneConfig, progress: bool = False) -> tuple[torch.nn.Module, PruneResult]:
    """Fine-tune a copy of `model` with gates; returns the pruned copy (hard masks installed)."""
    run = Pruning(model, data, cfg)
    run.train(cfg.steps, cfg.lam, progress)
    return run.snapshot(copy_model=False)


def prune_path(model, data: Prepared, cfg: PruneConfig, lams: Sequence[float], progress: bool = False,
               checkpoint: Path | None = None, resume: dict | None = None
               ) -> Iterator[tuple[float, torch.nn.Module, PruneResult]]:
    """The continuation path: one Hard Concrete fine-tuning whose lambda steps through `lams` in
    order, `cfg.steps` updates at each, every lambda warm-started from the previous lambda's gated
    model (weights, gates and optimizer state). Yields (lambda, pruned copy, result) after each.
    With k lambdas it costs k * cfg.steps updates; its first point is `prune` at lams[0].

    With a `checkpoint` file the fine-tuning's state is saved there (atomically) each time the
    caller asks for the next lambda, i.e. after it has stored the previous point. Given `resume`,
    what `saved_path` read from such a file, the path goes on after the lambdas it holds as if it
    had never stopped; so a path can outlive its process."""
    if cfg.method != "hard-concrete":
        raise ValueError(f"prune_path: the continuation path follows lambda, so method must be hard-concrete, "
                         f"got {cfg.method!r}")
    run, done = Pruning(model, data, cfg), (resume["lams"] if resume else [])
    if resume:
        run.load_state(resume["state"])
    fingerprint = model.fingerprint() if checkpoint is not None else None
    for i, lam in enumerate(lams[len(done):], len(done)):
        run.train(cfg.steps, lam, progress)
        yield (lam, *run.snapshot())
        if checkpoint is not None and i + 1 < len(lams):
            torch_save(checkpoint, {"lams": list(lams[:i + 1]), "model": fingerprint,
                                    "prune_config": dataclasses.asdict(cfg), "state": run.state()})


def saved_path(checkpoint: Path, fingerprint: str, cfg: PruneConfig, lams: Sequence[float]) -> dict | None:
    """The state `prune_path` saved in `checkpoint` ("lams" done, "state"), if that file is a path
    of the model `fingerprint` with settings `cfg` whose lambdas are a prefix of `lams`; else None."""
    if not Path(checkpoint).is_file():
        return None
    saved = load_checkpoint(checkpoint, "pruning path checkpoint")
    same = (saved["model"] == fingerprint and saved["prune_config"] == dataclasses.asdict(cfg)
            and "tokens" in saved["state"])   # a path saved before budgets were counted in tokens starts again
    return saved if same and list(lams[:len(saved["lams"])]) == saved["lams"] else None

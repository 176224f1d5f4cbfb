"""Head pruning by fine-tuning with Hard Concrete gates (Voita et al. 2019, Sec. 6).

Start from a converged model, add gates for the chosen attention kinds, and fine-tune with
L = L_xent + lambda * sum_h P(g_h != 0). Encoder pruning (Sec. 6.2) trains only the encoder and
its gates: the decoder is frozen so that functions cannot migrate into it (the joint embedding is
shared with the decoder, so it is frozen too). All-attention pruning (Sec. 6.3) gates enc-self,
dec-self and dec-enc and trains the whole model. After fine-tuning the gates are fixed to 0/1
(`HardConcreteGates.hard_masks`) and BLEU is measured with the hard mask, with no further
fine-tuning.
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from .batching import collate, epoch_order, make_batches
from .gates import HardConcreteGates
from .train import Prepared, token_loss


@dataclass(frozen=True)
class PruneConfig:
    kinds: tuple[str, ...] = ("enc-self",)
    lam: float = 0.01          # lambda of the expected-L0 penalty (paper scaling: sum over heads)
    steps: int = 500           # fine-tuning updates (the paper does not publish its step counts)
    lr: float = 1e-4           # model parameters (constant; the model has converged)
    gate_lr: float = 0.02      # log_alpha (our choice: gates must be able to close within `steps`)
    max_tokens: int = 4096
    seed: int = 1
    bf16: bool = True
    label_smoothing: float = 0.1


@dataclass
class PruneResult:
    masks: dict[str, torch.Tensor]
    log_alpha: dict[str, torch.Tensor]
    history: list[dict] = field(default_factory=list)
    minutes: float = 0.0

    def retained(self) -> dict[str, int]:
        return {k: int(m.sum()) for k, m in self.masks.items()}


def trainable_parameters(model, kinds) -> list[torch.nn.Parameter]:
    """Encoder-only pruning: encoder layers and the final encoder norm; otherwise everything."""
    if tuple(kinds) == ("enc-self",):
        return [p for n, p in model.named_parameters() if n.startswith(("encoder.", "enc_norm."))]
    return list(model.parameters())


def prune(model, data: Prepared, cfg: PruneConfig, progress: bool = False) -> tuple[torch.nn.Module, PruneResult]:
    """Fine-tune a copy of `model` with gates; returns the pruned copy (hard masks installed)."""
    torch.manual_seed(cfg.seed)
    model = copy.deepcopy(model).train()
    shapes = {k: tuple(model.head_mask(k).shape) for k in cfg.kinds}
    dev = next(model.parameters()).device
    gates = HardConcreteGates(shapes).to(dev)
    params = trainable_parameters(model, cfg.kinds)
    train_ids = {id(p) for p in params}
    for p in model.parameters():
        p.requires_grad_(id(p) in train_ids)
    opt = torch.optim.Adam([{"params": params, "lr": cfg.lr},
                            {"params": gates.parameters(), "lr": cfg.gate_lr}], betas=(0.9, 0.98), eps=1e-9)
    batches = make_batches(data.train, cfg.max_tokens)
    order, epoch, history = [], 0, []
    steps = range(cfg.steps)
    if progress:
        from tqdm.auto import tqdm
        steps = tqdm(steps, desc=f"prune {'+'.join(cfg.kinds)} lambda={cfg.lam}", leave=False)
    t0 = time.time()
    for step in steps:
        if not order:
            order = epoch_order(len(batches), cfg.seed, epoch)
            epoch += 1
        src, tgt_in, tgt_out = (t.to(dev) for t in collate(data.train, batches[order.pop()]))
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cfg.bf16):
            loss, ntok = token_loss(model, src, tgt_in, tgt_out, cfg.label_smoothing, gates=gates())
        xent = loss / ntok
        penalty = gates.penalty()
        (xent + cfg.lam * penalty).backward()
        opt.step()
        if step % 50 == 0 or step == cfg.steps - 1:
            history.append({"step": step, "xent": round(xent.item(), 4), "expected_open": round(penalty.item(), 2)})
    for p in model.parameters():
        p.requires_grad_(True)
    masks = gates.hard_masks()
    for k, m in masks.items():
        model.set_head_mask(k, m * model.head_mask(k))
    model.eval()
    masks = {k: m.cpu() for k, m in masks.items()}
    result = PruneResult(masks, {k.replace("_", "-"): a.detach().cpu().clone() for k, a in gates.log_alpha.items()},
                         history, round((time.time() - t0) / 60, 2))
    return model, result

"""The one fine-tuning loop: every update of training (`trainer.Trainer`), Hard Concrete and DSP
pruning (`headlib.pruning.prune`), adaptation (`headlib.studies.adapt`) and, through the trainer,
the lottery ticket's retraining is made here.

One update:

    lr        set on every parameter group, if a schedule is given (`lr(step)`, step 0-based)
    before    the caller's work before the forward passes (e.g. DSP's temperature), if given
    loss      sum_j loss_j * world / tokens over this rank's micro-batches j, one backward each,
              where loss_j is `loss(batch_j)`'s summed token loss and `tokens` counts the target
              tokens of the whole update (all ranks): any split gives the same gradient
    penalty   weight * penalty() added before the last backward (the expected L0 of Sec. 6.1)
    then      `after_backward()` (e.g. gradients masked), the gradient norm clipped (if clip_norm > 0),
              the optimizer step

`fine_tune` yields a `Done` after each update; what the caller does with it (counters,
evaluations, checkpoints, a history) stays with the caller.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import torch

from headlib.data.bpe import PAD_ID

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]   # src (B, S), tgt_in (B, T), tgt_out (B, T)


class Update(NamedTuple):
    batches: list[Batch]   # this rank's micro-batches
    tokens: int            # target tokens of the whole update, every rank's: the loss is divided by it


class Done(NamedTuple):
    step: int                      # 0-based index of the update just made
    loss: torch.Tensor             # summed token loss of this rank's micro-batches (detached)
    tokens: int                    # as in `Update`
    penalty: torch.Tensor | None   # the penalty's value (detached), None without one


def one_batch_updates(batches: Iterable[Batch]) -> Iterator[Update]:
    """Each batch of `batches` as an update of its own (pruning, adaptation)."""
    for batch in batches:
        yield Update([batch], int(batch[2].ne(PAD_ID).sum()))


def fine_tune(model: torch.nn.Module, optimizer: torch.optim.Optimizer, updates: Iterable[Update],
              loss: Callable[[Batch], tuple[torch.Tensor, int]], steps: int, *, start: int = 0,
              lr: Callable[[int], float] | None = None, penalty: Callable[[], torch.Tensor] | None = None,
              weight: float = 0.0, clip_norm: float = 0.0, bf16: bool = False, world: int = 1,
              no_sync: Callable | None = None, before: Callable[[int], None] | None = None,
              after_backward: Callable[[], None] | None = None) -> Iterator[Done]:
    """`steps` updates of `model` (numbered from `start`), one per item of `updates`, as the
    module docstring says; `no_sync`: the DDP wrapper's, to skip the gradient all-reduce on all
    but the last micro-batch. `loss` runs under bf16 autocast if `bf16` (the penalty does not)."""
    device = next(model.parameters()).device
    updates = iter(updates)
    for step in range(start, start + steps):
        update = next(updates)
        if lr is not None:
            rate = lr(step)
            for group in optimizer.param_groups:
                group["lr"] = rate
        if before is not None:
            before(step)
        optimizer.zero_grad(set_to_none=True)
        total, value = None, None
        for j, batch in enumerate(update.batches):
            last = j == len(update.batches) - 1
            sync = contextlib.nullcontext() if last or no_sync is None else no_sync()
            with sync:
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    summed, _ = loss(tuple(t.to(device) for t in batch))
                objective = summed * world / update.tokens
                if last and penalty is not None:
                    value = penalty()
                    objective = objective + weight * value
                objective.backward()
            total = summed.detach() if total is None else total + summed.detach()
        if after_backward is not None:
            after_backward()
        if clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        yield Done(step, total, update.tokens, None if value is None else value.detach())

"""Head-restricted domain adaptation (Chen et al. 2025, "ALPS").

ALPS adapts a model to a new task by updating only the attention parameters of the few heads the
task is most sensitive to. Here a model trained on one domain is fine-tuned on another with the
same budget three ways:

    all      every parameter
    alps     only the query/key/value rows and the W^O columns of the k most task-sensitive heads
    random   the same for k heads drawn uniformly (one draw per seed)

ALPS localises the task-sensitive heads by how far task fine-tuning moves their weights. We score
each of the 144 heads (enc-self, dec-self, dec-enc) by the relative change of its weight slices,
||W_h' - W_h|| / ||W_h||, between the model and its `all` fine-tune (the original measures a
distance between weight distributions of the base and the task-tuned model). Default k = 14: 10%
of the heads, as ALPS activates 10% of the attention parameters.

A frozen entry gets a zero gradient from the first update on, so Adam leaves it exactly as it was.
"""
from __future__ import annotations

import copy
import random
import time

import torch

from headlib.data.batching import Encoded, batch_stream
from headlib.nn.loss import token_loss
from headlib.nn.model import KINDS
from headlib.profiles import AdaptConfig
from headlib.train import fine_tune, one_batch_updates

Head = tuple[str, int, int]   # (kind, layer, head), 0-based layer and head


def all_heads(model) -> list[Head]:
    return [(kind, l, h) for kind in KINDS for l in range(model.layer_counts()[kind]) for h in range(model.cfg.n_heads)]


def _head_slices(model, head: Head) -> list[tuple[str, tuple]]:
    """(parameter name, index) pairs that hold one head's weights: its rows of W^Q, W^K, W^V and
    their biases, and its columns of W^O (the W^O bias is shared by all heads of the layer)."""
    kind, l, h = head
    module = model.attention_modules(kind)[l]
    prefix = next(n for n, m in model.named_modules() if m is module)
    rows = slice(h * module.d_head, (h + 1) * module.d_head)
    out = [(f"{prefix}.{proj}.{p}", (rows,)) for proj in ("q_proj", "k_proj", "v_proj") for p in ("weight", "bias")]
    return out + [(f"{prefix}.out_proj.weight", (slice(None), rows))]


def head_masks(model, heads: list[Head]) -> dict[str, torch.Tensor]:
    """0/1 masks, one per parameter that holds any of `heads`, set on those heads' entries."""
    params, masks = dict(model.named_parameters()), {}
    for head in heads:
        for name, index in _head_slices(model, head):
            masks.setdefault(name, torch.zeros_like(params[name]))[index] = 1
    return masks


@torch.no_grad()
def weight_shift(before, after) -> dict[Head, float]:
    """Per head, ||W_h' - W_h|| / ||W_h|| over its slices (`before`, `after`: models)."""
    old, new = dict(before.named_parameters()), dict(after.named_parameters())
    shift = {}
    for head in all_heads(before):
        slices = _head_slices(before, head)
        diff = sum(float((new[n][i] - old[n][i]).pow(2).sum()) for n, i in slices)
        norm = sum(float(old[n][i].pow(2).sum()) for n, i in slices)
        shift[head] = (diff / norm) ** 0.5
    return shift


def top_heads(shift: dict[Head, float], k: int) -> list[Head]:
    return sorted(shift, key=shift.get, reverse=True)[:k]


def random_heads(model, k: int, seed: int) -> list[Head]:
    return sorted(random.Random(seed).sample(all_heads(model), k))


def finetune(model, train: Encoded, cfg: AdaptConfig, masks: dict[str, torch.Tensor] | None = None,
             progress: bool = False) -> tuple[torch.nn.Module, dict]:
    """A copy of `model` fine-tuned on `train` for `cfg.steps` updates; with `masks`, only the
    masked entries of the named parameters change. Returns the model and {minutes, updated, history}."""
    torch.manual_seed(cfg.seed)
    model = copy.deepcopy(model).train()
    dev = next(model.parameters()).device
    params = dict(model.named_parameters())
    trainable = list(params) if masks is None else list(masks)
    for name, p in params.items():
        p.requires_grad_(name in trainable)
    masks = None if masks is None else {n: m.to(dev) for n, m in masks.items()}
    opt = torch.optim.Adam([params[n] for n in trainable], lr=cfg.lr, betas=(0.9, 0.98), eps=1e-9)

    def only_masked():   # a frozen entry's gradient is 0, so Adam leaves it as it was
        for name, m in (masks or {}).items():
            params[name].grad.mul_(m)
    loss = lambda batch: token_loss(model, *batch, cfg.label_smoothing)
    done = fine_tune(model, opt, one_batch_updates(batch_stream(train, cfg.max_tokens, cfg.seed)), loss, cfg.steps,
                     bf16=cfg.bf16, after_backward=only_masked)
    if progress:
        from tqdm.auto import tqdm
        done = tqdm(done, total=cfg.steps, desc="adapt", leave=False)
    t0, history = time.time(), []
    for d in done:
        if d.step % 50 == 0 or d.step == cfg.steps - 1:
            history.append({"step": d.step, "xent": round((d.loss / d.tokens).item(), 4)})
    model.eval()
    for p in model.parameters():
        p.requires_grad_(True)
    updated = sum(p.numel() for p in params.values()) if masks is None else int(sum(m.sum() for m in masks.values()))
    return model, {"minutes": round((time.time() - t0) / 60, 2), "updated": updated, "history": history}

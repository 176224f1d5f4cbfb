"""Gradient head importance (Michel, Levy and Neubig 2019, "Are Sixteen Heads Really Better than
One?") and the pruning orders that importance measures give.

Importance of head h: I_h = E_x |dL(x)/d xi_h|, the expected absolute derivative of the loss with
respect to a gate xi_h = 1 on the head's output, here over batches of dev pairs (teacher-forced on
the references, label-smoothed cross-entropy per token), then normalised per layer by the l2 norm
(Michel et al., Sec. 4.1). Test-time pruning removes the least important heads without any
retraining, re-scoring the remaining heads after each step.
"""
from __future__ import annotations

import torch

from headlib.data.batching import Encoded, collate, make_batches
from headlib.nn.loss import token_loss
from headlib.nn.model import KINDS


def gradient_importance(model, pairs: Encoded, kinds=("enc-self",), max_tokens: int = 4096,
                        normalize: bool = True) -> dict[str, torch.Tensor]:
    """{kind: (layers, heads)} importance of every head under the model's current head masks
    (a masked head has importance 0)."""
    model.eval()
    xi = {k: torch.ones_like(model.head_mask(k), requires_grad=True) for k in kinds}
    total = {k: torch.zeros_like(model.head_mask(k)) for k in kinds}
    batches = make_batches(pairs, max_tokens)
    for batch in batches:
        src, tgt_in, tgt_out = collate(pairs, batch)
        loss, ntok = token_loss(model, src, tgt_in, tgt_out, 0.1, gates=xi)
        grads = torch.autograd.grad(loss / ntok, [xi[k] for k in kinds])
        for k, g in zip(kinds, grads):
            total[k] += g.abs() * model.head_mask(k)
    scores = {k: t / len(batches) for k, t in total.items()}
    if normalize:
        scores = {k: s / s.norm(dim=1, keepdim=True).clamp_min(1e-12) for k, s in scores.items()}
    return scores


def prune_by_scores(mask: dict[str, torch.Tensor], scores: dict[str, torch.Tensor], n: int) -> dict[str, torch.Tensor]:
    """Close the `n` open heads with the lowest scores, over all kinds together."""
    candidates = [(float(scores[k][i, j]), k, i, j) for k in scores for i, j in mask[k].nonzero().tolist()]
    out = {k: m.clone() for k, m in mask.items()}
    for _, k, i, j in sorted(candidates)[:n]:
        out[k][i, j] = 0.0
    return out


@torch.no_grad()
def _set_masks(model, masks):
    for k, m in masks.items():
        model.set_head_mask(k, m)


def michel_schedule(model, pairs: Encoded, kinds=("enc-self",), step: float = 0.1,
                    max_tokens: int = 4096) -> list[dict[str, torch.Tensor]]:
    """Iterative test-time pruning: masks after removing, each time, `step` of the heads of
    `kinds` (the least important, re-scored on the pruned model), down to no heads. The model's
    own masks are restored afterwards."""
    original = {k: model.head_mask(k).clone() for k in KINDS}
    mask = {k: model.head_mask(k).clone() for k in kinds}
    n_step = max(1, round(step * sum(int(m.numel()) for m in mask.values())))
    schedule = [mask]
    try:
        while sum(int(m.sum()) for m in mask.values()) > 0:
            _set_masks(model, mask)
            mask = prune_by_scores(mask, gradient_importance(model, pairs, kinds, max_tokens), n_step)
            schedule.append(mask)
    finally:
        _set_masks(model, original)
    return schedule


def keep_top(scores: torch.Tensor, k: int) -> torch.Tensor:
    """0/1 mask (layers, heads) keeping the `k` heads with the highest scores over all layers
    (ties: the earlier head)."""
    flat = scores.flatten()
    order = sorted(range(flat.numel()), key=lambda i: (-float(flat[i]), i))
    mask = torch.zeros(flat.numel())
    mask[order[:k]] = 1.0
    return mask.view_as(scores)


def random_mask(shape: tuple[int, int], k: int, seed: int) -> torch.Tensor:
    """0/1 mask with `k` heads chosen uniformly at random (Budhraja et al. 2020)."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(shape[0] * shape[1])
    mask[torch.randperm(mask.numel(), generator=g)[:k]] = 1.0
    return mask.view(shape)


def bleu_without_retraining(model, bpe, corpus, masks: list[tuple[str, torch.Tensor]], kind: str = "enc-self") -> list[dict]:
    """Greedy BLEU of `model` with each (method, mask) installed for `kind`, with no retraining;
    the model's own mask is restored afterwards."""
    from headlib.nn.decode import evaluate_bleu
    original = model.head_mask(kind).clone()
    rows = []
    try:
        for method, mask in masks:
            _set_masks(model, {kind: mask})
            rows.append({"method": method, "heads": int(mask.sum()), "BLEU": evaluate_bleu(model, bpe, corpus)["bleu"]})
    finally:
        _set_masks(model, {kind: original})
    return rows

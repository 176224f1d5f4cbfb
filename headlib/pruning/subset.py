"""Exactly-k head gates: Differentiable Subset Pruning (Li, Cotterell and Sachan 2021).

One logit w_h per head over all gated attention kinds together. In training, a Gumbel soft
top-k relaxation of the k-subset: r = w + Gumbel noise; p_1 = softmax(r / tau); for
j = 2..k, r <- r + log max(1 - p_{j-1}, eps), p_j = softmax(r / tau); the gate vector is
m = sum_j p_j, which sums to exactly k. tau is annealed log-linearly over fine-tuning
(`anneal`). At evaluation, and when the gates are fixed, the k heads with the largest logits
are kept (`hard_masks`). Unlike the Hard Concrete L0 penalty, k is the budget itself, not a
consequence of lambda.
"""
from __future__ import annotations

import torch
from torch import nn

from headlib.analysis.importance import keep_top

EPS = 1e-20


def soft_top_k(scores: torch.Tensor, k: int, tau: float) -> torch.Tensor:
    """(n,) relaxed k-hot vector: each of the k softmaxes sums to 1, so the result sums to k;
    as tau -> 0 it tends to the 0/1 indicator of the k largest `scores`."""
    if not 0 < k <= scores.numel():
        raise ValueError(f"k must be in 1..{scores.numel()} (the number of gated heads), got {k}")
    p = torch.softmax(scores / tau, dim=-1)
    mask = p
    for _ in range(k - 1):
        scores = scores + torch.log((1 - p).clamp_min(EPS))
        p = torch.softmax(scores / tau, dim=-1)
        mask = mask + p
    return mask


def gumbel_perturbed(logits: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """logits + Gumbel noise, from uniform draws `u` (any shape that broadcasts with `logits`)."""
    return logits - torch.log(-torch.log(u.clamp(EPS, 1 - 1e-7)))


class SubsetGates(nn.Module):
    """Gates for a set of attention kinds, each (layers, heads), keeping exactly `k` heads over
    all of them; same interface as `HardConcreteGates` (forward, penalty, hard_masks)."""

    def __init__(self, shapes: dict[str, tuple[int, int]], k: int, tau: tuple[float, float] = (0.1, 1e-3)):
        super().__init__()
        self.shapes, self.k, self.tau_range = dict(shapes), k, tau
        self.tau = tau[0]
        n = sum(a * b for a, b in shapes.values())
        if not 0 < k <= n:
            raise ValueError(f"prune.k must be in 1..{n} (the heads of {', '.join(shapes)}), got {k}")
        self.logits = nn.Parameter(torch.zeros(n))   # no prior: the noise decides the first subsets

    def anneal(self, progress: float) -> None:
        """tau at `progress` (0..1) through fine-tuning, log-linear from tau_range[0] to [1]."""
        start, end = self.tau_range
        self.tau = start * (end / start) ** min(max(progress, 0.0), 1.0)

    def _split(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        parts = flat.split([a * b for a, b in self.shapes.values()])
        return {kind: part.view(shape) for (kind, shape), part in zip(self.shapes.items(), parts)}

    def forward(self) -> dict[str, torch.Tensor]:
        if not self.training:
            return self.hard_masks()
        return self._split(soft_top_k(gumbel_perturbed(self.logits, torch.rand_like(self.logits)), self.k, self.tau))

    def penalty(self) -> torch.Tensor:
        """No penalty: the number of heads is fixed by construction."""
        return self.logits.new_zeros(())

    @torch.no_grad()
    def hard_masks(self) -> dict[str, torch.Tensor]:
        """0/1 masks keeping the k largest logits (ties: the earlier head)."""
        return self._split(keep_top(self.logits.detach().cpu(), self.k).to(self.logits))

    def scores(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self._split(self.logits).items()}


OVERLAP_DRAWS = 10_000   # Gumbel draws behind `subset_overlap`


def subset_overlap(logits: torch.Tensor, k: int, draws: int = OVERLAP_DRAWS, seed: int = 0) -> float:
    """Expected share of the k kept heads (the k largest `logits`) that a training subset contains
    as tau -> 0, where the soft top-k is the hard top-k of the Gumbel-perturbed logits: 1 when the
    logits have separated, k / n when the noise alone decides."""
    flat = logits.detach().flatten().double().cpu()
    kept = keep_top(flat, k).bool()
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(draws, flat.numel(), generator=gen, dtype=torch.float64)
    noisy = gumbel_perturbed(flat, u).topk(k, dim=-1).indices                # (draws, k)
    return float(kept[noisy].double().mean())

"""Hard Concrete head gates (Louizos et al. 2018) as used by Voita et al. (2019), Sec. 6.1.

One gate per head, g = clip(s * (zeta - gamma) + gamma, 0, 1) with
s = sigmoid((log u - log(1 - u) + log_alpha) / beta), u ~ U(eps, 1 - eps): one noise draw per
head per batch in training; the deterministic gate clip(sigmoid(log_alpha) * (zeta - gamma) +
gamma, 0, 1) at evaluation. The expected-L0 penalty is
lambda * sum_h P(g_h != 0), P(g_h != 0) = sigmoid(log_alpha_h - beta * log(-gamma / zeta)).

Defaults are the official code's (lena-voita/the-story-of-heads): beta = 0.33, stretch
(gamma, zeta) = (-0.1, 1.1), eps = 1e-6, log_alpha ~ U(-0.61, 0.61) (glorot for [1, 8, 1, 1]).
Penalty scaling: the paper's sum over heads (`penalty`). The official code averages the
per-layer sums over the gated layers, i.e. its lambda equals the paper's lambda x #layers.
"""
from __future__ import annotations

import math

import torch
from torch import nn

BETA, GAMMA, ZETA, EPS = 0.33, -0.1, 1.1, 1e-6


class HardConcreteGates(nn.Module):
    """Gates for a set of attention kinds, each (layers, heads). `forward()` returns the dict of
    gate tensors that `Transformer.forward(gates=...)` takes."""

    def __init__(self, shapes: dict[str, tuple[int, int]], beta: float = BETA, gamma: float = GAMMA,
                 zeta: float = ZETA, eps: float = EPS, init_range: float = 0.61):
        super().__init__()
        self.beta, self.gamma, self.zeta, self.eps = beta, gamma, zeta, eps
        self.log_alpha = nn.ParameterDict({
            k.replace("-", "_"): nn.Parameter(torch.empty(*s).uniform_(-init_range, init_range))
            for k, s in shapes.items()})

    @property
    def kinds(self) -> list[str]:
        return [k.replace("_", "-") for k in self.log_alpha]

    def sample(self, log_alpha: torch.Tensor) -> torch.Tensor:
        """Stochastic gate: one draw per head."""
        u = torch.rand_like(log_alpha).clamp(self.eps, 1 - self.eps)
        s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + log_alpha) / self.beta)
        return (s * (self.zeta - self.gamma) + self.gamma).clamp(0, 1)

    def deterministic(self, log_alpha: torch.Tensor) -> torch.Tensor:
        """Evaluation gate (no noise)."""
        return (torch.sigmoid(log_alpha) * (self.zeta - self.gamma) + self.gamma).clamp(0, 1)

    def prob_nonzero(self, log_alpha: torch.Tensor) -> torch.Tensor:
        """P(g != 0) = sigmoid(log_alpha - beta * log(-gamma / zeta))."""
        return torch.sigmoid(log_alpha - self.beta * math.log(-self.gamma / self.zeta))

    def forward(self) -> dict[str, torch.Tensor]:
        fn = self.sample if self.training else self.deterministic
        return {k.replace("_", "-"): fn(a) for k, a in self.log_alpha.items()}

    def penalty(self) -> torch.Tensor:
        """Expected number of open heads, sum_h P(g_h != 0) over all gated kinds (paper scaling)."""
        return sum(self.prob_nonzero(a).sum() for a in self.log_alpha.values())

    def scores(self) -> dict[str, torch.Tensor]:
        """log_alpha per kind, the gates' learned openness."""
        return {k.replace("_", "-"): a.detach().cpu().clone() for k, a in self.log_alpha.items()}

    @torch.no_grad()
    def hard_masks(self) -> dict[str, torch.Tensor]:
        """0/1 masks: open where P(g = 1) > P(g = 0) (paper footnote); converged gates agree
        with the deterministic gate."""
        return {k.replace("_", "-"): (self.prob_one(a) > self.prob_zero(a)).float()
                for k, a in self.log_alpha.items()}

    def prob_zero(self, log_alpha: torch.Tensor) -> torch.Tensor:
        """P(g = 0) = P(s < -gamma / (zeta - gamma))."""
        t = -self.gamma / (self.zeta - self.gamma)
        return torch.sigmoid(self.beta * math.log(t / (1 - t)) - log_alpha)

    def prob_one(self, log_alpha: torch.Tensor) -> torch.Tensor:
        """P(g = 1) = P(s > (1 - gamma) / (zeta - gamma))."""
        t = (1 - self.gamma) / (self.zeta - self.gamma)
        return torch.sigmoid(log_alpha - self.beta * math.log(t / (1 - t)))

"""Inference-time edits of attention weights, through `MultiHeadAttention.hook_weights`.

- `threshold` (Ji et al. 2021, "On the Distribution, Sparsity, and Inference-time Quantization of
  Attention Values"): weights below t are set to 0, the rest kept as they are (no renormalisation).
- `log_quantize` (ibid.): log-scale quantization to 2^bits levels; log(a) is rounded to a uniform
  grid of 2^bits - 1 points on [log(floor), 0]; values below `floor` become 0 (the last level).
- `constant_attention` (Hassid et al. 2022, "How Much Does Attention Actually Attend?"): a head's
  weights are replaced by its average pattern over training sentences of the same length
  (`average_patterns`), so the head no longer looks at its input.

Every edit is a function fn(weights (B, H, Tq, Tk), layer) -> weights, installed for one
or more attention kinds by `edit_attention`. An edit's counters (`Counts`) say how much it changed.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from headlib.analysis.heads import encoder_attention
from headlib.nn.hooks import hook_names, hooks


@dataclass
class Counts:
    """Attention values seen (on real keys: weight > 0 before the edit) and set to zero."""
    values: int = 0
    zeroed: int = 0
    fallbacks: int = 0    # constant attention: sentences whose length no training sentence had

    def add(self, before: torch.Tensor, after: torch.Tensor) -> None:
        real = before > 0
        self.values += int(real.sum())
        self.zeroed += int((real & (after == 0)).sum())

    @property
    def zeroed_fraction(self) -> float:
        return self.zeroed / max(self.values, 1)


@contextmanager
def edit_attention(model, kinds: str | tuple[str, ...], fn):
    """Apply fn(weights, layer) to the attention weights (`hook_weights`) of every layer of one
    kind or several."""
    kinds = (kinds,) if isinstance(kinds, str) else kinds
    edits = {name: (lambda m, i, out, layer=l: fn(out, layer))
             for kind in kinds for l, name in enumerate(hook_names(model, "hook_weights", kind))}
    with hooks(model, edits):
        yield


def threshold(t: float, counts: Counts | None = None):
    """Zero the weights below `t` (pruned values are not renormalised)."""
    def fn(w, layer):
        out = w * (w >= t)
        if counts is not None:
            counts.add(w, out)
        return out
    return fn


def log_quantize(bits: int, floor: float = 1e-4, counts: Counts | None = None):
    """Round log(w) to 2^bits - 1 levels evenly spaced on [log(floor), 0]; w < floor -> 0."""
    if bits < 1:
        raise ValueError(f"bits must be >= 1, got {bits}")
    n_levels = 2 ** bits - 1                  # nonzero levels; the last code is 0
    lo = math.log(floor)
    step = -lo / max(n_levels - 1, 1)

    def fn(w, layer):
        logw = torch.log(w.clamp_min(floor))
        q = torch.exp(torch.round((logw - lo) / step) * step + lo) if n_levels > 1 else torch.ones_like(w)
        out = torch.where(w >= floor, q.to(w.dtype), torch.zeros_like(w))
        if counts is not None:
            counts.add(w, out)
        return out
    return fn


@torch.no_grad()
def average_patterns(model, bpe, sentences, chunk: int = 500) -> dict[int, torch.Tensor]:
    """Mean encoder self-attention map per source length S (pieces + EOS): {S: (L, H, S, S)}."""
    sums: dict[int, torch.Tensor] = {}
    counts: dict[int, int] = {}
    for start in range(0, len(sentences), chunk):
        for m in encoder_attention(model, bpe, sentences[start:start + chunk]):
            n = m.size(-1)
            sums[n] = sums.get(n, 0) + m
            counts[n] = counts.get(n, 0) + 1
    return {n: sums[n] / counts[n] for n in sorted(sums)}


def _pattern(patterns: dict[int, torch.Tensor], n: int, layer: int, counts: Counts | None):
    """(H, n, n) average pattern for length n; else the nearest longer length's, cropped and
    renormalised; None if no training sentence was as long."""
    if n in patterns:
        return patterns[n][layer]
    longer = [m for m in patterns if m > n]
    if counts is not None:
        counts.fallbacks += 1
    if not longer:
        return None
    p = patterns[min(longer)][layer][:, :n, :n]
    return p / p.sum(-1, keepdim=True).clamp_min(1e-12)


def constant_attention(patterns: dict[int, torch.Tensor], heads: set[tuple[int, int]], counts: Counts | None = None):
    """Encoder self-attention edit: the weights of each (layer, head) in `heads` (0-based) are
    replaced by the head's average pattern for the sentence's length. A sentence's length is
    read from its padding: padded keys have weight 0 for every head and query."""
    def fn(w, layer):
        chosen = [h for (l, h) in heads if l == layer]
        if not chosen:
            return w
        w = w.clone()
        lengths = (w.amax(dim=(1, 2)) > 0).sum(-1).tolist()      # (B,) real keys
        for b, n in enumerate(lengths):
            p = _pattern(patterns, n, layer, counts)
            if p is not None:
                w[b, chosen, :n, :n] = p[chosen].to(w.dtype)
        return w
    return fn

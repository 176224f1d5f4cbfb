"""Physical head removal: a smaller model whose pruned heads are sliced out of the q/k/v and
output projections (the follow-up question of Sec. 6: does pruning make the model faster?).

`shrink(model)` keeps, in every attention layer, the heads its 0/1 head mask leaves open. The
result computes the same function as the masked model: a kept head is unchanged, a removed head
contributed zero, and a layer with no heads left outputs only the output projection's bias (what
the masked layer adds on top of its residual path). Gates and masks still index the original
heads, so `forward(gates=...)` keeps working; attention weights come back with the kept heads
only, so `return_attention` needs the same number of heads in every layer of a kind.
"""
from __future__ import annotations

import copy
import time
import warnings

import torch
from torch import nn

from headlib.data.batching import source_tensor
from headlib.nn.decode import length_batches
from headlib.nn.masks import parse_spec
from headlib.nn.model import MultiHeadAttention


def _slice_linear(linear: nn.Linear, rows: torch.Tensor | None = None, cols: torch.Tensor | None = None) -> nn.Linear:
    w = linear.weight.detach()
    w = w[rows] if rows is not None else w
    w = w[:, cols] if cols is not None else w
    b = linear.bias.detach()
    b = b[rows] if rows is not None else b
    with warnings.catch_warnings():   # a layer with no heads left has zero-size projections
        warnings.simplefilter("ignore", UserWarning)
        out = nn.Linear(w.shape[1], w.shape[0], device=w.device, dtype=w.dtype)
    with torch.no_grad():
        out.weight.copy_(w)
        out.bias.copy_(b)
    return out


class PrunedAttention(MultiHeadAttention):
    """`full` with only the heads `kept` (indices into its heads)."""

    def __init__(self, full: MultiHeadAttention, kept: list[int]):
        super().__init__(full.q_proj.in_features, full.n_heads, full.attn_dropout)
        dh = full.d_head
        rows = torch.tensor([h * dh + j for h in kept for j in range(dh)], dtype=torch.long)
        self.n_heads, self.d_head = len(kept), dh
        self.register_buffer("kept", torch.tensor(kept, dtype=torch.long), persistent=False)
        self.q_proj, self.k_proj, self.v_proj = (_slice_linear(p, rows=rows) for p in (full.q_proj, full.k_proj, full.v_proj))
        self.out_proj = _slice_linear(full.out_proj, cols=rows)

    def forward(self, x, memory=None, bias=None, gate=None, cache=None, need_weights=False):
        if self.n_heads == 0:   # no head left: the sublayer adds only W^O's bias to the residual path
            return self.out_proj.bias.expand(*x.shape[:-1], -1), None
        if gate is not None:
            gate = gate[self.kept.to(gate.device)]
        return super().forward(x, memory, bias, gate, cache, need_weights)


def _kept(mask_row: torch.Tensor) -> list[int]:
    return mask_row.nonzero().flatten().tolist()


@torch.no_grad()
def shrink(model) -> nn.Module:
    """A copy of `model` with every head its head masks close removed from the weights."""
    small = copy.deepcopy(model)
    for i, layer in enumerate(small.encoder):
        layer.self_attn = PrunedAttention(layer.self_attn, _kept(model.head_mask("enc-self")[i]))
    for i, layer in enumerate(small.decoder):
        layer.self_attn = PrunedAttention(layer.self_attn, _kept(model.head_mask("dec-self")[i]))
        layer.cross_attn = PrunedAttention(layer.cross_attn, _kept(model.head_mask("dec-enc")[i]))
    return small


@torch.no_grad()
def with_masks(model, spec: str) -> nn.Module:
    """A copy of `model` with the head masks of `spec` (the text of `ModelConfig.head_mask`)."""
    masked = copy.deepcopy(model)
    for kind, m in parse_spec(spec, model.layer_counts(), model.cfg.n_heads).items():
        masked.set_head_mask(kind, m)
    return masked


def encoder_batches(bpe, sentences, max_tokens: int = 6000) -> list[torch.Tensor]:
    """`sentences` as length-sorted source batches of at most `max_tokens` tokens."""
    ids = bpe.encode_batch(sentences)
    return [source_tensor([ids[i] for i in b]) for b in length_batches(ids, 1, max_tokens)]


@torch.no_grad()
def encode_seconds(model, batches) -> float:
    """Wall seconds of one encoder pass over `batches` (source tensors)."""
    t0 = time.perf_counter()
    for src in batches:
        model.encode(src)
    return time.perf_counter() - t0


def encoder_seconds(models: dict[str, nn.Module], batches, rounds: int = 3) -> dict[str, float]:
    """Encoder seconds of each model over `batches`: the fastest of `rounds` rounds, the models
    interleaved within each round (so that the load on the machine affects them alike), after one
    warm-up pass each."""
    for m in models.values():
        encode_seconds(m, batches[:2])
    times = {name: [] for name in models}
    for _ in range(rounds):
        for name, m in models.items():
            times[name].append(encode_seconds(m, batches))
    return {name: min(t) for name, t in times.items()}

"""Layer-wise relevance propagation of the top-1 logit down to encoder heads (Sec. 4, App. A).

Rule set `conservative` (Ali et al. 2022, "XAI for Transformers: Better Explanations through
Conservative Propagation"; AttnLRP): hold the softmax attention weights and the LayerNorm scale
constant, and take gradient x input. With those held constant the network is piecewise linear
(ReLU) in its activations, so gradient x input is the epsilon-LRP rule (epsilon -> 0) on every
linear map, and with zero biases the relevance summed over any cut of the graph equals the
starting logit exactly (tests/test_lrp.py checks it).

Head relevance (Sec. 4): at each target step t of the model's own greedy translation (teacher
forced), start from the logit of the top-1 token; the relevance of head h in encoder layer l is
the relevance summed over its slice of the attention output before W^O (all source positions);
normalise over the heads of the layer (R_h / sum_h' |R_h'|, so that non-negative relevances sum to
one); average over steps and sentences.

Rule set `paper` (the Ding et al. 2017 rule as Voita et al. describe it, after their official
code): signed shares on linear maps (gradient x input, as above), but relevance also flows through
the softmax into queries and keys (the attention weights are *not* held constant), LayerNorm
passes relevance through unchanged, and at the input of every encoder and decoder layer the
relevance is replaced by its absolute value, rescaled so that its total is conserved. Not
reproduced: the official code's z+ rule (positive weights only) on dense layers, which the paper's
text does not describe. Gradient x input is not conservative through the softmax, hence the
rescaling; head relevance is normalised per layer, so only the signs and shares matter.

Computed in fp32: bf16 would break conservation.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

from headlib.data.batching import pad, source_tensor
from headlib.data.bpe import BOS_ID, EOS_ID, PAD_ID
from headlib.nn.decode import greedy
from headlib.nn.hooks import hook_names, hooks

RULES = ("conservative", "paper")
EPS = 1e-7   # stabiliser of relevance / activation (the official code's 1e-7)


def _layer_norms(model: nn.Module) -> list[str]:
    """The names of every LayerNorm of `model`."""
    return [name for name, m in model.named_modules() if isinstance(m, nn.LayerNorm)]


def _layer_norm_constant_scale(module: nn.LayerNorm, inputs, output):
    """LayerNorm whose 1/std is a constant for the backward pass (the forward value is unchanged)."""
    x = inputs[0]
    mean = x.mean(-1, keepdim=True)
    std = (x.var(-1, unbiased=False, keepdim=True) + module.eps).sqrt().detach()
    return (x - mean) / std * module.weight + module.bias


def _constant(module, inputs, output):
    """The same values, held constant for the backward pass (zennit's rules do the same)."""
    return output.detach()


@contextmanager
def conservative(model: nn.Module):
    """Inside this block, backward passes hold softmax weights (every `hook_weights`) and
    LayerNorm scales constant."""
    rule = {**dict.fromkeys(_layer_norms(model), _layer_norm_constant_scale),
            **dict.fromkeys(hook_names(model, "hook_weights"), _constant)}
    with hooks(model, rule):
        yield


def _stable(x: torch.Tensor) -> torch.Tensor:
    return x + EPS * torch.where(x >= 0, 1.0, -1.0)


class _LayerNormPassThrough(torch.autograd.Function):
    """Forward: the LayerNorm output y. Backward: the gradient that gives x * grad_x = y * grad_y,
    i.e. relevance passes through the LayerNorm unchanged."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return y.clone()

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y / _stable(x), None


class _AbsRescale(torch.autograd.Function):
    """Identity forward. Backward: the relevance R = x * grad of each batch row becomes
    |R| * sum(R) / sum(|R|) (non-negative when the total is, total conserved)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        rel = x * grad
        dims = tuple(range(1, rel.dim()))
        scale = rel.sum(dims, keepdim=True) / rel.abs().sum(dims, keepdim=True).clamp_min(1e-30)
        return rel.abs() * scale / _stable(x)


def _layer_norm_pass_through(module: nn.LayerNorm, inputs, output):
    return _LayerNormPassThrough.apply(inputs[0], output)


def _rescale_layer_input(module, inputs, output):
    return _AbsRescale.apply(output)


@contextmanager
def paper_rule(model: nn.Module):
    """Inside this block, backward passes follow the `paper` rule set (module docstring): the
    rescaling sits on every encoder and decoder layer's `hook_input`."""
    rule = {**dict.fromkeys(_layer_norms(model), _layer_norm_pass_through),
            **dict.fromkeys(hook_names(model, "hook_input"), _rescale_layer_input)}
    with hooks(model, rule):
        yield


@contextmanager
def capture_heads(model, kind: str = "enc-self"):
    """Collect the gated head outputs (B, H, T, dh) of every layer of `kind`, in layer order."""
    captured: list[torch.Tensor] = []
    with hooks(model, dict.fromkeys(hook_names(model, "hook_heads", kind), lambda m, i, o: captured.append(o))):
        yield captured


def top1_logits(logits: torch.Tensor) -> torch.Tensor:
    """(B, T, V) -> (B, T): the logit of the model's top-1 token at each step."""
    return logits.gather(-1, logits.argmax(-1, keepdim=True)).squeeze(-1)


def top1_start(model, src, tgt_in) -> torch.Tensor:
    """(B, T) fp32 top-1 logits, each computed as one dot product with its output embedding row:
    the same values and gradients as `top1_logits(model(src, tgt_in))`, but the backward pass of
    each step skips the (V, D) output projection (about a sixth of a step's backward FLOPs at the
    cpu profile's V = 8k, D = 256)."""
    hidden = model(src, tgt_in, hidden_only=True).float()                     # (B, T, D)
    with torch.no_grad():
        top = model.logits(hidden).argmax(-1)                                 # (B, T)
    return (hidden * model.tgt_embed.weight[top].float()).sum(-1) + model.out_bias[top].float()


NORMALIZE = ("step", "sentence")


def _layer_normalized(heads, grads) -> torch.Tensor:
    """(B, L, H) relevance of each head (summed over source positions and its dh dims),
    divided by the sum of |relevance| over the heads of its layer."""
    rel = torch.stack([(z * g).sum(dim=(2, 3)) for z, g in zip(heads, grads)], dim=1)
    return rel / rel.abs().sum(-1, keepdim=True).clamp_min(1e-12)


def head_relevance_batch(model, src, tgt_in, tgt_out, rule: str = "conservative", normalize: str = "step"):
    """Summed normalised head relevance (L, H) and the number of steps, for one batch.

    src (B, S); tgt_in (B, T) = BOS + output; tgt_out (B, T) = output + EOS (PAD where absent).
    normalize="step" (the paper: normalise over each layer's heads at every step, one backward pass
    per step); "sentence" normalises each sentence's relevance summed over its steps (one backward
    pass per batch, a fast approximation), weighted by its number of steps.
    """
    if normalize not in NORMALIZE:
        raise ValueError(f"unknown normalization {normalize!r}; valid: {', '.join(NORMALIZE)}")
    if rule not in RULES:
        raise ValueError(f"unknown LRP rule {rule!r}; valid: {', '.join(RULES)}")
    model.eval()
    rule_ctx = conservative(model) if rule == "conservative" else paper_rule(model)
    with torch.enable_grad(), rule_ctx, capture_heads(model, "enc-self") as heads:
        start = top1_start(model, src, tgt_in)                           # (B, T)
        valid = tgt_out.ne(PAD_ID)                                       # (B, T)
        total = torch.zeros(len(heads), heads[0].size(1), dtype=torch.float64)
        if normalize == "sentence":
            rel = _layer_normalized(heads, torch.autograd.grad(start[valid].sum(), heads))     # (B, L, H)
            n = valid.sum(1)                                                                  # (B,)
            return (rel.detach().double() * n[:, None, None]).sum(0), int(n.sum())
        steps = 0
        for t in range(start.size(1)):
            rows = valid[:, t]
            if not rows.any():
                continue
            grads = torch.autograd.grad(start[rows, t].sum(), heads, retain_graph=True)
            rel = _layer_normalized(heads, grads)[rows]                                        # (b, L, H)
            total += rel.detach().double().sum(0)
            steps += int(rows.sum())
    return total, steps


@torch.no_grad()
def own_translations(model, src: torch.Tensor):
    """Teacher-forcing inputs for the model's own greedy translation of `src`."""
    return _teacher_forcing(greedy(model, src))


def _teacher_forcing(hyps: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """tgt_in (B, T) = BOS + hypothesis, tgt_out (B, T) = hypothesis + EOS, right-padded."""
    return pad([[BOS_ID] + h for h in hyps]), pad([h + [EOS_ID] for h in hyps])


@torch.no_grad()
def teacher_forcing_batches(model, bpe, sentences, batch_size: int = 32) -> list[tuple]:
    """(src, tgt_in, tgt_out) batches of `sentences`, teacher-forced on the model's own greedy
    translations (decoded in batches of similar source length), grouped by translation length.

    Per-step relevance runs one backward pass per step of a batch's longest translation, over
    every row of the batch; rows of equal translation length waste none of them
    (`benchmarks/lrp_speed.py` times both groupings)."""
    ids = bpe.encode_batch(sentences)
    by_source = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    hyps = {}
    for k in range(0, len(by_source), batch_size):
        idx = by_source[k:k + batch_size]
        hyps.update(zip(idx, greedy(model, source_tensor([ids[i] for i in idx]))))
    by_target = sorted(hyps, key=lambda i: (len(hyps[i]), len(ids[i])))
    return [(source_tensor([ids[i] for i in idx]), *_teacher_forcing([hyps[i] for i in idx]))
            for idx in (by_target[k:k + batch_size] for k in range(0, len(by_target), batch_size))]


def head_relevance(model, bpe, sentences, rule: str = "conservative", batch_size: int = 32,
                   progress: bool = False, normalize: str = "step", translator=None) -> tuple[torch.Tensor, int]:
    """Encoder head relevance (layers, heads) averaged over all generation steps of `sentences`,
    and the number of steps. The steps are teacher-forced on the greedy translations of
    `translator` (default: `model` itself); an untrained model given the trained one's
    translations is measured on the same steps (Sec. 4's null at initialisation)."""
    batches = teacher_forcing_batches(translator if translator is not None else model, bpe, sentences, batch_size)
    if progress:
        from tqdm.auto import tqdm
        batches = tqdm(batches, desc="LRP", leave=False)
    total, steps = 0.0, 0
    for batch in batches:
        t, n = head_relevance_batch(model, *batch, rule, normalize)
        total, steps = total + t, steps + n
    return (total / max(steps, 1)).float(), steps


@contextmanager
def capture_source_input(model):
    """Make the encoder's input (B, S, D) (scaled embeddings + positions, at `encoder.0.hook_input`)
    a leaf that requires grad, and collect it."""
    captured: list[torch.Tensor] = []

    def leaf(module, inputs, x):
        captured.append(x.detach().requires_grad_(True))
        return captured[-1]
    with hooks(model, {"encoder.0.hook_input": leaf}):
        yield captured


@contextmanager
def relevance_only_through(model, keep: torch.Tensor | None, kind: str = "enc-self"):
    """Let relevance (the backward pass) flow only through the heads of `kind` where `keep`
    (layers, heads) is 1; the forward pass is unchanged (the refined LRP of Chen et al. 2024).
    `keep` None: through every head (nothing installed)."""
    def block(layer):
        def hook(module, inputs, out):                                   # out: (B, H, T, dh)
            m = keep[layer].view(1, -1, 1, 1).to(out)
            return out * m + (out * (1 - m)).detach()
        return hook
    names = hook_names(model, "hook_heads", kind) if keep is not None else []
    with hooks(model, {name: block(l) for l, name in enumerate(names)}):
        yield


def source_relevance_batch(model, src, tgt_in, tgt_out, keep: torch.Tensor | None = None) -> torch.Tensor:
    """(B, S) conservative-rule relevance of each source position's input vector for the sum of
    the top-1 logits over all steps of the translation (teacher forced on `tgt_in`); with `keep`,
    relevance passes only through the encoder heads it marks (`relevance_only_through`)."""
    model.eval()
    with torch.enable_grad(), conservative(model), relevance_only_through(model, keep), \
            capture_source_input(model) as xs:
        start = top1_logits(model(src, tgt_in).float())                  # (B, T)
        (grad,) = torch.autograd.grad(start[tgt_out.ne(PAD_ID)].sum(), xs[0])
        return (xs[0] * grad).sum(-1).detach()

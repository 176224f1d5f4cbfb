"""Forward hooks by module name, installed for one block and always removed after it (as zennit's
attributors and TransformerLens's `run_with_hooks`):

    with hooks(model, {"encoder.0.self_attn.hook_weights": fn, "enc_norm": other}):
        model(src, tgt_in)

A name is one of `model.named_modules()`: a `HookPoint` of `headlib.nn.model` (where analyses read
or replace a tensor) or any other module, e.g. a LayerNorm. The hook points, with their shapes:

    encoder.{l}.hook_input    (B, S, D)       input of encoder layer l
    decoder.{l}.hook_input    (B, T, D)       input of decoder layer l (T = 1 in cached decoding)
    {attn}.hook_weights       (B, H, Tq, Tk)  attention weights after softmax, before dropout
                                              and `@ v`
    {attn}.hook_heads         (B, H, Tq, dh)  gated head outputs before W^O

where {attn} is `encoder.{l}.self_attn` (enc-self), `decoder.{l}.self_attn` (dec-self) or
`decoder.{l}.cross_attn` (dec-enc). `hook_names` lists them in layer order.

Every hook function has PyTorch's forward-hook signature

    fn(module, inputs, output) -> replacement output or None

`inputs` is the tuple of positional arguments (for a hook point, `(output,)`); a returned tensor
replaces `output` for the rest of the forward pass (and for hooks installed after it on the same
module), None leaves it as it is. A hook that returns `output.detach()` holds the tensor constant
for the backward pass, as LRP's conservative rule does to the attention weights.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from contextlib import contextmanager

from torch import nn


def _modules(model: nn.Module, names) -> list[nn.Module]:
    """The modules called `names`, each checked before any hook is installed."""
    modules = dict(model.named_modules())
    for name in names:
        if name not in modules:
            close = difflib.get_close_matches(name, [n for n in modules if n], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{type(model).__name__} has no module named {name!r}{hint}")
    return [modules[name] for name in names]


@contextmanager
def hooks(model: nn.Module, fns: Mapping[str, Callable]):
    """Install `fns` ({module name: forward hook}) on `model` for the block; remove them on exit,
    also when the block raises. An unknown name is a ValueError, raised before anything is
    installed. Hooks on one module run in the order they were installed (nest blocks for several
    hooks on the same module)."""
    handles = []
    try:
        for module, fn in zip(_modules(model, fns), fns.values()):
            handles.append(module.register_forward_hook(fn))
        yield
    finally:
        for handle in handles:
            handle.remove()


def hook_names(model: nn.Module, point: str, kind: str | None = None) -> list[str]:
    """The names of the modules called `point` (the last part of a name, e.g. "hook_weights" or
    "hook_input"), in model order (encoder layers bottom up, then decoder layers); with `kind`
    ("enc-self", "dec-self", "dec-enc"), those of the attention modules of that kind, one per
    layer, bottom up (`Transformer.attention_modules`)."""
    if kind is None:
        return [name for name, _ in model.named_modules() if name.rsplit(".", 1)[-1] == point]
    name_of = {id(m): name for name, m in model.named_modules()}
    names = [f"{name_of[id(a)]}.{point}" for a in model.attention_modules(kind)]
    _modules(model, names)                    # a misspelt `point` fails here, not at install
    return names

"""LRP: conservation (biases zero), a slow explicit reference, gated heads get zero relevance."""
from dataclasses import replace

import pytest
import torch
from torch import nn

from headlib.analysis.lrp import capture_heads, conservative, head_relevance_batch, paper_rule, top1_logits
from headlib.config import ModelConfig
from headlib.nn.model import Transformer

CFG = ModelConfig(d_model=16, n_heads=4, d_ff=32, enc_layers=2, dec_layers=2, dropout=0.0, norm="pre")
POST_LN = replace(CFG, norm="post")     # the paper's (and the base profile's) LayerNorm position


def tiny_model(seed=0, zero_bias=True, cfg=CFG):
    torch.manual_seed(seed)
    model = Transformer(cfg, vocab_size=20).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if zero_bias and (name.endswith("bias") or name == "out_bias"):
                p.zero_()
            elif name.endswith("norm.weight") or ".norm." in name:
                p.uniform_(0.5, 1.5)   # non-trivial LayerNorm gains
    return model


def batch():
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 11, 2, 0]])
    tgt_in = torch.tensor([[1, 12, 13, 14], [1, 15, 16, 0]])
    tgt_out = torch.tensor([[12, 13, 14, 2], [15, 16, 2, 0]])
    return src, tgt_in, tgt_out


def relevance_at(model, src, tgt_in, t, row, points):
    """Relevance (x * dlogit/dx) summed over each captured tensor, for one starting logit."""
    captured = {}

    def keep(name):
        def hook(module, inputs, output=None):
            captured[name] = inputs[0]
        return hook

    handles = [getattr_path(model, p).register_forward_pre_hook(keep(p)) for p in points]
    with torch.enable_grad(), conservative(model):
        logit = top1_logits(model(src, tgt_in))[row, t]
        grads = torch.autograd.grad(logit, [captured[p] for p in points])
    for h in handles:
        h.remove()
    return logit.item(), [(captured[p] * g).sum().item() for p, g in zip(points, grads)]


def getattr_path(obj, path):
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else getattr(obj, part)
    return obj


@pytest.mark.parametrize("cfg", [CFG, POST_LN], ids=["pre-LN", "post-LN"])
def test_conservation_at_every_cut(cfg):
    """With zero biases, the relevance at each cut of the graph sums to the starting logit (post-LN:
    the LayerNorms sit on the residual sums, and their constant scale is what conserves it)."""
    model = tiny_model(cfg=cfg)
    src, tgt_in, _ = batch()
    for t, row in [(0, 0), (2, 0), (1, 1)]:
        # cuts: sets of tensors that every path from the inputs to the logit crosses exactly once
        cuts = [["encoder.0", "decoder.0"], ["encoder.1", "decoder.0"], ["enc_norm", "decoder.0"],
                ["dec_norm"]]
        for cut in cuts:
            logit, parts = relevance_at(model, src, tgt_in, t, row, cut)
            assert abs(sum(parts) - logit) <= 1e-4 * abs(logit), (cut, parts, logit)


def test_head_cut_conservation():
    """Encoder layer l: x' = x + W^O z. The cut {x (residual path only), heads z, decoder input}
    carries the whole logit: x . dlogit/dx' + z . dlogit/dz + y . dlogit/dy = logit."""
    model = tiny_model()
    src, tgt_in, _ = batch()
    captured = {}
    layer = model.encoder[1]
    hooks = [layer.register_forward_pre_hook(lambda m, i: captured.__setitem__("x", i[0])),
             layer.sub_ffn.register_forward_pre_hook(lambda m, i: captured.__setitem__("x_after", i[0])),
             model.decoder[0].register_forward_pre_hook(lambda m, i: captured.__setitem__("y", i[0]))]
    with torch.enable_grad(), conservative(model), capture_heads(model) as heads:
        logit = top1_logits(model(src, tgt_in))[0, 1]
        g_after, g_z, g_y = torch.autograd.grad(logit, [captured["x_after"], heads[1], captured["y"]])
    for h in hooks:
        h.remove()
    total = (captured["x"] * g_after).sum() + (heads[1] * g_z).sum() + (captured["y"] * g_y).sum()
    assert torch.allclose(total, logit, rtol=1e-4), (total, logit)


def slow_head_relevance(model, src, tgt_in, tgt_out):
    """Straight from the definition with explicit per-layer Jacobians: for each step and each
    encoder layer, R_h = sum over positions/dims of z_h * d logit / d z_h, where the derivative is
    taken by finite perturbation of z through a replacement hook (no autograd)."""
    import copy
    model = copy.deepcopy(model).double().eval()
    L, H = len(model.encoder), model.cfg.n_heads
    total, steps = torch.zeros(L, H, dtype=torch.float64), 0
    with torch.no_grad():
        base_logits = model(src, tgt_in)
        top = base_logits.argmax(-1)
        # the conservative network is linear in z given constant weights/LN scales; compute the
        # directional derivative along z_h with a symmetric difference while freezing those
        # constants at their unperturbed values (recorded on a first pass)
        for l in range(L):
            frozen = _record_constants(model, src, tgt_in)
            for h in range(H):
                def scaled(eps):
                    def hook(m, i, o):
                        o = o.clone()
                        o[:, h] *= (1 + eps)
                        return o
                    handle = model.encoder[l].self_attn.hook_heads.register_forward_hook(hook)
                    with _frozen_constants(model, frozen):
                        out = model(src, tgt_in).double()
                    handle.remove()
                    return out.gather(-1, top[..., None]).squeeze(-1)
                eps = 1e-6
                deriv = (scaled(eps) - scaled(-eps)) / (2 * eps)          # (B, T) = R_h per step
                if h == 0:
                    per_head = torch.zeros(*deriv.shape, H, dtype=torch.float64)
                per_head[..., h] = deriv
            valid = tgt_out.ne(0)
            rel = per_head[valid]                                          # (steps, H)
            rel = rel / rel.abs().sum(-1, keepdim=True)
            total[l] = rel.sum(0)
            steps = int(valid.sum())
    return total, steps


def _record_constants(model, src, tgt_in):
    """Attention weights and LayerNorm (mean-free) scales of an unperturbed forward pass."""
    rec = {"attn": [], "ln": []}
    hooks = []
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            hooks.append(m.register_forward_hook(
                lambda mod, i, o: rec["ln"].append((i[0].var(-1, unbiased=False, keepdim=True) + mod.eps).sqrt())))
    import headlib.nn.model as hm
    orig = hm.attention

    def recording(q, k, v, bias, *a, **kw):
        out, w = orig(q, k, v, bias, *a, **kw)
        rec["attn"].append(w)
        return out, w
    hm.attention = recording
    try:
        with torch.no_grad():
            model(src, tgt_in)
    finally:
        hm.attention = orig
        for h in hooks:
            h.remove()
    return rec


class _frozen_constants:
    """Replay recorded attention weights and LayerNorm scales (perturbations stay linear)."""

    def __init__(self, model, rec):
        self.model, self.rec = model, rec

    def __enter__(self):
        import headlib.nn.model as hm
        self.orig = hm.attention
        attn, ln = iter(self.rec["attn"]), iter(self.rec["ln"])

        def replay(q, k, v, bias, *a, **kw):
            w = next(attn)
            return w @ v, w
        hm.attention = replay
        self.hooks = [m.register_forward_hook(
            lambda mod, i, o: (i[0] - i[0].mean(-1, keepdim=True)) / next(ln) * mod.weight + mod.bias)
            for m in self.model.modules() if isinstance(m, nn.LayerNorm)]

    def __exit__(self, *exc):
        import headlib.nn.model as hm
        hm.attention = self.orig
        for h in self.hooks:
            h.remove()


@pytest.mark.parametrize("cfg", [CFG, POST_LN], ids=["pre-LN", "post-LN"])
def test_fast_equals_slow_reference(cfg):
    model = tiny_model(seed=3, zero_bias=False, cfg=cfg)
    src, tgt_in, tgt_out = batch()
    fast, n_fast = head_relevance_batch(model, src, tgt_in, tgt_out)
    slow, n_slow = slow_head_relevance(model, src, tgt_in, tgt_out)
    assert n_fast == n_slow
    assert torch.allclose(fast, slow, atol=1e-4), (fast, slow)
    assert slow.abs().min() > 1e-3  # a real comparison, not of zeros


def test_gated_head_gets_zero_relevance():
    model = tiny_model(seed=1, zero_bias=False)
    mask = torch.ones(2, 4)
    mask[0, 2] = 0
    mask[1, 0] = 0
    model.set_head_mask("enc-self", mask)
    src, tgt_in, tgt_out = batch()
    rel, _ = head_relevance_batch(model, src, tgt_in, tgt_out)
    assert rel[0, 2] == 0 and rel[1, 0] == 0
    assert (rel[mask.bool()] != 0).all()


# -- the `paper` rule ----------------------------------------------------------------------------

def test_paper_rule_layer_norm_passes_relevance_through():
    norm = nn.LayerNorm(6)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.3, 0.3)
    model = nn.Module()
    model.norm, model.encoder, model.decoder = norm, [], []
    x = torch.randn(3, 6, requires_grad=True)
    upstream = torch.randn(3, 6)
    with paper_rule(model):
        y = norm(x)
    g, = torch.autograd.grad(y, x, upstream)
    torch.testing.assert_close(x.detach() * g, y.detach() * upstream, rtol=1e-4, atol=1e-5)


def test_paper_rule_layer_inputs_get_non_negative_relevance_with_the_total_kept():
    """Below each layer input the relevance is |R| rescaled: one sign (the total's) everywhere,
    summing (per sentence) to the total that arrived."""
    model = tiny_model(seed=2, zero_bias=False)
    src, tgt_in, _ = batch()
    before, after = {}, {}
    layer = model.encoder[1]
    first = layer.register_forward_pre_hook(lambda m, a: before.__setitem__("x", a[0]))
    with torch.enable_grad(), paper_rule(model):
        last = layer.hook_input.register_forward_hook(lambda m, a, out: after.__setitem__("x", out))
        logit = top1_logits(model(src, tgt_in))[0, 2]
        g_before, g_after = torch.autograd.grad(logit, [before["x"], after["x"]])
    first.remove(); last.remove()
    r_before, r_after = (before["x"] * g_before)[0], (after["x"] * g_after)[0]
    sign = r_after.sum().sign()
    assert (r_after * sign < 0).any()                           # mixed signs arrived ...
    assert (r_before * sign >= -1e-6 * r_before.abs().max()).all()   # ... one sign left
    torch.testing.assert_close(r_before.sum(), r_after.sum(), rtol=1e-4, atol=1e-6)


def test_paper_rule_gated_head_gets_zero_relevance_and_differs_from_conservative():
    model = tiny_model(seed=1, zero_bias=False)
    mask = torch.ones(2, 4)
    mask[1, 3] = 0
    model.set_head_mask("enc-self", mask)
    src, tgt_in, tgt_out = batch()
    paper, steps = head_relevance_batch(model, src, tgt_in, tgt_out, rule="paper")
    conserv, _ = head_relevance_batch(model, src, tgt_in, tgt_out, rule="conservative")
    assert steps > 0 and paper[1, 3] == 0 and (paper[mask.bool()] != 0).all()
    assert not torch.allclose(paper, conserv, atol=1e-3)       # relevance through q and k matters


def test_sentence_normalization_equals_summing_steps_before_normalizing():
    """The fast variant: one backward per batch gives, per sentence, the relevance summed over its
    steps (checked against per-step gradients summed by hand), normalised once."""
    model = tiny_model(seed=4, zero_bias=False)
    src, tgt_in, tgt_out = batch()
    fast, n = head_relevance_batch(model, src, tgt_in, tgt_out, normalize="sentence")
    valid = tgt_out.ne(0)
    expected = torch.zeros_like(fast)
    with torch.enable_grad(), conservative(model), capture_heads(model) as heads:
        start = top1_logits(model(src, tgt_in))
        for b in range(src.size(0)):
            per_sentence = 0
            for t in range(start.size(1)):
                if valid[b, t]:
                    g = torch.autograd.grad(start[b, t], heads, retain_graph=True)
                    per_sentence = per_sentence + torch.stack([(z[b] * gz[b]).sum(dim=(1, 2)) for z, gz in zip(heads, g)])
            expected += (per_sentence / per_sentence.abs().sum(-1, keepdim=True)).double() * int(valid[b].sum())
    assert n == int(valid.sum())
    torch.testing.assert_close(fast, expected, rtol=1e-4, atol=1e-6)


def test_corpus_relevance_is_the_mean_over_every_step_of_every_sentence(trained_tiny):
    """`head_relevance` (sorted by length, batched, own translations) = the per-sentence sums,
    each computed alone, divided by the total number of steps (len(translation) + 1 each)."""
    from around_helpers import DigitBPE, reverse_corpus

    from headlib.analysis.lrp import head_relevance, own_translations
    from headlib.data.batching import source_tensor
    bpe, sentences = DigitBPE(), list(reverse_corpus(5).src)
    mean, steps = head_relevance(trained_tiny, bpe, sentences, batch_size=2)
    total, expected_steps = 0.0, 0
    for ids in bpe.encode_batch(sentences):
        src = source_tensor([ids])
        tgt_in, tgt_out = own_translations(trained_tiny, src)
        t, n = head_relevance_batch(trained_tiny, src, tgt_in, tgt_out)
        total, expected_steps = total + t, expected_steps + n
        assert n == tgt_in.size(1)                                  # len(translation) + 1 (EOS)
    assert steps == expected_steps
    torch.testing.assert_close(mean, (total / expected_steps).float(), rtol=1e-5, atol=1e-6)


def test_top1_start_is_the_top1_logit_with_its_gradient():
    """The dot-product start equals gathering the top-1 logit from the full logits, in value and
    in the gradient that reaches every encoder head."""
    from headlib.analysis.lrp import top1_start
    model = tiny_model(seed=4, zero_bias=False)
    src, tgt_in, _ = batch()
    with torch.enable_grad(), conservative(model):
        starts = []
        for f in (lambda: top1_logits(model(src, tgt_in)), lambda: top1_start(model, src, tgt_in)):
            with capture_heads(model) as heads:
                start = f()
                grads = torch.autograd.grad(start[:, 1].sum(), heads)
            starts.append((start.detach(), grads))
    (a, ga), (b, gb) = starts
    assert torch.allclose(a, b, atol=1e-6)
    for x, y in zip(ga, gb):
        assert torch.allclose(x, y, atol=1e-6) and x.abs().max() > 1e-3


def test_paper_rule_sends_relevance_through_the_softmax_and_conservative_does_not():
    """The query projection reaches the output only through the softmax weights: its gradient is
    exactly zero when they are held constant (conservative) and non-zero under the paper rule."""
    model = tiny_model(seed=1, zero_bias=False)
    src, tgt_in, _ = batch()
    q_weights = [m.q_proj.weight for m in model.attention_modules("enc-self")]
    for rule, context in (("conservative", conservative), ("paper", paper_rule)):
        with torch.enable_grad(), context(model):
            logit = top1_logits(model(src, tgt_in))[0, 2]
            grads = torch.autograd.grad(logit, q_weights)
        norms = [g.abs().sum().item() for g in grads]
        assert all(n == 0 for n in norms) if rule == "conservative" else all(n > 1e-6 for n in norms), (rule, norms)

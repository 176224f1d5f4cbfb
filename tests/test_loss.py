"""The fused, chunked linear cross-entropy against the unfused PyTorch computation."""
import pytest
import torch

from headlib.nn.loss import linear_cross_entropy, reference_cross_entropy


def inputs(dtype=torch.float64, N=23, D=6, V=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(N, D, generator=g, dtype=dtype, requires_grad=True)
    w = torch.randn(V, D, generator=g, dtype=dtype, requires_grad=True)
    b = torch.randn(V, generator=g, dtype=dtype, requires_grad=True)
    y = torch.randint(0, V, (N,), generator=g)
    return h, w, b, y


def loss_and_grads(fn, h, w, b, y, scale=1.0, **kw):
    h, w, b = (t.detach().clone().requires_grad_() for t in (h, w, b))
    loss = fn(h, w, b, y, **kw)
    (loss * scale).backward()
    return loss.detach(), h.grad, w.grad, b.grad


@pytest.mark.parametrize("chunk", [1, 5, 23, 64])   # chunks that divide N, that do not, and one chunk
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_loss_and_gradients_equal_the_unfused_computation(chunk, eps):
    h, w, b, y = inputs()
    fused = loss_and_grads(linear_cross_entropy, h, w, b, y, scale=3.7, label_smoothing=eps, chunk=chunk)
    ref = loss_and_grads(reference_cross_entropy, h, w, b, y, scale=3.7, label_smoothing=eps)
    assert fused[0].dtype == torch.float32 and ref[0].dtype == torch.float32
    for got, want in zip(fused, ref):   # both fp32, summed in other orders: 1e-5 is fp32 rounding
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-5, atol=1e-5)


def test_under_bf16_autocast_it_matches_the_autocast_reference():
    """Logits in bf16 as F.linear computes them under autocast, softmax in fp32: the two paths
    differ only by bf16 rounding of the gradients."""
    h, w, b, y = inputs(torch.float32, N=300, D=32, V=200)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = loss_and_grads(linear_cross_entropy, h, w, b, y, label_smoothing=0.1, chunk=128)
        ref = loss_and_grads(reference_cross_entropy, h, w, b, y, label_smoothing=0.1)
    torch.testing.assert_close(fused[0], ref[0], rtol=1e-4, atol=0)
    for got, want in zip(fused[1:], ref[1:]):
        assert got.dtype == want.dtype == torch.float32
        assert (got - want).norm() / want.norm() < 1e-2


def test_without_gradients_only_the_loss_is_computed():
    h, w, b, y = inputs()
    with torch.no_grad():
        loss = linear_cross_entropy(h, w, b, y, 0.1, chunk=4)
    assert loss.grad_fn is None
    torch.testing.assert_close(loss, reference_cross_entropy(h, w, b, y, 0.1).detach())


def test_bad_shapes_name_the_parameter():
    h, w, b, y = inputs()
    with pytest.raises(ValueError, match="hidden must be"):
        linear_cross_entropy(h[None], w, b, y)
    with pytest.raises(ValueError, match="target"):
        linear_cross_entropy(h, w, b, y[:-1])


def test_fused_token_loss_on_the_tied_embedding_model():
    """On a tiny fp32 model whose one embedding table is the source and target embedding and the
    output projection, training's loss with `fused=True` equals the unfused PyTorch computation:
    the loss, and the gradient of every parameter (the tied table gets both its lookup gradient and
    the output projection's)."""
    import random

    from conftest import reverse_batch, tiny_model_config

    from headlib.data.batching import collate
    from headlib.nn.model import Transformer
    from headlib.nn.loss import token_loss

    torch.manual_seed(0)
    model = Transformer(tiny_model_config(), 30).eval()     # dropout 0: both passes see the same function
    assert model.embed is model.tgt_embed and all(p.dtype == torch.float32 for p in model.parameters())
    data = reverse_batch(random.Random(0), 6, 30)
    src, tgt_in, tgt_out = collate(data, list(range(len(data))))
    assert tgt_out.eq(0).any()                               # padded positions are left out of the loss

    def loss_and_grads(fused):
        model.zero_grad(set_to_none=True)
        loss, n = token_loss(model, src, tgt_in, tgt_out, 0.1, fused=fused)
        (loss * 2.5 / n).backward()
        return loss.detach(), n, {name: p.grad.clone() for name, p in model.named_parameters()}

    ref_loss, ref_n, ref = loss_and_grads(False)
    loss, n, got = loss_and_grads(True)
    assert n == ref_n == sum(len(t) + 1 for t in data.tgt)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=0)
    assert got.keys() == ref.keys() and "embed.weight" in got and "tgt_embed.weight" not in got
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-4, atol=1e-6, msg=lambda m: f"{name}: {m}")
    # the output projection reaches every row of the tied table, the lookup only the rows of used tokens
    used = set(torch.cat([src.flatten(), tgt_in.flatten()]).tolist())
    unused = [v for v in range(30) if v not in used]
    assert unused and ref["embed.weight"][unused].abs().sum(-1).gt(0).all()

"""The gated Transformer against references written from the definitions (Vaswani et al. 2017;
Voita et al. 2019, Sec. 6.1: MultiHead(Q, K, V) = Concat_i(g_i * head_i) W^O)."""
import copy
import math

import pytest
import torch
from conftest import tiny_model_config

from headlib.config import ModelConfig, get_config
from headlib.data.bpe import PAD_ID
from headlib.nn.model import KINDS, MultiHeadAttention, Transformer, dropout

VOCAB = 40


def reference_mha(mha: MultiHeadAttention, x, memory, allowed, gate=None):
    """Per-head loop, in float64: for each head h, softmax(q_h k_h^T / sqrt(d_h) over the allowed
    keys) v_h, times its gate; concatenate the heads and apply W^O.

    x: (B, Tq, D); memory: (B, Tk, D) or None (self-attention); allowed: bool (B, Tq, Tk).
    Returns the output (B, Tq, D) and the weights (B, H, Tq, Tk).
    """
    f64 = lambda t: t.detach().double()
    x = f64(x)
    kv = x if memory is None else f64(memory)
    B, Tq, D = x.shape
    Tk, H = kv.shape[1], mha.n_heads
    dh = D // H
    Wq, Wk, Wv, Wo = (f64(m.weight) for m in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj))
    bq, bk, bv, bo = (f64(m.bias) for m in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj))
    out = torch.zeros(B, Tq, D, dtype=torch.float64)
    weights = torch.zeros(B, H, Tq, Tk, dtype=torch.float64)
    for b in range(B):
        heads = []
        for h in range(H):
            rows = slice(h * dh, (h + 1) * dh)
            q = x[b] @ Wq[rows].T + bq[rows]            # (Tq, dh)
            k = kv[b] @ Wk[rows].T + bk[rows]           # (Tk, dh)
            v = kv[b] @ Wv[rows].T + bv[rows]
            head = torch.zeros(Tq, dh, dtype=torch.float64)
            for i in range(Tq):
                keys = [j for j in range(Tk) if allowed[b, i, j]]
                s = torch.stack([q[i] @ k[j] for j in keys]) / math.sqrt(dh)
                e = torch.exp(s - s.max())
                w = e / e.sum()
                for wj, j in zip(w, keys):
                    weights[b, h, i, j] = wj
                    head[i] += wj * v[j]
            g = 1.0 if gate is None else float(gate[h])
            heads.append(g * head)
        out[b] = torch.cat(heads, dim=-1) @ Wo.T + bo
    return out, weights


def allowed_mask(q_len, k_len, k_lengths, causal=False):
    """bool (B, Tq, Tk): key j is a real token of its sentence (and j <= i if causal)."""
    B = len(k_lengths)
    m = torch.zeros(B, q_len, k_len, dtype=torch.bool)
    for b, n in enumerate(k_lengths):
        for i in range(q_len):
            for j in range(n):
                m[b, i, j] = (j <= i) if causal else True
    return m


def as_bias(allowed):
    return torch.zeros(allowed.shape).masked_fill(~allowed, float("-inf"))[:, None]


@pytest.fixture
def mha():
    torch.manual_seed(0)
    m = MultiHeadAttention(32, 4).eval()
    for p in m.parameters():  # non-zero biases, so that they are tested too
        torch.nn.init.normal_(p, 0, 0.1)
    return m


@pytest.mark.parametrize("kind", ["self-padded", "causal", "cross"])
def test_batched_attention_equals_per_head_loop(mha, kind):
    torch.manual_seed(1)
    B, T, S = 3, 5, 7
    x = torch.randn(B, T, 32)
    memory = torch.randn(B, S, 32) if kind == "cross" else None
    if kind == "self-padded":
        allowed = allowed_mask(T, T, [5, 3, 1])
    elif kind == "causal":
        allowed = allowed_mask(T, T, [5, 4, 2], causal=True)
        allowed[:, :, 0] = True  # every query sees at least the first key
    else:
        allowed = allowed_mask(T, S, [7, 2, 4])
    out, w = mha(x, memory, as_bias(allowed), need_weights=True)
    ref_out, ref_w = reference_mha(mha, x, memory, allowed)
    torch.testing.assert_close(w.double(), ref_w, atol=1e-6, rtol=0)
    torch.testing.assert_close(out.double(), ref_out, atol=1e-6, rtol=1e-5)
    # with gates: each head is scaled before W^O
    gate = torch.tensor([1.0, 0.0, 0.25, -0.5])
    out_g, _ = mha(x, memory, as_bias(allowed), gate=gate)
    torch.testing.assert_close(out_g.double(), reference_mha(mha, x, memory, allowed, gate)[0], atol=1e-6, rtol=1e-5)


def test_model_helpers_build_the_same_masks():
    src = torch.tensor([[5, 6, 7], [8, PAD_ID, PAD_ID]])
    bias = Transformer.padding_bias(src)
    assert bias.shape == (2, 1, 1, 3)
    assert torch.equal(bias[:, 0].isinf().expand(2, 3, 3), ~allowed_mask(3, 3, [3, 1]))
    causal = Transformer.causal_bias(4)
    assert torch.equal(causal[0].isinf(), ~allowed_mask(4, 4, [4], causal=True))


# -- the whole model ------------------------------------------------------------------------------

def make_batch(seed=0):
    """Sources of lengths 7, 4, 2 and targets of lengths 6, 3, 5 (right-padded)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((3, 7), PAD_ID)
    tgt = torch.full((3, 6), PAD_ID)
    for b, (s, t) in enumerate(zip([7, 4, 2], [6, 3, 5])):
        src[b, :s] = torch.randint(4, VOCAB, (s,), generator=g)
        tgt[b, :t] = torch.randint(4, VOCAB, (t,), generator=g)
    return src, tgt, [7, 4, 2], [6, 3, 5]


@pytest.fixture(params=["pre", "post"])
def model(request):
    torch.manual_seed(0)
    return Transformer(tiny_model_config(norm=request.param), VOCAB).eval()


def attention_module(model, kind, layer):
    if kind == "enc-self":
        return model.encoder[layer].self_attn
    return model.decoder[layer].self_attn if kind == "dec-self" else model.decoder[layer].cross_attn


@pytest.mark.parametrize("kind", KINDS)
def test_gate_zero_equals_removing_the_head_from_w_o(model, kind):
    src, tgt, _, _ = make_batch()
    layer, head, dh = 1, 2, 32 // 4
    with torch.no_grad():
        full = model(src, tgt)
        pruned = copy.deepcopy(model)
        mask = torch.ones(2, 4)
        mask[layer, head] = 0
        pruned.set_head_mask(kind, mask)
        by_gate = pruned(src, tgt)
        surgery = copy.deepcopy(model)
        attention_module(surgery, kind, layer).out_proj.weight[:, head * dh:(head + 1) * dh] = 0
        by_weights = surgery(src, tgt)
    torch.testing.assert_close(by_gate, by_weights, atol=1e-6, rtol=0)
    assert (by_gate - full).abs().max() > 1e-3  # the head mattered
    # other kinds are untouched by this mask
    for other in KINDS:
        if other != kind:
            assert torch.equal(pruned.head_mask(other), torch.ones(2, 4))


@pytest.mark.parametrize("kind", KINDS)
def test_fractional_gate_scales_the_head(model, kind):
    src, tgt, _, _ = make_batch()
    layer, head, dh, g = 0, 3, 32 // 4, 0.3
    gates = {kind: torch.ones(2, 4)}
    gates[kind][layer, head] = g
    with torch.no_grad():
        gated = model(src, tgt, gates=gates)
        scaled = copy.deepcopy(model)
        attention_module(scaled, kind, layer).out_proj.weight[:, head * dh:(head + 1) * dh] *= g
        ref = scaled(src, tgt)
    torch.testing.assert_close(gated, ref, atol=1e-5, rtol=1e-5)


def test_gate_is_linear_in_the_head_output(mha):
    """Within one attention layer the output is affine in each gate."""
    torch.manual_seed(2)
    x = torch.randn(2, 5, 32)
    out = lambda g: mha(x, gate=torch.tensor([1.0, g, 1.0, 1.0]))[0]
    o0, o1 = out(0.0), out(1.0)
    for g in (0.3, 0.7, 2.0):
        torch.testing.assert_close(out(g), o0 + g * (o1 - o0), atol=1e-5, rtol=1e-5)


def test_set_head_mask_agrees_with_gates_argument(model):
    src, tgt, _, _ = make_batch()
    g = torch.Generator().manual_seed(3)
    masks = {k: (torch.rand(2, 4, generator=g) > 0.4).float() for k in KINDS}
    soft = {k: torch.rand(2, 4, generator=g) for k in KINDS}
    with torch.no_grad():
        by_arg = model(src, tgt, gates=masks)
        masked = copy.deepcopy(model)
        for k, m in masks.items():
            masked.set_head_mask(k, m)
        by_buffer = masked(src, tgt)
        torch.testing.assert_close(by_arg, by_buffer, atol=1e-6, rtol=0)
        # the fixed mask and the gates multiply
        combined = {k: masks[k] * soft[k] for k in KINDS}
        torch.testing.assert_close(masked(src, tgt, gates=soft), model(src, tgt, gates=combined), atol=1e-6, rtol=0)
        # the mask is part of the state dict
        fresh = Transformer(model.cfg, VOCAB).eval()
        fresh.load_state_dict(masked.state_dict())
        torch.testing.assert_close(fresh(src, tgt), by_buffer, atol=0, rtol=0)
    with pytest.raises(ValueError, match="enc-self"):
        model.set_head_mask("encoder", torch.ones(2, 4))


def test_attention_weights_api(model):
    src, tgt, src_len, tgt_len = make_batch()
    L, B, H, S, T = 2, 3, 4, src.size(1), tgt.size(1)
    with torch.no_grad():
        logits, attn = model(src, tgt, return_attention=True)
        plain = model(src, tgt)
    torch.testing.assert_close(logits, plain, atol=0, rtol=0)
    assert set(attn) == set(KINDS)
    assert attn["enc-self"].shape == (L, B, H, S, S)
    assert attn["dec-self"].shape == (L, B, H, T, T)
    assert attn["dec-enc"].shape == (L, B, H, T, S)
    allowed = {"enc-self": allowed_mask(S, S, src_len), "dec-enc": allowed_mask(T, S, src_len),
               "dec-self": allowed_mask(T, T, tgt_len, causal=True)}
    for kind, w in attn.items():
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5, rtol=0)
        forbidden = ~allowed[kind][None, :, None].expand_as(w)
        assert forbidden.any()
        assert (w[forbidden] == 0).all(), kind
        assert (w[~forbidden] > 0).all(), kind


def test_returned_weights_follow_the_definition(model):
    """Layer-0 encoder weights returned by the model = the per-head reference on its input."""
    src, _, src_len, _ = make_batch()
    with torch.no_grad():
        _, w = model.encode(src, return_attention=True)
        x = model._embed(model.embed, src)
        layer = model.encoder[0]
        h = layer.sub_attn.norm(x) if model.cfg.norm == "pre" else x
        _, ref = reference_mha(layer.self_attn, h, None, allowed_mask(src.size(1), src.size(1), src_len))
    torch.testing.assert_close(w[0].double(), ref, atol=1e-6, rtol=0)


def test_padding_does_not_change_the_output(model):
    """A sentence gives the same logits alone as inside a padded batch."""
    src, tgt, src_len, tgt_len = make_batch()
    with torch.no_grad():
        batch = model(src, tgt)
        for b in range(3):
            alone = model(src[b:b + 1, :src_len[b]], tgt[b:b + 1, :tgt_len[b]])
            torch.testing.assert_close(batch[b:b + 1, :tgt_len[b]], alone, atol=1e-5, rtol=1e-5)


def test_bf16_fast_path_matches_fp32(trained_tiny):
    """The training fast path (bf16 autocast) computes the same function as the fp32 analysis path."""
    model = trained_tiny
    torch.manual_seed(5)
    src = torch.randint(4, 12, (8, 7))
    tgt = torch.cat([torch.ones(8, 1, dtype=torch.long), src.flip(1)], 1)
    cfg = get_config("smoke", ["train.bf16=true"])   # the base profile's training path
    with torch.no_grad():
        fp32 = model(src, tgt)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.train.bf16):   # as fine_tune trains
            bf16 = model(src, tgt)
    assert fp32.dtype == torch.float32 and bf16.dtype == torch.bfloat16  # really two paths
    a, b = fp32.flatten(), bf16.float().flatten()
    assert torch.corrcoef(torch.stack([a, b]))[0, 1] > 0.999
    assert (a - b).abs().mean() < 0.02 * a.abs().mean() + 0.05
    assert (fp32.argmax(-1) == bf16.float().argmax(-1)).float().mean() > 0.95


@pytest.mark.parametrize("masks", ["float32", "int16"])
def test_dropout_drops_at_rate_p_and_keeps_the_expectation(masks):
    torch.manual_seed(0)
    x = torch.ones(1000, 1001)                       # n not a multiple of 4
    for p in (0.1, 0.2, 0.5):
        y = dropout(x, p, training=True, masks=masks)
        kept = y.ne(0)
        n = x.numel()
        sd = (p * (1 - p) / n) ** 0.5
        assert abs(1 - kept.float().mean().item() - p) < 5 * sd                  # drop rate p
        p_used = p if masks == "float32" else round(p * 65536) / 65536
        assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / (1 - p_used)))
        assert abs(y.mean().item() - 1) < 5 * sd / (1 - p)                         # E[y] = x
    drawn = [dropout(x, 0.5, True, masks).ne(0).view(-1)[:4 * 10000].view(-1, 4).float() for _ in range(3)]
    corr = torch.corrcoef(torch.cat(drawn).T)        # neighbours (for int16: the four elements of one
    assert (corr - torch.eye(4)).abs().max() < 0.05  # 64-bit draw) are independent of each other
    assert dropout(x, 0.2, training=False, masks=masks) is x and dropout(x, 0.0, True, masks) is x


def test_dropout_masks_reach_every_dropout_and_float32_is_the_plain_draw():
    x = torch.randn(7, 9)
    torch.manual_seed(3)
    y = dropout(x, 0.3, True, "float32")
    torch.manual_seed(3)                   # float32 masks: torch's own dropout, written out
    assert torch.equal(y, x * (torch.rand(x.shape) >= 0.3).to(x.dtype) * (1.0 / (1.0 - 0.3)))

    model = Transformer(tiny_model_config(dropout=0.3), 20).train()
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    torch.manual_seed(3)
    reference = model(src, tgt)
    assert model.cfg.dropout_masks == "int16"      # the default
    model.set_dropout_masks("float32")
    assert {m.dropout_masks for m in model.modules() if hasattr(m, "dropout_masks")} == {"float32"}
    torch.manual_seed(3)
    assert not torch.equal(model(src, tgt), reference)
    with pytest.raises(ValueError, match="model.dropout_masks"):
        model.set_dropout_masks("float16")


def test_sinusoid_table_interleaves_sin_and_cos_and_extends_past_its_length():
    """Vaswani et al. (2017) Sec. 3.5, written out: PE(pos, 2i) = sin(pos / 10000^(2i/d)),
    PE(pos, 2i+1) = cos(...). Positions past the model's table are computed on the fly, equal."""
    from headlib.nn.model import sinusoid_table
    d = 8
    expected = torch.tensor([[math.sin(p / 10000 ** (2 * (j // 2) / d)) if j % 2 == 0 else
                              math.cos(p / 10000 ** (2 * (j // 2) / d)) for j in range(d)] for p in range(5)])
    torch.testing.assert_close(sinusoid_table(5, d), expected, atol=1e-6, rtol=0)
    cfg = ModelConfig(d_model=16, n_heads=4, d_ff=32, enc_layers=1, dec_layers=1, dropout=0.0, norm="pre")
    model = Transformer(cfg, vocab_size=12).eval()
    tokens = torch.randint(4, 12, (2, 6))
    n = model.positions.size(0)
    with torch.no_grad():
        inside = model._embed(model.embed, tokens, offset=0)
        past = model._embed(model.embed, tokens, offset=n - 2)       # 4 of 6 positions past the table
    big = sinusoid_table(n + 4, 16)
    torch.testing.assert_close(inside - model.positions[:6], past - big[n - 2:n + 4], atol=1e-5, rtol=0)
    torch.testing.assert_close(model.positions, sinusoid_table(n, 16))

"""Transformer encoder-decoder (Vaswani et al., 2017) with a gate on every attention head.

Reading order: attention -> feed-forward -> encoder / decoder layers -> Transformer.

Head gates (Voita et al. 2019, Sec. 6.1): MultiHead(Q, K, V) = Concat_i(g_i * head_i) W^O.
There are three attention kinds, each with one float tensor of gates shaped (layers, heads),
1 = keep:

    "enc-self"  encoder self-attention
    "dec-self"  decoder self-attention
    "dec-enc"   decoder-encoder attention

The model holds a fixed 0/1 `head_mask` per kind (a buffer: from-scratch training with a
pruned configuration, or evaluation with hard gates) and `forward` also takes `gates`, a dict of
(layers, heads) tensors multiplied on top (the Hard Concrete gates of `headlib.pruning.gates`).

The same modules serve training and analysis: `return_attention=True` also returns the
attention weights of every layer, shaped (layer, batch, head, query, key). Decoding uses a
key/value cache (`decode_step`). Analyses read or replace intermediate tensors at named hook points
(`HookPoint`: each layer's `hook_input`, each attention's `hook_weights` and `hook_heads`) through
`headlib.nn.hooks`; the model has no switches of its own for them.
"""
from __future__ import annotations

import hashlib
import math

import torch
import torch.nn.functional as F
from torch import nn

from headlib.config import ModelConfig
from headlib.data.bpe import PAD_ID
from headlib.nn.masks import parse_spec

KINDS = ("enc-self", "dec-self", "dec-enc")
NEG_INF = float("-inf")


DROPOUT_MASKS = ("float32", "int16")


def check_dropout_masks(masks: str) -> str:
    if masks not in DROPOUT_MASKS:
        raise ValueError(f"model.dropout_masks: {masks!r}; valid: {', '.join(DROPOUT_MASKS)}")
    return masks


def dropout(x, p: float, training: bool, masks: str = "float32"):
    """Inverted dropout; `masks` (ModelConfig.dropout_masks) says how the mask is drawn.

    "float32": an element is dropped when torch.rand falls below p (F.dropout's distribution; its
    bernoulli_ was 28% of a bf16 training step on CPU, torch.rand half that). "int16": when a uniform
    16-bit integer falls below p * 2^16, four elements per 64-bit draw, so p is rounded to a
    multiple of 2^-16 (|change| <= 7.7e-6); for a (256, 16, 256) activation on two CPU cores 0.9 ms
    of random numbers where torch.rand took 3.0 ms. The two draw different masks from one seed."""
    if not training or p == 0.0:
        return x
    if check_dropout_masks(masks) == "float32":
        return x * (torch.rand(x.shape, device=x.device) >= p).to(x.dtype) * (1.0 / (1.0 - p))
    n, drop = x.numel(), round(p * 65536)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-2 ** 63, None)
    r = bits.view(torch.int16)[:n].view(x.shape)                # uniform on [-32768, 32767]
    return x * (r >= drop - 32768).to(x.dtype) * (65536 / (65536 - drop))


def attention(q, k, v, bias, *, dropout_p: float = 0.0, training: bool = False, edit=None,
              dropout_masks: str = "float32"):
    """softmax(q k^T / sqrt(d) + bias) v.

    `edit`, if given, maps the softmax weights to the weights used, before dropout: a
    `MultiHeadAttention` passes its `hook_weights`, where analyses replace them (interventions,
    `headlib.analysis.interventions`) or detach them (conservative LRP, `headlib.analysis.lrp`).
    q: (B, H, Tq, dh); k, v: (B, H, Tk, dh); bias: additive mask broadcastable to (B, H, Tq, Tk).
    Returns the output (B, H, Tq, dh) and the weights after `edit` (B, H, Tq, Tk).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, H, Tq, Tk)
    if bias is not None:
        scores = scores + bias
    weights = scores.softmax(dim=-1)
    if edit is not None:
        weights = edit(weights)
    weights_used = dropout(weights, dropout_p, training, dropout_masks)
    return weights_used @ v, weights


class HookPoint(nn.Identity):
    """Identity with a name: analysis code (LRP, interventions) hooks here to read or replace a
    tensor, as in TransformerLens; `headlib.nn.hooks` installs hooks by name. No parameters or
    buffers, so state dicts are those of a model without them."""


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, attn_dropout: float = 0.0):
        super().__init__()
        self.hook_heads = HookPoint()         # (B, H, Tq, dh): gated head outputs before W^O
        self.hook_weights = HookPoint()       # (B, H, Tq, Tk): attention weights after softmax,
                                              # before dropout and `@ v` (called inside `attention`)
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)   # W^O
        self.attn_dropout = attn_dropout
        self.dropout_masks = "float32"        # set by Transformer.set_dropout_masks

    def _split(self, x):  # (B, T, D) -> (B, H, T, dh)
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)

    def project_kv(self, x):
        """Keys and values of `x`, each (B, H, T, dh): computed once per source for dec-enc."""
        w = torch.cat([self.k_proj.weight, self.v_proj.weight])
        b = torch.cat([self.k_proj.bias, self.v_proj.bias])
        k, v = F.linear(x, w, b).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def forward(self, x, memory=None, bias=None, gate=None, cache=None, need_weights=False):
        """Self-attention over `x` (memory None) or attention from `x` to `memory`.

        x: (B, Tq, D); memory: (B, Tk, D); gate: (H,) multiplied into each head's output.
        cache: dict updated in place for incremental decoding ("k"/"v" grow by Tq for
        self-attention; for attention to memory they are computed once and reused).
        Returns the output (B, Tq, D) and the weights (B, H, Tq, Tk) or None.
        """
        if memory is None:
            w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
            b = torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
            q, k, v = (self._split(t) for t in F.linear(x, w, b).chunk(3, dim=-1))
            if cache is not None:
                if "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        else:
            q = self._split(self.q_proj(x))
            if cache is not None and "k" in cache:
                k, v = cache["k"], cache["v"]
            else:
                k, v = self.project_kv(memory)
                if cache is not None:
                    cache["k"], cache["v"] = k, v
        heads, weights = attention(q, k, v, bias, dropout_p=self.attn_dropout, training=self.training,
                                   edit=self.hook_weights, dropout_masks=self.dropout_masks)  # (B, H, Tq, dh)
        if gate is not None:
            heads = heads * gate.to(heads.dtype).view(1, -1, 1, 1)
        heads = self.hook_heads(heads)
        B, H, Tq, dh = heads.shape
        out = self.out_proj(heads.transpose(1, 2).reshape(B, Tq, H * dh))
        return out, (weights if need_weights else None)


class FeedForward(nn.Module):
    """fc2(act(fc1(x))). No dropout inside (as Vaswani et al. and fairseq's default): it cost
    ~17% of a CPU training step on the d_ff-wide activations."""

    def __init__(self, d_model: int, d_ff: int, activation: str):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.act = F.relu if activation == "relu" else F.silu

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Sublayer(nn.Module):
    """Residual + LayerNorm around one sublayer: pre-LN x + f(LN(x)) or post-LN LN(x + f(x))."""

    def __init__(self, d_model: int, dropout: float, pre_norm: bool):
        super().__init__()
        self.norm, self.dropout, self.pre_norm = nn.LayerNorm(d_model), dropout, pre_norm
        self.dropout_masks = "float32"        # set by Transformer.set_dropout_masks

    def forward(self, x, f):
        if self.pre_norm:
            y, extra = f(self.norm(x))
            return x + dropout(y, self.dropout, self.training, self.dropout_masks), extra
        y, extra = f(x)
        return self.norm(x + dropout(y, self.dropout, self.training, self.dropout_masks)), extra


class EncoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        pre = cfg.norm == "pre"
        self.hook_input = HookPoint()         # (B, S, D): the layer's input
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation)
        self.sub_attn = Sublayer(cfg.d_model, cfg.dropout, pre)
        self.sub_ffn = Sublayer(cfg.d_model, cfg.dropout, pre)

    def forward(self, x, bias, gate=None, need_weights=False):
        x = self.hook_input(x)                                               # (B, S, D)
        x, w = self.sub_attn(x, lambda h: self.self_attn(h, None, bias, gate, None, need_weights))
        x, _ = self.sub_ffn(x, lambda h: (self.ffn(h), None))
        return x, w


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        pre = cfg.norm == "pre"
        self.hook_input = HookPoint()         # (B, T, D): the layer's input (T = 1 per decoding step)
        self.self_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout)
        self.cross_attn = MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.attn_dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation)
        self.sub_self = Sublayer(cfg.d_model, cfg.dropout, pre)
        self.sub_cross = Sublayer(cfg.d_model, cfg.dropout, pre)
        self.sub_ffn = Sublayer(cfg.d_model, cfg.dropout, pre)

    def forward(self, y, memory, self_bias, cross_bias, gate_self=None, gate_cross=None,
                cache=None, need_weights=False):
        c_self = cache.setdefault("self", {}) if cache is not None else None
        c_cross = cache.setdefault("cross", {}) if cache is not None else None
        y = self.hook_input(y)                                               # (B, T, D)
        y, w_self = self.sub_self(y, lambda h: self.self_attn(h, None, self_bias, gate_self, c_self, need_weights))
        y, w_cross = self.sub_cross(y, lambda h: self.cross_attn(h, memory, cross_bias, gate_cross, c_cross, need_weights))
        y, _ = self.sub_ffn(y, lambda h: (self.ffn(h), None))
        return y, w_self, w_cross


def sinusoid_table(n_pos: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """(n_pos, d_model) sinusoidal position encodings (Vaswani et al. 2017, Sec. 3.5): sin and cos
    interleaved, or (Marian) all sines then all cosines."""
    pos = torch.arange(n_pos, dtype=torch.float32)[:, None]
    i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = pos / torch.pow(10000.0, i / d_model)
    if layout == "halves":
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    table = torch.zeros(n_pos, d_model)
    table[:, 0::2], table[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return table


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig, vocab_size: int):
        super().__init__()
        self.cfg, self.vocab_size = cfg, vocab_size
        self.embed = nn.Embedding(vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.tgt_embed = self.embed if cfg.tied_embeddings else nn.Embedding(vocab_size, cfg.d_model, padding_idx=PAD_ID)
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))  # final logits bias (Marian has one)
        self.register_buffer("positions", sinusoid_table(cfg.max_positions, cfg.d_model, cfg.positions),
                             persistent=False)
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.enc_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.dec_layers))
        pre = cfg.norm == "pre"
        self.enc_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        self.dec_norm = nn.LayerNorm(cfg.d_model) if pre else nn.Identity()
        for kind, n in self.layer_counts().items():
            self.register_buffer(self.mask_buffer_name(kind), torch.ones(n, cfg.n_heads))
        for kind, mask in parse_spec(cfg.head_mask, self.layer_counts(), cfg.n_heads).items():
            self.set_head_mask(kind, mask)
        self.set_dropout_masks(cfg.dropout_masks)
        self.reset_parameters()

    def set_dropout_masks(self, masks: str) -> None:
        """How every dropout of the model draws its masks ("float32" or "int16", see `dropout`)."""
        self.dropout_masks = check_dropout_masks(masks)
        for module in self.modules():
            if hasattr(module, "dropout_masks"):
                module.dropout_masks = masks

    # -- head masks ---------------------------------------------------------------------------
    @staticmethod
    def mask_buffer_name(kind: str) -> str:
        """The state-dict name of the head mask of `kind`."""
        return "head_mask_" + kind.replace("-", "_")

    def layer_counts(self) -> dict[str, int]:
        return self.cfg.layer_counts()

    def head_mask(self, kind: str) -> torch.Tensor:
        """The fixed 0/1 mask of `kind`, (layers, heads)."""
        return getattr(self, self.mask_buffer_name(kind))

    def set_head_mask(self, kind: str, mask: torch.Tensor) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; valid: {', '.join(KINDS)}")
        getattr(self, self.mask_buffer_name(kind)).copy_(mask)

    def attention_modules(self, kind: str) -> list[MultiHeadAttention]:
        """The attention module of `kind` in each layer, bottom up."""
        if kind not in KINDS:
            raise ValueError(f"unknown attention kind {kind!r}; valid: {', '.join(KINDS)}")
        if kind == "enc-self":
            return [layer.self_attn for layer in self.encoder]
        return [layer.self_attn if kind == "dec-self" else layer.cross_attn for layer in self.decoder]

    def _gates(self, kind: str, gates: dict | None) -> torch.Tensor:
        g = self.head_mask(kind)
        if gates and kind in gates and gates[kind] is not None:
            g = g * gates[kind]
        return g  # (layers, heads)

    # -- model --------------------------------------------------------------------------------
    def reset_parameters(self):
        for name, p in self.named_parameters():
            if p.dim() > 1 and "embed" not in name:
                nn.init.xavier_uniform_(p)
            elif name.endswith("bias") and "norm" not in name:
                nn.init.zeros_(p)
        for emb in {id(self.embed): self.embed, id(self.tgt_embed): self.tgt_embed}.values():
            nn.init.normal_(emb.weight, 0.0, self.cfg.d_model ** -0.5)
            with torch.no_grad():
                emb.weight[PAD_ID].zero_()

    def _embed(self, table: nn.Embedding, tokens, offset: int = 0):
        T = tokens.size(1)
        if offset + T <= self.positions.size(0):
            pos = self.positions[offset:offset + T]
        else:  # beyond the table: compute on the fly
            pos = sinusoid_table(offset + T, self.cfg.d_model, self.cfg.positions)[offset:].to(tokens.device)
        x = table(tokens) * math.sqrt(self.cfg.d_model) + pos
        return dropout(x, self.cfg.dropout, self.training, self.dropout_masks)

    @staticmethod
    def padding_bias(tokens):
        """(B, 1, 1, T) additive bias: -inf on padding keys."""
        bias = torch.zeros(tokens.shape, dtype=torch.float32, device=tokens.device)
        return bias.masked_fill(tokens == PAD_ID, NEG_INF)[:, None, None, :]

    @staticmethod
    def causal_bias(T: int, device=None):
        """(1, 1, T, T) additive bias: -inf above the diagonal."""
        return torch.full((T, T), NEG_INF, device=device).triu(1)[None, None]

    def encode(self, src, gates=None, return_attention=False):
        """src: (B, S) token ids -> memory (B, S, D) [, weights (L, B, H, S, S)]."""
        bias = self.padding_bias(src)
        g = self._gates("enc-self", gates)
        x, attn = self._embed(self.embed, src), []
        for i, layer in enumerate(self.encoder):
            x, w = layer(x, bias, g[i], return_attention)
            attn.append(w)
        x = self.enc_norm(x)
        return (x, torch.stack(attn)) if return_attention else x

    def decode(self, tgt_in, memory, src, gates=None, return_attention=False):
        """Teacher-forced decoder: tgt_in (B, T) -> hidden (B, T, D) [, dict of weights]."""
        self_bias = self.causal_bias(tgt_in.size(1), tgt_in.device) + self.padding_bias(tgt_in)
        cross_bias = self.padding_bias(src)
        gs, gc = self._gates("dec-self", gates), self._gates("dec-enc", gates)
        y, w_self, w_cross = self._embed(self.tgt_embed, tgt_in), [], []
        for i, layer in enumerate(self.decoder):
            y, ws, wc = layer(y, memory, self_bias, cross_bias, gs[i], gc[i], None, return_attention)
            w_self.append(ws); w_cross.append(wc)
        y = self.dec_norm(y)
        if return_attention:
            return y, {"dec-self": torch.stack(w_self), "dec-enc": torch.stack(w_cross)}
        return y

    def logits(self, hidden):
        """hidden (..., D) -> logits (..., V) through the (tied) output embedding."""
        return F.linear(hidden, self.tgt_embed.weight, self.out_bias)

    def forward(self, src, tgt_in, gates=None, return_attention=False, hidden_only=False):
        """src (B, S), tgt_in (B, T) -> logits (B, T, V) [, weights per kind (L, B, H, Tq, Tk)];
        `hidden_only`: the decoder's output states (B, T, D) instead of the logits."""
        if hidden_only:
            return self.decode(tgt_in, self.encode(src, gates), src, gates)
        if return_attention:
            memory, enc_w = self.encode(src, gates, True)
            hidden, dec_w = self.decode(tgt_in, memory, src, gates, True)
            return self.logits(hidden), {"enc-self": enc_w, **dec_w}
        return self.logits(self.decode(tgt_in, self.encode(src, gates), src, gates))

    # -- incremental decoding -----------------------------------------------------------------
    def decode_step(self, token, memory, src_bias, cache: list[dict], step: int, gates=None):
        """One decoder step with a key/value cache.

        token: (B, 1) the previous output; memory: (B, S, D); src_bias: (B, 1, 1, S);
        cache: one dict per decoder layer (filled in place). Returns logits (B, V).
        """
        gs, gc = self._gates("dec-self", gates), self._gates("dec-enc", gates)
        y = self._embed(self.tgt_embed, token, offset=step)
        for i, layer in enumerate(self.decoder):
            y, _, _ = layer(y, memory, None, src_bias, gs[i], gc[i], cache[i])
        return self.logits(self.dec_norm(y[:, -1]))

    @staticmethod
    def reorder_cache(cache: list[dict], index) -> None:
        """Select rows `index` (beam search) of every cached key/value tensor, in place."""
        for layer in cache:
            for part in layer.values():
                for key in part:
                    part[key] = part[key].index_select(0, index)

    def fingerprint(self) -> str:
        """12 hex digits of a hash over the state dict (weights and head masks): which model a
        cached result was computed from."""
        h = hashlib.sha1()
        for name, t in sorted(self.state_dict().items()):
            h.update(name.encode())
            h.update(t.detach().float().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()[:12]

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

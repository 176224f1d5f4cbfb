"""Pretrained import: a `transformers` `MarianMTModel` (the opus-mt family, e.g.
Helsinki-NLP/opus-mt-en-ru) as a headlib `Transformer`, so that the study can run on a real
Transformer-base (the `base` profile's scale) on a machine with internet and a GPU.

Marian is a post-LN Transformer with swish feed-forward layers, embeddings scaled by sqrt(d_model),
sinusoidal positions laid out as all sines then all cosines, one shared embedding and a final
logits bias; headlib's model has each of these as a config option. Token ids differ: headlib
reserves 0-3 for PAD, BOS, EOS and UNK, while Marian starts decoding from its PAD and puts its
specials elsewhere. `MarianIds` maps between the two: headlib id i is Marian id `to_marian[i]`
(BOS and PAD both map to Marian's PAD, whose embedding starts Marian's decoder).

Tokenization stays Marian's (its SentencePiece models): `MarianTokenizerAdapter` gives a
`MarianTokenizer` headlib's tokenizer interface (that of `headlib.data.bpe.BPE`: encode_batch, decode,
pieces, offsets) in headlib ids, so translation, BLEU and the head analyses run unchanged.

`load_pretrained(source)` does all of it for a Hugging Face model id or a directory written by
`save_pretrained`, and says in one line (`HubError`) what is wrong: no network and no local copy,
an architecture the import does not support, a tokenizer that does not round-trip the pair's text.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch

from headlib.config import ModelConfig
from headlib.data.bpe import UNK_ID
from headlib.nn.model import Transformer


@dataclass(frozen=True)
class MarianIds:
    to_marian: torch.Tensor        # (V + 1,) Marian id of each headlib id
    from_marian_table: torch.Tensor  # (V,) headlib id of each Marian id (PAD -> headlib PAD)

    @classmethod
    def build(cls, vocab_size: int, pad: int, eos: int, unk: int) -> MarianIds:
        if len({pad, eos, unk}) != 3:
            raise ValueError(f"Marian pad, eos and unk ids must differ, got {pad}, {eos}, {unk}")
        rest = [i for i in range(vocab_size) if i not in (pad, eos, unk)]
        to_marian = torch.tensor([pad, pad, eos, unk, *rest])
        table = torch.empty(vocab_size, dtype=torch.long)
        table[to_marian[1:]] = torch.arange(1, vocab_size + 1)
        table[pad] = 0
        return cls(to_marian, table)

    def from_marian(self, ids: torch.Tensor) -> torch.Tensor:
        return self.from_marian_table[ids]

    def to_marian_ids(self, ids: torch.Tensor) -> torch.Tensor:
        return self.to_marian[ids]


def marian_config(config) -> ModelConfig:
    """The headlib `ModelConfig` of a `MarianConfig`; unsupported variants are errors."""
    problems = []
    if getattr(config, "normalize_before", False):
        problems.append("pre-LN (normalize_before)")
    if not config.scale_embedding:
        problems.append("unscaled embeddings (scale_embedding=False)")
    if config.activation_function not in ("swish", "silu", "relu"):
        problems.append(f"activation {config.activation_function!r}")
    if config.encoder_attention_heads != config.decoder_attention_heads:
        problems.append("different head counts in encoder and decoder")
    if getattr(config, "share_encoder_decoder_embeddings", True) is False:
        problems.append("separate encoder and decoder embeddings")
    if problems:
        raise ValueError("this Marian model cannot be imported: " + "; ".join(problems))
    return ModelConfig(d_model=config.d_model, n_heads=config.encoder_attention_heads,
                       d_ff=config.encoder_ffn_dim, enc_layers=config.encoder_layers,
                       dec_layers=config.decoder_layers, dropout=config.dropout,
                       attn_dropout=config.attention_dropout, norm="post",
                       activation="relu" if config.activation_function == "relu" else "swish",
                       tied_embeddings=True, max_positions=config.max_position_embeddings, positions="halves")


def _copy_attention(dst, src) -> None:
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        getattr(dst, name).load_state_dict(getattr(src, name).state_dict())


@torch.no_grad()
def from_marian(marian, unk_id: int = 1) -> tuple[Transformer, MarianIds]:
    """headlib's model with the weights of `marian` (a `MarianMTModel`), in eval mode, and the id
    map. `unk_id` is the tokenizer's unknown-token id (1 in the opus-mt models)."""
    cfg = marian.config
    ids = MarianIds.build(cfg.vocab_size, cfg.pad_token_id, cfg.eos_token_id, unk_id)
    if cfg.decoder_start_token_id != cfg.pad_token_id:
        raise ValueError("Marian models start decoding from PAD; this one does not")
    model = Transformer(marian_config(cfg), cfg.vocab_size + 1)
    core = marian.model
    model.embed.weight.copy_(core.shared.weight[ids.to_marian])
    model.out_bias.copy_(marian.final_logits_bias[0, ids.to_marian])
    for ours, theirs in zip(model.encoder, core.encoder.layers):
        _copy_attention(ours.self_attn, theirs.self_attn)
        ours.sub_attn.norm.load_state_dict(theirs.self_attn_layer_norm.state_dict())
        ours.ffn.fc1.load_state_dict(theirs.fc1.state_dict())
        ours.ffn.fc2.load_state_dict(theirs.fc2.state_dict())
        ours.sub_ffn.norm.load_state_dict(theirs.final_layer_norm.state_dict())
    for ours, theirs in zip(model.decoder, core.decoder.layers):
        _copy_attention(ours.self_attn, theirs.self_attn)
        _copy_attention(ours.cross_attn, theirs.encoder_attn)
        ours.sub_self.norm.load_state_dict(theirs.self_attn_layer_norm.state_dict())
        ours.sub_cross.norm.load_state_dict(theirs.encoder_attn_layer_norm.state_dict())
        ours.ffn.fc1.load_state_dict(theirs.fc1.state_dict())
        ours.ffn.fc2.load_state_dict(theirs.fc2.state_dict())
        ours.sub_ffn.norm.load_state_dict(theirs.final_layer_norm.state_dict())
    return model.eval(), ids


def piece_offsets(text: str, pieces: list[str], space: str = "\u2581") -> list[tuple[int, int]]:
    """Character span of each SentencePiece piece in `text`, found left to right (a piece that
    normalisation changed gets an empty span at the cursor)."""
    spans, cursor = [], 0
    for piece in pieces:
        body = piece.lstrip(space)
        while cursor < len(text) and text[cursor].isspace() and body:
            cursor += 1
        at = text.find(body, cursor) if body else -1
        if body and at == cursor:
            spans.append((at, at + len(body)))
            cursor = at + len(body)
        else:
            spans.append((cursor, cursor))
    return spans


class MarianTokenizerAdapter:
    """A `MarianTokenizer` behind headlib's tokenizer interface, in headlib ids: sources are encoded
    with the source SentencePiece model, outputs decoded with the target one."""

    def __init__(self, tokenizer, ids: MarianIds):
        self.tok, self.ids = tokenizer, ids

    @property
    def vocab_size(self) -> int:
        return len(self.ids.to_marian)

    def encode_batch(self, texts) -> list[list[int]]:
        marian = self.tok(list(texts), add_special_tokens=False)["input_ids"]
        return [self.ids.from_marian(torch.tensor(m, dtype=torch.long)).tolist() for m in marian]

    def encode_targets(self, texts) -> list[list[int]]:
        """Target-side texts with the target SentencePiece model (teacher forcing, fine-tuning)."""
        marian = self.tok(text_target=list(texts), add_special_tokens=False)["input_ids"]
        return [self.ids.from_marian(torch.tensor(m, dtype=torch.long)).tolist() for m in marian]

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def pieces(self, text: str) -> list[str]:
        return self.tok.tokenize(text)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return piece_offsets(text, self.pieces(text))

    def decode(self, ids) -> str:
        ids = [int(i) for i in ids if int(i) >= UNK_ID]     # drop PAD, BOS, EOS; keep UNK and pieces
        return self.tok.decode(self.ids.to_marian_ids(torch.tensor(ids, dtype=torch.long)).tolist(),
                               skip_special_tokens=True)

    def decode_batch(self, batch) -> list[str]:
        return [self.decode(ids) for ids in batch]


class HubError(RuntimeError):
    """A pretrained model that cannot be used, in one line naming it and what to do."""


ROUND_TRIP = 0.9   # the share of the pair's sentences a usable tokenizer gives back (after NFKC)


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def load_pretrained(source: str, check_texts=()) -> tuple[Transformer, MarianTokenizerAdapter]:
    """The `MarianMTModel` at `source` (a Hugging Face id, downloaded or from the local cache, or a
    directory written by `save_pretrained`) as a headlib model in eval mode, with its tokenizer in
    headlib ids. With `check_texts`, the tokenizer must give back `ROUND_TRIP` of them (compared
    after Unicode NFKC normalisation, which Marian's SentencePiece models apply)."""
    from transformers import AutoConfig, MarianMTModel, MarianTokenizer
    looks_local = source.startswith((".", "/", "~")) or Path(source).expanduser().exists()
    if looks_local and not Path(source).expanduser().is_dir():
        raise HubError(f"{source}: no such directory (a model saved with save_pretrained, or a Hugging Face id)")
    try:
        config = AutoConfig.from_pretrained(source)
    except OSError as e:
        raise HubError(f"{source}: no local copy and no network to download it ({_first_line(e)}); on a machine "
                       f"with internet run `huggingface-cli download {source} --local-dir DIR`, then pass DIR "
                       "(HEADLIB_PRETRAINED=DIR)") from None
    if config.model_type != "marian":
        raise HubError(f"{source}: a {config.model_type!r} model; the import supports Marian (opus-mt) models only")
    tokenizer = MarianTokenizer.from_pretrained(source)
    try:
        model, ids = from_marian(MarianMTModel.from_pretrained(source).eval(), unk_id=tokenizer.unk_token_id)
    except ValueError as e:
        raise HubError(f"{source}: {e}") from None
    adapter = MarianTokenizerAdapter(tokenizer, ids)
    texts = list(check_texts)
    if texts:
        norm = lambda t: " ".join(unicodedata.normalize("NFKC", t).split())
        back = map(adapter.decode, adapter.encode_batch(texts))
        lost = [(text, got) for text, got in zip(texts, back) if norm(got) != norm(text)]
        if len(lost) > (1 - ROUND_TRIP) * len(texts):
            raise HubError(f"{source}: its tokenizer does not give back {len(lost)} of {len(texts)} sentences of the "
                           f"pair (e.g. {lost[0][0]!r} -> {lost[0][1]!r}): is it the model of this language pair?")
    return model, adapter


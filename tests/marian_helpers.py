"""A tiny MarianMTModel and its MarianTokenizer, built here without a download (random weights,
SentencePiece models trained on the given sentences), for the pretrained-import tests."""
from __future__ import annotations

import json

import torch
import transformers  # pinned in requirements.txt: a missing one fails here rather than skipping the test


def marian(vocab_size=60):
    config = transformers.MarianConfig(
        vocab_size=vocab_size, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        pad_token_id=vocab_size - 1, eos_token_id=0, decoder_start_token_id=vocab_size - 1, activation_function="swish",
        scale_embedding=True, share_encoder_decoder_embeddings=True)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():   # non-zero biases everywhere, so that every mapped tensor matters
        model.final_logits_bias.uniform_(-1, 1)
        for name, p in model.named_parameters():
            if name.endswith("bias") or "layer_norm" in name:
                p.add_(torch.rand_like(p) * 0.2 - 0.1)
    return model


SENTENCES = ["a small dog runs on the grass .", "two men play music in the street .",
             "a woman in a red coat is reading a book .", "children are playing with a ball near the water ."]


def marian_tokenizer(tmp_path, sentences=SENTENCES * 20, vocab_size=40):
    """A MarianTokenizer over tiny SentencePiece models trained here (no download)."""
    import sentencepiece as spm
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_prefix=str(tmp_path / "sp"),
                                   vocab_size=vocab_size, character_coverage=1.0, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    tok = transformers.MarianTokenizer(source_spm=str(tmp_path / "sp.model"), target_spm=str(tmp_path / "sp.model"),
                                       vocab=str(tmp_path / "vocab.json"))
    return tok, vocab


def saved_marian(tmp_path, sentences=SENTENCES * 20, vocab_size=40, **config):
    """A tiny MarianMTModel and its MarianTokenizer saved as `save_pretrained` does (no download)."""
    (tmp_path / "spm").mkdir(parents=True)
    tok, vocab = marian_tokenizer(tmp_path / "spm", sentences, vocab_size)
    theirs = marian(len(vocab))
    for key, value in config.items():
        setattr(theirs.config, key, value)
    theirs.config.pad_token_id = theirs.config.decoder_start_token_id = vocab["<pad>"]
    theirs.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    return tmp_path / "model", theirs, tok

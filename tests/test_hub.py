"""Pretrained import: a randomly initialised MarianMTModel (no download) and its headlib copy
give the same logits, token for token, and the same greedy translation."""
import pytest
import torch
import transformers  # pinned in requirements.txt: a missing one fails here rather than skipping the test
from marian_helpers import SENTENCES, marian, marian_tokenizer, saved_marian

from headlib.nn.decode import greedy
from headlib.nn.hub import MarianIds, from_marian


def test_id_map_is_a_bijection_with_pad_twice():
    ids = MarianIds.build(10, pad=9, eos=0, unk=1)
    assert ids.to_marian.tolist()[:4] == [9, 9, 0, 1]
    assert sorted(ids.to_marian.tolist()[1:]) == list(range(10))
    assert torch.equal(ids.to_marian_ids(ids.from_marian(torch.arange(10)))[1:], torch.arange(10)[1:])
    with pytest.raises(ValueError, match="must differ"):
        MarianIds.build(10, pad=1, eos=0, unk=1)


def test_imported_model_computes_marian_logits():
    theirs = marian()
    ours, ids = from_marian(theirs)
    src = torch.tensor([[5, 7, 9, 11, 0, 59, 59], [3, 4, 8, 12, 13, 21, 0]])       # Marian ids, EOS 0, PAD 59
    tgt = torch.tensor([[59, 6, 10, 14, 15], [59, 22, 23, 24, 25]])                # decoder input starts with PAD
    with torch.no_grad():
        expected = theirs(input_ids=src, attention_mask=src.ne(59).long(), decoder_input_ids=tgt).logits
        got = ours(ids.from_marian(src), torch.cat([torch.ones(2, 1, dtype=torch.long),   # headlib BOS
                                                    ids.from_marian(tgt[:, 1:])], 1))
    torch.testing.assert_close(got[..., 1:], expected[..., ids.to_marian[1:]], atol=1e-5, rtol=0)
    greedy_ours = [ids.to_marian_ids(torch.tensor(h)).tolist() for h in greedy(ours, ids.from_marian(src), max_len=6)]
    with torch.no_grad():
        out = theirs.generate(input_ids=src, attention_mask=src.ne(59).long(), max_new_tokens=6, num_beams=1,
                              do_sample=False, bad_words_ids=[[59]], forced_eos_token_id=None)
    theirs_ids = [[t for t in row.tolist()[1:] if t != 59] for row in out]
    assert greedy_ours == [row[:row.index(0)] if 0 in row else row for row in theirs_ids]


def test_unsupported_marian_variants_are_named():
    from headlib.nn.hub import marian_config
    config = transformers.MarianConfig(vocab_size=60, d_model=32, scale_embedding=False, activation_function="gelu")
    with pytest.raises(ValueError, match="unscaled embeddings.*activation 'gelu'"):
        marian_config(config)


def test_an_unknown_position_layout_is_refused():
    from headlib.config import get_config
    with pytest.raises(ValueError, match="model.positions"):
        get_config("cpu", ["model.positions=spiral"])


def test_tokenizer_adapter_round_trips_and_translates_like_marian(tmp_path, monkeypatch):
    from headlib.nn.decode import translate
    from headlib.nn.hub import MarianTokenizerAdapter
    tok, vocab = marian_tokenizer(tmp_path)
    theirs = marian(len(vocab))
    ours, ids = from_marian(theirs, unk_id=vocab["<unk>"])
    adapter = MarianTokenizerAdapter(tok, ids)
    encoded = adapter.encode_batch(SENTENCES)
    assert [ids.to_marian_ids(torch.tensor(e)).tolist() for e in encoded] == \
        tok(SENTENCES, add_special_tokens=False)["input_ids"]
    assert [adapter.decode(e) for e in encoded] == SENTENCES
    for text in SENTENCES:
        spans = adapter.offsets(text)
        assert [text[a:b] for a, b in spans] == [p.lstrip("\u2581") for p in adapter.pieces(text)]
    batch = tok(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = theirs.generate(**batch, max_new_tokens=8, num_beams=1, do_sample=False,
                              bad_words_ids=[[vocab["<pad>"]]], forced_eos_token_id=None)
    expected = tok.batch_decode(out, skip_special_tokens=True)
    monkeypatch.setattr("headlib.nn.decode.max_length", lambda src, model: 8)     # generate's max_new_tokens
    assert translate(ours, adapter, SENTENCES) == expected


def test_a_saved_marian_model_loads_with_marians_logits_and_greedy_output(tmp_path):
    from headlib.nn.decode import translate
    from headlib.nn.hub import load_pretrained
    path, theirs, tok = saved_marian(tmp_path)
    ours, adapter = load_pretrained(str(path), check_texts=SENTENCES)
    batch = tok(SENTENCES, return_tensors="pt", padding=True)
    start = torch.full((len(SENTENCES), 1), theirs.config.decoder_start_token_id)
    with torch.no_grad():
        expected = theirs(**batch, decoder_input_ids=start).logits[:, -1]              # (B, V) Marian ids
        src = adapter.ids.from_marian(batch["input_ids"])
        got = ours(src, torch.ones(len(SENTENCES), 1, dtype=torch.long))[:, -1]       # (B, V + 1) headlib ids
    torch.testing.assert_close(got[:, 1:], expected[:, adapter.ids.to_marian[1:]], atol=1e-5, rtol=0)
    with torch.no_grad():
        out = theirs.generate(**batch, max_new_tokens=8, num_beams=1, do_sample=False,
                              bad_words_ids=[[theirs.config.pad_token_id]], forced_eos_token_id=None)
    import headlib.nn.decode as decode
    original, decode.max_length = decode.max_length, lambda src, model: 8          # generate's max_new_tokens
    try:
        assert translate(ours, adapter, SENTENCES) == tok.batch_decode(out, skip_special_tokens=True)
    finally:
        decode.max_length = original


def test_each_pretrained_failure_is_one_line_naming_the_model(tmp_path, monkeypatch):
    import huggingface_hub

    from headlib.nn.hub import HubError, load_pretrained
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)    # as on a machine without network
    with pytest.raises(HubError, match=r"^Helsinki-NLP/opus-mt-en-xx: no local copy and no network .*"
                                       r"huggingface-cli download Helsinki-NLP/opus-mt-en-xx .*HEADLIB_PRETRAINED=DIR"):
        load_pretrained("Helsinki-NLP/opus-mt-en-xx")
    with pytest.raises(HubError, match=r"nowhere: no such directory"):
        load_pretrained(str(tmp_path / "nowhere"))
    transformers.BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=8).save_pretrained(tmp_path / "bert")
    with pytest.raises(HubError, match=r"bert: a 'bert' model; the import supports Marian"):
        load_pretrained(str(tmp_path / "bert"))
    path, _, _ = saved_marian(tmp_path / "preln", normalize_before=True)
    with pytest.raises(HubError, match=r"preln/model: this Marian model cannot be imported: pre-LN"):
        load_pretrained(str(path))
    path, _, _ = saved_marian(tmp_path / "en")
    with pytest.raises(HubError, match=r"does not give back 3 of 3 sentences of the pair .*this language pair"):
        load_pretrained(str(path), check_texts=["Собака бежит.", "Дети играют.", "Жёлтый дом."])


def test_the_pretrained_profile_imports_the_model_and_scores_it_as_a_trained_run(tmp_path, monkeypatch):
    """The pretrained profile through `trained_model`, on a tiny Marian model whose SentencePiece
    tokenizer was trained on the pair's own sentences: imported (no training), scored on every test
    set, and read back with Marian's logits; another source is another run."""
    from headlib.data.corpora import load_split, test_sets
    from headlib.train import run_dir, trained_model
    train = load_split("en-de", "train").head(3000)
    path, theirs, tok = saved_marian(tmp_path, [*train.src, *train.tgt], vocab_size=300)
    monkeypatch.setenv("HEADLIB_PRETRAINED", str(path))
    limits = ("data.dev_limit=20", "data.test_limit=10", "train.tune_len_alpha=(0.6,1.0)", "train.beam=2")
    model, tokenizer, results = trained_model("pretrained", "en-de", 1, limits)
    assert results["source"] == str(path) and results["steps"] == 0 and results["stopped"] == "imported"
    assert set(results["test"]) == set(test_sets("en-de")) and results["test"]["test_2016_flickr"]["beam"]["n"] == 10
    assert results["parameters"] == model.num_parameters()
    assert (results["layers"], results["heads"], results["vocabulary"]) == ({"encoder": 2, "decoder": 2}, 4, len(tok))
    assert results["fingerprint"] == model.fingerprint() and set(results["dev_beam_by_alpha"]) == {"0.6", "1.0"}
    batch = tok(list(train.src[:3]), return_tensors="pt", padding=True)
    with torch.no_grad():
        expected = theirs(**batch, decoder_input_ids=torch.full((3, 1), theirs.config.pad_token_id)).logits[:, -1]
        got = model(tokenizer.ids.from_marian(batch["input_ids"]), torch.ones(3, 1, dtype=torch.long))[:, -1]
    torch.testing.assert_close(got[:, 1:], expected[:, tokenizer.ids.to_marian[1:]], atol=1e-5, rtol=0)
    assert tokenizer.encode_batch(train.src[:5]) == trained_model("pretrained", "en-de", 1, limits)[1].encode_batch(train.src[:5])
    from headlib.config import get_config
    here = run_dir(get_config("pretrained", limits))
    assert (here / "final.pt").is_file() and (here / "tokenizer").is_dir()
    monkeypatch.setenv("HEADLIB_PRETRAINED", str(tmp_path / "another"))
    assert run_dir(get_config("pretrained", limits)) != here

import gzip
import os
import random
import re
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from headlib.data.batching import Encoded, batch_stream, collate, epoch_order, make_batches
from headlib.data.bpe import BOS_ID, EOS_ID, PAD_ID, cached_bpe, normalize
from headlib.data.corpora import DataError, data_root, load_split, read_lines, read_parallel, read_tsv
from headlib.files import atomic_write, write_json, write_text

# -- the corpora ------------------------------------------------------------------------------

def _raw_lines(path: Path) -> list[str]:
    """An independent reader: the file's lines as Python splits them."""
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8").split("\n")[:-1]


@pytest.mark.parametrize("pair", ["en-de", "en-fr"])
@pytest.mark.parametrize("split,n", [("train", 29000), ("dev", 1014), ("test_2016_flickr", 1000)])
def test_multi30k_sizes_and_content(pair, split, n):
    c = load_split(pair, split)
    assert len(c) == len(c.src) == len(c.tgt) == n
    name = {"dev": "val"}.get(split, split)
    d = data_root() / "multi30k"
    assert list(c.src) == _raw_lines(d / f"{name}.en.gz")
    assert list(c.tgt) == _raw_lines(d / f"{name}.{pair[3:]}.gz")


def _pool():
    rows = [line.split("\t") for line in _raw_lines(data_root() / "enru" / "train.tsv")]
    return [tuple(r) for r in rows]


def test_enru_heldout_is_carved_from_train():
    train, held = load_split("en-ru", "train"), load_split("en-ru", "tatoeba-heldout")
    pool = _pool()
    assert len(pool) == 57285
    assert len(held) == 1000 and len(train) == 57285 - 1000
    assert all(o.startswith("tatoeba") for o in held.origin)
    rows = lambda c: Counter(zip(c.origin, c.src, c.tgt))
    # train and heldout partition the pool exactly (as multisets of (origin, en, ru) rows)
    assert rows(train) + rows(held) == Counter(pool)
    n_tatoeba = sum(o.startswith("tatoeba") for o, _, _ in pool)
    assert n_tatoeba == 19424
    assert sum(o.startswith("tatoeba") for o in train.origin) == n_tatoeba - 1000
    # deterministic across calls
    assert load_split("en-ru", "tatoeba-heldout") == held


def test_enru_test_sets():
    news, flores = load_split("en-ru", "newstest2019-2020"), load_split("en-ru", "flores-devtest")
    assert len(news) == 3999 and len(flores) == 1012
    assert all(o.startswith(("newstest2019", "newstest2020")) for o in news.origin)
    assert all(o.startswith("flores") for o in flores.origin)
    assert len(load_split("en-ru", "dev")) == 3000


def test_unknown_split_and_pair():
    with pytest.raises(DataError, match="test_2016_flickr"):
        load_split("en-de", "newstest2019-2020")
    with pytest.raises(DataError, match="flores-devtest"):
        load_split("en-ru", "test_2016_flickr")
    with pytest.raises(DataError, match="en-de"):
        load_split("en-xx", "train")


# -- bad input ----------------------------------------------------------------------------------

def test_line_counts_differ_names_both_files(tmp_path):
    a, b = tmp_path / "a.en", tmp_path / "b.de"
    a.write_text("one\ntwo\nthree\n", encoding="utf-8")
    b.write_text("eins\nzwei\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_parallel(a, b)
    assert str(e.value) == f"{a} has 3 lines but {b} has 2: files must be line-aligned"


@pytest.mark.parametrize("gz", [False, True])
def test_invalid_utf8_names_file_and_line(tmp_path, gz):
    data = "fine\nalso fine\n".encode() + b"bad \xff\xfe byte\n" + b"after\n"
    path = tmp_path / ("x.txt.gz" if gz else "x.txt")
    path.write_bytes(gzip.compress(data) if gz else data)
    with pytest.raises(DataError, match=re.escape(f"{path}:3: invalid UTF-8")):
        read_lines(path)


@pytest.mark.parametrize("content,line", [("a\n\nc\n", 2), ("a\nb\n   \n", 3), ("a\nb\n\n", 3)])
def test_empty_line_names_file_and_line(tmp_path, content, line):
    path = tmp_path / "x.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}:{line}: empty")):
        read_lines(path)


@pytest.mark.parametrize("row", ["tatoeba\tonly two", "o\ta\tb\textra", "o\t\tпривет", "o\thello\t  "])
def test_malformed_tsv_row_names_file_and_line(tmp_path, row):
    path = tmp_path / "pool.tsv"
    path.write_text("tatoeba\tHi.\tПривет.\nnews\tA b.\tА б.\n" + row + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}:3: expected origin<TAB>source<TAB>target")):
        read_tsv(path)


def test_good_tsv(tmp_path):
    path = tmp_path / "pool.tsv"
    path.write_text("tatoeba\tHi.\tПривет.\r\nnews\tA b.\tА б.\n", encoding="utf-8")
    c = read_tsv(path)
    assert c.origin == ("tatoeba", "news") and c.src == ("Hi.", "A b.") and c.tgt == ("Привет.", "А б.")
    assert c.where(lambda o: o == "news").src == ("A b.",)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=re.escape(f"{tmp_path / 'nope.txt'}: no such file")):
        read_lines(tmp_path / "nope.txt")
    with pytest.raises(DataError, match="no such file"):
        load_split("en-de", "train", root=tmp_path)


def test_missing_data_dir_is_a_clear_error(tmp_path, monkeypatch):
    missing = tmp_path / "no-data-here"
    monkeypatch.setenv("HEADLIB_DATA", str(missing))
    with pytest.raises(DataError) as e:
        load_split("en-de", "dev")
    assert "HEADLIB_DATA" in str(e.value) and str(missing) in str(e.value)


def test_headlib_data_is_honoured(tmp_path, monkeypatch):
    (tmp_path / "multi30k").mkdir()
    for lang, lines in (("en", ["A dog.", "Two cats."]), ("de", ["Ein Hund.", "Zwei Katzen."])):
        (tmp_path / "multi30k" / f"val.{lang}.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    monkeypatch.setenv("HEADLIB_DATA", str(tmp_path))
    c = load_split("en-de", "dev")
    assert c.src == ("A dog.", "Two cats.") and c.tgt == ("Ein Hund.", "Zwei Katzen.")


# -- atomic writes ------------------------------------------------------------------------------

def test_atomic_write_failure_keeps_old_file(tmp_path):
    path = tmp_path / "results.json"
    write_json(path, {"bleu": 1.0})
    before = path.read_bytes()

    def half_write(tmp):
        tmp.write_text('{"bleu": 2', encoding="utf-8")
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError, match="crash mid-write"):
        atomic_write(path, half_write)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_atomic_write_success_and_new_dirs(tmp_path):
    path = tmp_path / "a" / "b" / "x.txt"
    write_text(path, "héllo\n")
    write_text(path, "second\n")
    assert path.read_text(encoding="utf-8") == "second\n"
    assert os.listdir(path.parent) == ["x.txt"]


# -- BPE ----------------------------------------------------------------------------------------

def test_bpe_round_trip_multi30k_val():
    train = load_split("en-de", "train")
    bpe = cached_bpe(train.src, train.tgt, 2000)
    val = load_split("en-de", "dev")
    lines = [*val.src, *val.tgt]
    assert len(lines) == 2028
    bad = [s for s in lines if bpe.decode(bpe.encode(s)) != unicodedata.normalize("NFC", s)]
    assert bad == []
    # pieces really are subwords (not one piece per character) and specials are never produced
    ids = bpe.encode_batch(lines)
    assert sum(map(len, ids)) < 0.5 * sum(map(len, lines))
    assert min(min(i) for i in ids) >= 3


def test_bpe_round_trip_enru_sample():
    train = load_split("en-ru", "train")
    bpe = cached_bpe(train.src, train.tgt, 2000)
    dev = load_split("en-ru", "dev")
    sample = random.Random(0).sample(range(len(dev)), 300)
    lines = [s for i in sample for s in (dev.src[i], dev.tgt[i])]
    alphabet = set("".join(train.src) + "".join(train.tgt))
    covered = [s for s in lines if set(normalize(s)) <= alphabet]
    assert len(covered) >= 0.98 * len(lines)   # characters never seen in training become <unk>
    assert any(any("\u0400" <= ch <= "\u04ff" for ch in s) for s in covered)  # Cyrillic is in
    assert [s for s in covered if bpe.decode(bpe.encode(s)) != normalize(s)] == []


@pytest.mark.parametrize("text", ["a  b", "a ", "two  spaces   inside", "Cafe\u0301 au lait",
                                  "tab\there", "Ä ö\u00a0ü ß"])
def test_bpe_round_trip_spaces_and_nfc(text):
    train = load_split("en-de", "train")
    bpe = cached_bpe(train.src, train.tgt, 2000)
    assert bpe.decode(bpe.encode(text)) == unicodedata.normalize("NFC", text)


def test_cached_bpe_is_reused(tmp_path):
    train = load_split("en-de", "train").head(300)
    a = cached_bpe(train.src, train.tgt, 300, cache_dir=tmp_path)
    files = list(tmp_path.iterdir())
    assert len(files) == 1
    mtime = files[0].stat().st_mtime_ns
    b = cached_bpe(train.src, train.tgt, 300, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == files and files[0].stat().st_mtime_ns == mtime
    assert a.tok.to_str() == b.tok.to_str()
    # other inputs or settings -> another cache entry
    cached_bpe(train.src, train.tgt[:-1] + ("changed",), 300, cache_dir=tmp_path)
    cached_bpe(train.src, train.tgt, 280, cache_dir=tmp_path)
    assert len(list(tmp_path.iterdir())) == 3


def test_cached_bpe_default_dir_is_under_artifacts(artifacts_tmp):
    train = load_split("en-de", "train").head(200)
    cached_bpe(train.src, train.tgt, 250)
    assert list((artifacts_tmp / "bpe").glob("bpe-250-*.json"))


# -- batching -----------------------------------------------------------------------------------

def _toy(n=200, seed=0):
    rng = random.Random(seed)
    return Encoded([[rng.randrange(4, 50) for _ in range(rng.randint(1, 30))] for _ in range(n)],
                   [[rng.randrange(4, 50) for _ in range(rng.randint(1, 30))] for _ in range(n)])


def test_make_batches_covers_everything_within_the_token_cap():
    data, cap = _toy(), 120
    batches = make_batches(data, cap)
    assert sorted(i for b in batches for i in b) == list(range(len(data)))
    size = lambda i: max(len(data.src[i]), len(data.tgt[i])) + 1     # the longer side + EOS/BOS
    for b in batches:
        padded = len(b) * max(map(size, b))
        assert padded <= cap or len(b) == 1


def test_make_batches_packs_greedily_in_length_order():
    """The batches cut the pairs sorted by (target length, source length) into consecutive runs,
    each cut greedy: a batch ends only where its next pair would take its padded size (rows x
    longest side) over the cap. So the batches are full, not one pair each."""
    data, cap = _toy(), 120
    batches = make_batches(data, cap)
    order = [i for b in batches for i in b]
    key = lambda i: (len(data.tgt[i]), len(data.src[i]))
    assert all(key(a) <= key(b) for a, b in zip(order, order[1:]))
    size = lambda i: max(len(data.src[i]), len(data.tgt[i])) + 1
    for b, nxt in zip(batches, batches[1:]):
        assert (len(b) + 1) * max(map(size, b + nxt[:1])) > cap, (b, nxt[0])
    assert sum(len(b) > 1 for b in batches) > len(batches) / 2
    assert len(batches) < len(data) / 2
    # a batch may fill the cap exactly: ten pairs of 9 + 1 tokens a side, cap 40 -> 4 + 4 + 2 rows
    even = Encoded([[5] * 9] * 10, [[6] * 9] * 10)
    assert [len(b) for b in make_batches(even, 40)] == [4, 4, 2]


def test_epoch_order_is_a_seeded_permutation():
    a = epoch_order(50, seed=1, epoch=0)
    assert sorted(a) == list(range(50))
    assert a == epoch_order(50, seed=1, epoch=0)
    assert a != epoch_order(50, seed=1, epoch=1) and a != epoch_order(50, seed=2, epoch=0)


def test_collate_adds_bos_eos_and_padding():
    data = Encoded([[5, 6, 7], [8]], [[9], [10, 11, 12, 13]])
    src, tgt_in, tgt_out = collate(data, [0, 1])
    assert src.tolist() == [[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]
    assert tgt_in.tolist() == [[BOS_ID, 9, PAD_ID, PAD_ID, PAD_ID], [BOS_ID, 10, 11, 12, 13]]
    assert tgt_out.tolist() == [[9, EOS_ID, PAD_ID, PAD_ID, PAD_ID], [10, 11, 12, 13, EOS_ID]]


# -- local pairs (any corpus as line-aligned files, e.g. WMT) ----------------------------------

def test_local_pair_from_translation_records_trains_end_to_end(tmp_path, monkeypatch):
    """Rows shaped like a Hugging Face translation dataset become a pair that the smoke profile
    trains on, with its test set found by file name."""
    from headlib.config import get_config
    from headlib.data.corpora import test_sets, write_local_pair
    from headlib.train import train
    en = load_split("en-de", "train").head(300)
    records = [{"translation": {"en": s, "de": t}} for s, t in zip(en.src, en.tgt)]
    records.append({"translation": {"en": "a line\nbroken in two", "de": ""}})          # skipped
    assert write_local_pair(records, "en-de.wmt", "train", tmp_path) == {"pairs": 300, "skipped": 1}
    for name in ("dev", "newstest2014"):
        split = load_split("en-de", "val").head(20)
        write_local_pair(zip(split.src, split.tgt), "en-de.wmt", name, tmp_path)
    monkeypatch.setenv("HEADLIB_DATA", str(tmp_path))
    assert test_sets("en-de.wmt") == ("newstest2014",)
    assert load_split("en-de.wmt", "train").src == en.src
    results = train(get_config("smoke", ["train.max_steps=2", "train.eval_every=1"], pair="en-de.wmt"), progress=False)
    assert set(results["test"]) == {"newstest2014"}
    with pytest.raises(DataError, match="unknown split 'test'.*dev, newstest2014, train"):
        load_split("en-de.wmt", "test")
    with pytest.raises(ValueError, match="data.pair: unknown pair 'en-yy'.*pairs/en-yy"):
        get_config("smoke", pair="en-yy")


def test_batch_stream_reads_each_epoch_order_from_its_end():
    import itertools
    data = Encoded([[4 + i % 7] * (1 + i % 5) for i in range(60)], [[5] * (1 + i % 3) for i in range(60)])
    batches = make_batches(data, 16)
    key = lambda src: tuple(map(tuple, src.tolist()))
    by_src = {key(collate(data, b)[0]): i for i, b in enumerate(batches)}
    assert len(by_src) == len(batches) > 3
    seen = [by_src[key(src)] for src, _, _ in itertools.islice(batch_stream(data, 16, seed=3), 3 * len(batches))]
    assert seen == [i for epoch in range(3) for i in reversed(epoch_order(len(batches), 3, epoch))]

"""Released models (headlib.train.release): a smoke run released through the CLI, read back first by
every command and page, checked against its card, written atomically; and the book's pages
re-executed from the release in another folder give every glued value back (`book.verify`)."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import SMOKE_CLI_SET, run_cli

from headlib.train import release


@pytest.fixture
def released(smoke_run):
    """The smoke run released into artifacts/models/smoke/en-de/seed1, removed afterwards (other tests
    compare the CLI with the run's own final.pt)."""
    cfg, out = smoke_run
    proc = run_cli("release", "--profile", "smoke", *SMOKE_CLI_SET)
    path = release.release_dir("smoke", "en-de", 1)
    yield cfg, out, path, json.loads(proc.stdout)
    shutil.rmtree(path, ignore_errors=True)


def test_a_release_holds_weights_tokenizer_and_card_and_scores_its_own_weights(released):
    from headlib.train import load_model
    cfg, out, path, printed = released
    assert sorted(p.name for p in path.iterdir()) == ["README.md", "card.json", "model.safetensors", "tokenizer.json"]
    card = json.loads((path / "card.json").read_text())
    assert card["fingerprint"] == release.file_sha256(path / "model.safetensors")[:12] == printed["fingerprint"]
    assert card["release"]["dtype"] == "float16"          # the smoke model's BLEU does not move
    trained = json.loads((out / "results.json").read_text())
    assert card["training_copy"] == {"fingerprint": trained["fingerprint"], "test": trained["test"],
                                     "bleu_shift": release.bleu_shifts(card["test"], trained["test"])}
    assert card["run_dir"] == out.name and card["history"] == trained["history"]
    loaded = release.load_release(path)
    copy, _, _ = load_model(out / "final.pt")
    src = torch.tensor([[5, 6, 7, 8, 2]])
    tgt = torch.tensor([[1, 9, 10, 11]])
    with torch.no_grad():   # fp16 weights: the same function up to fp16 rounding
        torch.testing.assert_close(loaded.model(src, tgt), copy(src, tgt), atol=0.05, rtol=0.01)
    assert loaded.model.fingerprint() == card["release"]["loaded_fingerprint"]
    # the card's scores are the released weights' own
    rescored = release.score_tests(loaded.model, loaded.tokenizer, cfg, card["len_alpha"])
    assert {k: {m: v["bleu"] for m, v in t.items()} for k, t in rescored.items()} == \
        {k: {m: v["bleu"] for m, v in t.items()} for k, t in card["test"].items()}
    assert f"`{card['fingerprint']}`" in (path / "README.md").read_text()


def test_commands_and_pages_read_the_release_first(released, monkeypatch):
    from headlib.train.records import run_record
    from headlib.train import trained_model
    cfg, out, path, _ = released
    model, _, record = trained_model("smoke", "en-de", 1)
    card = release.read_card(path)
    assert record == card and model.fingerprint() == card["release"]["loaded_fingerprint"]
    assert run_record(cfg) == card
    proc = run_cli("translate", "--profile", "smoke", stdin="A dog runs .\n")
    assert f"release {path} (fingerprint {card['fingerprint']})" in proc.stderr
    monkeypatch.setenv("HEADLIB_RELEASES", "0")          # make study: the run, not the release
    assert trained_model("smoke", "en-de", 1)[2]["fingerprint"] == card["training_copy"]["fingerprint"]


def test_a_release_of_another_recipe_is_an_error_not_a_model(released):
    from headlib.config import get_config
    _, _, path, _ = released
    card = json.loads((path / "card.json").read_text())
    card["config"]["train"]["lr"] *= 2                                    # the code's recipe changed since
    (path / "card.json").write_text(json.dumps(card))
    with pytest.raises(release.ReleaseError, match="trained with another config or results version"):
        release.release_of(get_config("smoke"))


def test_changed_weights_are_refused_naming_the_file(released, tmp_path):
    _, _, path, _ = released
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (copy / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(release.ReleaseError, match="model.safetensors: SHA-256 .* the weights were changed"):
        release.load_release(copy)
    (copy / "card.json").unlink()
    with pytest.raises(release.ReleaseError, match="card.json: no release card"):
        release.load_release(copy)


def test_a_failed_release_leaves_the_previous_one_whole(released, monkeypatch):
    from headlib.train import load_model
    _, out, path, _ = released
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    model, bpe, _ = load_model(out / "final.pt")

    def boom(*args, **kw):
        raise RuntimeError("scoring failed")
    monkeypatch.setattr(release, "score_tests", boom)
    with pytest.raises(RuntimeError, match="scoring failed"):
        release.write_release(model, bpe, json.loads((out / "results.json").read_text()), path, log=print)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    assert [p.name for p in path.parent.iterdir()] == ["seed1"]          # no temporary folder left


def test_weights_that_move_bleu_are_released_in_fp32(smoke_run, tmp_path, monkeypatch):
    from headlib.train import load_model
    _, out = smoke_run
    model, bpe, _ = load_model(out / "final.pt")
    monkeypatch.setattr(release, "MAX_BLEU_SHIFT", -1.0)                 # every shift is too large
    card = release.write_release(model, bpe, json.loads((out / "results.json").read_text()), tmp_path / "r", log=print)
    assert card["release"]["dtype"] == "float32"
    loaded = release.load_release(tmp_path / "r").model
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))


def test_pages_re_executed_from_the_release_give_every_glued_value_back(released, tmp_path):
    """The smoke profile's Sec. 3-5 and Claims pages executed from the release, then `verify`: the
    same pages executed again in a scratch folder, every glued value equal; the committed tables are
    not written."""
    import headlib.book as book
    from headlib.book.verification import verification_record
    from headlib.settings import results_dir
    chosen = book.select(["03_data_and_models", "04_important_heads", "05_head_functions", "09_claims"])
    out = tmp_path / "book"
    book.run("smoke", ["en-de"], [1], out, progress=False, notebooks=chosen, toc=chosen, log=print, train=False)
    assert not book.check_models(out, require_release=True)
    manifest = json.loads(book.manifest_path(out / "executed/en-de/seed1/04_important_heads.ipynb").read_text())
    assert manifest["model"]["release"] and manifest["model"]["fingerprint"] == release.read_card(released[2])["fingerprint"]
    # a committed record computed from another model, or a page that reads one, is refused by check
    record = results_dir("smoke", "en-de", 1) / "pruning" / "point.json"
    record.parent.mkdir(exist_ok=True)
    record.write_text(json.dumps({"model": "0123456789ab", "lam": 0.1}))
    # (the smoke book of test_book.py, run before without a release, leaves records of the run's own model)
    problems = [p for p in book.check_records(out) if "point.json" in p]
    assert len(problems) == 1 and "point.json: computed from model 0123456789ab, not the release" in problems[0]
    record.unlink()
    path = book.manifest_path(out / "executed/en-de/seed1/05_head_functions.ipynb")
    good = path.read_text()
    path.write_text(json.dumps(json.loads(good) | {"model": {"run": "x", "fingerprint": "0123456789ab"}}))
    assert "05_head_functions: reads model x (0123456789ab), not release" in book.check_models(out)[0]
    path.write_text(good)
    tables = {p: p.read_bytes() for p in results_dir("smoke", "en-de", 1).glob("*.csv")}
    checks = book.verify("smoke", "en-de", 1, out, scratch=tmp_path / "scratch", log=print)
    print(book.report(checks))
    assert [c.page.split("/")[-1] for c in checks] == [nb.name for nb in chosen]
    assert all(c.values > 0 and c.ok for c in checks), book.report(checks)
    record = json.loads(json.dumps(verification_record(checks, [("en-de", 1)], 12.34)))   # as verify --json writes it
    assert record["values"] == record["equal"] == sum(c.values for c in checks) and record["seconds"] == 12.3
    assert [p["page"] for p in record["pages"]] == [c.page for c in checks] and "device" in record["machine"]
    assert {p: p.read_bytes() for p in results_dir("smoke", "en-de", 1).glob("*.csv")} == tables

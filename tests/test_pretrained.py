"""The pretrained profile's pages: Sec. 3-6 of the book run unchanged on an imported Marian model
(a tiny one saved with save_pretrained here, its SentencePiece tokenizer trained on Multi30k),
through the profile and the book runner, as they run on a trained one; Sec. 6 fine-tunes it with
gates on the pair's shared data and trains nothing from scratch."""
from __future__ import annotations

import json

import pytest
from marian_helpers import saved_marian

import headlib.book as book
from headlib.data.corpora import load_split

PAGES = ("03_data_and_models", "04_important_heads", "05_head_functions", "06_pruning_encoder",
         "07_pruning_all_attention")


@pytest.fixture(scope="module")
def pretrained_book(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("pretrained")
    train = load_split("en-de", "train").head(3000)
    path, _, _ = saved_marian(tmp, [*train.src, *train.tgt], vocab_size=300)
    mp.setenv("HEADLIB_PRETRAINED", str(path))
    out = tmp / "book"
    results = book.run("pretrained", ["en-de"], [1], out, progress=False, notebooks=book.select(PAGES))
    yield out, results, path
    mp.undo()


def test_sec3_to_5_run_on_the_imported_model(pretrained_book):
    out, results, path = pretrained_book
    assert [r.task.nb.name for r in results] == list(PAGES) and {r.status for r in results} == {"executed"}
    unit = out / "executed" / "en-de" / "seed1"
    manifests = {name: json.loads((unit / f"{name}.manifest.json").read_text()) for name in PAGES}
    fingerprints = {m["model"]["fingerprint"] for m in manifests.values()}
    assert len(fingerprints) == 1 and None not in fingerprints          # every page reads the one imported model
    assert book.check_manifests(out) == [] and book.check_models(out) == []
    from headlib.settings import results_dir
    record = json.loads((results_dir("pretrained", "en-de", 1) / "training_results.json").read_text())
    assert record["source"] == str(path) and record["stopped"] == "imported" and record["steps"] == 0
    assert record["fingerprint"] in fingerprints
    importance = (results_dir("pretrained", "en-de", 1) / "head_importance.csv").read_text().splitlines()
    assert len(importance) == 1 + 2 * 4                                  # a row per encoder head: 2 layers x 4
    pruning = results_dir("pretrained", "en-de", 1) / "pruning"
    assert (pruning / "enc-self-path-validation.json").is_file() and not list(pruning.glob("scratch-*.json"))
    assert "not the data it was trained on" in (unit / "06_pruning_encoder.ipynb").read_text()


def test_the_pretrained_book_builds_strictly_and_renders_cleanly(pretrained_book):
    from headlib.book import browse
    out, _, _ = pretrained_book
    intro = (out / "intro.md").read_text()
    assert intro.startswith("# headlib: the pretrained profile") and not (out / "reproduce.md").exists()
    assert book.check(out) == []
    build = book.build(out)
    assert build.returncode == 0, (build.stdout + build.stderr)[-3000:]
    html = out / "_build" / "html"
    with browse.serve(html) as base, browse.chromium() as browser:
        report = browse.check_site(browser, base, html, prefix="pretrained-")
    assert {f"executed/en-de/seed1/{page}.html" for page in PAGES} <= set(report.pages)
    assert report.images > 0 and not report.problems, "\n".join(report.problems)

"""The book: the smoke-profile book builds strictly end to end; every glue reference is defined by
an executed notebook; every notebook has a parameters cell; the runner skips unchanged notebooks
and keeps the previous good output when a notebook fails."""
from __future__ import annotations

import json
import shutil

import nbformat
import pytest
from book_helpers import build_log, smoke_book

import headlib.book as book
from headlib.book import glue_refs
from headlib.config import get_config
from headlib.settings import settings


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    return smoke_book(tmp_path_factory)


def test_smoke_book_builds_strictly(smoke):
    assert [r.status for r in smoke.results] == ["executed"] * len(book.NOTEBOOKS)
    assert smoke.build.returncode == 0, build_log(smoke)
    assert "build succeeded" in smoke.build.stdout, build_log(smoke)
    assert "WARNING" not in smoke.build.stdout + smoke.build.stderr, build_log(smoke)
    page = smoke.html / "executed" / "en-de" / "seed1" / "03_data_and_models.html"
    assert page.is_file() and (smoke.html / "intro.html").is_file() and (smoke.html / "reproduce.html").is_file()
    html = page.read_text()
    assert "test_2016_flickr" in html and "<img" in html   # the glued BLEU table and dev-curve figure


def test_smoke_book_stays_out_of_book_dir(smoke):
    assert smoke.book_src_changed == []                     # book/ (the committed cpu book) untouched
    assert book.default_out("smoke") != settings().book and book.default_out("cpu") == settings().book
    toc = (smoke.out / "_toc.yml").read_text()
    assert "executed/en-de/seed1/03_data_and_models" in toc and "smoke profile" in toc
    import yaml
    parts = yaml.safe_load(toc)["parts"]
    assert parts[0]["caption"] == "The verdicts" and parts[1]["caption"].startswith("Sec. 3")   # the answer first
    assert parts[-1]["chapters"] == [{"file": "reproduce"}, {"file": "glossary"}]
    manifest = json.loads(book.manifest_path(smoke.results[0].output).read_text())
    assert manifest["profile"] == "smoke" and manifest["parameters"] == {"profile": "smoke", "pair": "en-de", "seed": 1}
    with pytest.raises(book.BookError, match="holds outputs of profile smoke"):
        book.prepare_out(smoke.out, "cpu")
    with pytest.raises(book.BookError, match="committed outputs of the cpu profile"):
        book.prepare_out(settings().book, "smoke")


def test_every_glue_reference_is_defined(smoke):
    refs = glue_refs.glue_references(smoke.out)
    defined = glue_refs.glue_definitions(smoke.out)
    assert any(r.page == "intro" and r.doc == "executed/en-de/seed1/03_data_and_models" for r in refs)
    keys = defined["executed/en-de/seed1/03_data_and_models"]
    for key in ("sec3-corpus-table", "sec3-dev-curve", "sec3-bleu-table", "sec3-en-de-bleu-beam-test_2016_flickr",
                "sec3-en-de-bleu-greedy-test_2016_flickr", "sec3-en-de-train-minutes", "sec3-quoted-post-bleu"):
        assert key in keys
    assert glue_refs.check_glue(smoke.out) == []
    assert book.check(smoke.out) == []


def _copy(smoke, tmp_path):
    """A hand-built book: a copy of the consistent smoke book (and of the notebooks) to break."""
    copy, src = tmp_path / "book", tmp_path / "notebooks"
    shutil.copytree(smoke.out, copy, ignore=shutil.ignore_patterns("_build"))
    shutil.copytree(settings().notebooks, src)
    return copy, src


def _edit_manifest(copy, page, edit):
    path = copy / "executed" / "en-de" / "seed1" / f"{page}.manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    return manifest


def test_the_consistent_smoke_book_passes_the_check_and_records_its_model(smoke, tmp_path):
    copy, src = _copy(smoke, tmp_path)
    assert book.check(copy, src) == []
    manifests = [json.loads(path.read_text()) for path in (copy / "executed").rglob("*.manifest.json")]
    models = {json.dumps(m["model"]) for m in manifests if m.get("model")}
    assert len(models) == 1                     # every page that reads a model reads the same one
    model, = map(json.loads, models)
    assert len(model["fingerprint"]) == 12 and model["run"].startswith("en-de-smoke-")


def test_check_refuses_a_page_of_another_model(smoke, tmp_path):
    """A model retrained elsewhere keeps its run name, not its weights: the fingerprint decides."""
    copy, src = _copy(smoke, tmp_path)
    _edit_manifest(copy, "05_head_functions", lambda m: m["model"].update(fingerprint="0123456789ab"))
    problems = book.check(copy, src)
    assert len(problems) == 1 and problems[0].startswith("executed/en-de/seed1/05_head_functions: reads model")
    assert "0123456789ab" in problems[0] and "not the Sec. 3 model of en-de, seed1" in problems[0]
    _edit_manifest(copy, "05_head_functions", lambda m: m.pop("model"))      # a page from before fingerprints
    assert "records no model fingerprint" in book.check(copy, src)[0]


def test_check_refuses_a_page_executed_from_another_source(smoke, tmp_path):
    copy, src = _copy(smoke, tmp_path)
    nb = nbformat.read(src / "04_important_heads.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("A sentence added after the page was executed."))
    nbformat.write(nb, src / "04_important_heads.ipynb")
    problems = book.check(copy, src)
    assert len(problems) == 1 and problems[0].startswith("executed/en-de/seed1/04_important_heads: executed from another source")


def test_check_refuses_a_manifest_whose_key_is_not_its_basis(smoke, tmp_path):
    """A manifest "refreshed" by hand (its recorded upstream changed, the key kept)."""
    copy, src = _copy(smoke, tmp_path)
    _edit_manifest(copy, "03_data_and_models", lambda m: m["upstream"]["artifacts"].update({"runs/x/results.json": "y"}))
    problems = book.check(copy, src)
    assert len(problems) == 1 and problems[0].startswith("executed/en-de/seed1/03_data_and_models: its manifest's key")


def test_check_refuses_a_missing_glue_key(smoke, tmp_path):
    copy, src = _copy(smoke, tmp_path)
    with open(copy / "intro.md", "a", encoding="utf-8") as f:
        f.write("\nA {glue:text}`executed/en-de/seed1/03_data_and_models.ipynb::sec3-no-such-number:.1f`.\n")
    problems = book.check(copy, src)
    assert len(problems) == 1 and "sec3-no-such-number" in problems[0] and "intro" in problems[0]


def test_glue_outputs_use_the_papermill_record_mime_prefix(smoke):
    """What myst-nb 1.4's glue(..., display=False) writes, and what glue_definitions relies on."""
    nb = nbformat.read(smoke.results[0].output, as_version=4)
    glued = [o for c in nb.cells for o in c.get("outputs", []) if "scrapbook" in o.get("metadata", {})]
    assert glued and all(all(k.startswith(glue_refs.GLUE_MIME_PREFIX) for k in o["data"]) for o in glued)


def test_glue_check_catches_undefined_keys(smoke, tmp_path):
    copy = tmp_path / "book"
    shutil.copytree(smoke.out, copy, ignore=shutil.ignore_patterns("_build"))
    doc = "executed/en-de/seed1/03_data_and_models.ipynb"
    with open(copy / "intro.md", "a", encoding="utf-8") as f:
        f.write(f"\nA {{glue:text}}`{doc}::sec3-no-such-number:.1f` and {{glue}}`{doc}::sec3-en-de-steps`.\n"
                f"\n```{{glue}} sec3-no-such-table\n:doc: {doc}\n```\n"
                f"\nAnd {{glue:text}}`executed/en-xx/seed1/03_data_and_models.ipynb::sec3-steps:d`.\n")
    nb_path = copy / doc
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("Local: {glue:text}`sec3-local-missing:.2f`"))
    nbformat.write(nb, nb_path)
    problems = glue_refs.check_glue(copy)
    assert len(problems) == 4, problems
    for missing in ("sec3-no-such-number", "sec3-no-such-table", "en-xx", "sec3-local-missing"):
        assert any(missing in p for p in problems), (missing, problems)


def test_source_notebooks_have_a_parameters_cell_first():
    notebooks = sorted(settings().notebooks.glob("*.ipynb"))
    assert {nb.name for nb in book.NOTEBOOKS} <= {p.stem for p in notebooks}
    for path in notebooks:
        book.check_parameters(path)
        first_code = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        assert "parameters" in first_code.metadata.get("tags", []), path
        assert not any(c.get("outputs") for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"), \
            f"{path}: source notebooks are committed without outputs"


def test_pages_hold_no_logic(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1  # one\n\n# a comment\nys = [y for y in range(3)]\nfor y in ys:\n    pass"),
                nbformat.v4.new_markdown_cell("for y in prose: not code")]
    nbformat.write(nb, tmp_path / "loops.ipynb")
    assert book.code_size(tmp_path / "loops.ipynb") == (4, ["ys = [y for y in range(3)]", "for y in ys:"])
    for path in sorted(settings().notebooks.glob("*.ipynb")):   # their logic lives in headlib.book.pages
        lines, loops = book.code_size(path)
        assert lines <= 60 and not loops, (path.name, lines, loops)


def test_parameters_check_catches_a_missing_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell('profile = "smoke"\npair = "en-de"\nseed = 1')]
    nbformat.write(nb, tmp_path / "untagged.ipynb")
    with pytest.raises(book.BookError, match="no code cell tagged 'parameters'"):
        book.check_parameters(tmp_path / "untagged.ipynb")
    nb.cells[0].metadata["tags"] = ["parameters"]
    nb.cells[0].source = 'profile = "smoke"\npair = "en-de"'
    nbformat.write(nb, tmp_path / "no_seed.ipynb")
    with pytest.raises(book.BookError, match="does not assign seed"):
        book.check_parameters(tmp_path / "no_seed.ipynb")
    nb.cells[0].source = 'profile = "smoke"\npair = "en-de"\nseed = 1\nn_sentences = 0'
    nbformat.write(nb, tmp_path / "sizes.ipynb")
    with pytest.raises(book.BookError, match="assigns n_sentences; a page's parameters are profile, pair, seed only"):
        book.check_parameters(tmp_path / "sizes.ipynb")
    assert any("untagged" in p for p in book.check(tmp_path, src_dir=tmp_path))


def test_second_run_skips_unchanged_notebooks(smoke):
    before = smoke.results[0].output.stat().st_mtime_ns
    again = book.run("smoke", ["en-de"], [1], smoke.out, progress=False, log=print)
    assert [r.status for r in again] == ["skipped"] * len(book.NOTEBOOKS)
    assert smoke.results[0].output.stat().st_mtime_ns == before


# -- the runner on a tiny notebook ------------------------------------------------------------------

TINY = book.Notebook("tiny", "Tiny")


def write_tiny(src_dir, body="value = seed * 10"):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    params = nbformat.v4.new_code_cell('profile = "smoke"\npair = "en-de"\nseed = 1')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(body)]
    src_dir.mkdir(exist_ok=True)
    nbformat.write(nb, src_dir / "tiny.ipynb")


def run_tiny(tmp_path, seeds=(1,)):
    return book.run("smoke", ["en-de"], seeds, tmp_path / "out", progress=False, notebooks=[TINY],
                    src_dir=tmp_path / "src", log=print)


def test_runner_skips_unchanged_and_reruns_what_changed(tmp_path):
    write_tiny(tmp_path / "src")
    first = run_tiny(tmp_path)
    assert [r.status for r in first] == ["executed"]
    out1 = first[0].output
    assert out1 == tmp_path / "out" / "executed" / "en-de" / "seed1" / "tiny.ipynb"
    assert [r.status for r in run_tiny(tmp_path)] == ["skipped"]
    # another seed gets its own output and leaves seed 1 alone
    second = run_tiny(tmp_path, seeds=(1, 2))
    assert [r.status for r in second] == ["skipped", "executed"]
    assert second[1].output == tmp_path / "out" / "executed" / "en-de" / "seed2" / "tiny.ipynb"
    toc = (tmp_path / "out" / "_toc.yml").read_text()
    assert "executed/en-de/seed1/tiny" in toc and "executed/en-de/seed2/tiny" in toc
    # a changed notebook source is executed again
    write_tiny(tmp_path / "src", body="value = seed * 100")
    assert [r.status for r in run_tiny(tmp_path)] == ["executed"]


def test_a_notebook_across_seeds_runs_once_per_pair(tmp_path):
    write_tiny(tmp_path / "src")
    across = book.Notebook("tiny", "Tiny", across_seeds=True)
    results = book.run("smoke", ["en-de"], (2, 1), tmp_path / "out", progress=False, notebooks=[across],
                       src_dir=tmp_path / "src", log=print)
    assert [(r.status, r.task.seed) for r in results] == [("executed", 2)]


def test_a_notebook_with_a_fixed_pair_runs_once_for_it(tmp_path):
    write_tiny(tmp_path / "src")
    fixed = book.Notebook("tiny", "Tiny", pair="en-ru")
    results = book.run("smoke", ["en-de", "en-fr"], (2, 1), tmp_path / "out", progress=False, notebooks=[fixed],
                       src_dir=tmp_path / "src", log=print)
    assert [(r.status, r.task.pair, r.task.seed) for r in results] == [("executed", "en-ru", 2)]
    assert results[0].output == tmp_path / "out" / "executed" / "en-ru" / "seed2" / "tiny.ipynb"
    # Once it exists, a run that does not name its pair keeps it, even when forced (like other pairs')
    kept = book.run("smoke", ["en-de"], (2,), tmp_path / "out", progress=False, notebooks=[fixed],
                    src_dir=tmp_path / "src", log=print, force=True)
    assert [r.status for r in kept] == ["skipped"]
    rerun = book.run("smoke", ["en-de", "en-ru"], (2,), tmp_path / "out", progress=False, notebooks=[fixed],
                     src_dir=tmp_path / "src", log=print, force=True)
    assert [(r.status, r.task.pair) for r in rerun] == [("executed", "en-ru")]


def test_a_notebook_that_fills_a_table_it_reads_is_unchanged_on_the_next_run(tmp_path):
    """The key is written after execution: a cache the notebook filled (the cross-lingual head
    profiles) does not make the next run execute it again; a change by anyone else still does."""
    from headlib.settings import results_dir
    table = results_dir("smoke", "en-de", 1) / "tiny_cache.txt"
    table.unlink(missing_ok=True)
    write_tiny(tmp_path / "src", body=f"from pathlib import Path\nPath({str(table)!r}).write_text('filled')")
    fills = book.Notebook("tiny", "Tiny", reads=("{pair}/seed{seed}/tiny_cache.txt",))
    run = lambda: [r.status for r in book.run("smoke", ["en-de"], (1,), tmp_path / "out", progress=False,
                                              notebooks=[fills], src_dir=tmp_path / "src", log=print)]
    try:
        assert run() == ["executed"] and table.read_text() == "filled"
        assert run() == ["skipped"]
        table.write_text("changed elsewhere")
        assert run() == ["executed"]
    finally:
        table.unlink(missing_ok=True)


def test_status_says_what_would_execute_and_why(tmp_path):
    write_tiny(tmp_path / "src")
    shutil.copy(tmp_path / "src" / "tiny.ipynb", tmp_path / "src" / "after.ipynb")
    books = [TINY, book.Notebook("after", "After", after=("tiny",))]
    run = lambda: book.run("smoke", ["en-de"], (1,), tmp_path / "out", progress=False, notebooks=books,
                           src_dir=tmp_path / "src", log=print)
    status = lambda: [(t.nb.name, why) for t, why in book.status("smoke", ["en-de"], (1,), tmp_path / "out",
                                                                  books, tmp_path / "src")]
    assert status() == [("tiny", ["no output"]), ("after", ["no output", "after tiny (re-executed)"])]
    run()
    assert status() == [("tiny", []), ("after", [])]
    write_tiny(tmp_path / "src", body="value = seed * 100")
    assert status() == [("tiny", ["source"]), ("after", ["after tiny (re-executed)"])]
    assert [r.status for r in run()] == ["executed", "executed"]      # what status said
    assert status() == [("tiny", []), ("after", [])]


def test_failing_notebook_keeps_the_previous_good_output(tmp_path):
    write_tiny(tmp_path / "src")
    good = run_tiny(tmp_path)[0].output
    good_bytes = good.read_bytes()
    manifest = book.manifest_path(good).read_text()
    write_tiny(tmp_path / "src", body='raise ValueError("boom in the tiny notebook")')
    with pytest.raises(book.BookError) as err:
        run_tiny(tmp_path)
    message = str(err.value)
    assert "tiny [en-de, seed 1] failed in cell" in message
    assert 'raise ValueError("boom in the tiny notebook")' in message   # the cell
    assert "ValueError: boom in the tiny notebook" in message            # the error
    assert good.read_bytes() == good_bytes                              # previous good output kept
    assert book.manifest_path(good).read_text() == manifest
    assert book.failed_path(good).is_file()
    assert not list(good.parent.glob(".*.tmp.ipynb"))                     # no temporary left behind
    # fixed again: executes, and the failed copy goes away
    write_tiny(tmp_path / "src", body="value = seed * 1000")
    assert [r.status for r in run_tiny(tmp_path)] == ["executed"]
    assert not book.failed_path(good).exists()


def test_select_keeps_the_book_order_and_names_unknown_notebooks():
    chosen = book.select(["09_claims", "04_important_heads"])
    assert [nb.name for nb in chosen] == ["04_important_heads", "09_claims"]
    assert [nb.name for nb in book.ordered(chosen)] == ["04_important_heads", "09_claims"]
    with pytest.raises(book.BookError, match="unknown notebook.*valid: 03_data_and_models"):
        book.select(["04_important_heads", "04_typo"])


def test_an_imported_model_gets_no_page_that_compares_seeds_or_trains_models_of_its_own():
    def names(profile):
        return [t.nb.name for t in book.planned(book.NOTEBOOKS, profile, ["en-de"], [1, 2])]
    across_units = ("11_seeds", "12_domains", "01_verdicts")       # seeds, own models, every unit's verdicts
    assert set(across_units) <= set(names("smoke"))
    assert not set(across_units) & set(names("pretrained"))
    assert names("pretrained") == [n for n in names("smoke") if n not in across_units]


def test_tables_a_notebook_reads_enter_its_key_for_every_pair(tmp_path):
    from headlib.settings import results_dir
    claims = book.select(["09_claims"])[0]
    task = book.Task(book.Notebook(claims.name, claims.caption, reads=claims.reads), "smoke", "en-de", 1)
    other = results_dir("smoke", "en-fr", 1) / "head_importance.csv"
    other.write_text("layer,head,relevance,confidence,rank_in_layer\n1,1,0.5,0.5,1\n")
    before = book.upstream(task, tmp_path)["artifacts"]
    assert "results/en-fr/seed1/head_importance.csv" in before
    other.write_text("layer,head,relevance,confidence,rank_in_layer\n1,1,0.6,0.5,1\n")
    assert book.upstream(task, tmp_path)["artifacts"] != before
    other.unlink()


def test_another_seeds_training_enters_the_key_of_the_pages_judged_by_the_seed_spread(tmp_path):
    """Sec. 6.2 and Beyond judge differences against the spread of the pair's seeds: a seed trained
    later makes them stale (the check names them), where before it left them as they were."""
    from headlib.settings import results_dir
    other = results_dir("smoke", "en-de", 7) / "training_results.json"
    for nb in book.select(["06_pruning_encoder", "08_beyond"]):
        task = book.Task(book.Notebook(nb.name, nb.caption, reads=nb.reads), "smoke", "en-de", 1)
        before = book.upstream(task, tmp_path)["artifacts"]
        other.write_text("{}")
        assert "results/en-de/seed7/training_results.json" in book.upstream(task, tmp_path)["artifacts"]
        assert book.upstream(task, tmp_path)["artifacts"] != before
        other.unlink()


def test_a_trained_run_enters_the_key_by_its_record_without_the_clock(tmp_path):
    """A notebook that reads a trained run is keyed by the run's record less its wall-clock fields:
    this machine's results.json, else the committed record of the same run (a fresh clone trains
    nothing to find a notebook unchanged); a replay on a slower machine keeps the key."""
    from headlib.settings import results_dir
    from headlib.train import run_dir
    task = book.Task(book.Notebook("tiny", "Tiny", trains=True), "smoke", "en-de", 7)
    run, entry = run_dir(task.config()), f"runs/{run_dir(task.config()).name}/results.json"
    committed = results_dir("smoke", "en-de", 7) / "training_results.json"
    record = {"run_dir": run.name, "stopped": "max_minutes", "steps": 3, "train_minutes": 1.0,
              "tokens_per_second": 100.0, "history": [{"step": 3, "dev_bleu": 1.5, "minutes": 1.0}]}
    key = lambda: book.upstream(task, tmp_path)["artifacts"][entry]
    try:
        assert key() == "missing"
        committed.write_text(json.dumps(record | {"run_dir": "another-run"}))
        assert key() == "missing"                                  # another config's record
        committed.write_text(json.dumps(record))
        from_committed = key()
        assert from_committed != "missing"
        run.mkdir(parents=True)
        slower = record | {"train_minutes": 2.0, "tokens_per_second": 50.0,
                           "history": [{"step": 3, "dev_bleu": 1.5, "minutes": 2.0}]}
        (run / "results.json").write_text(json.dumps(slower))
        assert key() == from_committed                             # the same run, replayed slower
        (run / "results.json").write_text(json.dumps(slower | {"history": [{"step": 3, "dev_bleu": 1.6, "minutes": 2.0}]}))
        assert key() != from_committed                             # a run that learned differently
    finally:
        committed.unlink(missing_ok=True)
        shutil.rmtree(run, ignore_errors=True)


def test_page_runs_reads_the_run_of_each_executed_page_from_its_manifest(tmp_path):
    """What run each page was executed with, as its manifest recorded it; pages that read no run
    (or were never executed) are absent."""
    def executed(name, model):
        output = book.Task(book.Notebook(name, name), "cpu", "en-de", 1).output(tmp_path)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text("{}")
        book.manifest_path(output).write_text(json.dumps({"model": model, "upstream": {"artifacts": {}, "notebooks": {}}}))
    executed("04_important_heads", {"run": "en-de-cpu-new", "fingerprint": "1", "release": "models/cpu/en-de/seed1"})
    executed("06_pruning_encoder", {"run": "en-de-cpu-old", "fingerprint": "2", "release": None})
    executed("09_claims", None)
    assert book.page_runs(tmp_path, "cpu", "en-de", 1) == {"04_important_heads": "en-de-cpu-new",
                                                          "06_pruning_encoder": "en-de-cpu-old"}
    assert book.page_runs(tmp_path, "cpu", "en-fr", 1) == {}


def test_a_subset_reads_the_outputs_of_the_notebooks_it_runs_after(tmp_path, monkeypatch):
    """A run of some notebooks of the book keys each by the outputs of the notebooks it runs after
    as they are: unchanged, it is skipped; re-executed upstream, it executes; missing, it is an error."""
    write_tiny(tmp_path / "src")
    shutil.copy(tmp_path / "src" / "tiny.ipynb", tmp_path / "src" / "after.ipynb")
    after = book.Notebook("after", "After", after=("tiny",))
    monkeypatch.setattr(book.plan, "NOTEBOOKS", (TINY, after))     # the book these two make up
    run = lambda notebooks, out="out": [(r.task.nb.name, r.status) for r in book.run(
        "smoke", ["en-de"], (1,), tmp_path / out, progress=False, notebooks=notebooks,
        src_dir=tmp_path / "src", log=print, toc=(TINY, after))]
    assert run([TINY, after]) == [("tiny", "executed"), ("after", "executed")]
    tiny_output = tmp_path / "out" / "executed" / "en-de" / "seed1" / "tiny.ipynb"
    key = json.loads(book.manifest_path(tiny_output).read_text())["key"]
    assert run([after]) == [("after", "skipped")]                     # tiny not run: read as it is
    write_tiny(tmp_path / "src", body="value = seed * 100")
    assert run([TINY]) == [("tiny", "executed")]
    assert json.loads(book.manifest_path(tiny_output).read_text())["key"] != key
    assert run([after]) == [("after", "executed")]                    # tiny's new key is in its key
    assert run([after]) == [("after", "skipped")]
    with pytest.raises(book.BookError, match=r"^after \[en-de, seed 1\] needs the output of tiny for en-de, "
                                             r"seed 1; it has not been executed$"):
        run([after], out="fresh")
    assert not (tmp_path / "fresh" / "executed" / "en-de" / "seed1" / "after.ipynb").exists()


def test_notebooks_that_run_after_each_other_are_a_dependency_cycle(tmp_path):
    write_tiny(tmp_path / "src")
    shutil.copy(tmp_path / "src" / "tiny.ipynb", tmp_path / "src" / "other.ipynb")
    one, other = book.Notebook("tiny", "Tiny", after=("other",)), book.Notebook("other", "Other", after=("tiny",))
    with pytest.raises(book.BookError, match="^notebook dependency cycle through tiny$"):
        book.run("smoke", ["en-de"], (1,), tmp_path / "out", progress=False, notebooks=[one, other],
                 src_dir=tmp_path / "src", log=print)
    assert not (tmp_path / "out" / "executed").exists()                # nothing executed
    with pytest.raises(book.BookError, match="^tiny runs after nowhere, which is not a notebook of the book$"):
        book.ordered([book.Notebook("tiny", "Tiny", after=("nowhere",))])


def test_the_estimate_sums_the_measured_times_of_what_would_execute(smoke):
    """`make book` prints it before it starts: nothing when the book is current; forced, every page
    at the seconds its manifest measured (the trainings are cached here, so none is added)."""
    plan = book.status("smoke", ["en-de"], [1], smoke.out)
    assert plan and all(not why for _, why in plan)
    assert book.estimate(plan, smoke.out) == (0.0, [])
    seconds, lines = book.estimate([(task, ["--force"]) for task, _ in plan], smoke.out)
    measured = [json.loads(p.read_text())["seconds"] for p in (smoke.out / "executed").rglob("*.manifest.json")]
    assert seconds == pytest.approx(sum(measured)) and len(lines) == len(plan) == len(measured)
    from headlib.settings import results_dir
    record = json.loads((results_dir("smoke", "en-de", 1) / "training_results.json").read_text())   # Sec. 3's copy
    assert book.seconds_per_update(get_config("smoke")) == (pytest.approx(record["train_minutes"] * 60 / record["steps"]),
                                                            "its committed record")


def test_pages_that_read_other_models_name_them_with_their_fingerprints(smoke, tmp_path):
    copy, src = _copy(smoke, tmp_path)
    roles = {}
    for page in ("en-de/seed1/06_pruning_encoder", "en-de/seed1/10_around", "en-ru/seed1/12_domains"):
        manifest = json.loads((copy / "executed" / f"{page}.manifest.json").read_text())
        others = manifest["other_models"]
        assert others and all(len(m["fingerprint"]) == 12 for m in others), page
        own = (manifest.get("model") or {}).get("fingerprint")
        assert own not in {m["fingerprint"] for m in others}                           # not the page's own model
        html = (smoke.html / "executed" / f"{page}.html").read_text()
        assert all(m["run"] in html for m in others), page                             # the page shows their ids
        roles[page] = {m["role"] for m in others}
    assert "lottery ticket" in roles["en-de/seed1/10_around"]
    assert roles["en-ru/seed1/12_domains"] == {"the news model", "the Tatoeba model"}
    _edit_manifest(copy, "06_pruning_encoder", lambda m: m["other_models"][0].pop("fingerprint"))
    problems = book.check(copy, src)
    assert len(problems) == 1 and problems[0].startswith("executed/en-de/seed1/06_pruning_encoder: names model")


def test_make_book_checks_and_builds_without_executing_and_make_test_checks_the_book():
    import subprocess
    def planned(target):
        return subprocess.run(["make", "-n", target], capture_output=True, text=True, check=True,
                              cwd=settings().root).stdout.splitlines()
    lines = planned("book")
    check, build = (next(i for i, line in enumerate(lines) if what in line)
                    for what in ("headlib.book check", "jupyter-book build"))
    assert check < build and not any("headlib.book run" in line or "headlib train" in line for line in lines)
    assert any("headlib.book check" in line for line in planned("test"))
    assert any("headlib.book verify" in line for line in planned("pages"))

"""The command line: python -m headlib train|translate|evaluate."""
import json
import subprocess
import sys

import pytest
from conftest import SMOKE_CLI_SET, run_cli

from headlib.data.corpora import load_split
from headlib.nn.decode import score, translate
from headlib.settings import settings
from headlib.train import load_model


def test_unknown_key_exits_nonzero_listing_valid_keys():
    proc = run_cli("train", "--profile", "smoke", "--set", "train.foo=1", check=False)
    assert proc.returncode != 0
    assert "train.foo" in proc.stderr
    for key in ("model.d_model", "model.n_heads", "data.bpe_vocab", "train.lr", "train.save_every"):
        assert key in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_value_exits_nonzero_naming_the_key():
    proc = run_cli("train", "--profile", "smoke", "--set", "train.lr=fast", check=False)
    assert proc.returncode != 0 and "train.lr" in proc.stderr and "Traceback" not in proc.stderr


def test_train_prints_the_run_and_test_bleu(smoke_run):
    cfg, out = smoke_run
    proc = run_cli("train", "--profile", "smoke", *SMOKE_CLI_SET, "--quiet")   # cached: no training
    summary = json.loads(proc.stdout)
    results = json.loads((out / "results.json").read_text())
    assert summary["run"] == str(out)
    assert summary["test_bleu"]["test_2016_flickr"] == {k: v["bleu"] for k, v in results["test"]["test_2016_flickr"].items()}


def _sentences(n=12):
    return list(load_split("en-de", "test_2016_flickr").src[:n])


def test_translate_stdin_and_file(smoke_run, tmp_path):
    cfg, out = smoke_run
    sents = _sentences()
    model, bpe, ckpt = load_model(out / "final.pt")
    # the run is shared by every smoke config that differs only in train.threads (not hashed)
    same = lambda d: {**d, "train": {k: v for k, v in d["train"].items() if k != "threads"}}
    assert same(ckpt["config"]) == same(cfg.to_dict())
    expected = translate(model, bpe, sents, beam=cfg.train.beam, alpha=ckpt["len_alpha"])
    proc = run_cli("translate", "--profile", "smoke", *SMOKE_CLI_SET, stdin="\n".join(sents) + "\n")
    assert proc.stdout.split("\n")[:-1] == expected
    path = tmp_path / "in.txt"
    path.write_text("\n".join(sents) + "\n", encoding="utf-8")
    proc = run_cli("translate", "--checkpoint", str(out / "final.pt"), "--input", str(path), "--beam", "1")
    assert proc.stdout.split("\n")[:-1] == translate(model, bpe, sents, beam=1)


def test_evaluate_prints_bleu_chrf_and_signature(smoke_run, tmp_path):
    cfg, out = smoke_run
    test = load_split("en-de", "test_2016_flickr")
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("\n".join(test.src[:20]) + "\n", encoding="utf-8")
    ref.write_text("\n".join(test.tgt[:20]) + "\n", encoding="utf-8")
    proc = run_cli("evaluate", "--checkpoint", str(out / "final.pt"), "--src", str(src), "--ref", str(ref))
    result = json.loads(proc.stdout)
    assert {"bleu", "chrf", "bleu_signature", "chrf_signature", "beam", "len_alpha"} <= set(result)
    assert "tok:13a" in result["bleu_signature"] and result["n"] == 20
    model, bpe, ckpt = load_model(out / "final.pt")
    hyps = translate(model, bpe, list(test.src[:20]), beam=result["beam"], alpha=result["len_alpha"])
    assert result["bleu"] == score(hyps, list(test.tgt[:20]))["bleu"]
    assert result["chrf"] == score(hyps, list(test.tgt[:20]))["chrf"]


def test_evaluate_bad_input_is_one_clear_line(smoke_run, tmp_path):
    cfg, out = smoke_run
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("a\nb\n", encoding="utf-8")
    ref.write_text("x\n", encoding="utf-8")
    proc = run_cli("evaluate", "--checkpoint", str(out / "final.pt"), "--src", str(src), "--ref", str(ref), check=False)
    assert proc.returncode != 0 and str(src) in proc.stderr and str(ref) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_what_a_new_user_ran_into_is_one_line_naming_the_file_or_parameter(smoke_run, tmp_path):
    """Each bad input of issue 41's new user: one line on stderr, no traceback, naming what is wrong."""
    _, out = smoke_run
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    corrupt = tmp_path / "final.pt"
    corrupt.write_bytes((out / "final.pt").read_bytes()[:4000])
    empty_src, empty_ref = tmp_path / "empty.en", tmp_path / "empty.de"
    empty_src.write_text("")
    empty_ref.write_text("")
    cases = [   # (arguments, stdin bytes, what the line must say)
        (("translate", "--profile", "smoke", "--input", str(tmp_path / "missing.txt")), b"",
         f"--input {tmp_path / 'missing.txt'}: no such file"),
        (("translate", "--profile", "smoke"), b"fine\n\xff\xfe broken\n", "stdin: line 2 is not valid UTF-8"),
        (("evaluate", "--profile", "smoke", "--src", str(empty_src), "--ref", str(empty_ref)), b"",
         "are empty: nothing to evaluate"),
        (("translate", "--profile", "smoke", "--beam", "0"), b"a\n", "--beam: must be a positive integer (1 = greedy), got 0"),
        (("translate", "--profile", "smoke", "--beam", "-3"), b"a\n", "--beam: must be a positive integer (1 = greedy), got -3"),
        (("translate", "--checkpoint", str(text)), b"a\n", f"{text}: not a trained model saved by torch.save"),
        (("translate", "--checkpoint", str(corrupt)), b"a\n", f"{corrupt}: not a trained model saved by torch.save"),
        (("translate", "--profile", "smoke", "--seed", "7"), b"a\n",
         "no trained model for --profile smoke --pair en-de --seed 7: no release in"),
    ]
    for args, stdin, expected in cases:
        proc = subprocess.run([sys.executable, "-m", "headlib", *args], input=stdin, capture_output=True,
                              cwd=settings().root)
        err = proc.stderr.decode()
        lines = [line for line in err.splitlines() if not line.startswith("usage:") and not line.startswith(" ")]
        assert proc.returncode != 0 and expected in err and "Traceback" not in err, (args, err)
        assert len(lines) == 1, (args, err)
    # the corrupt file is the user's: the line never tells them to delete it
    proc = subprocess.run([sys.executable, "-m", "headlib", "translate", "--checkpoint", str(corrupt)], input=b"a\n",
                          capture_output=True, cwd=settings().root)
    assert "delete" not in proc.stderr.decode()
    assert "python -m headlib train --profile smoke --pair en-de --seed 7" in err


def test_a_page_run_before_its_upstream_page_names_the_page_to_run_first(tmp_path):
    from headlib.tables import MissingTable, read_table
    folder = tmp_path / "results" / "cpu" / "en-de" / "seed3"
    folder.mkdir(parents=True)
    with pytest.raises(MissingTable) as err:
        read_table(folder, "head_importance.csv")
    assert str(err.value) == (f"{folder / 'head_importance.csv'}: missing; it is written by the page "
                              "notebooks/04_important_heads.ipynb: run that page first (python -m headlib.book run "
                              "--profile cpu --pairs en-de --seeds 3 --notebooks 04_important_heads)")

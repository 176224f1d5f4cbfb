"""The command line: python -m headlib train|translate|evaluate."""
import json

from conftest import SMOKE_CLI_SET, run_cli

from headlib.data.corpora import load_split
from headlib.nn.decode import score, translate
from headlib.train.trainer import load_model


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

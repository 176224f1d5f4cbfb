"""Sec. 3's tables from run records: the recipe table on hand-built records, and the committed
runs that chose the cpu profile's recipe."""
import pytest

from headlib.stats import RECIPE_RUNS, recipe_records, recipe_table


def _record(schedule=None, bf16=True, machine=None, bleu=30.0):
    train = {"lr": 1e-3, "max_tokens": 4096, "accum": 2, "bf16": bf16, "seed": 3, "max_steps": 2700}
    if schedule:
        train["schedule"] = schedule
    record = {"pair": "en-de", "config": {"train": train}, "steps": 1234, "train_tokens": 2_500_000,
              "tokens_per_second": 925.9, "train_minutes": 45.0,
              "test": {"test_2016_flickr": {"beam": {"bleu": bleu}}, "test_2017_flickr": {"beam": {"bleu": 1.0}}}}
    if machine:
        record["machine"] = {"bf16": machine}
    return record


def test_recipe_table_describes_each_run_from_its_record():
    old = _record()                                   # written before `schedule` and `machine` existed
    new = _record(schedule="linear", bf16=False, machine="avx512_bf16", bleu=36.5)
    table = recipe_table([old, new])
    assert table["schedule"].tolist() == ["inverse square root", "linear to 0 at 2,700"]
    assert table["precision"].tolist() == ["bf16 autocast", "fp32"]
    assert table["machine"].tolist() == ["not recorded", "avx512_bf16"]
    assert table["tokens per batch"].tolist() == [8192, 8192]          # max_tokens x accum
    assert table["target tokens (M)"].tolist() == [2.5, 2.5]
    assert table["BLEU beam (test_2016_flickr)"].tolist() == [30.0, 36.5]   # the main test set, not another


def test_the_runs_that_chose_the_recipe_are_committed(tmp_path):
    records = recipe_records()
    assert len(records) == len(RECIPE_RUNS)
    table = recipe_table(records)
    assert table["precision"].iloc[0] == "bf16 autocast" and (table["precision"].iloc[1:] == "fp32").all()
    assert (table["pair"] == "en-de").all() and table["minutes"].max() <= 45.1
    assert table["updates"].iloc[0] == records[0]["steps"]
    with pytest.raises(FileNotFoundError, match=RECIPE_RUNS[0].split("/")[-1]):   # names the missing record
        recipe_records(tmp_path)

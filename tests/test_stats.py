"""Sec. 3's tables from run records: the recipe table on hand-built records, and the committed
runs that chose the cpu profile's recipe."""
import pytest

from headlib.book.pages.sec3 import (NORM_RUNS, PRECISION_RUNS, RECIPE_RUNS, WIDE_ALPHA_RUN, norm_choice, norm_trial,
                               precision_table, recipe_choice, recipe_records, recipe_table, wide_alpha_choice)


def _record(schedule=None, bf16=True, machine=None, bleu=30.0):
    train = {"lr": 1e-3, "max_tokens": 4096, "accum": 2, "bf16": bf16, "seed": 3, "max_steps": 2700}
    if schedule:
        train["schedule"] = schedule
    record = {"pair": "en-de", "config": {"train": train}, "steps": 1234, "train_tokens": 2_500_000,
              "tokens_per_second": 925.9, "train_minutes": 45.0, "len_alpha": 1.0,
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

    # v1's clock-aimed recipe, whose records say which precision the machine chose
    clocked = _record(schedule="clocked", machine="amx_bf16")
    on_avx512 = _record(schedule="clocked", machine="avx512_bf16") | {"bf16_autocast": False}
    table = recipe_table([clocked, on_avx512])
    assert table["schedule"].tolist() == ["clocked (a v1 wall-clock recipe)"] * 2
    assert table["precision"].tolist() == ["bf16 autocast", "fp32"]


def test_the_runs_that_chose_the_recipe_are_committed(tmp_path):
    records = recipe_records()
    assert len(records) == len(RECIPE_RUNS)
    table = recipe_table(records)
    assert table["precision"].iloc[0] == "bf16 autocast"
    assert (table[table["machine"] == "avx512_bf16"]["precision"] == "fp32").all()
    clock = table[table["schedule"].str.endswith("(a v1 wall-clock recipe)")]
    assert len(clock) and (clock["machine"] == "amx_bf16").all() and (clock["precision"] == "bf16 autocast").all()
    assert (table["pair"] == "en-de").all() and table["minutes"].max() <= 45.1
    assert table["updates"].iloc[0] == records[0]["steps"]
    with pytest.raises(FileNotFoundError, match=RECIPE_RUNS[0].split("/")[-1]):   # names the missing record
        recipe_records(tmp_path)
    wide, = recipe_records(names=(WIDE_ALPHA_RUN,))
    same, = recipe_records(names=(WIDE_ALPHA_RUN.replace("_alpha-to-2.2", ""),))
    assert same["history"] == wide["history"]                     # the same training, finalized twice
    assert max(wide["dev_beam_by_alpha"], key=float) == "2.2" and max(same["dev_beam_by_alpha"], key=float) == "1.4"


def test_wide_alpha_choice_compares_the_wide_grids_pick_with_the_profiles():
    record = _record(bleu=35.6) | {"len_alpha": 2.2, "dev_beam_by_alpha": {"0.6": 37.0, "1.4": 38.28, "1.8": 38.3, "2.2": 38.34}}
    choice = wide_alpha_choice(record, (0.6, 1.0, 1.4))
    assert (choice["low"], choice["high"], choice["chosen"], choice["grid_best"]) == (0.6, 2.2, 2.2, 1.4)
    assert choice["dev_margin"] == pytest.approx(0.06) and choice["test_bleu"] == 35.6
    assert choice["test_set"] == "test_2016_flickr"


def test_recipe_choice_is_made_on_dev_and_says_what_test_would_have_chosen():
    runs = [_record(bleu=36.0) | {"dev_beam_by_alpha": {"1": 38.0}},
            _record(bleu=36.9) | {"dev_beam_by_alpha": {"1": 37.5}},     # best on test, not on dev
            _record(bleu=40.0)]                                          # no dev score: not a candidate
    table = recipe_table(runs)
    assert table["dev BLEU beam"].iloc[:2].tolist() == [38.0, 37.5] and table["dev BLEU beam"].isna().iloc[2]
    choice = recipe_choice(table)
    assert (choice["dev_row"], choice["test_row"], choice["candidates"]) == (0, 1, 2)
    assert (choice["dev_bleu"], choice["dev_choice_test_bleu"], choice["test_choice_test_bleu"]) == (38.0, 36.0, 36.9)


def test_precision_table_compares_fp32_with_bf16_per_kind_of_cpu():
    def bench(bf16, fp32_speed, bf16_speed):
        systems = lambda v: {"systems": {"headlib fast (pre-LN)": {"tok_per_s_median": v}, "Marian": {"tok_per_s_median": 1}}}
        return {"kernels": {"bf16": bf16}, "max_tokens": 2048, "results": {"fp32": systems(fp32_speed), "bf16": systems(bf16_speed)}}
    table = precision_table([bench("amx_bf16", 1000.0, 1900.0), bench("none", 1400.0, 35.0)])
    assert table["CPU's bf16 instructions"].tolist() == ["amx_bf16", "none"]
    assert table["bf16 / fp32"].tolist() == pytest.approx([1.9, 0.025])
    committed = precision_table(recipe_records(names=PRECISION_RUNS[:2]))   # AMX and AVX512-BF16 measured
    assert committed["bf16 / fp32"].iloc[0] > 1.5 > 1.0 > committed["bf16 / fp32"].iloc[1]


def _heads(share):   # 2 layers x 2 heads; head L2H1 puts `share` of its argmax at offset -1
    flat = [0.2, 0.2, 0.2, 0.2, 0.2]
    return {"offsets": [-2, -1, 0, 1, 2], "confidence": [[0.3, 0.4], [0.5, 0.6]],
            "offset_share": [[flat, flat], [[0.1, share, 0.1, 0.1, 0.1], flat]], "rare_rate": [[0.1, 0.2], [0.9, 0.9]]}


def test_norm_trial_compares_dev_bleu_and_heads_at_equal_updates():
    def run(norm, lr, warmup, bleus):
        return {"config": {"model": {"norm": norm}, "train": {"lr": lr, "warmup": warmup}},
                "history": [{"step": 400 * (i + 1), "dev_bleu": b, "heads": _heads(0.3 + 0.1 * i)}
                            for i, b in enumerate(bleus)]}
    pre, post = run("pre", 2e-3, 800, [10.0, 20.0, 25.0]), run("post", 1e-3, 1400, [2.0, 15.0])
    post["history"].append({"step": 1200, "dev_bleu": 26.0})        # an evaluation without head statistics
    trial = norm_trial([pre, post])
    assert trial["layer norm"].tolist() == ["pre-LN"] * 3 + ["post-LN"] * 3
    assert trial[["peak lr", "warmup"]].drop_duplicates().values.tolist() == [["0.002", 800], ["0.001", 1400]]
    last_pre = trial.iloc[2]
    assert (last_pre["update"], last_pre["dev BLEU greedy"]) == (1200, 25.0)
    assert last_pre["best positional share"] == pytest.approx(0.5) and last_pre["its head"] == "L2H1"
    assert last_pre["max confidence"] == 0.6 and last_pre["max layer-1 rare rate"] == 0.2   # layer 1 only
    assert trial.iloc[5].isna()["best positional share"]
    choice = norm_choice(trial)
    assert (choice["chosen"], choice["update"]) == ("post-LN", 1200) and choice["margin"] == pytest.approx(1.0)
    assert norm_choice(trial[trial["update"] < 1200])["chosen"] == "pre-LN"   # the last common update decides


def test_the_norm_trial_runs_are_committed():
    pre, post = recipe_records(names=NORM_RUNS)
    assert (pre["config"]["model"]["norm"], post["config"]["model"]["norm"]) == ("pre", "post")
    assert pre["steps"] == post["steps"] and pre["config"]["train"]["max_steps"] == post["config"]["train"]["max_steps"]
    assert {k: v for k, v in pre["config"]["train"].items() if k not in ("lr", "warmup")} == \
           {k: v for k, v in post["config"]["train"].items() if k not in ("lr", "warmup")}
    assert norm_choice(norm_trial([pre, post]))["update"] == pre["steps"]

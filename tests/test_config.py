import dataclasses
import json

import pytest

from headlib.config import PROFILES, Config, ModelConfig, get_config, validate
from headlib.profiles import PruneConfig


def all_keys():
    return [f"{s}.{f.name}" for s in ("model", "data", "train")
            for f in dataclasses.fields(type(getattr(Config(), s)))]


def test_unknown_key_lists_every_valid_key():
    with pytest.raises(ValueError) as e:
        get_config("smoke", ["train.foo=1"])
    msg = str(e.value)
    assert "train.foo" in msg
    for key in all_keys():
        assert key in msg


@pytest.mark.parametrize("item", ["foo.lr=1", "profile=x", "lr=1e-3", "train.lr"])
def test_malformed_or_unknown_override_is_rejected(item):
    with pytest.raises(ValueError, match="valid keys"):
        get_config("smoke", [item])


@pytest.mark.parametrize("item,key", [("train.lr=fast", "train.lr"), ("model.n_heads=2.5", "model.n_heads"),
                                      ("train.bf16=maybe", "train.bf16"), ("train.betas=(0.9,x)", "train.betas")])
def test_bad_value_names_the_key(item, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        get_config("smoke", [item])


@pytest.mark.parametrize("raw,expected", [("true", True), ("1", True), ("yes", True), ("False", False),
                                          ("0", False), ("no", False)])
def test_bool_parsing(raw, expected):
    assert get_config("smoke", [f"train.bf16={raw}"]).train.bf16 is expected


def test_tuple_and_scalar_parsing():
    cfg = get_config("smoke", ["train.betas=(0.8, 0.95)", "train.tune_len_alpha=0.5,1,1.5",
                               "train.lr=5e-4", "model.n_heads=8", "data.pair=en-ru"])
    assert cfg.train.betas == (0.8, 0.95) and all(isinstance(b, float) for b in cfg.train.betas)
    assert cfg.train.tune_len_alpha == (0.5, 1.0, 1.5)
    assert cfg.train.lr == 5e-4 and cfg.model.n_heads == 8 and cfg.data.pair == "en-ru"
    # overrides leave the rest of the profile alone
    assert cfg.model.d_model == PROFILES["smoke"].model.d_model


def test_pair_argument_and_digest():
    a, b = get_config("smoke"), get_config("smoke", pair="en-fr")
    assert b.data.pair == "en-fr" and a.data.pair == "en-de"
    assert a.digest() != b.digest()
    assert a.digest() == get_config("smoke").digest()
    assert a.digest() != a.digest("other-version")


def test_cpu_profile_keeps_the_papers_48_encoder_heads():
    m, d = get_config("cpu").model, get_config("cpu").data
    assert (m.enc_layers, m.n_heads, m.enc_layers * m.n_heads) == (6, 8, 48)
    assert (m.d_model, m.d_ff, d.bpe_vocab) == (256, 1024, 8000)


def test_base_profile_is_transformer_base():
    m = get_config("base").model
    assert (m.d_model, m.n_heads, m.d_ff, m.enc_layers, m.dec_layers) == (512, 8, 2048, 6, 6)
    assert m.norm == "post"


def test_unknown_profile():
    with pytest.raises(ValueError, match="smoke"):
        get_config("huge")


@pytest.mark.parametrize("item,match", [
    ("model.d_model=30", "divisible"), ("model.norm=middle", "model.norm"),
    ("model.activation=tanh", "model.activation"), ("data.pair=en-xx", "data.pair"),
    ("train.max_tokens=0", "train.max_tokens"), ("train.accum=-1", "train.accum")])
def test_validation_errors(item, match):
    with pytest.raises(ValueError, match=match):
        get_config("smoke", [item])


def test_validate_called_directly_on_a_config():
    with pytest.raises(ValueError, match="divisible"):
        validate(Config(model=ModelConfig(d_model=30, n_heads=4)))


def test_a_config_comes_back_from_its_record():
    cfg = get_config("cpu", ["train.tune_len_alpha=0.6,1.2"], pair="en-fr")
    assert Config.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg     # JSON's lists back to tuples
    old = cfg.to_dict()
    old["train"]["bf16_if_fast"] = True
    with pytest.raises(ValueError, match="TrainConfig has no bf16_if_fast: a config of another headlib version"):
        Config.from_dict(old)


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_config("smoke").model.d_model = 64  # type: ignore[misc]


def test_every_profile_has_grids_and_the_sweeps_read_them():
    from headlib.profiles import grids, profile as settings
    from headlib.pruning.points import independent_steps, lambda_grid, scratch_head_counts
    for profile in PROFILES:
        assert settings(profile).config == PROFILES[profile] and settings(profile).name == profile
        g = grids(profile)
        assert lambda_grid(profile, "encoder") == list(g.lambdas_encoder) == sorted(g.lambdas_encoder)
        assert lambda_grid(profile, "all") == list(g.lambdas_all)
        assert scratch_head_counts(profile, "all") == list(g.scratch_heads_all)
        assert independent_steps(profile) == g.finetune_steps
        assert g.finetune_steps // g.path_share >= 1          # the path spends at least one update per lambda
    before = get_config("cpu").digest()
    assert "lambdas_encoder" not in json.dumps(get_config("cpu").to_dict()) and get_config("cpu").digest() == before
    with pytest.raises(ValueError, match="unknown profile 'gpu'"):
        grids("gpu")


def test_grids_on_the_command_line_for_scripts():
    from conftest import run_cli
    assert run_cli("grids", "--profile", "cpu", "--key", "lambdas_all", "--groups", "3").stdout.split() == \
        ["0.0005,0.001,0.002", "0.005,0.01,0.02", "0.05,0.1"]
    assert run_cli("grids", "--profile", "smoke", "--key", "finetune_steps").stdout.strip() == "10"
    smoke = json.loads(run_cli("grids", "--profile", "smoke").stdout)
    assert set(smoke) == {"config", "grids", "prune", "lottery", "adapt", "domains"}   # the whole profile
    assert smoke["grids"]["lambdas_encoder"] == [0.01, 1.0] and smoke["config"]["model"]["d_model"] == 32
    assert smoke["domains"]["adapt"]["steps"] == 3 and smoke["prune"]["steps"] == PruneConfig().steps
    assert run_cli("grids", "--profile", "smoke", "--key", "domains.adapt.k").stdout.strip() == "3"
    assert run_cli("grids", "--profile", "cpu", "--key", "config.train.lr").stdout.strip() == "0.002"
    bad = run_cli("grids", "--key", "nope", check=False)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: grids: unknown key 'nope'; valid keys: " + ", ".join(json.loads(run_cli("grids").stdout)["grids"])
        + ", or a setting's dotted path such as prune.steps (python -m headlib grids lists them)"]

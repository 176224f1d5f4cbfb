"""The head-mask format (`headlib.nn.masks`): text and tensors round-trip, a malformed spec is one
error naming the config key, all-on kinds drop out of the canonical form."""
import pytest
import torch

from headlib.config import get_config
from headlib.nn.masks import canonical, kind_mask, parse_spec, to_spec

LAYERS = {"enc-self": 2, "dec-self": 2, "dec-enc": 2}


def test_specs_and_tensors_round_trip_and_errors_name_the_key():
    masks = {"enc-self": torch.tensor([[1.0, 0, 1, 1], [0, 0, 0, 1]]), "dec-enc": torch.ones(2, 4)}
    spec = to_spec(masks)
    assert spec == "enc-self:1011/0001,dec-enc:1111/1111"
    back = parse_spec(spec, LAYERS, 4)
    assert set(back) == set(masks) and all(torch.equal(back[k], masks[k]) for k in masks)
    for bad in ("enc-self:1011", "enc-self:1012/0001", "cross:1111/1111", "enc-self:10110/0001"):
        with pytest.raises(ValueError, match="model.head_mask"):
            get_config("smoke", [f"model.head_mask={bad}"])


def test_canonical_drops_the_kinds_whose_heads_are_all_on():
    assert canonical("enc-self:1011/0001,dec-self:1111/1111,dec-enc:1111/1111") == "enc-self:1011/0001"
    assert canonical("enc-self:1111/1111") == ""


def test_kind_mask_reads_one_kind_with_its_own_shape():
    spec = "enc-self:101/001/111,dec-enc:11/01"
    assert torch.equal(kind_mask(spec, "enc-self"), torch.tensor([[1.0, 0, 1], [0, 0, 1], [1, 1, 1]]))
    assert torch.equal(kind_mask(spec, "dec-enc"), torch.tensor([[1.0, 1], [0, 1]]))
    with pytest.raises(ValueError, match="no part for dec-self"):
        kind_mask(spec, "dec-self")

"""Hand-built sweep points for the tests of `headlib.pruning.points` and `headlib.pruning.readout`."""
import torch

from headlib.nn.masks import to_spec


def point_row(lam, enc, dec_self=None, kinds=("enc-self",)):
    masks = {"enc-self": torch.tensor(enc, dtype=torch.float)}
    if dec_self is not None:
        masks["dec-self"] = torch.tensor(dec_self, dtype=torch.float)
    return {"lam": lam, "kinds": list(kinds), "mask": to_spec(masks),
            "retained": {k: int(m.sum()) for k, m in masks.items()},
            "per_layer": {k: m.sum(1).int().tolist() for k, m in masks.items()}}

"""The head view's HTML: its data are the attention given, and bad shapes are refused."""
import json
import re

import numpy as np
import pytest

from headlib.analysis.headview import head_view_html


def test_embedded_data_round_trip_and_script_safe_tokens():
    tokens = [["a", "</script>", "c"]]
    att = np.random.default_rng(0).dirichlet(np.ones(3), size=(2, 4, 3))      # (L, H, T, T)
    out = head_view_html(tokens, [att], layer=1, head=2)
    payload = re.search(r'<script type="application/json">(.*?)</script>', out, re.S).group(1)
    data = json.loads(payload)
    assert data["sentences"][0]["tokens"] == tokens[0]
    np.testing.assert_allclose(data["sentences"][0]["attention"], att, atol=5e-4)
    assert out.count("<option") == 1 + 2 + 4
    assert 'value="1" selected' in out and 'value="2" selected' in out


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="does not fit 2 tokens"):
        head_view_html([["a", "b"]], [np.zeros((1, 1, 3, 3))])
    with pytest.raises(ValueError, match="1 sentences but 2"):
        head_view_html([["a"]], [np.zeros((1, 1, 1, 1))] * 2)

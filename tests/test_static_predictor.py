"""The deprecated static predictor's names: they warn and answer as the live predictor does."""

from __future__ import annotations

import pytest

from minitorch_dist.memory import predict
from minitorch_dist.viz import static_predictor as sp
from minitorch_dist.viz.live_html import live_html


def test_aliases_warn_and_call_the_live_predictor():
    values = {"preset": "llama-3-70b", "seq": "8192", "zero": "3", "dp": "64", "offload": "true"}
    with pytest.warns(DeprecationWarning, match="live_result"):
        got = sp.predict_for_controls(values)
    assert got == predict("llama-3-70b", 8192, 1, zero_stage=3, dp=64, offload=True)
    with pytest.warns(DeprecationWarning, match="live_html"):
        page = sp.static_predictor_html(preset="llama-3-70b", zero=3)
    assert page == live_html("predictor", preset="llama-3-70b", zero_stage=3)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="control zero_stage"):
        sp.predict_for_controls({"zero": "5"})

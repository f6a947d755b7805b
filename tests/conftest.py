"""Shared test set-up."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    """One intra-op thread: on a busy 2-core machine, two threads make small ops 20x slower."""
    torch.set_num_threads(1)

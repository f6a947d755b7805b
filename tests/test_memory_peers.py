"""The peers' model-state formulas (minitorch_dist.memory.peers), each against its tool's source
read by hand, and the differences from ours that chapter 1 explains."""

from __future__ import annotations

import pytest

from minitorch_dist.memory import model_state_bytes, peer_model_state_bytes

PSI = 8_030_261_248  # Llama-3-8B


def test_megatron_is_ours_with_fp32_main_grads_and_no_16bit_grads() -> None:
    """Catches 16 or 20 bytes for Megatron: 2 + 4 + 12 = 18, and 6 + 12/d distributed."""
    assert peer_model_state_bytes("megatron", PSI) == 18 * PSI
    ours_fp32_grads = model_state_bytes(PSI, recipe="mixed_fp32_grads")["total"]
    assert peer_model_state_bytes("megatron", PSI) == ours_fp32_grads - 2 * PSI
    assert peer_model_state_bytes("megatron", 1000, dp=8, distributed_optimizer=True) == 7500


def test_deepspeed_formulas() -> None:
    """DeepSpeed's estimate_zero2/3_model_states_mem_needs without offload, by hand."""
    assert peer_model_state_bytes("deepspeed_zero2", 1000, dp=8) == 2000 + 2250
    assert peer_model_state_bytes("deepspeed_zero2_before_5099", 1000, dp=8) == 4000 + 2000
    assert (
        peer_model_state_bytes("deepspeed_zero3", 1000, dp=8, largest_layer_params=50) == 200 + 2250
    )
    ours2 = model_state_bytes(8000, zero_stage=2, dp=8)["total"]  # 2 x 8000 + 14 x 1000
    # since PR #5099 only the fp32 gradient partition differs (18/N against 14/N) ...
    assert peer_model_state_bytes("deepspeed_zero2", 8000, dp=8) - ours2 == 4 * 1000
    # ... before it, the 16-bit gradients were counted whole on every rank (2 Psi too many)
    before = peer_model_state_bytes("deepspeed_zero2_before_5099", 8000, dp=8)
    assert before - ours2 == 2 * 8000 + 2 * 1000
    ours3 = model_state_bytes(8000, zero_stage=3, dp=8)["total"]  # 16 x 1000
    assert peer_model_state_bytes("deepspeed_zero3", 8000, dp=8) - ours3 == 2 * 1000


def test_accelerate_is_four_times_the_model_in_its_dtype() -> None:
    assert peer_model_state_bytes("accelerate", PSI, dtype_bytes=2) == 8 * PSI
    assert (
        peer_model_state_bytes("accelerate", PSI, dtype_bytes=4)
        == model_state_bytes(PSI, recipe="fp32")["total"]
    )


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="tool"):
        peer_model_state_bytes("colossal", 10)
    with pytest.raises(ValueError, match="dp"):
        peer_model_state_bytes("megatron", 10, dp=0)

"""The answers to the exercises of lab 10, recomputed through the package.

Each answer is computed twice: by the package (as the lab does) and by hand from the formulas
(one dispatch sends T k h (ep-1)/ep elements, Lepikhin et al. 2021, section 3.2; capacity
C = ceil(T/E cf k), Fedus et al. 2022, section 2.2; Mixtral-8x7B's shape from its config.json),
so a change in the package that would silently change a published answer fails here. Not graded
(no ``lab10`` marker): the graded tests of the code these answers use live in
test_expert_parallel.py.
"""

from __future__ import annotations

from minitorch_dist.expert_parallel import (
    all_to_all_bytes,
    capacity_buffer_bytes,
    ep_step_bytes,
    expert_capacity,
)
from minitorch_dist.models.moe import moe_params_per_rank, moe_preset


# -- lab 10 -----------------------------------------------------------------------------------
def test_lab_ex1_mixtral_dispatch_bytes():
    """4096 x 2 x 4096 x 7/8 x 2 bytes = 56 MiB per dispatch."""
    answer = 4096 * 2 * 4096 * 7 // 8 * 2
    assert answer == 58_720_256 == 56 * 2**20
    assert all_to_all_bytes(tokens=4096, top_k=2, hidden=4096, ep=8) == answer


def test_lab_ex2_capacity_and_buffer_bytes():
    """C = 4096/8 x 1.25 x 2 = 1280; the buffer sends 1 x 1280 rows to each of 7 ranks: 70 MiB,
    1.25 times the dropless dispatch."""
    assert expert_capacity(4096, 8, 1.25, top_k=2) == 1280
    answer = 1280 * 7 * 4096 * 2
    assert answer == 73_400_320 == 70 * 2**20
    kw = {"tokens": 4096, "top_k": 2, "hidden": 4096, "ep": 8}
    assert capacity_buffer_bytes(**kw, experts=8, capacity_factor=1.25) == answer
    assert answer == 1.25 * all_to_all_bytes(**kw)


def test_lab_ex3_mixtral_params_per_rank_ep8():
    """All of Mixtral-8x7B but 7 of each layer's 8 experts: 7,242,780,672."""
    answer = 46_702_792_704 - 32 * 7 * 3 * 4096 * 14336
    assert answer == 7_242_780_672
    assert moe_params_per_rank(*moe_preset("mixtral-8x7b"), ep=8) == answer


def test_lab_section7_mixtral_scale():
    """Section 7's numbers: 7 GiB per step over the 32 layers (four all-to-alls of 56 MiB)."""
    sent = all_to_all_bytes(tokens=4096, top_k=2, hidden=4096, ep=8)
    assert 32 * ep_step_bytes(sent) == 7 * 2**30
    assert moe_params_per_rank(*moe_preset("mixtral-8x7b"), ep=4) == 12_879_925_248


def test_lab_ex4_bias_chooses_probabilities_weigh():
    """Scores p + b = (0.25, 0.3, 0.35, 0.1): experts 2 then 1; gate weights 0.2 and 0.3
    renormalised, 0.4 and 0.6 -- through the package's BiasedRouter (chapter 10)."""
    import torch

    from minitorch_dist.course.answers import check_answer
    from minitorch_dist.models.moe_bias import BiasedRouter

    router = BiasedRouter(4, 4, 2).double()
    with torch.no_grad():
        router.gate.weight.zero_()
        router.gate.weight[:, 0] = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64).log()
        router.bias.copy_(torch.tensor([-0.15, 0.0, 0.15, 0.0]))
    weights, experts, _ = router(torch.eye(4, dtype=torch.float64)[:1])
    assert experts.tolist() == [[2, 1]]
    assert torch.allclose(weights, torch.tensor([[0.4, 0.6]], dtype=torch.float64))
    check_answer("lab10.8", (2, 1, 0.4, 0.6))

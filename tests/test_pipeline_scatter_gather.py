"""Scatter/gather of pipeline messages with TP (Narayanan et al. 2021, section 4.1; chapter 9).

The 3D grid (pp = 2, tp = 2, no sequence parallelism) with its stages' messages scattered over
the TP group and gathered on arrival trains as one process does, in fp64 (losses, gradient
norms, every weight), and each rank sends b s h / t elements per message: counted = formula.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist import launch
from minitorch_dist.grid import ProcessGrid
from minitorch_dist.models import Llama
from minitorch_dist.parallel3d import build_3d
from minitorch_dist.parallel3d.compare import TINY, reference_with_clip
from minitorch_dist.parallel3d.recipe import rank_micro_batches, train_step
from minitorch_dist.pipeline.scatter_gather import enable_scatter_gather, scatter_gather_bytes
from minitorch_dist.reference import EXACT, TIGHT, compare, make_batches
from minitorch_dist.tensor_parallel import padded_vocab_size, tp_shards

SEQ, M, STEPS, LR, MAX_NORM = 16, 2, 2, 1e-3, 0.5


def _rank(rank: int, world_size: int, batches: list, scatter: bool) -> dict:
    torch.manual_seed(0)
    grid = ProcessGrid(dp=1, pp=2, cp=1, tp=2)
    model = Llama(TINY).to(torch.float64)
    model3d = build_3d(
        model, grid, micro_batches=M, seq_len=SEQ, lr=LR, max_norm=MAX_NORM, sp=False
    )
    sg = enable_scatter_gather(model3d.stage, grid.group("tp")) if scatter else None
    losses = [train_step(model3d, rank_micro_batches(b, grid, M)) for b in batches]
    shards = {n: s for n, s in tp_shards(TINY, grid.index("tp"), 2).items() if n in model3d.named}
    weights = {n: p.detach().clone() for n, p in model3d.named.items()}
    return {
        "losses": losses,
        "weights": weights,
        "shards": shards,
        "sent": sg.sent_bytes if sg else None,
    }


@pytest.fixture(scope="module")
def runs() -> tuple[list, object]:
    batches = make_batches(TINY.vocab_size, M, SEQ, STEPS)
    results = launch(_rank, 4, batches, True, timeout=180)
    ref, _ = reference_with_clip(TINY, batches, torch.float64, LR, MAX_NORM)
    return results, ref


def test_scatter_gather_equals_one_process_in_fp64(runs: tuple) -> None:
    """Catches a gather that fills the receive buffer in the wrong order, or a slice that is not
    this rank's: the next stage then computes on a scrambled activation (or gradient)."""
    results, ref = runs
    vp = padded_vocab_size(TINY.vocab_size, 2)
    want = {
        n: torch.cat([w, w.new_zeros(vp - w.shape[0], *w.shape[1:])])
        if n in ("embed.weight", "head.weight")
        else w
        for n, w in ref.weights.items()
    }
    for rank, r in enumerate(results):
        compare(
            {"loss": torch.tensor(r["losses"], dtype=torch.float64)},
            {"loss": torch.tensor(ref.losses, dtype=torch.float64)},
            tolerance=TIGHT,
            label=f"rank {rank}, ",
        )
        compare(
            r["weights"],
            {n: want[n] for n in r["weights"]},
            shards=r["shards"],
            tolerance=EXACT,
            label=f"rank {rank}, weight ",
        )


def test_each_rank_sends_bsh_over_t_per_message(runs: tuple) -> None:
    """Catches a stage that still sends the whole b s h message from every TP rank."""
    results, _ = runs
    per_message = scatter_gather_bytes(
        micro_batch=1, seq_len=SEQ, hidden=TINY.hidden, tp=2, bytes_per_element=8
    )
    # grid order: ranks 0, 1 are stage 0 (activations forward), 2, 3 stage 1 (gradients back)
    for r in results:
        assert r["sent"] == STEPS * M * per_message
    assert per_message * 2 == 1 * SEQ * TINY.hidden * 8  # 1/t of the whole message


def test_scatter_gather_bytes_refuses_indivisible_messages() -> None:
    with pytest.raises(ValueError, match="not divisible by tp=3"):
        scatter_gather_bytes(micro_batch=1, seq_len=5, hidden=7, tp=3)

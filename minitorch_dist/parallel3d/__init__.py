"""3D parallelism (chapter 11, lab 11): the techniques of chapters 6-9 composed on one grid.

    grid = ProcessGrid(dp=2, pp=2, tp=2)                          # 8 ranks, tp innermost
    model3d = build_3d(Llama(cfg), grid, micro_batches=2, seq_len=16, lr=1e-2, max_norm=1.0)
    loss = train_step(model3d, rank_micro_batches(batch, grid, 2))

The only package allowed to import several techniques (README, "How the code is organised"). Modules: ``recipe`` (the
order of the wrappers and the training step), ``clip`` (the gradient norm over the whole grid,
inside ZeRO-1), ``compare`` (against the single-process reference, and the pitfalls made to
happen), ``seeds`` (which ranks share a random stream), ``plots`` (the grid as it was built; not imported here).
"""

from minitorch_dist.parallel3d.clip import (
    ClippedZeroStage1,
    clip_coefficient,
    grid_grad_norm,
    tp_replicated,
)
from minitorch_dist.parallel3d.compare import (
    BUGS,
    FP32_ADAM,
    GridCheck,
    compare_grid_with_reference,
    grid_rank,
    reference_with_clip,
)
from minitorch_dist.parallel3d.recipe import (
    GridModel,
    GridStage,
    build_3d,
    rank_micro_batches,
    train_step,
)
from minitorch_dist.parallel3d.seeds import PP_SEED_OFFSET, grid_generators, stream_draws

__all__ = [
    "BUGS",
    "FP32_ADAM",
    "PP_SEED_OFFSET",
    "ClippedZeroStage1",
    "GridCheck",
    "GridModel",
    "GridStage",
    "build_3d",
    "clip_coefficient",
    "compare_grid_with_reference",
    "grid_generators",
    "grid_grad_norm",
    "grid_rank",
    "rank_micro_batches",
    "reference_with_clip",
    "stream_draws",
    "tp_replicated",
    "train_step",
]

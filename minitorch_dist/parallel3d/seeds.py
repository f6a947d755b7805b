"""Random streams on a grid: which ranks must draw the same numbers, and which must not.

Three streams, each with its own rule (Megatron-LM: ``_set_random_seed`` in
``training/initialize.py`` and ``model_parallel_cuda_manual_seed`` in
``core/tensor_parallel/random.py``; Shoeybi et al. 2019, appendix B.2):

* **initialisation**: the same on EVERY rank. Our ranks build the whole model after one seed
  and cut their slices from it, so dp replicas start equal and tp slices are pieces of one
  matrix -- the single-process model, distributed. A rank that seeds with its own rank builds a
  different model on each replica (the ``"rank_seed"`` pitfall of :mod:`.compare`).
* **dropout outside the tp regions** (residual stream, embeddings): the same on the ranks of a
  tp group, which hold the same activations (per rank under sequence parallelism, where they
  hold different tokens); different per pipeline stage (Megatron adds ``100 * pp_rank``: stages
  hold different layers); the same across dp replicas is harmless, since they see different data.
* **dropout inside a tp region** (attention probabilities, the MLP's hidden units): a stream per
  tp rank (``+ 2718 + tp_rank``), since each rank holds different heads or columns. Seeded alike,
  every rank would drop the same positions of its heads: correlated masks, a different model.

:func:`grid_generators` returns the three generators of this rank; :func:`stream_draws` runs it
on emulated ranks and returns each rank's first draws, for the checks and the lab's table.
"""

from __future__ import annotations

from typing import Any

import torch

from minitorch_dist.grid import GridLayout, ProcessGrid
from minitorch_dist.launching.launcher import launch
from minitorch_dist.tensor_parallel import tp_generators

__all__ = ["PP_SEED_OFFSET", "grid_generators", "stream_draws"]

PP_SEED_OFFSET = 100  # Megatron-LM's per-pipeline-stage offset of the seed


def grid_generators(seed: int, grid: Any, *, sp: bool = False) -> dict[str, torch.Generator]:
    """This rank's ``"init"``, ``"outside"`` and ``"inside"`` CPU generators (see the module
    docstring); the dropout streams come from chapter 7's ``tp_generators``, offset per stage."""
    outside, inside = tp_generators(
        seed + PP_SEED_OFFSET * grid.index("pp"), grid.group("tp"), sp=sp
    )
    return {"init": torch.Generator().manual_seed(seed), "outside": outside, "inside": inside}


def _naive_generators(seed: int, grid: Any, *, sp: bool = False) -> dict[str, torch.Generator]:
    """Pitfall: one seed for every stream on every rank."""
    return {name: torch.Generator().manual_seed(seed) for name in ("init", "outside", "inside")}


def _draws(
    rank: int, world_size: int, layout: GridLayout, seed: int, sp: bool, naive: bool
) -> dict[str, Any]:
    grid = ProcessGrid(dp=layout.dp, pp=layout.pp, cp=layout.cp, ep=layout.ep, tp=layout.tp)
    make = _naive_generators if naive else grid_generators
    gens = make(seed, grid, sp=sp)
    return {
        "coords": grid.coords,
        **{name: torch.rand(4, generator=g).tolist() for name, g in gens.items()},
    }


def stream_draws(
    layout: GridLayout, seed: int = 0, *, sp: bool = False, naive: bool = False
) -> list[dict[str, Any]]:
    """Per rank (in rank order): its coordinates and the first four numbers of each stream
    (``naive=True``: every stream seeded alike, the pitfall)."""
    return launch(_draws, layout.world_size, layout, seed, sp, naive, timeout=60)

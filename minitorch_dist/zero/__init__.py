"""ZeRO: data parallelism without the redundancy (chapter 6, lab 6).

Rajbhandari et al. 2020 ("ZeRO: Memory Optimizations Toward Training Trillion Parameter Models")
shard the model states over the N data-parallel ranks in three stages, each a ``torch.optim``
optimizer shaped like torch's ``ZeroRedundancyOptimizer`` (any ``torch.optim`` class inside):

    sharding    flat, padded buffers cut into N shards; units of parameters (shared helper)
    stage0      plain data parallelism, the baseline                         16 Psi per rank
    stage1      optimizer states sharded (lab06.1)                4 Psi + 4 Psi + 8 Psi / N (fp32)
    stage2      gradients reduce-scattered into shards (lab06.2)        4 Psi + 12 Psi / N
    stage3      parameters gathered on demand, freed after use, prefetched (lab06.3)  16 Psi / N
    offload     optimizer states and the update in CPU memory, ZeRO-Offload (lab06.4)
    state       full (consolidated, any world size) and local (sharded) state dicts
    transform   apply_zero3(model): stage 3 as a module transform (FSDP2's fully_shard)
    clip        clip_grad_norm_: the global gradient norm over the shards (torch's raises)
    base        the step every stage shares: reduce the gradients, update the shards, gather
    compat      what makes a stage a torch.optim.Optimizer: param groups, state dicts
    holdings    the bytes a rank keeps and sends, read off a stage (for measure)
    groups      param groups and units; sync: the same initial weights on every rank
    guard       torch idioms that cannot be right on ZeRO's objects raise (installed by the
                first ZeRO object built)
    stages      STAGES and zero_optimizer(model, stage): the stage by its number
    cost        bytes each rank sends per step, closed form (torch-free, for the planner)
    measure     per-rank bytes and bytes communicated, on emulated ranks and on fake ones
    train       training on emulated ranks against the single-process Adam reference

    opt = ZeroStage2(model.parameters(), torch.optim.AdamW, lr=1e-3, weight_decay=0.1)
    loss.backward(); opt.step(); opt.zero_grad()       # a torch.optim.Optimizer: schedulers work
    opt = zero_optimizer(model, stage=3, lr=1e-3)      # stage 3 wraps the module
"""

from typing import TYPE_CHECKING

from minitorch_dist.lazy import attach

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from .base import ZeroOptimizer
    from .clip import clip_grad_norm_
    from .cost import zero_comm_bytes
    from .holdings import storage_bytes
    from .offload import CpuOffloadAdam
    from .sharding import FlatUnit, build_units, default_unit_modules, shard_numel
    from .stage0 import ZeroStage0
    from .stage1 import ZeroStage1
    from .stage2 import ZeroStage2
    from .stage3 import ZeroStage3
    from .stages import STAGES, zero_optimizer
    from .transform import MixedPrecision, Zero3Module, apply_zero3

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above

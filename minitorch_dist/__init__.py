"""minitorch_dist: the package behind the book *Training LLMs when memory is the wall*.

Each subpackage is one chapter's technique, built by the reader in the lab of the same number;
ARCHITECTURE.md (at the repository's root) has the layering rules and the public API.

    launching/     emulated ranks (N CPU processes on gloo) and torchrun for real GPUs  chapter 0
    checks         the argument checks every module shares (a leaf: standard library only)
    arithmetic     the torch-free layer: closed forms, memory prediction, the planner (package
                   ``__init__`` files export lazily through ``lazy``, so they import no torch)
    models/        LlamaConfig (presets of real checkpoints), the tiny Llama every lab trains,
                   cut into pipeline stages (stage) and checkpoint targets (checkpointing)
    printing       rank-ordered printing and seeding
    figures        the figure base (BookFigure, category colours) every topic's plots use
    display        what the book shows, fitted to its column: tables, a task's signature
    scopes         thread-local scopes shared across packages (a backend's collectives)
    progress       a progress bar, silent under CI, nbval and builds
    grid           ProcessGrid: dp x pp x cp x ep x tp process groups, tp innermost, passed
                   explicitly to every technique of chapters 7-11
    reference      the one harness that checks N ranks against one process (outputs,
                   gradients or their shards, weights after k steps); the checks
                   themselves in comparison (re-exported by reference)
    memory/        closed-form accounting (estimate), per-rank totals (prediction),
                   measured accounting (track), FLOPs per token and MFU (flops)         chapters 1, 4
    precision/     number formats, loss scaling, mixed precision, fp8                    chapter 2
    recompute/     activation checkpointing: full and selective policies                 chapter 3
    accumulate/    gradient accumulation with token-weighted normalisation               chapter 4
    comm/          bytes per collective, a counter, the ring from send/recv              chapter 5
    data_parallel/ naive and bucketed DDP with no_sync; a profiled step (profiling)      chapter 5
    zero/          ZeRO stages 1, 2, 3, optimizer offload, checkpoints (checkpoint)      chapter 6
    tensor_parallel/  f/g, column/row/vocab-parallel layers, sequence parallelism        chapter 7
    context_parallel/ ring attention (online softmax), zig-zag layout, Ulysses          chapter 8
    pipeline/      schedules as data, stages, one runtime, a simulator                   chapter 9
    expert_parallel/  router, capacity, all-to-all dispatch and combine (models/moe)     chapter 10
    parallel3d/    the one place that composes techniques on a grid                      chapter 11
    planner/       fits, costs and ranks layouts from the techniques' closed forms       chapter 12
    arithmetic     the torch-free layer: the closed forms, the memory predictor and the
                   planner import without torch (the book runs them in the browser)
    viz/           the ipywidgets memory predictor and planner (nothing else imports it)
    course/        the course and book machinery (make, release, grade, answers, the
                   book's Sphinx extensions): nothing a chapter teaches imports it

Modules that moved keep their old names (``minitorch_dist.grade``, ``python -m
minitorch_dist.make``) for the commands and notebooks in print: ``_moved`` lists them.

Each topic keeps its figures beside it in a ``plots`` module (``memory.plots``,
``precision.plots``, ``comm.plots``, ``recompute.plots``, ``accumulate.plots``) that its package's
``__init__`` does not import, so the numbers never pull in matplotlib.

Top-level names are imported lazily, so ``python -m minitorch_dist.make`` runs before torch is
installed and ``import minitorch_dist`` stays cheap.
"""

from typing import TYPE_CHECKING

from minitorch_dist import _moved
from minitorch_dist.lazy import attach

__version__ = "0.1.0"

_moved.install()  # the old names of moved modules (minitorch_dist.grade, .answers, ...)

if TYPE_CHECKING:  # what an editor follows; attach() imports each name on first use
    from minitorch_dist.comm.cost import collective_bytes
    from minitorch_dist.grid import GridLayout, ProcessGrid
    from minitorch_dist.launching.launcher import (
        LaunchError,
        RankError,
        RankTimeoutError,
        launch,
        torchrun,
    )
    from minitorch_dist.memory.estimate import activation_bytes, model_state_bytes
    from minitorch_dist.models.configs import LlamaConfig
    from minitorch_dist.printing import rank0_print, seed_all

__getattr__, __dir__ = attach(__name__)  # __all__: the names imported above

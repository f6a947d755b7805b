"""Drawings of collectives as ranks x chunks grids, taken from live runs; the ring, step by step.

A cell ``(rank, chunk)`` shows what that rank holds in that chunk of its buffer: ``a2`` is rank 0's
(``a``) chunk 2, ``Σ2`` the sum of every rank's chunk 2, ``ab1`` a partial sum of ranks 0 and 1.
:func:`run_collective` runs one collective on real tensors that *encode* this: row ``j`` of rank
``r``'s ``(n, 2)`` buffer is ``[2**r, 2**r * j]``, so after any sum the first entry is the bit
mask of the ranks that contributed and the second divided by the first is the chunk index.
The figures are therefore drawn from what the backend really did, not from a description.

The only module of ``comm`` that imports matplotlib: ``import minitorch_dist.comm`` (the cost
formulas, the counter, the shims) does not import this one.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from matplotlib.figure import Figure

from minitorch_dist.comm.cost import ALGORITHMS, collective_time
from minitorch_dist.comm.shim import all_gather_into_tensor, reduce_scatter_tensor
from minitorch_dist.figures import BookFigure  # shows itself as a PNG

__all__ = [
    "COLLECTIVES",
    "Cell",
    "plot_alpha_beta",
    "plot_collectives",
    "plot_ring",
    "ring_states",
    "run_collective",
]

COLLECTIVES = (
    "broadcast",
    "reduce",
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "all_to_all",
    "send_recv",
)
Cell = tuple[tuple[int, ...], int] | None  # (ranks summed in, chunk index), or None: empty
_LETTERS = "abcdefgh"
_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2", "#937860", "#da8bc3", "#8c8c8c"]


def _encode(rank: int, n: int, rows: list[int]) -> torch.Tensor:
    t = torch.zeros(n, 2, dtype=torch.float64)  # (chunks, 2): [mask, mask * chunk] per row
    for j in rows:
        t[j] = torch.tensor([2.0**rank, 2.0**rank * j])
    return t


def _decode(t: torch.Tensor) -> list[Cell]:
    cells: list[Cell] = []
    for mask, weighted in t.tolist():
        if mask == 0:
            cells.append(None)
            continue
        ranks = tuple(r for r in range(int(mask).bit_length()) if int(mask) >> r & 1)
        cells.append((ranks, round(weighted / mask)))
    return cells


def run_collective(rank: int, world_size: int, op: str) -> tuple[list[Cell], list[Cell]]:
    """Run ``op`` (one of :data:`COLLECTIVES`) on this rank; return its cells before and after.

    Call it under ``launch(run_collective, n, op)``. Rooted ops use rank 0 as the root;
    ``send_recv`` sends rank 0's buffer to rank 1. After a ``reduce`` only the root's buffer is
    defined (gloo uses the others as scratch space), so theirs are returned empty.
    """
    if op not in COLLECTIVES:
        raise ValueError(f"op must be one of {COLLECTIVES}, got {op!r}")
    n = world_size
    everything = list(range(n))
    own = {
        "broadcast": everything if rank == 0 else [],
        "all_gather": [rank],
        "send_recv": everything if rank == 0 else [],
    }.get(op, everything)
    t = _encode(rank, n, own)
    before = _decode(t)
    if op == "broadcast":
        dist.broadcast(t, src=0)
    elif op == "reduce":
        dist.reduce(t, dst=0)
        t = t if rank == 0 else torch.zeros_like(t)
    elif op == "all_reduce":
        dist.all_reduce(t)
    elif op == "reduce_scatter":
        out = torch.zeros(1, 2, dtype=t.dtype)
        reduce_scatter_tensor(out, t)  # rank r keeps row r of the sum
        t = torch.zeros_like(t)
        t[rank] = out[0]
    elif op == "all_gather":
        all_gather_into_tensor(t, t[rank : rank + 1].clone())
    elif op == "all_to_all":
        out = torch.empty_like(t)
        dist.all_to_all_single(out, t)  # row j goes to rank j, arriving as row `rank`
        t = out
    elif n > 1 and rank in (0, 1):  # send_recv
        dist.send(t, dst=1) if rank == 0 else dist.recv(t, src=0)
    return before, _decode(t)


def _label(cell: Cell, n: int) -> str:
    if cell is None:
        return ""
    ranks, chunk = cell
    return ("Σ" if len(ranks) == n and n > 2 else "".join(_LETTERS[r] for r in ranks)) + str(chunk)


def _grid(
    ax, cells: list[list[Cell]], title: str, sent: set | None = None, font: float = 8
) -> None:  # noqa: ANN001
    n = len(cells)
    for r, row in enumerate(cells):
        for j, cell in enumerate(row):
            if cell is None:
                face, alpha = "white", 1.0
            else:
                ranks = cell[0]
                face = _COLORS[ranks[0] % len(_COLORS)] if len(ranks) == 1 else "#333333"
                alpha = 1.0 if len(ranks) in (1, n) else 0.35 + 0.5 * len(ranks) / n
            edge = 2.5 if sent and (r, j) in sent else 0.6
            ax.add_patch(_rect(j, r, face, alpha, edge))
            ax.text(
                j + 0.5,
                r + 0.5,
                _label(cell, n),
                ha="center",
                va="center",
                fontsize=font,
                color="white" if cell else "black",
            )
    ax.set_xlim(0, len(cells[0]))
    ax.set_ylim(n, 0)
    ax.set_xticks([j + 0.5 for j in range(len(cells[0]))], [str(j) for j in range(len(cells[0]))])
    ax.set_yticks([r + 0.5 for r in range(n)], [f"rank {r}" for r in range(n)])
    ax.tick_params(length=0, labelsize=font)
    ax.set_title(title, fontsize=font + 1)


def _rect(x: float, y: float, face: str, alpha: float, edge: float):  # noqa: ANN202
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), 1, 1, facecolor=face, alpha=alpha, edgecolor="black", linewidth=edge)


def plot_collectives(states: dict[str, list[tuple[list[Cell], list[Cell]]]]) -> Figure:
    """Before and after grids (ranks x chunks) per op; ``states[op]`` is ``launch``'s result."""
    if not states:
        raise ValueError("states must hold at least one collective")
    fig = BookFigure(figsize=(6.2, 1.55 * len(states)))
    axes = fig.subplots(len(states), 2, squeeze=False)
    for (op, per_rank), (left, right) in zip(states.items(), axes):
        _grid(left, [b for b, _ in per_rank], f"{op}: before")
        _grid(right, [a for _, a in per_rank], f"{op}: after")
        for ax in (left, right):
            ax.set_xlabel("chunk", fontsize=8, labelpad=1)
    fig.tight_layout()
    fig.description = (
        f"Grids of ranks by chunks before and after {', '.join(states)}: which ranks' data "
        "each rank holds in each chunk, before the collective and after it."
    )
    return fig


def ring_states(n: int) -> list[tuple[str, list[list[Cell]], set]]:
    """The ring all-reduce on ``n`` ranks, simulated: ``(title, cells, sent)`` per step.

    ``sent`` holds the ``(rank, chunk)`` cells sent to the right neighbour at that step.
    """
    if not isinstance(n, int) or not 2 <= n <= len(_LETTERS):
        raise ValueError(f"n must be an int in [2, {len(_LETTERS)}], got {n!r}")
    cells: list[list[Cell]] = [[((r,), j) for j in range(n)] for r in range(n)]
    out = [("start", [row[:] for row in cells], set())]
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(n - 1):
            shift = 1 if phase == "reduce-scatter" else 0
            sends = {r: (r - step - shift) % n for r in range(n)}  # rank -> chunk it sends
            new = [row[:] for row in cells]
            for r, j in sends.items():
                right = (r + 1) % n
                got = cells[r][j]
                if phase == "reduce-scatter":
                    new[right][j] = (tuple(sorted(set(cells[right][j][0]) | set(got[0]))), j)
                else:
                    new[right][j] = got
            out.append((f"{phase} {step + 1}", new, set(sends.items())))
            cells = new
    return out


def plot_ring(n: int = 4) -> Figure:
    """Every step of the ring all-reduce on ``n`` ranks; thick borders mark the chunks sent.

    Two rows (start and reduce-scatter above, all-gather below), 6.4 inches wide: at the
    book's 100 dpi that is 640 pixels, narrower than the text column, so the page shows it
    unscaled and its 9-point labels stay readable (one row of seven steps was scaled to
    about two thirds, 6-pixel labels).
    """
    steps = ring_states(n)
    cols = n  # start + (n - 1) reduce-scatter steps; below them the (n - 1) all-gather steps
    fig = BookFigure(figsize=(6.4, 0.75 + 0.62 * n))
    axes = fig.subplots(2, cols, gridspec_kw={"wspace": 0.06, "hspace": 0.45})
    slots = [axes[0][j] for j in range(cols)] + [axes[1][j] for j in range(cols - 1)]
    fig.delaxes(axes[1][cols - 1])
    for ax, (title, cells, sent) in zip(slots, steps):
        _grid(ax, cells, title, sent, font=8.5)
        if ax not in (axes[0][0], axes[1][0]):
            ax.set_yticks([])
    fig.subplots_adjust(left=0.1, right=0.99, top=0.92, bottom=0.07)
    fig.description = (
        f"The ring all-reduce on {n} ranks step by step: the start, {n - 1} reduce-scatter "
        f"steps, then {n - 1} all-gather steps, each a grid of ranks by chunks naming the ranks "
        "summed into each chunk, with the chunks sent to the right neighbour outlined."
    )
    return fig


def plot_alpha_beta(
    world_size: int, alpha: float, bandwidth: float, sizes: list[float] | None = None
) -> Figure:
    """All-reduce time against message size for each algorithm of ``cost.collective_time``."""
    sizes = sizes or [2.0**k for k in range(4, 34)]
    fig = BookFigure(figsize=(6, 3.4))
    ax = fig.subplots()
    for algorithm in ALGORITHMS:
        t = [
            collective_time(
                "all_reduce", s, world_size, alpha=alpha, bandwidth=bandwidth, algorithm=algorithm
            )
            for s in sizes
        ]
        ax.loglog(sizes, t, label=algorithm.replace("_", " "))
    ax.set_xlabel("message size S (bytes)")
    ax.set_ylabel("all-reduce time (s)")
    ax.set_title(
        f"alpha-beta model, n = {world_size}, alpha = {alpha * 1e6:g} µs, {bandwidth / 1e9:g} GB/s",
        fontsize=9,
    )
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return fig

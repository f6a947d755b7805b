"""How much of tensor parallelism's communication can hide behind compute: a small timeline
simulation of one transformer layer's backward pass on one rank (chapter 7).

Each tensor-parallel region (attention, MLP) is entered through a column-parallel linear
(wq/wk/wv; w1/w3) whose backward computes the input gradient ``dX = dY W^T`` and the weight
gradient ``dW = X^T dY``, and then all-reduces ``dX`` over the ``t`` ranks (the ``f`` operator).
Nothing waits for ``dW``, so Megatron-LM starts the all-reduce as soon as ``dX`` is ready and
computes ``dW`` meanwhile (Megatron Core's ``LinearWithGradAccumulationAndAsyncCommunication``;
with sequence parallelism the same trick hides the reduce-scatter).
Without that, the all-reduce sits between the two products.

The simulation runs two streams, compute and communication, on one rank, in the order of the
backward pass: per region, the row-parallel linear's two products, the core (attention scores
or SwiGLU, here only attention's, 2x its forward), the column-parallel linear's ``dX``, the
all-reduce, its ``dW``; the next region waits for the all-reduce (its norm needs the sum).
A product of ``m x k`` by ``k x n`` costs ``2 m k n`` FLOP at ``flops`` FLOP/s; an all-reduce
takes ``2 (t - 1) alpha`` plus its ring bytes over ``bandwidth``, one quarter of
:func:`~minitorch_dist.tensor_parallel.tp_comm_bytes` (four equal all-reduces per layer, two of
them in backward). Compute is assumed not slowed by the concurrent collective (on a GPU the
collective's kernels take some of the SMs: real gains are smaller).

:func:`collective_matmul` does the same for an all-gather followed by a product (sequence
parallelism's forward): decomposed into ``t`` chunks (Wang et al. 2023, "Overlap
communication with dependent computation via decomposition"; PyTorch's async TP),
each chunk's product runs while the next shard travels.
"""

from __future__ import annotations

from typing import Any

from minitorch_dist.checks import check_bool, check_int, check_positive
from minitorch_dist.tensor_parallel.cost import kv_heads_per_rank, tp_comm_bytes

__all__ = ["Event", "collective_matmul", "tp_backward_timeline"]

Event = tuple[str, str, float, float]  # (stream "compute" | "comm", label, start s, end s)


def _check_rates(bandwidth: float, flops: float, alpha: float) -> None:
    check_positive("bandwidth", bandwidth)
    check_positive("flops", flops)
    if not alpha >= 0:
        raise ValueError(f"alpha must be >= 0 seconds, got {alpha}")


def tp_backward_timeline(
    config: Any,
    *,
    micro_batch: int,
    seq_len: int,
    tp: int,
    bandwidth: float,
    flops: float,
    alpha: float = 0.0,
    bytes_per_element: int = 2,
    overlap: bool = True,
) -> dict[str, Any]:
    """One layer's backward on one tensor-parallel rank: ``events`` (a list of
    :data:`Event`), ``total`` seconds, ``compute`` (sum of the products), ``comm`` (sum of the
    all-reduces) and ``exposed = total - compute``. ``overlap=True``: each region's all-reduce
    of dX runs under its column-parallel linear's dW product. ``config``: a LlamaConfig (hidden,
    ffn_hidden, heads, kv_heads, head_dim)."""
    for name, value in (("micro_batch", micro_batch), ("seq_len", seq_len), ("tp", tp)):
        check_int(name, value)
    check_bool("overlap", overlap)
    _check_rates(bandwidth, flops, alpha)
    bs, h, f, t = micro_batch * seq_len, config.hidden, config.ffn_hidden, tp
    kv = kv_heads_per_rank(config.kv_heads, t) * config.head_dim  # k and v columns per rank
    nbytes = (
        tp_comm_bytes(
            micro_batch=micro_batch,
            seq_len=seq_len,
            hidden=h,
            tp=t,
            bytes_per_element=bytes_per_element,
        )
        / 4
    )
    all_reduce = 2 * (t - 1) * alpha + nbytes / bandwidth
    gemm = lambda k, n: 2 * bs * k * n / flops  # noqa: E731  (bs x k) @ (k x n)
    core = 4 * micro_batch * seq_len * seq_len * h / t / flops  # causal scores, 2x the forward
    regions = [  # (name, row-parallel product, core, column-parallel product)
        ("MLP", gemm(f // t, h), 0.0, gemm(h, 2 * f // t)),
        ("attention", gemm(h // t, h), core, gemm(h, h // t + 2 * kv)),
    ]
    events: list[Event] = []
    now = 0.0

    def run(stream: str, label: str, start: float, seconds: float) -> float:
        if seconds > 0:
            events.append((stream, label, start, start + seconds))
        return start + seconds

    for name, row, core_s, col in regions:
        now = run("compute", f"{name} row dX, dW", now, 2 * row)
        now = run("compute", f"{name} core", now, core_s)
        now = run("compute", f"{name} column dX", now, col)
        comm_end = run("comm", f"{name} all-reduce dX", now, all_reduce)
        now = run("compute", f"{name} column dW", now if overlap else comm_end, col)
        now = max(now, comm_end)  # the norm before the region needs the summed dX
    compute = sum(e[3] - e[2] for e in events if e[0] == "compute")
    comm = sum(e[3] - e[2] for e in events if e[0] == "comm")
    return {
        "events": events,
        "total": now,
        "compute": compute,
        "comm": comm,
        "exposed": now - compute,
    }


def collective_matmul(
    *, gather_seconds: float, gemm_seconds: float, tp: int, decompose: bool = True
) -> dict[str, Any]:
    """An all-gather over ``tp`` ranks (``gather_seconds``: ``t - 1`` shards, one after
    another) followed by a product on the gathered input (``gemm_seconds``). ``decompose``:
    the product is cut into ``tp`` chunks, one per shard; chunk 0 (this rank's shard) starts at
    once and chunk ``k`` when shard ``k`` has arrived and chunk ``k - 1`` is done, so the total is
    ``g + (t - 1) max(g, c)`` with ``g = gemm / t``, ``c = gather / (t - 1)``. Returns
    ``events``, ``total``, ``exposed = total - gemm_seconds``."""
    check_int("tp", tp)
    check_bool("decompose", decompose)
    for name, value in (("gather_seconds", gather_seconds), ("gemm_seconds", gemm_seconds)):
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0 seconds, got {value}")
    if not decompose or tp == 1:
        events = [
            ("comm", "all-gather", 0.0, gather_seconds),
            ("compute", "product", gather_seconds, gather_seconds + gemm_seconds),
        ]
        total = gather_seconds + gemm_seconds
        return {"events": events, "total": total, "exposed": total - gemm_seconds}
    g, c = gemm_seconds / tp, gather_seconds / (tp - 1)
    events, done = [("compute", "chunk 0", 0.0, g)], g
    for k in range(1, tp):
        events.append(("comm", f"shard {k}", (k - 1) * c, k * c))
        start = max(done, k * c)
        events.append(("compute", f"chunk {k}", start, start + g))
        done = start + g
    return {"events": events, "total": done, "exposed": done - gemm_seconds}

"""A cluster as the planner sees it: GPUs, their memory and peak, and two kinds of links.

Inside a node the GPUs talk over NVLink (``intra_bandwidth`` bytes/s each way per GPU); between
nodes every message leaves through one of the node's ``nics_per_node`` network ports of
``nic_bandwidth`` bytes/s each. Each message also pays a latency ``alpha`` (the alpha-beta model
of Thakur et al. 2005, as in :mod:`minitorch_dist.comm.cost`).

:meth:`Cluster.link` answers the one question the cost model asks: a group of ``size`` ranks whose
members sit ``stride`` ranks apart (the grid puts TP innermost, then CP, then DP, then PP: stride
1, tp, tp cp, tp cp dp) -- what bandwidth does its ring get, and what latency? A group inside one
node gets NVLink. A group that spans nodes with ``k`` members per node shares the node's ports
with the ``gpus_per_node / k`` other groups that run the same collective at the same time, so it
gets ``k`` GPUs' share of them, capped by NVLink: :func:`~minitorch_dist.comm.multi_node_ring_bandwidth`
with ``nics_per_node = k`` ports of ``nic_bandwidth * nics_per_node / gpus_per_node`` each.

Presets (numbers from vendor datasheets and the papers that used the machines; assumed values
are marked as such):

- ``dgx-a100``: 8 A100 80GB per node; 312 TFLOP/s dense bf16; NVLink 3 600 GB/s total = 300 GB/s
  each way per GPU; 8 HDR InfiniBand ports of 200 Gb/s (NVIDIA A100 datasheet; DGX A100 system
  architecture white paper; Narayanan et al. 2021, section 5: Selene, 8 x 200 Gb/s per node).
- ``dgx-h100``: 8 H100 SXM 80GB; 989 TFLOP/s dense bf16; NVLink 4 900 GB/s total = 450 GB/s each
  way; 8 ConnectX-7 ports of 400 Gb/s (NVIDIA H100 datasheet; DGX H100 user guide). Llama 3's
  servers have the same shape: 8 H100 per server joined by NVLink, 400 Gb/s per GPU (Dubey et
  al. 2024, section 3.3.1).
- ``h800``: DeepSeek-V3's cluster: 8 H800 per node, NVLink 160 GB/s, InfiniBand 50 GB/s per GPU
  (DeepSeek-AI 2024, section 3.1); the H800 computes as an H100 (989 TFLOP/s dense bf16).

The latencies (5 us inside a node, 10 us across nodes) are assumed orders of magnitude, not
measurements; ``matmul_efficiency`` (the share of peak a large bf16 matrix product sustains) is
an assumption too, the planner's one calibration constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

from minitorch_dist.checks import check_bool, check_int, check_positive
from minitorch_dist.comm.cost import multi_node_ring_bandwidth

__all__ = ["CLUSTER_PRESETS", "Cluster", "Link"]

GB = 10**9
GIB = 2**30


@dataclass(frozen=True)
class Link:
    """What a group's ring gets: ``bandwidth`` bytes/s each way per rank, ``alpha`` s/message."""

    bandwidth: float
    alpha: float
    inter_node: bool


@dataclass(frozen=True)
class Cluster:
    """GPUs joined by NVLink inside a node and by network ports between nodes."""

    name: str  # a label
    gpus: int  # GPUs in the job
    gpus_per_node: int  # GPUs joined by NVLink
    memory_bytes: int  # usable memory per GPU, bytes
    peak_flops: float  # dense bf16 FLOP/s per GPU
    intra_bandwidth: float  # NVLink bytes/s each way per GPU
    nic_bandwidth: float  # bytes/s each way of one network port
    nics_per_node: int  # network ports per node (one per GPU on DGX machines)
    intra_alpha: float = 5e-6  # assumed latency of one message inside a node, seconds
    inter_alpha: float = 10e-6  # assumed latency of one message between nodes, seconds
    matmul_efficiency: float = 0.6  # assumed share of peak that the model's products sustain
    tp_across_nodes: bool = False  # allow a TP group to leave the node (forbidden by default)

    def __post_init__(self) -> None:
        check_int("gpus", self.gpus)
        check_int("gpus_per_node", self.gpus_per_node)
        check_int("memory_bytes", self.memory_bytes)
        check_int("nics_per_node", self.nics_per_node)
        for name in (
            "peak_flops",
            "intra_bandwidth",
            "nic_bandwidth",
            "intra_alpha",
            "inter_alpha",
            "matmul_efficiency",
        ):
            check_positive(name, getattr(self, name))
        check_bool("tp_across_nodes", self.tp_across_nodes)
        if self.matmul_efficiency > 1:
            raise ValueError(f"matmul_efficiency must be <= 1, got {self.matmul_efficiency}")
        if self.gpus > self.gpus_per_node and self.gpus % self.gpus_per_node:
            raise ValueError(
                f"gpus={self.gpus} is not a whole number of nodes of gpus_per_node={self.gpus_per_node}"
            )

    @classmethod
    def from_preset(cls, name: str, gpus: int, **changes: object) -> Cluster:
        """A preset machine with ``gpus`` GPUs (and any field changed by keyword)."""
        if name not in CLUSTER_PRESETS:
            raise ValueError(f"unknown cluster {name!r}; valid names: {', '.join(CLUSTER_PRESETS)}")
        return replace(CLUSTER_PRESETS[name], gpus=gpus, **changes)

    @property
    def nodes(self) -> int:
        return max(1, self.gpus // self.gpus_per_node)

    @property
    def nic_share(self) -> float:
        """Network bytes/s each way that one GPU gets when every GPU of the node sends."""
        return self.nic_bandwidth * self.nics_per_node / self.gpus_per_node

    @lru_cache(maxsize=4096)  # noqa: B019 (frozen and hashable: the answer never changes)
    def link(self, size: int, stride: int) -> Link:
        """The ring of a group of ``size`` ranks ``stride`` ranks apart (module docstring)."""
        check_int("size", size)
        check_int("stride", stride)
        if size * stride <= self.gpus_per_node:
            return Link(self.intra_bandwidth, self.intra_alpha, False)
        per_node = max(1, min(size, self.gpus_per_node // stride))  # k members in one node
        bandwidth = multi_node_ring_bandwidth(
            intra_bandwidth=self.intra_bandwidth,
            nic_bandwidth=self.nic_share,
            nics_per_node=per_node,
            nodes=math.ceil(size / per_node),
        )
        return Link(bandwidth, self.inter_alpha, True)


def _preset(
    name: str, memory_gib: int, tflops: float, nvlink_gbs: float, nic_gbits: float, nics: int
) -> Cluster:
    return Cluster(
        name, 8, 8, memory_gib * GIB, tflops * 1e12, nvlink_gbs * GB, nic_gbits * GB / 8, nics
    )


CLUSTER_PRESETS: dict[str, Cluster] = {
    c.name: c
    for c in (
        _preset("dgx-a100", 80, 312, 300, 200, 8),
        _preset("dgx-h100", 80, 989, 450, 400, 8),
        _preset("h800", 80, 989, 160, 400, 8),
    )
}

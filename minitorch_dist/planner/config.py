"""One parallel configuration and the rules it must obey before anything is estimated.

``dp x tp x pp x cp`` ranks make the job (expert parallelism borrows its ``ep`` ranks from the
data-parallel ones, as Megatron-LM and DeepSeek-V3 do, so ``ep`` divides ``dp``). The grid is
laid out TP innermost, then CP, then DP, then PP (Megatron-LM's order): :func:`strides` gives how
far apart each group's members sit, which decides whether its ring stays inside a node.

:func:`validate` raises a ``ValueError`` that names the first rule a configuration breaks; the
planner records that message as the reason the configuration is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from minitorch_dist.checks import check_bool, check_choice, check_int

__all__ = [
    "HSDP_SYNC",
    "RECOMPUTE",
    "RESHARD",
    "ParallelConfig",
    "in_flight",
    "micro_batches",
    "strides",
    "validate",
]

RECOMPUTE = ("none", "selective", "full")
# ZeRO-3's resharding policies (chapter 12): when the gathered parameters are freed, and the
# all-gathers + reduce-scatters per step they cost, in units of (n - 1)/n of the 16-bit weights
RESHARD = {
    "after_forward": "3m",  # after forward and after backward, every micro-batch (ZeRO paper)
    "after_backward": "2m",  # kept from forward to backward (FSDP2 reshard_after_forward=False)
    "after_step": "m + 1",  # kept across micro-batches, gradients reduce-scattered every one
    "after_step_no_sync": "2",  # kept, and one reduce-scatter per step (no gradient sync)
}
HSDP_SYNC = ("step", "micro_batch")  # HSDP's replica all-reduce: deferred, or every micro-batch


@dataclass(frozen=True, order=True)
class ParallelConfig:
    """How the job is cut. Every field has the meaning of its chapter."""

    dp: int = 1  # data-parallel replicas (chapter 5); ZeRO shards over dp x cp (chapter 6)
    tp: int = 1  # tensor-parallel ranks (chapter 7), innermost in the grid
    pp: int = 1  # pipeline stages (chapter 9)
    v: int = 1  # virtual stages per pipeline rank (interleaved 1F1B); 1 = plain 1F1B
    cp: int = 1  # context-parallel ranks, the sequence cut in 2 cp zig-zag chunks (chapter 8)
    ep: int = 1  # expert-parallel ranks, taken from the data-parallel ones (chapter 10)
    sp: bool = False  # sequence parallelism inside the TP group (chapter 7)
    zero: int = 1  # ZeRO stage 0-3 over the dp x cp ranks (chapter 6)
    recompute: str = "selective"  # "none" | "selective" | "full" (chapter 3)
    micro_batch: int = 1  # sequences per micro-batch (chapter 4)
    offload: bool = False  # optimizer states in CPU memory (ZeRO-Offload, chapter 6)
    shard_group: int = 0  # HSDP: ZeRO shards over groups of this many dp ranks (x cp); 0 = all dp
    reshard: str = "after_forward"  # ZeRO-3's resharding policy, one of RESHARD (chapter 12)
    hsdp_sync: str = "step"  # HSDP's replica all-reduce: "step" (deferred) or "micro_batch"

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "v", "cp", "ep", "micro_batch"):
            check_int(name, getattr(self, name))
        check_int("shard_group", self.shard_group, minimum=0)
        check_bool("sp", self.sp)
        check_bool("offload", self.offload)
        check_choice("zero", self.zero, (0, 1, 2, 3))
        check_choice("recompute", self.recompute, RECOMPUTE)
        check_choice("reshard", self.reshard, tuple(RESHARD))
        check_choice("hsdp_sync", self.hsdp_sync, HSDP_SYNC)

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def shard(self) -> int:
        """Ranks the dense ZeRO states are sharded over and their gradients reduced over: the
        dp ranks (or HSDP's shard group of them) times the cp ranks. The cp ranks of one
        sequence hold the same weights and each computes a partial gradient of them, so the
        gradient is reduced, and the states sharded, over ``dp x cp`` -- as Megatron-LM's
        distributed optimizer (``with_context_parallel=True``) and torchtitan (``dp_shard_cp``)
        do."""
        return (self.shard_group or self.dp) * self.cp

    @property
    def expert_shard(self) -> int:
        """Ranks an expert's ZeRO states are sharded over: its ``dp / ep`` replicas times cp."""
        return self.dp // self.ep * self.cp

    @property
    def replicas(self) -> int:
        """HSDP's replica groups (1 without HSDP): dp / shard_group."""
        return self.dp // (self.shard_group or self.dp)

    def key(self) -> tuple:
        """A total order on configurations, for deterministic ranking of equal times."""
        return (
            self.dp,
            self.tp,
            self.pp,
            self.v,
            self.cp,
            self.ep,
            self.sp,
            self.zero,
            self.recompute,
            self.micro_batch,
            self.offload,
            self.shard_group,
            self.reshard,
            self.hsdp_sync,
        )

    def label(self) -> str:
        """``dp64 tp8 pp16`` plus whatever differs from the defaults."""
        parts = [f"dp{self.dp}", f"tp{self.tp}", f"pp{self.pp}"]
        defaults = ParallelConfig()
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("dp", "tp", "pp") or value == getattr(defaults, f.name):
                continue
            if f.name in ("reshard", "hsdp_sync"):
                parts.append(f"{f.name}={value}")
            elif isinstance(value, bool):
                parts.append(f.name)  # sp, offload
            else:
                parts.append(f"{f.name}{value}" if isinstance(value, int) else value)
        return " ".join(parts)


def micro_batches(config: ParallelConfig, global_batch: int) -> int:
    """Micro-batches each pipeline runs per step: ``B / (dp b)``."""
    return global_batch // (config.dp * config.micro_batch)


def in_flight(pp: int, v: int, m: int, stage: int) -> float:
    """Micro-batches' worth of activations stage ``stage`` holds at its peak.

    1F1B: ``min(p - stage, m)``. Interleaved (v > 1): Megatron's warm-up runs
    ``2 (p - 1 - stage) + (v - 1) p`` chunk forwards before the first backward, so
    ``(v + 1) p - 1 - 2 stage`` chunks of ``1 / v`` of the rank's layers are alive at once; on
    stage 0 that is ``p`` times :func:`~minitorch_dist.pipeline.first_stage_activation_factor`.
    Both equal the peaks of :func:`~minitorch_dist.pipeline.simulate` (tests/test_planner.py)."""
    if v == 1:
        return min(pp - stage, m)
    return min(((v + 1) * pp - 1 - 2 * stage) / v, m)


def strides(config: ParallelConfig) -> dict[str, int]:
    """How many ranks apart the members of each group sit (TP innermost, then CP, DP, PP)."""
    return {
        "tp": 1,
        "cp": config.tp,
        "dp": config.tp * config.cp,
        "ep": config.tp * config.cp,
        "pp": config.tp * config.cp * config.dp,
    }


def validate(model, cluster, config: ParallelConfig, *, global_batch: int, seq_len: int) -> None:  # noqa: ANN001
    """Raise a ValueError naming the first rule ``config`` breaks for ``model`` on ``cluster``."""
    llama, moe = model.llama, model.moe
    c = config
    if c.gpus != cluster.gpus:
        raise ValueError(
            f"dp*tp*pp*cp = {c.dp}*{c.tp}*{c.pp}*{c.cp} = {c.gpus} != gpus={cluster.gpus}"
        )
    if c.tp > cluster.gpus_per_node and not cluster.tp_across_nodes:
        raise ValueError(f"tp={c.tp} > gpus_per_node={cluster.gpus_per_node} (TP leaves the node)")
    if llama.heads % c.tp:
        raise ValueError(f"heads={llama.heads} is not divisible by tp={c.tp}")
    if llama.kv_heads % c.tp and c.tp % llama.kv_heads:
        raise ValueError(
            f"kv_heads={llama.kv_heads} is not divisible by tp={c.tp}, nor tp by kv_heads"
        )
    if llama.ffn_hidden % c.tp:
        raise ValueError(f"ffn_hidden={llama.ffn_hidden} is not divisible by tp={c.tp}")
    if moe is not None and moe.attention is not None and c.tp > 1:
        raise ValueError("tp > 1 with MLA attention is not modelled: tp must be 1")
    if llama.layers < c.pp * c.v:
        raise ValueError(f"layers={llama.layers} < pp*v = {c.pp}*{c.v}: a chunk needs a layer")
    if c.v > 1 and c.pp == 1:
        raise ValueError(f"v={c.v} needs pp > 1 (interleaving cuts a pipeline rank's layers)")
    if seq_len % (2 * c.cp) and c.cp > 1:
        raise ValueError(
            f"seq_len={seq_len} is not divisible by 2*cp = {2 * c.cp} (zig-zag chunks)"
        )
    if c.sp and seq_len // c.cp % c.tp:
        raise ValueError(f"seq_len/cp = {seq_len // c.cp} is not divisible by tp={c.tp} (sp)")
    if c.sp and c.tp == 1:
        raise ValueError("sp=True needs tp > 1 (sequence parallelism splits over the TP group)")
    if moe is None and c.ep > 1:
        raise ValueError(f"ep={c.ep} > 1 needs a mixture-of-experts model")
    if moe is not None and moe.experts % c.ep:
        raise ValueError(f"experts={moe.experts} is not divisible by ep={c.ep}")
    if c.dp % c.ep:
        raise ValueError(f"dp={c.dp} is not divisible by ep={c.ep} (EP ranks come from DP)")
    if global_batch % (c.dp * c.micro_batch):
        raise ValueError(
            f"global_batch={global_batch} is not divisible by dp*micro_batch = {c.dp}*{c.micro_batch}"
        )
    if c.shard_group and (c.dp % c.shard_group or c.zero == 0 or c.ep > 1):
        raise ValueError(
            f"shard_group={c.shard_group} must divide dp={c.dp}, with zero >= 1 (HSDP shards the "
            f"ZeRO states; zero={c.zero}) and ep = 1 (experts under HSDP are not modelled)"
        )
    if c.reshard != "after_forward" and c.zero != 3:
        raise ValueError(f"reshard={c.reshard!r} needs zero=3 (a ZeRO-3 policy; zero={c.zero})")
    if c.hsdp_sync != "step" and not (
        c.shard_group and (c.zero == 2 or (c.zero == 3 and c.reshard != "after_step_no_sync"))
    ):
        raise ValueError(
            f"hsdp_sync={c.hsdp_sync!r} needs HSDP (shard_group > 0) with a reduce-scatter every "
            "micro-batch (zero=2, or zero=3 without reshard='after_step_no_sync')"
        )
    m = global_batch // (c.dp * c.micro_batch)
    if c.v > 1 and m % c.pp:
        raise ValueError(f"micro-batches={m} is not divisible by pp={c.pp} (interleaved 1F1B)")

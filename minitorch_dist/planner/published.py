"""Published training layouts, stored as data, and where the planner ranks each of them.

Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", Table 1: GPT models of 1.7B to 1T parameters on up to 3,072 A100s (Selene: DGX
A100 nodes), sequence 2048, vocabulary 51,200, tensor size t, pipeline size p, and the achieved
teraFLOP/s per GPU counted with their eq. (3) (recomputation included). Data parallel size
``d = n / (t p)``. Their runs used activation recomputation and no ZeRO; sequence parallelism
came later (Korthikanti et al. 2022). The micro-batch size and interleaving are not in the table:
the planner fills them in (the best completion that fits).

Dubey et al. 2024, "The Llama 3 Herd of Models", Table 4: Llama 3 405B on 8,192 and 16,384 H100s,
TP 8, PP 16, DP 64 or 128 at sequence 8,192, and TP 8, CP 16, PP 16, DP 8 at 131,072; 16M tokens
per batch; 430, 400 and 380 TFLOP/s per GPU (BF16 MFU 43 %, 41 %, 38 %). ZeRO stage and
recomputation are not in the table: the planner fills them in. The long-context row prints DP 4;
8 x 16 x 16 x 4 is half of its 16,384 GPUs and 4 x 16 sequences half of its 16M-token batch, so
DP 8 (which makes both agree) is stored.

DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", sections 3.2 and 4.2: 2,048 H800 GPUs, 16-way
pipeline parallelism (DualPipe), 64-way expert parallelism across 8 nodes, ZeRO-1 data
parallelism, no tensor parallelism; sequence 4,096, batch 15,360 sequences (after the ramp-up).
No throughput is given in TFLOP/s. FP8 training and DualPipe's overlap are not modelled.

Each GPT of Table 1 is stood in for by a Llama of the same hidden size, layers and heads (plain
multi-head attention, tied embeddings) whose SwiGLU width ``f ~ 8 h / 3`` (a multiple of 64)
gives the GPT's ``8 h^2`` MLP parameters per layer to within 0.5 %.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minitorch_dist.models import LlamaConfig

from .cluster import Cluster
from .model import PlannerModel, as_model
from .search import Plan, Row, plan

__all__ = [
    "PUBLISHED",
    "Published",
    "Verdict",
    "comparable_tflops",
    "completions",
    "evaluate_published",
    "gpt_standin",
    "recorded_verdict",
    "LLAMA3_PRINTED_DP",
]

# params (billion), heads, hidden, layers, t, p, GPUs, batch, TFLOP/s per GPU (Table 1)
NARAYANAN_TABLE1 = (
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
)


def gpt_standin(params_b: float, heads: int, hidden: int, layers: int) -> LlamaConfig:
    """A Llama shaped like Narayanan's GPT: same h, L, heads; SwiGLU width ~ 8h/3."""
    ffn = round(8 * hidden / 3 / 64) * 64
    return LlamaConfig(
        f"gpt-{params_b}b",
        51200,
        hidden,
        layers,
        heads,
        heads,
        ffn,
        2048,
        1e-5,
        10000.0,
        tie_embeddings=True,
    )


@dataclass(frozen=True)
class Published:
    """One published run: the model, the machine, the batch, and the layout the paper gives."""

    source: str  # citation, table or section
    label: str  # short name for tables
    model: PlannerModel
    cluster: Cluster
    global_batch: int  # sequences per step
    seq_len: int
    fixed: dict = field(default_factory=dict)  # ParallelConfig fields the paper states
    tflops_per_gpu: float | None = None  # achieved, as the paper counts it
    mfu: float | None = None  # achieved model FLOPs utilisation, where given
    counts_recompute: bool = False  # the paper's TFLOP/s count the recomputed forward (eq. (3))


def _narayanan() -> list[Published]:
    out = []
    for b, heads, h, layers, t, p, n, batch, tflops in NARAYANAN_TABLE1:
        out.append(
            Published(
                "Narayanan et al. 2021, Table 1",
                f"GPT {b}B",
                PlannerModel(gpt_standin(b, heads, h, layers)),
                Cluster.from_preset("dgx-a100", n),
                batch,
                2048,
                {
                    "tp": t,
                    "pp": p,
                    "dp": n // (t * p),
                    "cp": 1,
                    "sp": False,
                    "zero": 0,
                    "recompute": "full",
                    "offload": False,
                },
                tflops,
                counts_recompute=True,
            )
        )
    return out


LLAMA3_PRINTED_DP = 4  # what Table 4's long-context row prints (see the module docstring)


def _llama3() -> list[Published]:
    src, model = "Dubey et al. 2024, Table 4", as_model("llama-3.1-405b")
    runs = (
        (8192, 64, 1, 8192, 430, 0.43),
        (16384, 128, 1, 8192, 400, 0.41),
        (16384, 8, 16, 131072, 380, 0.38),
    )
    return [
        Published(
            src,
            f"Llama 3 405B, {n} GPUs, seq {s}",
            model,
            Cluster.from_preset("dgx-h100", n),
            16 * 2**20 // s,
            s,
            {"tp": 8, "pp": 16, "dp": dp, "cp": cp, "offload": False},
            tflops,
            mfu,
        )
        for n, dp, cp, s, tflops, mfu in runs
    ]


def _deepseek() -> list[Published]:
    return [
        Published(
            "DeepSeek-AI 2024, sections 3.2 and 4.2",
            "DeepSeek-V3, 2048 GPUs",
            as_model("deepseek-v3"),
            Cluster.from_preset("h800", 2048),
            15360,
            4096,
            {"tp": 1, "pp": 16, "dp": 128, "ep": 64, "cp": 1, "zero": 1, "offload": False},
        )
    ]


PUBLISHED: list[Published] = [*_narayanan(), *_llama3(), *_deepseek()]


@dataclass(frozen=True)
class Verdict:
    """The planner on one published run."""

    run: Published
    row: Row | None  # the best-ranked completion of the published layout (None: none fits)
    rank: int | None  # its rank among every configuration that fits
    fitting: int  # how many configurations fit
    best: Row  # the planner's own choice


def evaluate_published(run: Published, result: Plan | None = None) -> Verdict:
    """Plan ``run``'s problem and find its layout: the best-ranked fitting configuration whose
    stated fields match the paper (the planner fills in the rest)."""
    if result is None:
        result = plan(run.model, run.cluster, global_batch=run.global_batch, seq_len=run.seq_len)
    fitting = result.fitting
    for i, row in enumerate(fitting, 1):
        if all(getattr(row.config, k) == v for k, v in run.fixed.items()):
            return Verdict(run, row, i, len(fitting), fitting[0])
    return Verdict(run, None, None, len(fitting), fitting[0])


def recorded_verdict(run: Published, rank: int | None, fitting: int, best: dict) -> Verdict:
    """``run``'s verdict from the three things only its full search can tell (seconds of CPU per
    run), recorded earlier (``benchmarks/published_verdicts.py``): the layout's rank, how many
    configurations fit, and the fields of the planner's choice. The two rows are planned again,
    each alone (``only=``, milliseconds), so their bytes and times are today's code's."""
    ours = next((r for r in completions(run) if r.fits), None)
    kw = {"global_batch": run.global_batch, "seq_len": run.seq_len}
    chosen = plan(run.model, run.cluster, **kw, only=best).rows
    if len(chosen) != 1 or not chosen[0].fits:
        raise ValueError(
            f"{run.label}: the recorded choice {best} is not one fitting configuration"
        )
    if (ours is None) != (rank is None):
        raise ValueError(
            f"{run.label}: recorded rank {rank}, but the layout fits: {ours is not None}"
        )
    return Verdict(run, ours, rank, fitting, chosen[0])


def comparable_tflops(run: Published, row: Row) -> float:
    """The planner's TFLOP/s per GPU for ``row``, counted as the paper counts: with the
    recomputed forward (Narayanan's eq. (3)) or model FLOPs only (Llama 3's MFU x peak)."""
    if run.counts_recompute:
        return row.time.tflops_per_gpu
    return row.time.mfu * run.cluster.peak_flops / 1e12


def completions(run: Published) -> list[Row]:
    """Only the configurations that keep the paper's stated fields, ranked (no full search):
    the quick way to ask whether the published layout fits under the planner."""
    result = plan(
        run.model, run.cluster, global_batch=run.global_batch, seq_len=run.seq_len, only=run.fixed
    )
    return result.rows

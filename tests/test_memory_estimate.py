"""Closed-form memory accounting (lab 1, tasks lab01.1 and lab01.2).

Expected values are computed here from the papers' formulas, independently of the package:
ZeRO (Rajbhandari et al. 2020, section 3.1 and 5, Figure 1) and Korthikanti et al. 2022 (Table 2).
"""

from __future__ import annotations

import random

import pytest

from minitorch_dist.memory import (
    activation_bytes,
    bytes_per_param,
    format_bytes,
    llama_activation_breakdown,
    llama_activation_bytes,
    model_state_bytes,
)
from minitorch_dist.models import LlamaConfig

PSI = 7_500_000_000  # ZeRO's running example: a 7.5B-parameter model on N = 64 GPUs


def states(params: int, grads: int, optimizer: int, offloaded: int = 0) -> dict:
    return {
        "params": params,
        "grads": grads,
        "optimizer": optimizer,
        "total": params + grads + optimizer,
        "offloaded": offloaded,
    }


# -- lab01.1: model states ------------------------------------------------------------------
@pytest.mark.lab01
@pytest.mark.task("lab01.1")
def test_mixed_adam_is_16_bytes_per_param() -> None:
    """Catches a wrong K: mixed-precision Adam is 2 + 2 + 12 bytes per parameter (ZeRO 3.1)."""
    assert model_state_bytes(1000) == states(2000, 2000, 12000)
    assert model_state_bytes(PSI)["total"] == 120_000_000_000  # ZeRO Figure 1, baseline


@pytest.mark.lab01
@pytest.mark.task("lab01.1")
def test_fp32_grad_buffer_recipe_is_20_bytes_per_param() -> None:
    """Catches forgetting the fp32 gradient accumulation buffer (it is gradient memory)."""
    got = model_state_bytes(1000, recipe="mixed_fp32_grads")
    assert got["grads"] == 6000, (
        f"the fp32 gradient accumulation buffer is missing: grads are {got['grads'] / 1000:g} "
        "bytes/param, expected 2 (16-bit grads) + 4 (the fp32 buffer) = 6"
    )
    assert got == states(2000, 6000, 12000)


@pytest.mark.lab01
@pytest.mark.task("lab01.1")
def test_fp32_recipe_has_no_master_copy() -> None:
    """Catches counting an fp32 master copy when the params already are fp32: 4 + 4 + 8."""
    assert model_state_bytes(1000, recipe="fp32") == states(4000, 4000, 8000)


@pytest.mark.lab01
@pytest.mark.task("lab01.1")
@pytest.mark.parametrize(
    ("recipe", "optimizer", "optim_bytes"),
    [
        ("mixed", "sgd", 4),
        ("mixed", "sgd_momentum", 8),
        ("fp32", "sgd", 0),
        ("fp32", "sgd_momentum", 4),
        ("mixed_fp32_grads", "sgd", 4),
    ],
)
def test_sgd_optimizer_states(recipe: str, optimizer: str, optim_bytes: int) -> None:
    """Catches SGD keeping Adam's two states, or losing the master copy of a mixed recipe."""
    got = model_state_bytes(10, recipe=recipe, optimizer=optimizer)
    assert got["optimizer"] == 10 * optim_bytes
    assert bytes_per_param(recipe, optimizer)["optimizer"] == optim_bytes


@pytest.mark.lab01
@pytest.mark.task("lab01.1")
def test_bytes_per_param_table() -> None:
    """Catches a recipe table that disagrees with model_state_bytes at one parameter."""
    for recipe, total in (("mixed", 16), ("mixed_fp32_grads", 20), ("fp32", 16)):
        per = bytes_per_param(recipe, "adam")
        assert per["total"] == total == per["params"] + per["grads"] + per["optimizer"]
        one = model_state_bytes(1, recipe=recipe)
        assert {k: one[k] for k in per} == per


@pytest.mark.lab01
@pytest.mark.task("lab01.1")
def test_zero_stages_per_rank_formulas() -> None:
    """Catches sharding the wrong states per stage: 4P+12P/N, 2P+14P/N, 16P/N (ZeRO section 5)."""
    n = 64
    assert model_state_bytes(PSI, zero_stage=1, dp=n)["total"] == 4 * PSI + 12 * PSI // n
    assert model_state_bytes(PSI, zero_stage=2, dp=n)["total"] == 2 * PSI + 14 * PSI // n
    assert model_state_bytes(PSI, zero_stage=3, dp=n)["total"] == 16 * PSI // n
    # ZeRO Figure 1 rounds these to 31.4, 16.6 and 1.9 GB
    gb = [round(model_state_bytes(PSI, zero_stage=k, dp=n)["total"] / 1e9, 1) for k in (1, 2, 3)]
    assert gb == [31.4, 16.6, 1.9]
    assert model_state_bytes(PSI, zero_stage=0, dp=n) == model_state_bytes(PSI)  # DDP replicates


@pytest.mark.lab01
@pytest.mark.task("lab01.1")
def test_zero_uneven_count_rounds_shard_up() -> None:
    """Catches floor division: 10 params over 4 ranks is a padded shard of 3 on every rank."""
    for stage, want in ((1, states(20, 20, 36)), (2, states(20, 6, 36)), (3, states(6, 6, 36))):
        got = model_state_bytes(10, zero_stage=stage, dp=4)
        assert got == want, (
            f"10 params over 4 ranks, ZeRO-{stage}: {got}, not {want}. A shard is 10 / 4 "
            "padded to ceil(P / N) = 3 params on every rank (floor division gives 2 and loses "
            "the last two parameters)"
        )


@pytest.mark.lab01
@pytest.mark.task("lab01.1")
def test_offload_moves_optimizer_states_to_cpu() -> None:
    """Catches offload leaving the fp32 states on the device, or dropping them from the books."""
    assert model_state_bytes(1000, offload=True) == states(2000, 2000, 0, offloaded=12000)
    got = model_state_bytes(1000, zero_stage=2, dp=8, offload=True)
    assert got == states(2000, 250, 0, offloaded=1500)


@pytest.mark.lab01
@pytest.mark.drawn_per_run
@pytest.mark.task("lab01.1")
def test_model_states_at_sizes_drawn_per_run() -> None:
    """Catches a table of the values printed above: at a parameter count, dp and recipe drawn
    for this run (not stored anywhere), each ZeRO stage shards what section 5 says, with the
    shard ceil(P / N) padded up."""
    rng = random.Random()
    n, dp = rng.randrange(10**3, 10**11), rng.randrange(2, 2049)
    recipe = rng.choice(["mixed", "mixed_fp32_grads", "fp32"])
    p, g, o = {"mixed": (2, 2, 12), "mixed_fp32_grads": (2, 6, 12), "fp32": (4, 4, 8)}[recipe]
    shard = -(-n // dp)
    sharded = {
        0: (),
        1: ("optimizer",),
        2: ("grads", "optimizer"),
        3: ("params", "grads", "optimizer"),
    }
    for stage, parts in sharded.items():
        count = {k: shard if k in parts else n for k in ("params", "grads", "optimizer")}
        want = states(p * count["params"], g * count["grads"], o * count["optimizer"])
        got = model_state_bytes(n, zero_stage=stage, dp=dp, recipe=recipe)
        assert got == want, (
            f"{n:,} params, dp = {dp}, recipe {recipe!r}, ZeRO-{stage} (drawn for this run): "
            f"got {got}, not {want}. ZeRO-{stage} shards {', '.join(parts) or 'nothing'} into "
            f"ceil(P / N) = {shard:,} params per rank; the rest stays whole ({p} + {g} + {o} "
            "bytes per param): compute it from P, N and the recipe, not from stored cases"
        )


def test_model_state_validation() -> None:
    """Catches silently accepting impossible settings."""
    with pytest.raises(ValueError, match="num_params must be an integer >= 0, got -1"):
        model_state_bytes(-1)
    with pytest.raises(ValueError, match="dp must be an integer >= 1, got 0"):
        model_state_bytes(10, dp=0)
    with pytest.raises(ValueError, match="zero_stage must be one of 0, 1, 2, 3, got 4"):
        model_state_bytes(10, zero_stage=4)
    with pytest.raises(ValueError, match="recipe must be one of"):
        model_state_bytes(10, recipe="fp8")
    with pytest.raises(ValueError, match="optimizer must be one of"):
        model_state_bytes(10, optimizer="lion")
    with pytest.raises(ValueError, match="num_params must be an integer"):
        model_state_bytes(1.5)  # type: ignore[arg-type]


# -- lab01.2: activations -------------------------------------------------------------------
GPT3 = dict(seq_len=2048, hidden=12288, heads=96, layers=96)  # GPT-3 175B, Korthikanti Table 3


@pytest.mark.lab01
@pytest.mark.task("lab01.2")
def test_gpt3_activations_rival_its_parameters() -> None:
    """Catches a wrong coefficient: GPT-3 at b=1 stores 275.4 GB, 79% of its 350 GB of 16-bit
    params. Per layer 34*2048*12288 + 5*96*2048^2 = 855,638,016 + 2,013,265,920 bytes."""
    got = activation_bytes(micro_batch=1, **GPT3)
    assert got == 96 * (855_638_016 + 2_013_265_920) == 275_414_777_856
    assert 0.78 < got / (2 * 175e9) < 0.79
    assert activation_bytes(micro_batch=4, **GPT3) == 4 * got  # linear in b


@pytest.mark.lab01
@pytest.mark.task("lab01.2")
def test_tensor_and_sequence_parallel_forms() -> None:
    """Catches dividing the replicated 10sbh by t without sequence parallelism (Table 2)."""
    s, b, h, a, t = 2048, 1, 12288, 96, 8
    sbh = s * b * h
    got = activation_bytes(micro_batch=b, tp=t, **GPT3)
    want = 96 * (10 * sbh + 24 * sbh // t + 5 * a * s * s * b // t)
    assert got != 96 * (34 * sbh + 5 * a * s * s * b) // t, (
        "tp without sp divides all of 34sbh by t: the 10sbh of norms, dropout masks and block "
        "inputs is replicated on every rank (only sp splits it); 24sbh/t of linear inputs is split"
    )
    assert got == want
    assert activation_bytes(micro_batch=b, tp=t, sp=True, **GPT3) == 96 * (
        (34 * sbh + 5 * a * s * s * b) // t
    )
    no_tp = activation_bytes(micro_batch=b, **GPT3)
    assert activation_bytes(micro_batch=b, sp=True, **GPT3) == no_tp  # sp alone is a no-op


@pytest.mark.lab01
@pytest.mark.task("lab01.2")
def test_selective_and_full_recompute() -> None:
    """Catches selective recompute keeping the as^2b attention scores, or full keeping more than
    the layer input: selective + sp = 34sbh/t, full = 2sbh (2sbh/t with sp)."""
    sbh = 2048 * 12288
    kw = dict(micro_batch=1, seq_len=2048, hidden=12288, heads=96)
    for extra, want in (
        ({}, 34 * sbh),
        ({"tp": 8, "sp": True}, 34 * sbh // 8),
        ({"tp": 8}, 10 * sbh + 24 * sbh // 8),
    ):
        got = activation_bytes(recompute="selective", **extra, **kw)
        assert got == want, (
            f"selective recomputation with {extra or 'no parallelism'}: {got:,} bytes, not "
            f"{want:,}"
            + (
                ": selective recomputation still stores the 5 a s^2 b of attention scores, "
                "softmax and dropout; it recomputes them and keeps only the 34 sbh"
                if got > want
                else ""
            )
        )
    assert activation_bytes(recompute="full", layers=3, **kw) == 3 * 2 * sbh
    assert activation_bytes(recompute="full", tp=8, **kw) == 2 * sbh
    assert activation_bytes(recompute="full", tp=8, sp=True, **kw) == 2 * sbh // 8


def test_activation_validation() -> None:
    """Catches heads or hidden that tensor parallelism cannot split, and unknown policies."""
    kw = dict(seq_len=8, micro_batch=1, hidden=768)
    with pytest.raises(ValueError, match="heads=12 is not divisible by tp=8"):
        activation_bytes(heads=12, tp=8, **kw)
    with pytest.raises(ValueError, match="hidden=770 is not divisible by tp=4"):
        activation_bytes(seq_len=8, micro_batch=1, hidden=770, heads=4, tp=4)
    with pytest.raises(ValueError, match="recompute must be one of none, selective, full"):
        activation_bytes(heads=12, recompute="some", **kw)
    with pytest.raises(ValueError, match="seq_len must be an integer >= 1, got 0"):
        activation_bytes(seq_len=0, micro_batch=1, hidden=768, heads=12)
    with pytest.raises(ValueError, match="micro_batch must be an integer"):
        activation_bytes(seq_len=8, micro_batch=1.0, hidden=768, heads=12)  # type: ignore[arg-type]


@pytest.mark.lab01
@pytest.mark.drawn_per_run
@pytest.mark.task("lab01.2")
def test_activations_at_sizes_drawn_per_run() -> None:
    """Catches a table of the values printed above: at sizes drawn for this run (not stored
    anywhere), Korthikanti's per-layer bytes, 34 sbh + 5 a s^2 b without parallelism, with tp
    (10 sbh + 24 sbh / t + 5 a s^2 b / t), tp with sp (all of it / t), selective and full."""
    rng = random.Random()
    t = rng.choice([2, 4, 8])
    a = t * rng.randrange(1, 17)
    s, b, h, layers = 64 * rng.randrange(1, 65), rng.randrange(1, 9), a * 64, rng.randrange(1, 9)
    sbh, att = s * b * h, 5 * a * s * s * b
    kw = dict(seq_len=s, micro_batch=b, hidden=h, heads=a, layers=layers)
    cases = {
        "no parallelism": ({}, 34 * sbh + att),
        f"tp = {t}": ({"tp": t}, 10 * sbh + 24 * sbh // t + att // t),
        f"tp = {t} with sp": ({"tp": t, "sp": True}, (34 * sbh + att) // t),
        "selective recompute": ({"recompute": "selective"}, 34 * sbh),
        f"full recompute, tp = {t} with sp": (
            {"recompute": "full", "tp": t, "sp": True},
            2 * sbh // t,
        ),
    }
    for name, (extra, per_layer) in cases.items():
        got = activation_bytes(**kw, **extra)
        assert got == layers * per_layer, (
            f"s = {s}, b = {b}, h = {h}, a = {a}, L = {layers}, {name} (drawn for this run): "
            f"{got:,} bytes, not {layers * per_layer:,}; compute the closed form from the sizes "
            "(Korthikanti et al. 2022, Table 2), not from stored cases"
        )


TINY = LlamaConfig.from_preset("tiny")  # V=256, h=64, L=2, H=4, kv=32, f=176, d=16


@pytest.mark.lab01
@pytest.mark.task("lab01.2")
def test_llama_estimate_hand_count() -> None:
    """Catches a missing or doubled term, on numbers counted by hand for b=2, s=8, fp32 (p=4):
    per block 4(8*1024 + 2*16*32 + 4*16*176 + 2*16) + 4*16*4 = 82,304; rope 4*2*8*16 = 1,024;
    final norm 4(3*1024 + 16) = 12,352; loss 4*16*256 + 8*16 + 8 = 16,520."""
    got = llama_activation_breakdown(TINY, seq_len=8, micro_batch=2, dtype_bytes=4)
    assert got == {"blocks": 2 * 82_304, "rope": 1_024, "final_norm": 12_352, "loss": 16_520}
    assert llama_activation_bytes(TINY, seq_len=8, micro_batch=2, dtype_bytes=4) == 194_504


@pytest.mark.lab01
@pytest.mark.task("lab01.2")
def test_llama_recompute_policies() -> None:
    """Catches selective recompute dropping more than the fused attention's fp32 logsumexp
    (4bHs), or full recompute keeping more than each block's input (p bsh)."""
    kw = dict(seq_len=8, micro_batch=2, dtype_bytes=2)
    none = llama_activation_breakdown(TINY, **kw)
    selective = llama_activation_breakdown(TINY, recompute="selective", **kw)
    full = llama_activation_breakdown(TINY, recompute="full", **kw)
    assert none["blocks"] - selective["blocks"] == TINY.layers * 4 * 2 * 8 * TINY.heads
    assert full["blocks"] == TINY.layers * 2 * 2 * 8 * TINY.hidden
    for key in ("rope", "final_norm", "loss"):
        assert none[key] == selective[key] == full[key]


def test_llama_estimate_validation() -> None:
    """Catches a silently wrong dtype size or policy name."""
    with pytest.raises(ValueError, match="dtype_bytes must be an integer >= 1"):
        llama_activation_bytes(TINY, seq_len=8, micro_batch=1, dtype_bytes=0)
    with pytest.raises(ValueError, match="recompute must be one of"):
        llama_activation_bytes(TINY, seq_len=8, micro_batch=1, recompute="all")


def test_format_bytes() -> None:
    """Catches decimal units where the book uses binary ones (GiB = 2^30 bytes)."""
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(13 * 2**30) == "13.0 GiB"
    assert format_bytes(3 * 2**40) == "3.0 TiB"


def test_zero_offload_recipe_moves_the_gradients_too() -> None:
    """Ren et al. 2021, section 4: ZeRO-Offload keeps only the 16-bit parameters on the device
    (2 psi) and the 16-bit gradients with the fp32 master weights and Adam states on the CPU
    (14 psi); our CpuOffloadAdam ("optimizer") keeps the gradients on the device (4 / 12).
    Catches treating the two as one recipe."""
    from minitorch_dist.memory import predict
    from minitorch_dist.models import LlamaConfig

    n = LlamaConfig.from_preset("llama-2-7b").num_params()
    paper = predict("llama-2-7b", 4096, 1, "full", 0, 1, offload="zero-offload")
    ours = predict("llama-2-7b", 4096, 1, "full", 0, 1, offload="optimizer")
    device = lambda r: r["params"] + r["grads"] + r["optimizer"]  # noqa: E731
    assert (device(paper), paper["cpu"]) == (2 * n, 14 * n)
    assert (device(ours), ours["cpu"]) == (4 * n, 12 * n)
    assert predict("llama-2-7b", 4096, 1, "full", 0, 1, offload=True) == ours
    shard = -(-n // 8)
    sharded = predict("llama-2-7b", 4096, 1, "full", 2, 8, offload="zero-offload")
    assert (device(sharded), sharded["cpu"]) == (2 * n, 14 * shard)
    with pytest.raises(ValueError, match="offload must be one of"):
        predict("llama-2-7b", 4096, 1, "full", 0, 1, offload="nvme")

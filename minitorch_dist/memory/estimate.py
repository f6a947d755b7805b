"""Closed-form memory accounting: how many bytes training needs, before running anything.

Chapter 1 splits the memory of a training step in two parts and counts each with a formula.

**Model states** -- parameters, gradients, optimizer states -- scale with the parameter count Psi.
Mixed-precision Adam keeps 16-bit params (2 Psi) and grads (2 Psi) plus K = 12 bytes per parameter
of fp32 optimizer state (master weights, momentum m, variance v): 16 Psi in all (Rajbhandari et al.
2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", section 3.1). ZeRO
(section 5) shards these states over the N data-parallel ranks: stage 1 the optimizer states
(2 Psi + 2 Psi + 12 Psi / N per rank), stage 2 the gradients too (2 Psi + 14 Psi / N), stage 3 the
parameters too (16 Psi / N). ZeRO-Offload (Ren et al. 2021, "ZeRO-Offload: Democratizing
Billion-Scale Model Training", section 4) keeps the fp32 states in CPU memory instead.

**Activations** -- what the forward pass saves for the backward -- scale with the batch: per
transformer layer, in 16 bits, s b h (34 + 5 a s / h) bytes (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", section 4, Table 2), for sequence s, micro
batch b, hidden h and a heads. :func:`llama_activation_breakdown` redoes that count for the Llama of
this book (RMSNorm, GQA, SwiGLU, fused attention, no dropout) term by term.
"""

from __future__ import annotations

from typing import Any

from minitorch_dist.checks import check_bool, check_choice, check_divisible, check_int

RECIPES = ("mixed", "mixed_fp32_grads", "fp32")
OPTIMIZERS = ("adam", "sgd", "sgd_momentum")
ZERO_STAGES = (0, 1, 2, 3)
RECOMPUTE = ("none", "selective", "full")


def bytes_per_param(recipe: str = "mixed", optimizer: str = "adam") -> dict[str, int]:
    """Bytes per parameter of each model state, unsharded: keys params, grads, optimizer, total.

    ``mixed``: 16-bit params (2) and grads (2); the optimizer keeps an fp32 master copy (4) plus its
    fp32 states -- 2 + 2 + 12 = 16 for Adam (ZeRO section 3.1, K = 12). ``mixed_fp32_grads`` adds an
    fp32 gradient accumulation buffer (4, counted under grads): 20 for Adam. ``fp32``: 4 + 4 and no
    master copy: 4 + 4 + 8 = 16 for Adam. Adam keeps two fp32 states (m, v), SGD with momentum one,
    plain SGD none.
    """
    check_choice("recipe", recipe, RECIPES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    # BEGIN SOLUTION lab01.1: bytes per parameter of params, grads and optimizer states
    params, grads, master = {"mixed": (2, 2, 4), "mixed_fp32_grads": (2, 6, 4), "fp32": (4, 4, 0)}[
        recipe
    ]
    states = {"adam": 2, "sgd": 0, "sgd_momentum": 1}[optimizer]  # fp32 tensors per parameter
    optim = master + 4 * states
    return {"params": params, "grads": grads, "optimizer": optim, "total": params + grads + optim}
    # END SOLUTION


def model_state_bytes(
    num_params: int,
    *,
    zero_stage: int = 0,
    dp: int = 1,
    recipe: str = "mixed",
    optimizer: str = "adam",
    offload: bool = False,
) -> dict[str, int]:
    """Bytes **per rank** of parameters, gradients and optimizer states.

    Returns ``{"params", "grads", "optimizer", "total", "offloaded"}``: the first four live on the
    device; ``offloaded`` is what ``offload=True`` moved to CPU memory (not part of ``total``).
    ZeRO stage k >= 1 shards the optimizer states over ``dp`` ranks, k >= 2 the gradients too,
    k = 3 the parameters too; a shard holds ceil(num_params / dp) elements, as a padded flat
    buffer does. Offload (ZeRO-Offload) moves the optimizer states -- fp32 master weights
    included -- to the CPU, so the device's ``optimizer`` becomes 0.
    """
    check_int("num_params", num_params, minimum=0)
    check_int("dp", dp)
    check_choice("zero_stage", zero_stage, ZERO_STAGES)
    check_bool("offload", offload)
    per_param = bytes_per_param(recipe, optimizer)
    # BEGIN SOLUTION lab01.1: per-rank bytes of params, grads and optimizer states
    shard = -(-num_params // dp)  # ceil(Psi / N): the padded shard each rank keeps
    params = per_param["params"] * (shard if zero_stage >= 3 else num_params)
    grads = per_param["grads"] * (shard if zero_stage >= 2 else num_params)
    optim = per_param["optimizer"] * (shard if zero_stage >= 1 else num_params)
    offloaded = optim if offload else 0
    optim -= offloaded
    # END SOLUTION
    return {
        "params": params,
        "grads": grads,
        "optimizer": optim,
        "total": params + grads + optim,
        "offloaded": offloaded,
    }


def _check_activation_args(
    seq_len: int, micro_batch: int, hidden: int, heads: int, layers: int, tp: int, recompute: str
) -> None:
    for name, value in (
        ("seq_len", seq_len),
        ("micro_batch", micro_batch),
        ("hidden", hidden),
        ("heads", heads),
        ("layers", layers),
        ("tp", tp),
    ):
        check_int(name, value)
    check_divisible("heads", heads, "tp", tp)
    check_divisible("hidden", hidden, "tp", tp)
    check_choice("recompute", recompute, RECOMPUTE)


def activation_bytes(
    *,
    seq_len: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    layers: int = 1,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    cp: int = 1,
) -> int:
    """Activation bytes stored for backward by a GPT layer, times ``layers`` (Korthikanti et al.
    2022, section 4, Table 2): 16-bit activations, 1-byte dropout masks, s=seq_len, b=micro_batch,
    h=hidden, a=heads, t=tp.

    ===========================  ====================================
    no parallelism               s b h (34 + 5 a s / h)
    tensor parallel              s b h (10 + 24 / t + 5 a s / (h t))
    tensor + sequence parallel   s b h / t (34 + 5 a s / h)
    selective recompute          drops the 5 a s^2 b attention term
    full recompute               2 s b h (the layer input), / t with sp
    ===========================  ====================================

    ``sp=True`` with ``tp=1`` is allowed and changes nothing (there is nothing to split).

    ``cp`` (context parallelism, chapter 8): bytes PER RANK when the sequence is split over
    ``cp`` ranks. Every term is a count of rows of the sequence -- the s x s score term too,
    each rank keeping its s/cp rows of it -- so each divides by cp exactly. ValueError unless
    cp divides seq_len.
    """
    _check_activation_args(seq_len, micro_batch, hidden, heads, layers, tp, recompute)
    check_bool("sp", sp)
    check_int("cp", cp)
    check_divisible("seq_len", seq_len, "cp", cp)
    if cp > 1:  # every term is (s/cp) x (a count per token): the whole divides by cp
        whole = activation_bytes(
            seq_len=seq_len,
            micro_batch=micro_batch,
            hidden=hidden,
            heads=heads,
            layers=layers,
            tp=tp,
            sp=sp,
            recompute=recompute,
        )
        return whole // cp
    # BEGIN SOLUTION lab01.2: stored activation bytes per Korthikanti et al. 2022 Table 2
    s, b, h, a, t = seq_len, micro_batch, hidden, heads, tp
    sbh = s * b * h
    if recompute == "full":
        return layers * (2 * sbh // t if sp else 2 * sbh)  # only the layer input is kept
    # softmax output 2as^2b + dropout mask as^2b + dropout output 2as^2b, split over t heads
    scores = 5 * a * s * s * b // t if recompute == "none" else 0
    # linear/GeLU inputs (24sbh) split over t; norms, dropout masks and block inputs (10sbh) are
    # replicated unless sequence parallelism splits them along s
    per_layer = 34 * sbh // t if sp else 10 * sbh + 24 * sbh // t
    return layers * (per_layer + scores)
    # END SOLUTION


def llama_activation_breakdown(
    config: Any,
    *,
    seq_len: int,
    micro_batch: int,
    dtype_bytes: int = 2,
    recompute: str = "none",
    cp: int = 1,
) -> dict[str, int]:
    """Activation bytes our :class:`~minitorch_dist.models.Llama` keeps at the end of the forward
    pass (loss included), by term. p = ``dtype_bytes`` (2 for bf16/fp16, 4 for fp32); b, s, h as
    above, kv = kv_hidden, f = ffn_hidden, H = heads, d = head_dim, V = vocab_size, L = layers.

    ``blocks`` = L x per block, which for ``recompute="none"`` is
        attn_norm  input x, x * rstd, rstd                     p (2bsh + bs)
        wq/wk/wv   their shared input (the normed x)           p bsh
        core       q, k, v after RoPE, output                  p (2bsh + 2bs kv)
                   logsumexp per (row, head), always fp32      4 bHs
        mlp_norm   input, x * rstd, rstd                       p (2bsh + bs)
        w1/w3      their shared input                          p bsh
        SwiGLU     w1 x, silu(w1 x), w3 x, their product       p 4bsf
    that is p (8bsh + 2bs kv + 4bsf + 2bs) + 4bHs; wo's input is a view of the core's output.
    ``selective`` recomputes ``attn.core``: its inputs and output stay saved by their neighbours,
    only the fp32 logsumexp (4bHs) goes -- fused attention already keeps no (s x s) matrix, the
    5as^2b term Korthikanti's selective recomputation removes. ``full`` checkpoints each Block:
    only its input p bsh stays.

    Once per forward: ``rope`` the cos and sin tables p (2sd); ``final_norm`` its input, x * rstd,
    rstd and the head's input p (3bsh + bs); ``loss`` log_softmax's fp32 output 4bsV, the
    flattened int64 targets 8bs (a copy when the targets are a strided slice, as
    ``synthetic_batch`` makes them for b > 1; at b = 1 a view of the batch, counted as data) and
    two fp32 scalars (loss, weight total) 8. The logits themselves are not saved (log_softmax
    keeps its output, not its input), though they are alive for a moment: peaks exceed this.

    ``cp``: bytes per rank when context parallelism splits the sequence over ``cp`` ranks
    (chapter 8): the breakdown of ``seq_len / cp`` tokens.

    Measured by ``MemoryTracker``: exact on CPU (fp32, bf16) and on fake tensors, within 0.2 %
    on an H100 in bf16 (flash attention). Not covered: fp32 attention on CUDA (no flash kernel:
    +4 % on the tiny model), and autocast, which also keeps a 16-bit copy of every weight for the
    step (2 bytes/param more).
    """
    check_int("seq_len", seq_len)
    check_int("micro_batch", micro_batch)
    check_int("dtype_bytes", dtype_bytes)
    check_choice("recompute", recompute, RECOMPUTE)
    check_int("cp", cp)
    # context parallelism: a rank holds s/cp tokens and every term counts tokens (fused attention
    # keeps no s x s matrix), so a rank's bytes are those of a sequence of s/cp
    seq_len = check_divisible("seq_len", seq_len, "cp", cp)
    # BEGIN SOLUTION lab01.2: the Llama stored activation bytes, term by term
    s, b, p = seq_len, micro_batch, dtype_bytes
    h, kv, f = config.hidden, config.kv_hidden, config.ffn_hidden
    bs, bsh = b * s, b * s * h
    if recompute == "full":
        block = p * bsh  # the checkpointed Block keeps only its input
    else:
        block = p * (8 * bsh + 2 * bs * kv + 4 * bs * f + 2 * bs)
        if recompute == "none":
            block += 4 * bs * config.heads  # fp32 logsumexp of the fused attention
    return {
        "blocks": config.layers * block,
        "rope": p * 2 * s * config.head_dim,
        "final_norm": p * (3 * bsh + bs),
        "loss": 4 * bs * config.vocab_size + 8 * bs + 8,
    }
    # END SOLUTION


def llama_activation_bytes(
    config: Any,
    *,
    seq_len: int,
    micro_batch: int,
    dtype_bytes: int = 2,
    recompute: str = "none",
    cp: int = 1,
) -> int:
    """Total of :func:`llama_activation_breakdown`: the Llama's stored activations in bytes
    (per rank of a context-parallel group of ``cp``)."""
    parts = llama_activation_breakdown(
        config,
        seq_len=seq_len,
        micro_batch=micro_batch,
        dtype_bytes=dtype_bytes,
        recompute=recompute,
        cp=cp,
    )
    return sum(parts.values())


def format_bytes(n: float) -> str:
    """Binary units with one decimal: 512 -> "512 B", 1536 -> "1.5 KiB", 14e9 -> "13.0 GiB"."""
    if n < 0:
        return "-" + format_bytes(-n)
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")

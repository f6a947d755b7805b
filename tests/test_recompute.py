"""Activation recomputation (lab 3: lab03.1 checkpoint, lab03.2 full policy, lab03.3 selective).

The reference is always the same computation without checkpointing: outputs, input gradients and
parameter gradients must be identical (on the CPU in fp32 the recomputation repeats the same
kernels on the same data, so equality is exact). Stored bytes are checked against
``llama_activation_bytes`` (the closed form of chapter 1) and against torch's own checkpoint.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minitorch_dist.memory import (
    MemoryTracker,
    activation_bytes,
    llama_activation_breakdown,
    llama_activation_bytes,
)
from minitorch_dist.models import (
    AttentionCore,
    Block,
    Llama,
    LlamaConfig,
    cross_entropy,
    rope_tables,
    synthetic_batch,
)
from minitorch_dist.recompute import (
    apply_activation_checkpointing,
    checkpoint,
    checkpointed_modules,
    math_attention_extra_bytes,
    measure_recompute,
    remove_activation_checkpointing,
    segment_checkpoint_bytes,
    selective_policy,
    use_attention,
)

TINY = LlamaConfig.from_preset("tiny")
F32 = 4


def grads_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def loss_and_grads(model: nn.Module, batch: tuple) -> tuple[torch.Tensor, dict]:
    model.zero_grad(set_to_none=True)
    loss = cross_entropy(model(batch[0]), batch[1])
    loss.backward()
    return loss.detach(), grads_of(model)


def assert_same_step(model: nn.Module, policy: str, batch: tuple) -> list[str]:
    """Checkpointed copy vs original: same loss, every parameter's gradient identical."""
    reference = copy.deepcopy(model)
    names = apply_activation_checkpointing(model, policy)
    loss_ref, grads_ref = loss_and_grads(reference, batch)
    loss, grads = loss_and_grads(model, batch)
    assert torch.equal(loss, loss_ref)
    assert grads.keys() == grads_ref.keys() and len(grads) == len(list(model.parameters()))
    for name in grads:
        assert torch.equal(grads[name], grads_ref[name]), name
    return names


# -- lab03.1: the autograd.Function ---------------------------------------------------------
@pytest.mark.lab03
@pytest.mark.task("lab03.1")
def test_checkpointed_block_has_identical_output_and_gradients() -> None:
    """Catches a backward that returns the wrong input gradient, drops the parameters' gradients
    (forgot to backpropagate through the recomputed graph) or recomputes with other inputs."""
    torch.manual_seed(0)
    block = Block(TINY)
    cos, sin = rope_tables(16, TINY.head_dim, TINY.rope_theta)
    x = torch.randn(2, 16, TINY.hidden, requires_grad=True)
    g = torch.randn(2, 16, TINY.hidden)

    y_ref = block(x, cos, sin)
    y_ref.backward(g)
    dx_ref, dw_ref = x.grad.clone(), grads_of(block)
    x.grad = None
    block.zero_grad(set_to_none=True)

    y = checkpoint(block, x, cos, sin)
    assert torch.equal(y, y_ref)
    y.backward(g)
    assert torch.equal(x.grad, dx_ref)
    dw = grads_of(block)
    assert dw.keys() == dw_ref.keys() and len(dw) == len(list(block.parameters()))
    for name in dw:
        assert torch.equal(dw[name], dw_ref[name]), name


@pytest.mark.lab03
@pytest.mark.task("lab03.1")
def test_checkpoint_stores_only_its_inputs() -> None:
    """Catches a forward that records the inside (no torch.no_grad): a 4-layer MLP then keeps
    every hidden activation. Checkpointed, the forward leaves alive only its output."""
    torch.manual_seed(0)
    assert torch.equal(
        checkpoint(torch.tanh, torch.ones(2, requires_grad=True)), torch.ones(2).tanh()
    )
    mlp = nn.Sequential(
        nn.Linear(32, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 32)
    )
    x = torch.randn(64, 32, requires_grad=True)
    with MemoryTracker(mlp) as tracker:
        tracker.track(x, "other")  # existed before: not part of what the forward keeps
        before = sum(tracker.current().values())
        y = checkpoint(mlp, x)
        kept = sum(tracker.current().values()) - before
    assert kept == y.numel() * F32, (  # nothing inside the MLP
        f"the checkpointed forward left {kept} bytes alive, not only its output's "
        f"{y.numel() * F32}: it recorded the inside of the function; run it under "
        "torch.no_grad() and save only the inputs for backward"
    )
    with MemoryTracker(mlp) as tracker:
        tracker.track(x, "other")
        before = sum(tracker.current().values())
        y = mlp(x)
        kept_plain = sum(tracker.current().values()) - before
    assert kept_plain > 8 * kept  # the uncheckpointed MLP keeps its 256-wide hiddens


@pytest.mark.lab03
@pytest.mark.task("lab03.1")
def test_backward_reruns_the_forward_exactly_once() -> None:
    """Catches a backward that never recomputes (gradients from stale state) or recomputes
    more than once."""
    calls = []
    w = nn.Parameter(torch.randn(8, 8))

    def f(x: torch.Tensor) -> torch.Tensor:
        calls.append(torch.is_grad_enabled())
        return torch.tanh(x @ w)

    x = torch.randn(4, 8, requires_grad=True)
    y = checkpoint(f, x)
    assert calls == [False], (  # the forward recorded nothing
        f"the function ran {len(calls)} time(s) in the checkpointed forward, grad enabled "
        f"{calls}: it must run once, under torch.no_grad(), recording nothing"
    )
    y.sum().backward()
    assert calls == [False, True], (  # the recomputation recorded the graph
        f"grad enabled in each run of the function: {calls}, not [False, True]: backward must "
        "rerun it exactly once, with grad enabled, to rebuild the graph it differentiates"
    )
    assert w.grad is not None and x.grad is not None


@pytest.mark.lab03
@pytest.mark.task("lab03.1")
def test_dropout_masks_are_replayed_in_the_recomputation() -> None:
    """Catches a recomputation that draws new dropout masks (RNG state not restored): its
    gradients would belong to another network than the forward's."""
    torch.manual_seed(0)
    w = nn.Parameter(torch.randn(16, 16))
    x = torch.randn(8, 16, requires_grad=True)

    def f(inp: torch.Tensor) -> torch.Tensor:
        return F.dropout(torch.relu(inp @ w), p=0.5, training=True)

    torch.manual_seed(1)
    f(x).square().sum().backward()
    dw_ref, dx_ref = w.grad.clone(), x.grad.clone()
    w.grad = x.grad = None
    torch.manual_seed(1)
    checkpoint(f, x).square().sum().backward()
    assert torch.equal(w.grad, dw_ref) and torch.equal(x.grad, dx_ref), (
        "the gradients differ from the uncheckpointed ones: the recomputation drew new dropout "
        "masks; set the RNG state saved in forward back before rerunning f (inside fork_rng)"
    )


@pytest.mark.lab03
@pytest.mark.task("lab03.1")
def test_the_callers_random_stream_is_not_disturbed() -> None:
    """Catches restoring the saved RNG state without forking: the caller's generator would be
    rewound, and the next dropout mask after backward would repeat an old one."""
    w = nn.Parameter(torch.randn(16, 16))
    x = torch.randn(8, 16, requires_grad=True)

    def f(inp: torch.Tensor) -> torch.Tensor:
        return F.dropout(inp @ w, p=0.5, training=True)

    torch.manual_seed(2)
    y = f(x)
    between = torch.rand(3)  # the caller draws between forward and backward
    y.sum().backward()
    expected = torch.rand(4)
    torch.manual_seed(2)
    y = checkpoint(f, x)
    assert torch.equal(torch.rand(3), between)
    y.sum().backward()
    assert torch.equal(torch.rand(4), expected)


@pytest.mark.lab03
@pytest.mark.task("lab03.1")
def test_several_outputs_and_non_tensor_arguments() -> None:
    """Catches a Function that only handles one tensor in and one out: mixed arguments (a float,
    a tensor without grad) and a tuple of outputs of which only one is used."""
    w = nn.Parameter(torch.randn(6, 6))
    x = torch.randn(3, 6, requires_grad=True)
    bias = torch.randn(6)  # no grad

    def f(inp: torch.Tensor, scale: float, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.sin(inp @ w) * scale + b
        return h, h.square()

    a, c = f(x, 0.5, bias)
    (a.sum() + c.mean()).backward()
    dw_ref, dx_ref = w.grad.clone(), x.grad.clone()
    w.grad = x.grad = None
    a, c = checkpoint(f, x, 0.5, bias)
    (a.sum() + c.mean()).backward()
    assert torch.equal(w.grad, dw_ref) and torch.equal(x.grad, dx_ref)
    assert bias.grad is None
    w.grad = None
    a, _ = checkpoint(f, x, 0.5, bias)  # the second output unused: its gradient is None
    a.sum().backward()
    assert w.grad is not None


@pytest.mark.lab03
@pytest.mark.task("lab03.1")
def test_recomputation_runs_under_the_callers_autocast() -> None:
    """Catches a recomputation outside the forward's autocast: backward runs outside the
    caller's ``torch.autocast`` block, so it would recompute in fp32 and backpropagate through
    another computation than the bf16 forward."""
    torch.manual_seed(0)
    lin = nn.Linear(16, 16)
    x = torch.randn(4, 16, requires_grad=True)
    grads = []
    for wrap in (lambda f, t: f(t), checkpoint):
        lin.zero_grad(set_to_none=True)
        x.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = wrap(lambda t: torch.relu(lin(t)) * lin(t), x)
        assert y.dtype == torch.bfloat16
        y.float().square().sum().backward()
        grads.append([x.grad.clone(), lin.weight.grad.clone()])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_checkpoint_input_validation() -> None:
    """Catches a checkpoint that silently gives parameters no gradient (no input needs grad)."""
    w = nn.Parameter(torch.randn(4, 4))
    with pytest.raises(ValueError, match="at least one tensor argument must require grad"):
        checkpoint(lambda t: t @ w, torch.randn(2, 4))
    with pytest.raises(ValueError, match="function must be callable"):
        checkpoint(3, torch.randn(2, 4, requires_grad=True))  # type: ignore[arg-type]
    with torch.no_grad():  # evaluation: plain call, nothing to recompute
        assert checkpoint(lambda t: t @ w, torch.randn(2, 4)).shape == (2, 4)


# -- lab03.2: full recomputation ------------------------------------------------------------
@pytest.mark.lab03
@pytest.mark.task("lab03.2")
def test_full_policy_wraps_every_block_and_keeps_gradients() -> None:
    """Catches wrapping the wrong modules, or a wrapper that changes the loss or a gradient."""
    torch.manual_seed(0)
    model = Llama(TINY)
    batch = synthetic_batch(TINY.vocab_size, 2, 32)
    names = assert_same_step(model, "full", batch)
    want = [f"layers.{i}" for i in range(TINY.layers)]
    assert names == want, f"the full policy wrapped {names}, not every Block {want}"
    assert checkpointed_modules(model) == names, (
        f"apply_activation_checkpointing returned {names} but the model has "
        f"{checkpointed_modules(model)} checkpointed: each picked module's forward must be "
        "replaced by one that runs it under checkpoint"
    )


@pytest.mark.lab03
@pytest.mark.task("lab03.2")
def test_full_recomputation_stores_the_block_inputs_only() -> None:
    """Catches a wrapper that does not checkpoint (stores everything) or stores extra copies:
    the stored bytes must equal the closed form, and torch's checkpoint, to the byte."""
    for seq, b in ((32, 2), (64, 3)):
        ours = measure_recompute(TINY, seq_len=seq, micro_batch=b, policy="full")
        theirs = measure_recompute(TINY, seq_len=seq, micro_batch=b, policy="full", impl="torch")
        expected = llama_activation_bytes(
            TINY, seq_len=seq, micro_batch=b, dtype_bytes=F32, recompute="full"
        )
        assert ours["activations"] == theirs["activations"] == expected, (
            f"s = {seq}, b = {b}: full recomputation stores {ours['activations']} bytes, torch's "
            f"checkpoint {theirs['activations']}, the closed form {expected}: "
            + (
                "more means a block is not checkpointed (its inside is stored) or an input is "
                "stored twice"
                if ours["activations"] > expected
                else "less means something the backward needs was not stored"
            )
        )


@pytest.mark.lab03
@pytest.mark.task("lab03.2")
def test_each_block_runs_its_forward_twice_per_step() -> None:
    """Catches a policy applied to the model but not used (no recomputation in backward)."""
    torch.manual_seed(0)
    model = Llama(TINY)
    apply_activation_checkpointing(model, "full")
    calls: list[str] = []
    for i, block in enumerate(model.layers):
        block.attn.register_forward_hook(lambda *_, i=i: calls.append(f"block {i}"))
    inputs, targets = synthetic_batch(TINY.vocab_size, 2, 16)
    loss = cross_entropy(model(inputs), targets)
    assert calls == ["block 0", "block 1"], f"the forward ran {calls}, not each block once"
    loss.backward()
    assert calls == ["block 0", "block 1", "block 1", "block 0"], (  # backward: last to first
        f"forward and backward ran {calls}: in backward each checkpointed block must run its "
        "forward again (last block first); the policy was applied but nothing recomputes"
    )


@pytest.mark.lab03
@pytest.mark.task("lab03.2")
def test_custom_policy_and_removal() -> None:
    """Catches wrapping a module inside one already wrapped (its forward would run three
    times), and a removal that leaves a wrapper behind."""
    torch.manual_seed(0)
    model = Llama(TINY)
    batch = synthetic_batch(TINY.vocab_size, 2, 16)

    def blocks_and_cores(name: str, module: nn.Module) -> bool:
        return isinstance(module, (Block, AttentionCore))

    names = assert_same_step(model, blocks_and_cores, batch)
    assert names == [f"layers.{i}" for i in range(TINY.layers)], (  # cores sit inside blocks
        f"wrapped {names}: a module inside one already wrapped (each block's attention core) "
        "must not be wrapped again, its forward would run three times"
    )
    assert remove_activation_checkpointing(model) == names
    assert checkpointed_modules(model) == []
    assert "forward" not in vars(model.layers[0])
    assert apply_activation_checkpointing(model, lambda name, m: name == "layers.1") == ["layers.1"]


def test_policy_validation() -> None:
    """Catches silently accepting an unknown policy or wrapping a model twice."""
    model = Llama(TINY)
    with pytest.raises(ValueError, match="policy must be one of none, full, selective"):
        apply_activation_checkpointing(model, "everything")
    with pytest.raises(ValueError, match="policy must be one of"):
        apply_activation_checkpointing(model, 3)  # type: ignore[arg-type]
    assert apply_activation_checkpointing(model, "none") == []


# -- lab03.3: selective recomputation -------------------------------------------------------
PICK_THE_CORE = (
    "the selective policy must pick only the attention core of each block (an "
    "AttentionCore), not the attention with its projections nor the block"
)


@pytest.mark.lab03
@pytest.mark.task("lab03.3")
def test_selective_policy_wraps_only_the_attention_cores() -> None:
    """Catches a selective policy that wraps whole blocks or attention with its projections."""
    assert selective_policy("layers.0.attn.core", AttentionCore()), PICK_THE_CORE
    assert not selective_policy("layers.0", Block(TINY)), PICK_THE_CORE
    torch.manual_seed(0)
    model = Llama(TINY)
    batch = synthetic_batch(TINY.vocab_size, 2, 32)
    names = assert_same_step(model, selective_policy, batch)
    assert names == [f"layers.{i}.attn.core" for i in range(TINY.layers)], (
        f"the selective policy picked {names}: it must pick only the attention core of each "
        "block (softmax(qk^T / sqrt(d)) v), not the attention with its projections nor the block"
    )


@pytest.mark.lab03
@pytest.mark.task("lab03.3")
def test_selective_removes_exactly_the_attention_matrices() -> None:
    """Catches a selective policy that keeps the (s x s) probabilities of unfused attention, or
    that recomputes more than the core: stored bytes must match the closed forms exactly."""
    assert selective_policy("layers.1.attn.core", AttentionCore()), PICK_THE_CORE
    seq, b = 64, 2
    fused = llama_activation_bytes(
        TINY, seq_len=seq, micro_batch=b, dtype_bytes=F32, recompute="selective"
    )
    for attention in ("fused", "math"):
        got = measure_recompute(
            TINY, seq_len=seq, micro_batch=b, policy="selective", attention=attention
        )
        assert got["activations"] == fused, attention
    # the unfused core without recomputation: + p·bHs^2 probabilities (and GQA copies)
    none = measure_recompute(TINY, seq_len=seq, micro_batch=b, attention="math")
    extra = math_attention_extra_bytes(TINY, seq_len=seq, micro_batch=b, dtype_bytes=F32)
    plain = llama_activation_bytes(TINY, seq_len=seq, micro_batch=b, dtype_bytes=F32)
    assert none["activations"] == plain + extra


# -- not graded: helpers and the exercises' answers ----------------------------------------
def test_math_attention_equals_fused_attention() -> None:
    """Catches an unfused core that computes something else (mask, scale or GQA wrong)."""
    torch.manual_seed(0)
    model = Llama(TINY)
    inputs, _ = synthetic_batch(TINY.vocab_size, 2, 32)
    fused = model(inputs)
    torch.testing.assert_close(use_attention(model, "math")(inputs), fused)
    with pytest.raises(ValueError, match="kind must be one of fused, math"):
        use_attention(model, "flash")


def test_segment_checkpoint_bytes_has_its_minimum_near_sqrt_n() -> None:
    """Catches a wrong Chen et al. count: with layer = input the best segment is sqrt(n)."""
    costs = {k: segment_checkpoint_bytes(64, k, input_bytes=1, layer_bytes=1) for k in range(1, 65)}
    assert min(costs, key=costs.get) == 8 and costs[8] == 16
    assert segment_checkpoint_bytes(10, 3, input_bytes=5, layer_bytes=7) == 4 * 5 + 3 * 7
    with pytest.raises(ValueError, match="segment=5 is longer"):
        segment_checkpoint_bytes(4, 5, input_bytes=1, layer_bytes=1)


GPT3 = dict(seq_len=2048, hidden=12288, heads=96, layers=96)  # Korthikanti et al., Table 3


def test_chapter3_exercise_answers() -> None:
    """The answers the chapter asserts, recomputed by hand from the papers' formulas."""
    # 1. selective recomputation saves 5as/h / (34 + 5as/h) of GPT-3's activations (~70 %)
    s, h, a = 2048, 12288, 96
    saved = 1 - activation_bytes(micro_batch=1, recompute="selective", **GPT3) / activation_bytes(
        micro_batch=1, **GPT3
    )
    assert saved == pytest.approx((5 * a * s / h) / (34 + 5 * a * s / h))
    assert round(saved, 2) == 0.70
    # 2. the best segment length for Llama-3-70B at s = 4096, b = 1, 16-bit: a block stores
    # about 22 times its input, so segments of 2 blocks beat checkpointing every block
    cfg = LlamaConfig.from_preset("llama-3-70b")
    block = llama_activation_breakdown(cfg, seq_len=4096, micro_batch=1)["blocks"] // cfg.layers
    block_input = 2 * 4096 * cfg.hidden
    full = llama_activation_breakdown(cfg, seq_len=4096, micro_batch=1, recompute="full")
    assert full["blocks"] == cfg.layers * block_input
    costs = {
        k: segment_checkpoint_bytes(cfg.layers, k, input_bytes=block_input, layer_bytes=block)
        for k in range(1, cfg.layers + 1)
    }
    assert min(costs, key=costs.get) == 2 and costs[2] < costs[1]
    # 3. with fused attention, selective saves only the fp32 logsumexp: L x 4bHs
    cfg = LlamaConfig.from_preset("llama-3-8b")
    saved = llama_activation_bytes(cfg, seq_len=8192, micro_batch=1) - llama_activation_bytes(
        cfg, seq_len=8192, micro_batch=1, recompute="selective"
    )
    assert saved == 32 * 4 * 32 * 8192 == 33_554_432


def test_figures_render_headless() -> None:
    """Catches a figure function that fails on the data the chapter and the lab give it."""
    from minitorch_dist.recompute.plots import plot_policy_sweep, plot_segments, plot_who_dominates

    run = {"params": 2**30, "grads": 2**30, "optimizer": 2**31, "activations": 2**29}
    runs = {"m": {(s, p): run for s in (1024, 2048) for p in ("none", "selective", "full")}}
    for fig in (
        plot_who_dominates(runs),
        plot_policy_sweep([32, 64], {"none": [1, 2], "full": [1, 1]}, references={"x": [1, 2]}),
        plot_segments({1: 5, 2: 4, 3: 6}),
    ):
        assert fig._repr_png_().startswith(b"\x89PNG")

"""Measured memory accounting (lab 1, task lab01.3): the live-storage tracker, on hand-countable
toys, against torch's own MemTracker, against the closed forms of ``estimate``, and on fake
tensors for models that do not fit this machine."""

from __future__ import annotations

import pytest
import torch
from own_process import own_process
from torch import nn

from minitorch_dist.memory import (
    MemoryTracker,
    llama_activation_bytes,
    measure_step,
    measure_step_fake,
    model_state_bytes,
)
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.models.checkpointing import apply_torch_checkpointing
from minitorch_dist.models.data import synthetic_batch

F32 = 4


def mlp() -> nn.Module:
    """Linear(16, 32) -> ReLU -> Linear(32, 8): 16*32 + 32 + 32*8 + 8 = 808 parameters."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


def total(sample: dict[str, int]) -> int:
    return sum(sample.values())


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_toy_mlp_exact_bytes() -> None:
    """Catches wrong categories or double counting, on bytes counted by hand (batch 4, fp32):
    forward saves ReLU's output (4x32) and returns y (4x8); the input x (4x16) is "other";
    after the step Adam holds m and v (2 x 808 floats) and a 4-byte step counter per tensor."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(4, 16)
    with MemoryTracker(model, opt) as tracker:
        y = model(x)
        assert tracker.current() == {
            "params": 808 * F32,
            "grads": 0,
            "optimizer": 0,
            "activations": (4 * 32 + 4 * 8) * F32,
            "other": 4 * 16 * F32,
        }
        y.sum().backward()
        after_backward = tracker.current()
        opt.step()
        after_step = tracker.current()
    assert after_backward["grads"] == 808 * F32
    assert after_backward["activations"] == 4 * 8 * F32  # only y, which we still hold
    assert after_step["optimizer"] == 2 * 808 * F32 + 4 * F32, (  # m, v and 4 step counters
        f"after Adam's first step {after_step['optimizer']} bytes are filed as optimizer states, "
        f"not m and v (2 x 808 floats) and 4 step counters = {2 * 808 * F32 + 4 * F32}: what "
        "is made inside the optimizer step is optimizer state"
    )
    assert after_step["params"] == 808 * F32  # the update is in place


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_peak_is_the_breakdown_at_the_peak() -> None:
    """Catches reporting per-category maxima (which never coexisted) instead of one moment."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    with MemoryTracker(model, opt) as tracker:
        model(torch.randn(64, 16)).sum().backward()
        opt.step()
    peak = tracker.peak()
    assert total(peak) == tracker.peak_total == max(total(s) for _, _, s in tracker.timeline)
    first_at_peak = next(s for _, _, s in tracker.timeline if total(s) == tracker.peak_total)
    assert peak == first_at_peak
    per_category_max = {c: max(s[c] for _, _, s in tracker.timeline) for c in peak}
    assert total(per_category_max) > tracker.peak_total  # the wrong answer is really different


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_timeline_is_ordered_and_labelled() -> None:
    """Catches a timeline that cannot be plotted: indices must not go back, phases in order."""
    model = mlp()
    result = measure_step(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        (torch.randn(4, 16), torch.randn(4, 8)),
        nn.functional.mse_loss,
    )
    indices = [i for i, _, _ in result["timeline"]]
    assert indices == sorted(indices) and len(indices) > 10
    phases = [p for _, p, _ in result["timeline"]]
    order = [p for i, p in enumerate(phases) if i == 0 or p != phases[i - 1]]
    assert order == ["forward", "backward", "optimizer", "idle"]


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_views_count_once_and_dead_storages_leave() -> None:
    """Catches counting each view as new memory, and leaks: bytes must fall when tensors die."""
    with MemoryTracker() as tracker, torch.no_grad():
        a = torch.zeros(100)
        b, c = a.view(10, 10), a[:50]
        got = tracker.current()["other"]
        assert got == 100 * F32, (
            f"a tensor of 100 floats and two views of it count {got} bytes, not 400: a view "
            "shares its base's storage; count each storage once"
        )
        del a, b
        got = tracker.current()["other"]
        assert got == 100 * F32, (  # c still holds the storage
            f"{got} bytes after deleting a and one view, not 400: the storage lives while any "
            "view of it does"
        )
        del c
        got = tracker.current()["other"]
        assert got == 0, (
            f"{got} bytes left after every view of the storage died, not 0: a dead storage must "
            "leave the books (its finalizer calls _free)"
        )
    model = mlp()
    with MemoryTracker(model) as tracker:
        y = model(torch.randn(4, 16))
        assert tracker.current()["activations"] > 0
        del y
        got = tracker.current()["activations"]
        assert got == 0, (  # the graph and what it saved are gone
            f"{got} bytes of activations left after the output and its graph died, not 0: a "
            "dead storage must leave the books"
        )


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_storage_resized_in_place_is_remeasured() -> None:
    """Catches counting a parameter that ZeRO-3 freed with ``untyped_storage().resize_(0)``."""
    model = nn.Linear(10, 10)
    with MemoryTracker(model) as tracker:
        model.weight.untyped_storage().resize_(0)
        got = tracker.current()["params"]
        assert got == 10 * F32, (  # the bias is left
            f"params hold {got} bytes after weight.untyped_storage().resize_(0), expected "
            f"{10 * F32} (the bias): a storage resized in place (as ZeRO-3 frees its gathered "
            "parameters) must be re-measured, not counted once at its first size"
        )
        model.weight.untyped_storage().resize_(100 * F32)
        assert tracker.current()["params"] == 110 * F32


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_existing_states_counted_on_enter() -> None:
    """Catches a tracker that only sees tensors made after it starts: grads and Adam states from
    an earlier step exist before the ``with`` and must be counted."""
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 16)).sum().backward()
    opt.step()
    with MemoryTracker(model, opt) as tracker:
        now = tracker.current()
    assert now["params"] == now["grads"] == 808 * F32
    assert now["optimizer"] == 2 * 808 * F32 + 4 * F32


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_matches_torch_memtracker() -> None:
    """Catches any disagreement with PyTorch's own (private) tracker on params, grads and
    optimizer states after a step."""
    mem_tracker = pytest.importorskip("torch.distributed._tools.mem_tracker")
    x = torch.randn(8, 16)
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    reference = mem_tracker.MemTracker()
    reference.track_external(model, opt)
    with reference:
        model(x).sum().backward()
        opt.step()
    theirs = {
        str(k.value): v
        for k, v in reference.get_tracker_snapshot()[torch.device("cpu")].items()
        if hasattr(k, "value")
    }
    model = mlp()
    opt = torch.optim.Adam(model.parameters())
    with MemoryTracker(model, opt) as tracker:
        model(x).sum().backward()
        opt.step()
    ours = tracker.current()
    assert (ours["params"], ours["grads"], ours["optimizer"]) == (
        theirs["Parameter"],
        theirs["Gradient"],
        theirs["Optstate"],
    )


TINY = LlamaConfig.from_preset("tiny")


def tiny_step(recompute: str = "none", batch: int = 4, seq: int = 64) -> dict:
    torch.manual_seed(0)
    model = apply_torch_checkpointing(Llama(TINY), recompute)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return measure_step(model, opt, lambda: synthetic_batch(TINY.vocab_size, batch, seq))


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_tiny_llama_activations_match_estimate(recompute: str) -> None:
    """Catches a Llama estimate that misses what the model saves (within 5%; it is exact for the
    reference): measured activations at the end of the forward pass, fp32 on CPU."""
    measured = tiny_step(recompute)["forward"]["activations"]
    predicted = llama_activation_bytes(
        TINY, seq_len=64, micro_batch=4, dtype_bytes=F32, recompute=recompute
    )
    assert abs(measured - predicted) / predicted < 0.05, (measured, predicted)


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_tiny_llama_model_states_match_closed_form() -> None:
    """Catches measured model states that disagree with 4 + 4 + 8 bytes/param (fp32 + Adam);
    Adam's per-tensor step counters (4 bytes each) are the only extra."""
    after = tiny_step()["optimizer"]
    n, tensors = TINY.num_params(), len(list(Llama(TINY).parameters()))
    predicted = model_state_bytes(n, recipe="fp32")
    assert after["params"] == predicted["params"]
    assert after["grads"] == predicted["grads"]
    assert after["optimizer"] == predicted["optimizer"] + 4 * tensors


SMALL = LlamaConfig("small", 32000, 512, 4, 8, 4, 1376, 2048, 1e-5, 10000.0)


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
@pytest.mark.parametrize(("dtype", "nbytes"), [(torch.float32, 4), (torch.bfloat16, 2)])
@own_process
def test_fake_measurement_equals_closed_form(dtype: torch.dtype, nbytes: int) -> None:
    """Catches a tracker that breaks on fake tensors: model states of a 4-layer, h=512 Llama and
    its activations equal the closed forms exactly (pure ``dtype`` training, Adam)."""
    got = measure_step_fake(SMALL, seq_len=128, micro_batch=2, dtype=dtype)
    n = SMALL.num_params()
    assert got["num_params"] == n
    assert got["params"] == got["grads"] == nbytes * n, (
        f"measured params {got['params']} and grads {got['grads']} bytes, not {nbytes} x {n}: "
        "storages made on fake tensors (the model's, then backward's gradients) were not filed"
    )
    optimizer = got["optimizer"] - 4 * (9 * SMALL.layers + 3)  # less the step counters
    assert optimizer == 2 * nbytes * n, (
        f"measured {optimizer} bytes of Adam's m and v, not 2 x {nbytes} x {n}: storages made "
        "inside the optimizer step were not filed as optimizer"
    )
    want = llama_activation_bytes(SMALL, seq_len=128, micro_batch=2, dtype_bytes=nbytes)
    assert got["activations"] == want, (
        f"measured {got['activations']} bytes of activations, not the closed form's {want}: "
        "storages made while autograd records (the forward) are activations, each counted once"
    )


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
@own_process
def test_fake_recompute_policies() -> None:
    """Catches checkpointing that does not reduce stored activations as the estimate says."""
    for recompute in ("selective", "full"):
        got = measure_step_fake(SMALL, seq_len=128, micro_batch=2, recompute=recompute)
        want = llama_activation_bytes(
            SMALL, seq_len=128, micro_batch=2, dtype_bytes=4, recompute=recompute
        )
        assert got["activations"] == want, (
            f"recompute={recompute!r}: measured {got['activations']} bytes of activations, not "
            f"the closed form's {want}: the tracker must file the storages the checkpointed "
            "forward keeps, and only those"
        )


@pytest.mark.lab01
@pytest.mark.task("lab01.3")
@own_process
def test_fake_llama_2_7b_is_16_bytes_per_param() -> None:
    """Catches a measurement that cannot reach real sizes: one fp32 + Adam step of Llama-2-7B on
    fake tensors holds 16 bytes/param of model states (plus 291 four-byte step counters)."""
    got = measure_step_fake(LlamaConfig.from_preset("llama-2-7b"), seq_len=256, micro_batch=1)
    assert got["num_params"] == 6_738_415_616
    assert got["bytes_per_param"] == pytest.approx(16.0, abs=1e-6)  # ~108 GB: fake, not held


def test_tracker_validation() -> None:
    """Catches typos in phase or category names passing silently."""
    tracker = MemoryTracker()
    with pytest.raises(ValueError, match="phase must be one of"):
        tracker.mark("fwd")
    with pytest.raises(ValueError, match="category must be one of"):
        tracker.track(torch.zeros(1), "weights")
    with pytest.raises(ValueError, match="seq_len must be an integer >= 1"):
        measure_step_fake(TINY, seq_len=0, micro_batch=1)
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        measure_step_fake(TINY, seq_len=10_000, micro_batch=1)


@pytest.mark.gpu
@pytest.mark.lab01
@pytest.mark.task("lab01.3")
def test_cuda_tracker_matches_allocator() -> None:
    """Catches a tracker blind to CUDA tensors: on a GPU, the growth of the tracked total to its
    peak is within 5% of the growth of ``torch.cuda.max_memory_allocated`` (the allocator rounds
    blocks up to 512 bytes)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(0)
    model = Llama(TINY).cuda()
    opt = torch.optim.Adam(model.parameters())
    x, y = (t.cuda() for t in synthetic_batch(TINY.vocab_size, 8, 256))
    cross_entropy(model(x), y).backward()  # warm-up: cuBLAS allocates its workspace once
    model.zero_grad(set_to_none=True)
    got = measure_step(model, opt, (x, y))
    tracked = got["peak_total"] - got["cuda"]["tracked_at_enter"]
    allocator = got["cuda"]["max_allocated"] - got["cuda"]["allocated_at_enter"]
    assert abs(tracked - allocator) / allocator < 0.05, (tracked, allocator)


def _tracked_bytes_during_reduce_scatter(rank: int, world_size: int) -> tuple[int, int]:
    from minitorch_dist.comm import CommCounter, reduce_scatter_tensor

    flat = torch.ones(world_size * 1024)
    with MemoryTracker(nn.Linear(1, 1)) as tracker:
        known = tracker.current()["other"]
        tracker.track(flat, "other")
        with CommCounter(), torch.no_grad():  # counting too, inside a step, as lab 6 does
            reduce_scatter_tensor(flat[:1024], flat)  # in place, as ZeRO-1 does
        most = max(s["other"] for _, _, s in tracker.timeline)
    return most - known, flat.numel() * F32


def test_collective_buffers_are_not_counted() -> None:
    """Catches the tracker adopting gloo's own copy of a reduce-scatter's input (freed by gloo's
    worker thread at a moment that varies from run to run, so peaks flickered): during an
    in-place reduce-scatter, "other" holds exactly the tensor handed to it."""
    from minitorch_dist.launching.launcher import launch

    for seen, handed in launch(_tracked_bytes_during_reduce_scatter, 2):
        assert seen == handed, (seen, handed)

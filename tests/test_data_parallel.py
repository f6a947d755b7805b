"""Lab 5, tasks lab05.2 (naive DDP) and lab05.3 (bucketed DDP overlapped with backward).

Every variant is checked against one process training on the whole global batch: the weights
after several optimizer steps must agree in fp32 to rounding (Li et al. 2020, §3.2: averaging the
ranks' gradients of equal slices is the gradient of the global batch). The toy model has a tied
embedding/head and a frozen layer (as CS336's DDP tests do); the tiny Llama is the book's model.
SGD with momentum keeps rounding differences at rounding size; Adam divides by sqrt(v) and blows
up the 1e-8-sized differences of near-zero gradients, so it is only used on the toy model.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from minitorch_dist import launch
from minitorch_dist.comm import CommCounter, collective_bytes
from minitorch_dist.data_parallel import (
    DataParallelBucket,
    DataParallelNaive,
    TiedToy,
    Timeline,
    batch_slice,
    broadcast_parameters,
    build_buckets,
    make_batches,
    replicas_agree,
)
from minitorch_dist.models import Llama, LlamaConfig, cross_entropy
from minitorch_dist.reference import (
    TIGHT,
    Run,
    Shard,
    assert_runs_match,
    param_grads,
    reference_run,
    run_training,
    scale_mistake,
)

STEPS, GLOBAL_BATCH, SEQ = 3, 8, 16


def _model(kind: str) -> nn.Module:
    return TiedToy() if kind == "toy" else Llama(LlamaConfig.from_preset("tiny"))


def _vocab(kind: str) -> int:
    return 32 if kind == "toy" else LlamaConfig.from_preset("tiny").vocab_size


def _optimizer(params, name: str) -> torch.optim.Optimizer:  # noqa: ANN001
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.5, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-2)


def _state(model: nn.Module, optimizer: object = None) -> dict[str, torch.Tensor]:
    """Every entry of the state dict: frozen weights and buffers too (a missed broadcast)."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _reference(kind: str, opt: str, grad_acc: int = 1) -> Run:
    """One process, the whole global batch per step (grad_acc micro-batches of it)."""
    return reference_run(
        lambda: _model(kind),
        lambda ps: _optimizer(ps, opt),
        make_batches(_vocab(kind), GLOBAL_BATCH, SEQ, STEPS),
        grad_acc=grad_acc,
        weights=_state,
    )


def _wrap(variant: str, model: nn.Module, cap_mb: float) -> nn.Module:
    if variant == "naive":
        return DataParallelNaive(model)
    return DataParallelBucket(model, bucket_cap_mb=cap_mb)


def _train(rank, world_size, kind, opt, variant, cap_mb=25.0, grad_acc=1) -> dict:  # noqa: ANN001
    torch.manual_seed(0 if rank == 0 else 1000 + rank)  # replicas differ until the broadcast
    model = _model(kind)
    ddp = _wrap(variant, model, cap_mb)
    counters: list[CommCounter] = []

    def counted(step: int) -> CommCounter:
        counters.append(CommCounter())
        return counters[-1]

    run = run_training(
        ddp,
        _optimizer(model.parameters(), opt),
        make_batches(_vocab(kind), GLOBAL_BATCH, SEQ, STEPS),
        rank=rank,
        world_size=world_size,
        grad_acc=grad_acc,
        around_step=counted,
        grads=lambda m, o: param_grads(model),
        weights=lambda m, o: _state(model),
    )
    steps = [(cc.calls["all_reduce"], cc.bytes_sent["all_reduce"]) for cc in counters]
    buckets = [b.nbytes for b in ddp.buckets] if variant == "bucketed" else None
    grads = [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]
    return {
        "run": run,
        "agree": replicas_agree(model),
        "steps": steps,
        "buckets": buckets,
        "grads": grads,
    }


def _check_against_reference(results: list[dict], ref: Run) -> None:
    """Through the shared harness: each rank's outputs (its rows of the reference's), the first
    step's averaged gradients, the weights (and buffers) after the last step, the mean loss."""
    assert all(r["agree"] for r in results), "the replicas drifted apart"
    n = len(results)
    mistake = scale_mistake(results[0]["run"].grads, ref.grads, n)  # the first step's grads
    assert mistake is None, mistake
    assert_runs_match(
        [r["run"] for r in results], ref, outputs=lambda rank: Shard(0, rank, n), tolerance=TIGHT
    )


# -- lab05.2: naive ---------------------------------------------------------------------------
def _broadcast(rank: int, world_size: int) -> dict:
    torch.manual_seed(rank)  # every rank starts different
    model = TiedToy()
    broadcast_parameters(model)
    return _state(model)


@pytest.mark.lab05
@pytest.mark.task("lab05.2")
def test_broadcast_copies_rank_0_everywhere() -> None:
    """Catches a broadcast that skips frozen parameters or buffers, or picks the wrong root."""
    torch.manual_seed(0)
    want = _state(TiedToy())
    for rank, state in enumerate(launch(_broadcast, 3)):
        for name, value in want.items():
            assert torch.equal(state[name], value), (
                f"rank {rank}'s {name} differs from rank 0's after broadcast_parameters: every "
                "parameter, frozen ones included, and the module's buffers too must be copied "
                "from the group's rank 0"
            )


@pytest.mark.lab05
@pytest.mark.task("lab05.2")
@pytest.mark.parametrize(
    ("kind", "opt", "world_size"), [("toy", "sgd", 4), ("toy", "adamw", 2), ("llama", "sgd", 4)]
)
def test_naive_matches_single_process(kind: str, opt: str, world_size: int) -> None:
    """Catches summing without dividing by n, a missing broadcast, a tied weight reduced twice,
    or a frozen parameter waited for: weights after 3 steps equal one process's."""
    results = launch(_train, world_size, kind, opt, "naive", timeout=120)
    _check_against_reference(results, _reference(kind, opt))


@pytest.mark.lab05
@pytest.mark.task("lab05.2")
def test_naive_sends_one_all_reduce_per_gradient() -> None:
    """Catches extra or missing collectives: one all-reduce per trainable tensor per step, and
    2 (n - 1) / n times its bytes each (a tied weight counts once, a frozen one not at all)."""
    n = 4
    for r in launch(_train, n, "toy", "sgd", "naive"):
        want = sum(collective_bytes("all_reduce", b, n) for b in r["grads"])
        assert r["steps"] == [(len(r["grads"]), want)] * STEPS, (
            f"(all-reduces, bytes) per step: {r['steps']}, not {len(r['grads'])} all-reduces "
            f"of {want} bytes in all: naive data parallelism all-reduces each trainable "
            "gradient once, on its own (a tied weight once, a frozen one never)"
        )
        assert want == collective_bytes("all_reduce", sum(r["grads"]), n)


@pytest.mark.lab05
@pytest.mark.task("lab05.2")
def test_naive_no_sync_accumulates_then_syncs_once() -> None:
    """Catches no_sync that still communicates, or that loses the accumulated gradients."""
    results = launch(_train, 2, "toy", "sgd", "naive", 25.0, 2)
    _check_against_reference(results, _reference("toy", "sgd", grad_acc=2))
    for r in results:
        calls = [calls for calls, _ in r["steps"]]
        assert calls == [len(r["grads"])] * STEPS, (
            f"all-reduces per optimizer step: {calls}, not {len(r['grads'])} (one per gradient, "
            "once per step): inside no_sync() the backward must not communicate, and the "
            "synchronising backward then reduces the accumulated gradients"
        )


# -- lab05.3: buckets -------------------------------------------------------------------------
@pytest.mark.lab05
@pytest.mark.task("lab05.3")
def test_build_buckets_by_hand() -> None:
    """Catches buckets that overflow the cap, skip a tensor, reorder, or mix dtypes."""
    f32 = [torch.empty(10), torch.empty(10), torch.empty(10), torch.empty(25)]  # 40, 40, 40, 100 B
    mixed = [torch.empty(2), torch.empty(2, dtype=torch.float64), torch.empty(2)]
    for tensors, cap, want in (
        (f32, 100, [[0, 1], [2], [3]]),
        (f32, 80, [[0, 1], [2], [3]]),  # 100 B > cap: a bucket of its own
        (f32, 79, [[0], [1], [2], [3]]),
        (f32, 10**6, [[0, 1, 2, 3]]),
        (mixed, 10**6, [[0], [1], [2]]),
        ([], 100, []),
    ):
        got = build_buckets(tensors, cap)
        sizes = [(t.numel() * t.element_size(), str(t.dtype)[6:]) for t in tensors]
        assert got == want, (
            f"build_buckets of (bytes, dtype) {sizes} with cap {cap} B gave {got}, not {want}: "
            "consecutive tensors share a bucket while its bytes stay <= the cap (a tensor "
            "larger than the cap gets a bucket of its own), and a bucket holds one dtype"
        )


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
@pytest.mark.parametrize("cap_mb", [1e-5, 0.002, 25.0])  # one tensor per bucket, a few, one
def test_bucketed_matches_single_process_toy(cap_mb: float) -> None:
    """Catches a wrong slot, a bucket launched before all its gradients are in, or a tied or
    frozen parameter mishandled, whatever the bucket size."""
    results = launch(_train, 4, "toy", "sgd", "bucketed", cap_mb, timeout=120)
    _check_against_reference(results, _reference("toy", "sgd"))


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
def test_bucketed_matches_single_process_adamw_and_llama() -> None:
    """Same check with AdamW on the toy model, and on the tiny Llama with a few buckets."""
    _check_against_reference(
        launch(_train, 2, "toy", "adamw", "bucketed", 0.002), _reference("toy", "adamw")
    )
    _check_against_reference(
        launch(_train, 4, "llama", "sgd", "bucketed", 0.1, timeout=120), _reference("llama", "sgd")
    )


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
@pytest.mark.parametrize("cap_mb", [1e-5, 0.002, 25.0])
def test_bucketed_bytes_per_step_equal_the_formula(cap_mb: float) -> None:
    """Catches a bucket all-reduced twice, or padding sent: one all-reduce per bucket, and the
    ring bytes of the whole gradient in total, exactly."""
    n = 4
    for r in launch(_train, n, "toy", "sgd", "bucketed", cap_mb):
        assert sum(r["buckets"]) == sum(r["grads"])
        want = collective_bytes("all_reduce", sum(r["grads"]), n)
        assert sum(collective_bytes("all_reduce", b, n) for b in r["buckets"]) == want
        assert r["steps"] == [(len(r["buckets"]), want)] * STEPS, (
            f"(all-reduces, bytes) per step: {r['steps']}, not one all-reduce per bucket "
            f"({len(r['buckets'])}) sending the whole gradient's ring bytes ({want}) once: a "
            "bucket reduced twice, a gradient reduced on its own, or padding sent"
        )


def _first_bucket(rank: int, world_size: int) -> list[list[str]]:
    torch.manual_seed(0)
    model = Llama(LlamaConfig.from_preset("tiny"))
    ddp = DataParallelBucket(model, bucket_cap_mb=25, first_bucket_cap_mb=0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    return [[names[id(p)] for p in b.params] for b in ddp.buckets]


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
def test_first_bucket_is_small_and_the_rest_follow_the_cap() -> None:
    """Catches buckets that lose or repeat a parameter when the first bucket has its own cap:
    the head (the last layer, 64 KiB) fills the 10 KB first bucket alone, the rest fit one."""
    buckets = launch(_first_bucket, 1)[0]
    model = Llama(LlamaConfig.from_preset("tiny"))
    assert buckets[0] == ["head.weight"] and len(buckets) == 2
    assert buckets[0] + buckets[1] == [n for n, _ in model.named_parameters()][::-1]


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
def test_bucketed_no_sync_accumulates_then_syncs_once() -> None:
    """Catches hooks that communicate (or copy stale gradients) inside no_sync."""
    results = launch(_train, 4, "toy", "sgd", "bucketed", 0.002, 2)
    _check_against_reference(results, _reference("toy", "sgd", grad_acc=2))
    for r in results:
        calls = [calls for calls, _ in r["steps"]]
        assert calls == [len(r["buckets"])] * STEPS, (
            f"all-reduces per optimizer step: {calls}, not one per bucket ({len(r['buckets'])}): "
            "inside no_sync() the hooks must not launch a bucket"
        )


class RegisteredOutOfOrder(nn.Module):
    """Two layers registered in the reverse of the order forward uses them: the gradients of
    ``second`` arrive first, though the (reversed registration) bucket order puts it last."""

    def __init__(self) -> None:
        super().__init__()
        self.second = nn.Linear(8, 8)
        self.first = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def _events(
    rank: int, world_size: int, kind: str = "llama"
) -> tuple[list[tuple[str, int]], list[list[int]]]:
    """The timeline's events, and each bucket's parameters as indices of the "grad" events."""
    torch.manual_seed(0)
    if kind == "llama":
        ddp = DataParallelBucket(Llama(LlamaConfig.from_preset("tiny")), bucket_cap_mb=0.02)
        x, y = make_batches(256, 2 * world_size, SEQ, 1)[0]
        ddp.timeline = Timeline()
        cross_entropy(
            ddp(batch_slice(x, rank, world_size)), batch_slice(y, rank, world_size)
        ).backward()
    else:  # one bucket, its last slot's gradient arriving first
        ddp = DataParallelBucket(RegisteredOutOfOrder(), bucket_cap_mb=None)
        ddp.timeline = Timeline()
        ddp(torch.randn(4, 8)).square().sum().backward()
    index = {id(p): i for i, p in enumerate(ddp.params)}
    members = [[index[id(p)] for p in bucket.params] for bucket in ddp.buckets]
    return [(kind, i) for kind, i, _ in ddp.timeline.events if kind != "done"], members


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
def test_buckets_launch_during_backward_in_order() -> None:
    """Catches all-reduces deferred to the end of backward (no overlap), launched out of order
    (ranks would pair different buckets) or before all their gradients are in (also when the
    gradients arrive in another order than the buckets'): bucket 0 starts before the last
    gradient is ready, buckets start as 0, 1, 2, ..., and the same way on every rank."""
    for events, members in launch(_events, 2, "out of order") + launch(_events, 2):
        for k, (kind, b) in enumerate(events):
            if kind == "launch":
                arrived = {i for kind_before, i in events[:k] if kind_before == "grad"}
                missing = [i for i in members[b] if i not in arrived]
                assert not missing, (
                    f"bucket {b} was launched before all its gradients were ready (parameters "
                    f"{missing} had not arrived; gradients need not arrive in bucket order): "
                    "its all-reduce sends zeros or stale values for them; launch a bucket only "
                    "once every slot is filled"
                )
    per_rank = launch(_events, 2)
    assert per_rank[0] == per_rank[1]
    events, _ = per_rank[0]
    launches = [i for kind, i in events if kind == "launch"]
    assert launches == list(range(len(launches))) and len(launches) > 2
    last_grad = max(k for k, (kind, _) in enumerate(events) if kind == "grad")
    assert events.index(("launch", 0)) < last_grad
    assert events[-2:] == [("sync_start", -1), ("sync_end", -1)]


def _unused(rank: int, world_size: int, variant: str) -> str:
    model = TiedToy()
    model.extra = nn.Linear(2, 2)  # trainable, never used in forward
    ddp = _wrap(variant, model, 25.0)
    x = torch.zeros(2, 4, dtype=torch.long)
    try:
        cross_entropy(ddp(x), x).backward()
        return "no error"
    except RuntimeError as e:
        return str(e)


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
@pytest.mark.parametrize("variant", ["naive", "bucketed"])
def test_a_parameter_without_gradient_is_named(variant: str) -> None:
    """Catches a silent hang (or a silently stale gradient) when a trainable parameter takes
    no part in the loss: the error names it, on every rank, instead."""
    for message in launch(_unused, 2, variant):
        assert "no gradient for" in message and "extra.weight" in message, (
            f"a trainable parameter outside the loss gave {message!r}: the synchronisation must "
            "stop with an error naming it ('no gradient for extra.weight'), not hang or reduce "
            "a stale gradient"
        )


def _double(rank: int, world_size: int) -> list[str]:
    ddp = DataParallelBucket(TiedToy())
    x = torch.zeros(2, 4, dtype=torch.long)
    out = []
    for _ in range(2):  # two synchronised backward passes: fine
        cross_entropy(ddp(x), x).backward()
    out.append("ok")
    return out


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
def test_bucket_state_is_reset_between_steps() -> None:
    """Catches ready flags or handles left over from the previous step (the second backward
    would see every gradient 'arrive twice')."""
    assert launch(_double, 2) == [["ok"], ["ok"]]


def _grad_offsets(rank: int, world_size: int) -> list[tuple[str, int, int, int]]:
    """Per parameter after a synchronised step: name, bucket, where its .grad starts in the
    bucket's buffer (elements), where its slot starts."""
    torch.manual_seed(0)
    model = TiedToy()
    ddp = DataParallelBucket(model, bucket_cap_mb=0.002)  # a few buckets of several tensors
    x = torch.zeros(2, 4, dtype=torch.long)
    cross_entropy(ddp(x), x).backward()
    names = {id(p): n for n, p in model.named_parameters()}
    out = []
    for b, bucket in enumerate(ddp.buckets):
        size = bucket.buffer.element_size()
        for i, p in enumerate(bucket.params):
            start = (p.grad.data_ptr() - bucket.buffer.data_ptr()) // size
            out.append((names[id(p)], b, start, bucket.offsets[i]))
    return out


@pytest.mark.lab05
@pytest.mark.task("lab05.3")
def test_each_grad_is_read_back_from_its_own_slot() -> None:
    """Catches gradients read back from the wrong place of the bucket (an offset not advanced,
    or another parameter's): after the sync each .grad is the view of its own slot."""
    for name, b, start, offset in launch(_grad_offsets, 2)[0]:
        assert start == offset, (
            f"the gradient of {name} is read back from offset {start} of bucket {b}'s buffer, "
            f"but its slot starts at offset {offset}: wrong bucket offset"
        )


# -- not graded: input checks and facts about torch ------------------------------------------
def test_wrappers_need_a_process_group() -> None:
    """Catches a confusing failure deep inside torch when run outside launch."""
    with pytest.raises(ValueError, match="initialised process group"):
        DataParallelNaive(TiedToy())


def _bad_cap(rank: int, world_size: int, name: str, cap: object) -> str:
    try:
        DataParallelBucket(TiedToy(), **{name: cap})
    except ValueError as e:
        return str(e)
    return "no error"


@pytest.mark.parametrize("name", ["bucket_cap_mb", "first_bucket_cap_mb"])
@pytest.mark.parametrize("cap", [0, -1.0, "25"])
def test_bucket_cap_must_be_a_positive_number(name: str, cap: object) -> None:
    """Catches a zero or negative cap turning into one bucket per byte, or a string accepted."""
    assert all(f"{name} must be" in m for m in launch(_bad_cap, 1, name, cap))


def test_build_buckets_rejects_a_bad_cap() -> None:
    """Catches a cap of zero bytes accepted."""
    with pytest.raises(ValueError, match="bucket_cap_bytes must be an integer >= 1"):
        build_buckets([torch.empty(1)], 0)


@pytest.mark.parametrize(("rows", "world", "rank"), [(10, 4, 0), (8, 4, 4)])
def test_batch_slice_rejects_bad_input(rows: int, world: int, rank: int) -> None:
    """Catches a global batch that does not divide, or a rank out of range, sliced silently."""
    with pytest.raises(ValueError, match="must divide|rank must be in"):
        batch_slice(torch.zeros(rows, 2), rank, world)


def _torch_ddp_counted(rank: int, world_size: int) -> list[dict]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ddp = nn.parallel.DistributedDataParallel(model)
    out = []
    for _ in range(3):
        with CommCounter() as cc:
            ddp(torch.randn(4, 8)).sum().backward()
        out.append(dict(cc.bytes_sent))
    return out


def test_comm_counter_sees_torch_ddp_all_reduce_on_cpu() -> None:
    """Documents a fact the chapter relies on: torch DDP's C++ reducer launches its bucket
    all-reduce through the c10d dispatcher from autograd's thread, which on CPU is the thread
    that called backward, so CommCounter books it (212 fp32 gradients, one bucket)."""
    n, nbytes = 2, 212 * 4
    for steps in launch(_torch_ddp_counted, n):
        assert [s["all_reduce"] for s in steps] == [collective_bytes("all_reduce", nbytes, n)] * 3


def _first_buckets(rank: int, world_size: int, cap_mb: float | None) -> list[bool]:
    from minitorch_dist.data_parallel.speed import wrap

    def model() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(*[nn.Linear(512, 512) for _ in range(4)])  # 1 MiB per weight

    ours = wrap("bucketed", model(), bucket_cap_mb=cap_mb)
    theirs = wrap("torch_ddp", model(), bucket_cap_mb=cap_mb)
    config = theirs._bucket_config  # torch 2.13: the caps DDP hands to its reducer
    order = ours.params[::-1]
    first = [order[i] for i in build_buckets(order, config.first_bucket_bytes_cap)[0]]
    return [
        ours.bucket_cap_bytes == config.bucket_bytes_cap,
        [id(p) for p in ours.buckets[0].params] == [id(p) for p in first],
    ]


@pytest.mark.parametrize("cap_mb", [None, 25.0, 4.0])
def test_speed_comparison_gives_both_wrappers_the_same_buckets(cap_mb: float | None) -> None:
    """Catches the benchmark that compared unlike settings: passing ``bucket_cap_mb=25``
    explicitly makes torch's DDP drop its 1 MiB first bucket (it keeps it only while the cap is
    left at its default), while ours kept it. ``speed.wrap`` gives both the same caps."""
    assert launch(_first_buckets, 1, cap_mb) == [[True, True]]


# -- torch's options: given plumbing, not graded --------------------------------------------
class Branchy(nn.Module):
    """Rows whose first token is 0 go through ``extra``; ``never`` is used by no row. A rank
    whose rows all miss the branch gets no gradient for ``extra`` (torch's unused parameter)."""

    def __init__(self, vocab: int = 16, hidden: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.extra = nn.Linear(hidden, hidden)
        self.never = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)  # (b, s, h)
        chosen = tokens[:, 0] == 0  # (b,): rows that take the branch
        if chosen.any():
            x = torch.where(chosen[:, None, None], x + self.extra(x), x)
        return self.head(x)  # (b, s, vocab)


def _branchy_batches() -> list:
    """4 rows a step; rows 0-1 (rank 0's of 2) take the branch, rows 2-3 (rank 1's) do not."""
    gen = torch.Generator().manual_seed(3)
    batches = []
    for _ in range(STEPS):
        x = torch.randint(1, 16, (4, SEQ), generator=gen)
        x[:2, 0] = 0
        batches.append((x, torch.randint(0, 16, (4, SEQ), generator=gen)))
    return batches


class _FinishAgain:
    """The optimizer of a torch user who calls ``finish_gradient_synchronization()`` once more
    between backward and step (the wrappers already did it at the end of backward)."""

    def __init__(self, ddp: nn.Module, opt: torch.optim.Optimizer, counters: list) -> None:
        self.ddp, self.opt, self.counters = ddp, opt, counters

    def zero_grad(self) -> None:
        self.opt.zero_grad()

    def step(self) -> None:
        with CommCounter() as cc:
            self.ddp.finish_gradient_synchronization()
        self.counters.append(dict(cc.calls))
        self.opt.step()


def _train_options(rank: int, world_size: int, variant: str, cap_mb: float | None) -> dict:
    torch.manual_seed(0)
    model = Branchy()
    if variant == "naive":
        ddp = DataParallelNaive(model, find_unused_parameters=True)
    else:
        ddp = DataParallelBucket(model, bucket_cap_mb=cap_mb, find_unused_parameters=True)
    counters: list = []
    opt = _FinishAgain(ddp, torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9), counters)
    run = run_training(
        ddp,
        opt,
        _branchy_batches(),
        rank=rank,
        world_size=world_size,
        loss_fn=cross_entropy,
        grads=lambda m, o: param_grads(model),
        weights=lambda m, o: _state(model),
    )
    keys = list(ddp.state_dict()) == list(model.state_dict())
    ddp.load_state_dict({k: torch.zeros_like(v) for k, v in ddp.state_dict().items()})
    zeroed = not any(v.any() for v in model.state_dict().values())
    buckets = len(ddp.buckets) if variant == "bucketed" else None
    return {"run": run, "again": counters, "keys": keys, "zeroed": zeroed, "buckets": buckets}


@pytest.mark.parametrize(
    ("variant", "cap_mb"), [("naive", None), ("bucketed", 1e-5), ("bucketed", None)]
)
def test_unused_parameters_a_second_finish_and_one_bucket(variant: str, cap_mb: float | None):
    """Catches a parameter unused on one rank that hangs or breaks the step (find_unused:
    zeros from that rank, the one-process gradient after averaging), a parameter no rank used
    that gets a zero gradient (so momentum and weight decay would move it), a second
    finish_gradient_synchronization() that communicates or raises, bucket_cap_mb=None that is
    not one bucket, and state_dict keys prefixed with ``module.``."""
    ref = reference_run(
        Branchy,
        lambda ps: torch.optim.SGD(ps, lr=0.5, momentum=0.9),
        _branchy_batches(),
        weights=_state,
    )
    assert "extra.weight" in ref.grads and "never.weight" not in ref.grads  # the premise
    results = launch(_train_options, 2, variant, cap_mb)
    assert_runs_match(
        [r["run"] for r in results], ref, outputs=lambda rank: Shard(0, rank, 2), tolerance=TIGHT
    )
    for r in results:
        assert r["again"] == [{}] * STEPS  # the second call sent nothing
        assert r["keys"] and r["zeroed"]
        if cap_mb is None and variant == "bucketed":
            assert r["buckets"] == 1


def _unused_without_the_flag(rank: int, world_size: int) -> None:
    torch.manual_seed(0)
    model = DataParallelBucket(Branchy())
    x, y = _branchy_batches()[0]
    cross_entropy(model(x[2 * rank : 2 * rank + 2]), y[2 * rank : 2 * rank + 2]).backward()


def test_unused_parameter_without_the_flag_names_it():
    """Catches a silent wrong step when a parameter gets no gradient and the user did not ask
    for find_unused_parameters: the error names the parameter and the option."""
    with pytest.raises(Exception, match="find_unused_parameters=True") as err:
        launch(_unused_without_the_flag, 2)
    assert "never.weight" in str(err.value)

"""The transforms compose: each takes a whole Llama or a part of one (a pipeline stage), and the
model has one forward.

Each test cuts the tiny Llama into stages, applies a chapter's transform to every stage on
emulated ranks, chains the stages on each rank and compares the result with the same transform
applied to the whole model (fp64, equal to the last bit where the same operations run) or with
one process. Chapter 11's recipe, which composes them all, is tested against one process in
tests/test_lab11_grid.py and tests/test_parallel3d.py.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
import torch.distributed as dist

from minitorch_dist import launch
from minitorch_dist.context_parallel import (
    apply_context_parallel,
    shard_sequence,
)
from minitorch_dist.expert_parallel import apply_expert_parallel
from minitorch_dist.models import (
    Llama,
    LlamaConfig,
    LlamaStage,
    MoEConfig,
    cross_entropy,
    split_model,
    use_moe,
)
from minitorch_dist.parallel3d import GridStage, recipe
from minitorch_dist.pipeline import (
    Pipeline,
    RunObserver,
    apply_pipeline_parallel,
    make_schedule,
    micro_batch_list,
    run_schedule,
)
from minitorch_dist.pipeline import measure as pipeline_measure
from minitorch_dist.reference import make_batches
from minitorch_dist.tensor_parallel import apply_tensor_parallel

TINY = LlamaConfig.from_preset("tiny")
DEEP = LlamaConfig("deep", 256, 32, 8, 4, 2, 64, 64, 1e-5, 1e4)  # 8 layers, kv_heads 2


def _tokens(config: LlamaConfig, b: int = 2, s: int = 16) -> torch.Tensor:
    return torch.randint(0, config.vocab_size, (b, s), generator=torch.Generator().manual_seed(1))


def _chain(stages: list, x: torch.Tensor) -> torch.Tensor:
    for stage in stages:
        x = stage(x)
    return x


def test_the_model_has_one_forward():
    """Catches a stage, the grid's stage or the context-parallel model with a forward of its
    own (a copy of the layer loop that can drift from Llama.forward)."""
    for cls in (LlamaStage, GridStage):
        assert issubclass(cls, Llama)
        assert "forward" not in vars(cls), f"{cls.__name__} defines its own forward"
    assert "def forward" not in inspect.getsource(recipe), "the 3D recipe defines a forward"
    torch.manual_seed(0)
    model = Llama(DEEP).double()
    tokens = _tokens(DEEP)
    assert torch.equal(_chain(split_model(model, [3, 3, 2]), tokens), model(tokens))


def test_every_transform_takes_the_module_then_the_group():
    """The naming rule: apply_<technique>(module, group, *, ...), the group second and
    positional."""
    for fn in (
        apply_tensor_parallel,
        apply_context_parallel,
        apply_expert_parallel,
        apply_pipeline_parallel,
    ):
        params = list(inspect.signature(fn).parameters.values())
        assert params[1].name == "group", fn.__name__
        assert params[1].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD, fn.__name__
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:]), fn.__name__


def _tp_rank(rank: int, world_size: int, sp: bool) -> bool:
    tokens = _tokens(DEEP)
    torch.manual_seed(0)
    whole = apply_tensor_parallel(Llama(DEEP).double(), None, sp=sp)
    torch.manual_seed(0)
    stages = split_model(Llama(DEEP).double(), [5, 3])
    for stage in stages:
        apply_tensor_parallel(stage, None, sp=sp)
    return torch.equal(_chain(stages, tokens), whole(tokens))


@pytest.mark.parametrize("sp", [False, True], ids=["tp", "tp-sp"])
def test_tensor_parallel_stages_chain_to_the_tensor_parallel_model(sp):
    """Catches a stage whose RoPE tables are made for the s/t tokens that arrive under sequence
    parallelism (the model's ``sequence_shards`` hook), a stage without embedding or head that
    the transform cannot take: the stages, each made tensor-parallel, chain to the whole model
    made tensor-parallel, to the last bit."""
    assert all(launch(_tp_rank, 2, sp))


def _cp_rank(rank: int, world_size: int) -> bool:
    full = _tokens(DEEP)
    tokens = shard_sequence(full, rank, world_size, layout="zigzag", dim=1)
    torch.manual_seed(0)
    whole = apply_context_parallel(Llama(DEEP).double(), None)
    torch.manual_seed(0)
    stages = split_model(Llama(DEEP).double(), [4, 4])
    for stage in stages:
        apply_context_parallel(stage, None, sync_grads=False)
    ours = _chain(stages, tokens)
    return torch.equal(ours, whole(tokens))


def test_context_parallel_stages_chain_to_the_context_parallel_model():
    """Catches a later stage whose RoPE takes the shard's positions (it sees hidden states, not
    tokens): context-parallel stages chain to the context-parallel model."""
    assert all(launch(_cp_rank, 2))


def _ep_rank(rank: int, world_size: int) -> float:
    cfg = MoEConfig(experts=4, top_k=2, expert_ffn=12)
    torch.manual_seed(0)
    model = use_moe(Llama(TINY).double(), cfg)
    tokens = _tokens(TINY)
    want = copy.deepcopy(model)(tokens)  # one process, every expert
    stages = split_model(model, [1, 1])
    for stage in stages:
        apply_expert_parallel(stage, None)
    return (_chain(stages, tokens) - want).abs().max().item()


def test_expert_parallel_takes_a_stage():
    """The experts of each stage spread over 2 ranks: the chained stages equal one process."""
    assert max(launch(_ep_rank, 2)) < 1e-12


def _pp_rank(rank: int, world_size: int) -> dict:
    torch.manual_seed(0)
    pipe = apply_pipeline_parallel(Llama(TINY).double(), None, schedule="1f1b", micro_batches=2)
    assert isinstance(pipe, Pipeline) and pipe.schedule == make_schedule("1f1b", 2, 2)
    batch = make_batches(TINY.vocab_size, 2, 16, 1)[0]
    run = pipe.run(micro_batch_list(batch, 2))
    grads = {n: p.grad.clone() for n, p in pipe.named_parameters().items()}
    return {"loss": run.loss, "grads": grads, "rank": dist.get_rank()}


def test_apply_pipeline_parallel_trains_like_one_process():
    """The transform's stage and schedule: every parameter's gradient once over the ranks, equal
    to one process's on the same two micro-batches (loss divided by m), and the same loss."""
    results = launch(_pp_rank, 2)
    torch.manual_seed(0)
    model = Llama(TINY).double()
    batch = make_batches(TINY.vocab_size, 2, 16, 1)[0]
    losses = []
    for x, y in micro_batch_list(batch, 2):
        loss = cross_entropy(model(x), y) / 2  # the runtime's default loss
        loss.backward()
        losses.append(loss.item())
    held = {n: g for r in results for n, g in r["grads"].items()}
    assert sorted(held) == sorted(n for n, _ in model.named_parameters())
    for name, param in model.named_parameters():
        torch.testing.assert_close(held[name], param.grad, rtol=0, atol=1e-12, msg=name)
    assert results[0]["loss"] is None
    assert abs(results[1]["loss"] - sum(losses)) < 1e-12


def test_apply_pipeline_parallel_checks_the_schedule():
    with pytest.raises(ValueError, match="micro_batches"):
        apply_pipeline_parallel(Llama(TINY), None, schedule="1f1b", micro_batches=0)
    with pytest.raises(ValueError, match="the schedule is for pp=2"):
        apply_pipeline_parallel(
            Llama(TINY), None, schedule=make_schedule("1f1b", 2, 4), micro_batches=4
        )


def test_building_blocks_keep_their_old_home():
    from minitorch_dist.pipeline import build

    for name in ("build_stage", "micro_batch_list", "stage_parameters"):
        assert getattr(pipeline_measure, name) is getattr(build, name)


class _Log(RunObserver):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def started(self, action, stage) -> None:  # noqa: ANN001
        self.calls.append(("started", action.op))

    def ended(self, action, stage, run) -> None:  # noqa: ANN001
        assert run.executed[-1] == action
        self.calls.append(("ended", action.op))


def _observed_rank(rank: int, world_size: int) -> tuple:
    torch.manual_seed(0)
    pipe = apply_pipeline_parallel(Llama(TINY), None, schedule="gpipe", micro_batches=2)
    batch = micro_batch_list(make_batches(TINY.vocab_size, 2, 16, 1)[0], 2)
    log = _Log()
    quiet = run_schedule(pipe.schedule, pipe.stage, batch, observers=[log])
    default = run_schedule(pipe.schedule, pipe.stage, batch)
    return quiet, default, log.calls


def test_measurement_is_an_observer():
    """Catches recording that stays inside the runtime's loop: with observers=[] of its own the
    run records no clock and no in-flight counts, and each observer is told each action's start
    and end in order; by default the runtime attaches the recorder, as before."""
    for quiet, default, calls in launch(_observed_rank, 2):
        assert quiet.events == [] and quiet.in_flight == []
        ops = [a.op for a in quiet.executed]
        assert calls == [(when, op) for op in ops for when in ("started", "ended")]
        assert len(default.events) == len(default.in_flight) == len(default.executed)
    with pytest.raises(ValueError, match="RunRecorder"):
        run_schedule(make_schedule("gpipe", 1, 1), None, [None], tracker=object(), observers=[])

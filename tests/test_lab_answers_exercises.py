"""The reference answers of the notebook exercises that ``check_answer`` checks, and the tests
that keep the stored digests (minitorch_dist/course/answer_digests.py) in step with them.

Instructor-only: the student release leaves every ``tests/test_*exercises.py`` out, so the
answers below never reach a student. After changing an answer, regenerate the digests::

    PYTHONPATH=. python tests/test_lab_answers_exercises.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from minitorch_dist.comm import collective_bytes
from minitorch_dist.comm.cost import bus_bandwidth, collective_time
from minitorch_dist.course.answers import (
    Answer,
    check_answer,
    load_digests,
    make_digests,
    write_digests,
)
from minitorch_dist.memory import model_state_bytes, predict
from minitorch_dist.models import Llama, LlamaConfig
from minitorch_dist.models.moe_bias import BiasedRouter
from minitorch_dist.planner import ParallelConfig, as_model, rank_memory
from minitorch_dist.zero.measure import zero_comm_bytes

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30


def _psi(preset: str) -> int:
    return LlamaConfig.from_preset(preset).num_params()


def reference() -> dict[str, Answer]:
    """Each answer through the package, as the lab's own cells compute its quantities."""
    psi_8b, psi_70b = _psi("llama-3-8b"), _psi("llama-3-70b")
    sizes = [p.numel() * 4 for p in Llama(LlamaConfig.from_preset("tiny")).parameters()]
    ab = dict(alpha=20e-6, bandwidth=25e9)
    offload = predict("llama-2-7b", 4096, 1, "none", 2, 8, offload=True)
    return {
        "lab00.2": Answer(collective_bytes("all_reduce", GiB, 8)),
        "lab00.3": Answer(
            collective_bytes("reduce_scatter", GiB, 8) + collective_bytes("all_gather", GiB, 8)
        ),
        "lab00.4": Answer(
            collective_bytes("all_reduce", GiB, 64) - collective_bytes("all_reduce", GiB, 8)
        ),
        "lab01.4": Answer(model_state_bytes(psi_8b, zero_stage=2, dp=8)["total"]),
        "lab02.5": Answer(
            (
                model_state_bytes(1, recipe="mixed", optimizer="sgd")["total"],
                model_state_bytes(1, recipe="fp32", optimizer="sgd")["total"],
            ),
            names=("answer_mixed", "answer_fp32"),
        ),
        "lab05.4": Answer(
            (
                collective_bytes("all_reduce", 2 * psi_8b, 64),
                8 * collective_bytes("all_reduce", 2 * psi_8b, 64),
            ),
            names=("with_no_sync", "without_no_sync"),
        ),
        "lab05.5": Answer(
            (
                sum(collective_time("all_reduce", s, 8, **ab) for s in sizes),
                collective_time("all_reduce", sum(sizes), 8, **ab),
            ),
            digits=4,
            names=("naive_s", "bucket_s"),
        ),
        "lab05.6": Answer(
            (GiB / 5e-3 / 1e9, bus_bandwidth("all_reduce", GiB, 5e-3, 8) / 1e9),
            digits=4,
            names=("algbw", "busbw"),
        ),
        "lab06.5": Answer(zero_comm_bytes(psi_70b, 3, 512, bytes_per_param=2), digits=12),
        "lab06.7": Answer(
            (offload["params"] + offload["grads"] + offload["optimizer"], offload["cpu"]),
            names=("answer_3_device", "answer_3_cpu"),
        ),
        "lab10.8": Answer(
            _biased_choice((0.4, 0.3, 0.2, 0.1), (-0.15, 0.0, 0.15, 0.0)),
            digits=4,
            names=("first_4", "second_4", "weight_first_4", "weight_second_4"),
        ),
        "lab12.6": Answer(
            rank_memory(
                as_model("tiny"),
                ParallelConfig(dp=2, tp=2, sp=True, zero=1, recompute="selective"),
                seq_len=64,
                global_batch=2,
                activations="exact",
            )["logits"]
        ),
    }


def _biased_choice(probs: tuple, bias: tuple) -> tuple:
    """(first expert, second expert, their gate weights) through the package's BiasedRouter:
    a router whose softmax gives ``probs`` for the input e_0 (gate column 0 = log probs)."""
    router = BiasedRouter(len(probs), len(probs), 2)
    with torch.no_grad():
        router.gate.weight.zero_()
        router.gate.weight[:, 0] = torch.tensor(probs, dtype=torch.float64).log()
        router.bias.copy_(torch.tensor(bias))
    weights, experts, _ = router.double()(torch.eye(len(probs), dtype=torch.float64)[:1])
    return (*experts[0].tolist(), *weights[0].tolist())


REFERENCE = reference()


def test_stored_digests_are_those_of_the_reference_answers() -> None:
    """Catches an answer changed (here or in the package) without regenerating the digests."""
    assert load_digests() == make_digests(REFERENCE), (
        "regenerate: PYTHONPATH=. python tests/test_lab_answers_exercises.py"
    )


def test_the_reference_answers_by_hand() -> None:
    """The same answers from the formulas, so a package change cannot move them silently."""
    psi_8b, psi_70b, psi_7b = _psi("llama-3-8b"), _psi("llama-3-70b"), _psi("llama-2-7b")
    assert REFERENCE["lab00.2"].value == 2 * 7 * GiB // 8 == REFERENCE["lab00.3"].value
    assert REFERENCE["lab00.4"].value == 2 * 63 * GiB // 64 - 2 * 7 * GiB // 8
    assert REFERENCE["lab01.4"].value == 2 * psi_8b + 14 * -(-psi_8b // 8)
    assert REFERENCE["lab02.5"].value == (2 + 2 + 4, 4 + 4)
    assert REFERENCE["lab05.4"].value == (2 * 63 * 2 * psi_8b // 64, 8 * 2 * 63 * 2 * psi_8b // 64)
    naive, bucket = REFERENCE["lab05.5"].value
    total = 500_992  # bytes of the tiny Llama's 21 fp32 gradients
    assert naive == pytest.approx(21 * 14 * 20e-6 + 14 / 8 * total / 25e9)
    assert bucket == pytest.approx(14 * 20e-6 + 14 / 8 * total / 25e9)
    assert REFERENCE["lab05.6"].value == pytest.approx((GiB / 5e-3 / 1e9, GiB / 5e-3 / 1e9 * 1.75))
    assert REFERENCE["lab06.5"].value == 3 * 511 * 2 * psi_70b // 512
    shard = -(-psi_7b // 8)
    assert REFERENCE["lab06.7"].value == (2 * psi_7b + 2 * shard, 12 * shard)
    # scores p + b = (0.25, 0.3, 0.35, 0.1): experts 2, 1; weights 0.2 and 0.3 over their sum
    assert REFERENCE["lab10.8"].value == pytest.approx((2, 1, 0.4, 0.6))
    assert REFERENCE["lab12.6"].value == (4 + 4 + 4 + 2) * 64 * 256 // 2  # fp32 x 3, bf16


def test_the_right_answers_pass_as_a_student_computes_them() -> None:
    """The reference, and the same numbers as the worked solutions compute them (floats where
    the formula divides), pass the check."""
    for exercise, answer in REFERENCE.items():
        check_answer(exercise, answer.value)
    check_answer("lab00.2", 2 * (8 - 1) * 2**30 / 8)  # an integral float counts as the int
    psi_70b = _psi("llama-3-70b")
    check_answer("lab06.5", 3 * (512 - 1) / 512 * 2 * psi_70b)
    naive, bucket = REFERENCE["lab05.5"].value
    check_answer("lab05.5", (naive * (1 + 1e-6), bucket * (1 - 1e-6)))


def _wrong_answers() -> list[tuple[str, object, str]]:
    psi_8b, psi_70b = _psi("llama-3-8b"), _psi("llama-3-70b")
    value = {k: a.value for k, a in REFERENCE.items()}
    naive, bucket = value["lab05.5"]
    sizes = 500_992
    return [
        ("lab00.2", 2 * value["lab00.2"], "off by a factor 2"),
        ("lab00.2", 2 * 8 * GiB // 8, "n instead of n - 1"),
        ("lab00.3", value["lab00.3"] // 2, "only the reduce-scatter"),
        ("lab00.4", 2 * 63 * GiB // 64, "64 ranks, not the difference"),
        ("lab01.4", 16 * -(-psi_8b // 8), "ZeRO-3's sharding"),
        ("lab02.5", (16, 16), "Adam's states kept"),
        ("lab05.4", (value["lab05.4"][0], value["lab05.4"][0]), "no_sync changes nothing"),
        ("lab05.5", (21 * 16 * 20e-6 + 2 * sizes / 25e9, bucket), "n instead of n - 1"),
        ("lab05.5", (naive, bucket * 2), "off by a factor 2"),
        ("lab05.6", (value["lab05.6"][0], value["lab05.6"][0] * 2), "busbw with n instead of n-1"),
        ("lab06.5", 3 * 2 * _psi("llama-3-70b"), "n / n instead of (n - 1) / n"),
        ("lab06.5", value["lab06.5"] * (1 + 1e-9), "a few hundred bytes off"),
        ("lab06.7", (2 * psi_70b, value["lab06.7"][1]), "the wrong model"),
        ("lab10.8", (0, 1, 0.4 / 0.7, 0.3 / 0.7), "the bias ignored"),
        ("lab10.8", (2, 1, 0.35 / 0.65, 0.3 / 0.65), "weights from the biased scores"),
        ("lab10.8", (2, 1, 0.2, 0.3), "weights not renormalised"),
        ("lab12.6", 4 * 64 * 256 // 2, "the textbook's fp32 log-probabilities only"),
        ("lab12.6", 14 * 64 * 256, "the whole vocabulary, not the rank's V_p / t"),
        ("lab12.6", 8 * 64 * 256 // 2, "without the clone and the bf16 copy"),
    ]


@pytest.mark.parametrize("exercise, wrong, mistake", _wrong_answers())
def test_a_wrong_answer_fails_the_check(exercise: str, wrong: object, mistake: str) -> None:
    with pytest.raises(AssertionError, match="not the expected answer .checked against a digest"):
        check_answer(exercise, wrong)


def test_every_check_in_the_labs_has_a_reference_answer() -> None:
    """Catches a lab calling check_answer for an exercise with no stored answer, and a stored
    answer no lab asks for."""
    called = set()
    for nb in sorted((ROOT / "labs").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            source = "".join(cell["source"])
            called |= set(re.findall(r"check_answer\(\"(lab\d\d\.\d+)\"", source))
    assert called == set(REFERENCE)


if __name__ == "__main__":
    write_digests(REFERENCE)
    print(f"wrote the digests of {len(REFERENCE)} exercises")

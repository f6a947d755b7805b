"""The answers to the exercises of lab 7, recomputed through the package.

Each answer is computed twice: by the package (as the lab does) and by hand from the formulas
(Megatron-LM, Shoeybi et al. 2019, section 3: four all-reduces of b s h per layer; Megatron's
padded vocabulary; the Llama saved-tensor table of ``models/llama.py``), so a change in the
package that would silently change a published answer fails here. Not graded (no ``lab07``
marker): the graded tests of the code these answers use live in test_tensor_parallel.py.
"""

from __future__ import annotations

from minitorch_dist.models import LlamaConfig
from minitorch_dist.tensor_parallel import (
    measure_tp_activations,
    padded_vocab_size,
    tp_activation_breakdown,
    tp_comm_bytes,
)


# -- lab 7 ------------------------------------------------------------------------------------
def test_lab_ex1_bytes_per_layer_llama2_70b_t8():
    """4 ring all-reduces of b s h bf16 elements: 8 x 4096 x 8192 x 7/8 x 2 bytes = 448 MiB."""
    answer = 8 * 1 * 4096 * 8192 * 7 // 8 * 2
    assert answer == 469_762_048 == 448 * 2**20
    assert tp_comm_bytes(micro_batch=1, seq_len=4096, hidden=8192, tp=8) == answer


def test_lab_ex2_llama3_padded_vocabulary_t8():
    """128256 / (128 x 8) = 125.25 -> 126 blocks of 1024 rows: 129024, 768 of them padding."""
    assert padded_vocab_size(128256, 8) == 126 * 1024 == 129_024
    assert padded_vocab_size(128256, 8) - 128256 == 768


def test_lab_ex3_norm_bytes_under_sp():
    """Two RMSNorms, each input, x*rstd (b,s,h) and rstd (b,s,1), fp32, s split by 4:
    4 x 2 x (2 x 2 x 16 x 64 + 2 x 16) / 4 = 8256 bytes; measured by the tracker too."""
    answer = 4 * 2 * (2 * 2 * 16 * 64 + 2 * 16) // 4
    assert answer == 8256
    tiny = LlamaConfig.from_preset("tiny")
    shown = tp_activation_breakdown(tiny, micro_batch=2, seq_len=16, tp=4, sp=True)
    assert shown["norms"] == answer
    measured = measure_tp_activations(4, sp=True)
    assert measured["breakdown"]["norms"] == answer
    assert measured["per_rank"] == [measured["formula"]] * 4


def test_lab_section6_llama3_70b_scale():
    """The numbers section 6 prints: 448 MiB sent per layer (672 MiB with full recompute)."""
    kw = {"micro_batch": 1, "seq_len": 4096, "hidden": 8192, "tp": 8}
    assert tp_comm_bytes(**kw) == 448 * 2**20
    assert tp_comm_bytes(**kw, recompute="full") == 672 * 2**20

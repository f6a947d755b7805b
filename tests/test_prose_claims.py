"""Claims of the chapters that were checked against their sources, held to the wording that
states them correctly.

Each test names the claim, the source it was checked against, and fails on the wording the page
had before it was corrected (``OLD``), which the last test feeds back through the same checks.
A paragraph here is a run of non-blank lines of a page's Markdown, its inline code kept (the
names a claim rests on are often code), its whitespace collapsed.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CH = ROOT / "chapters"


def paragraphs(text: str) -> list[str]:
    """The page's paragraphs, whitespace collapsed to single spaces."""
    return [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def page(name: str) -> str:
    """A chapter's Markdown, or a lab's Markdown cells one after another."""
    path = ROOT / name
    if path.suffix != ".ipynb":
        return path.read_text(encoding="utf-8")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def about(text: str, anchor: str) -> list[str]:
    """The paragraphs of ``text`` that contain ``anchor``; at least one must."""
    found = [p for p in paragraphs(text) if anchor in p]
    assert found, f"no paragraph contains {anchor!r}"
    return found


# Each check: (page, anchor, what the paragraph must contain, what no paragraph may contain).
# The anchor finds the paragraph that states the claim; ``need`` are phrases it must hold;
# ``forbid`` is a regular expression of the wrong wording, searched in the whole page.
CHECKS = {
    "pipeline messages without SP: scatter/gather, as Megatron-LM and Narayanan et al. ran": (
        "chapters/09_pipeline_parallelism.md",
        "It is off by default here",
        ("`scatter_gather=True`", "planner of chapter 12", "Narayanan et al.'s"),
        r"It is off by default, so without sequence parallelism `p2p_bytes` counts the whole",
    ),
    "the planner's pipeline bytes are 1/t per TP rank, with SP or by scatter/gather": (
        "chapters/12_choosing_a_configuration.md",
        "a pipeline stage sends its $b s h$",
        ("$1/t$ of it", "scatter/gather", "narayanan2021efficient"),
        r"activation forward and its gradient back, \$v\$ times with interleaving \(chapter 9\)\.",
    ),
    "overlap_p2p_comm is implemented only by Megatron-LM's interleaved schedule": (
        "chapters/12_choosing_a_configuration.md",
        "`overlap_p2p_comm`",
        ("only its interleaved schedule", "1F1B refuses"),
        r"`overlap_p2p_comm`, which its interleaved schedule implements\)",
    ),
    "newer Megatron-LM relaxes 'm a multiple of p' (microbatch group size per virtual stage)": (
        "chapters/09_pipeline_parallelism.md",
        "needs $m$ to be a multiple of $p$",
        ("`--microbatch-group-size-per-virtual-pipeline-stage`", "$N = m$"),
        r"refuses other\s+\$m\$ with a ValueError naming the constraint\.\s*$",
    ),
    "PyTorch's interleaved zero-bubble and ZB-V schedules are not ZB-H1": (
        "chapters/09_pipeline_parallelism.md",
        "| `ScheduleInterleavedZeroBubble`",
        ("ZB-V", "no twin"),
        r"`ScheduleZBVZeroBubble` \| `make_schedule\(\"zb-h1\"|ZB1P \(ZB-H1\)",
    ),
    "async TP is a torch.compile pass over SymmetricMemory; Megatron's needs SP": (
        "chapters/07_tensor_and_sequence_parallelism.md",
        'PyTorch\'s "async TP" does this',
        (
            "`torch.compile`",
            "SymmetricMemory",
            "`--tp-comm-overlap` only with sequence parallelism",
        ),
        None,
    ),
    "the decomposed forward times each chunk product at the whole product's rate": (
        "chapters/07_tensor_and_sequence_parallelism.md",
        "The model is optimistic",
        ("$1/t$ of the whole product", "a low estimate"),
        None,
    ),
    "TP is bounded by the query heads; which frameworks require t to divide the kv heads": (
        "chapters/08_context_parallelism.md",
        "**Tensor parallelism** with sequence parallelism",
        ("bounded by the query heads", "`ColwiseParallel`", "megatron2025tpkv"),
        r"\$t\$ is bounded by the key/value heads",
    ),
    "Ulysses' all-to-alls can be pipelined over groups of heads": (
        "chapters/08_context_parallelism.md",
        "Ulysses and the ring have opposite strengths",
        ("heads can travel in groups", "deepspeed2025ulysseslayer"),
        r"Ulysses' bytes fall with \$c\$, but its\s+all-to-alls sit on the critical path",
    ),
    "gamma is in the units of the router's scores (softmax vs sigmoid)": (
        "chapters/10_mixture_of_experts.md",
        "Our $\\gamma$ is larger",
        ("softmax", "sigmoid", "{glue:text}`dsv3_gamma`"),
        None,
    ),
    "bf16 has fp32's normal range, not its subnormals": (
        "chapters/02_number_formats.md",
        "**bf16 has fp32's",
        ("normal range", "{glue:text}`bf16_min_sub`", "{glue:text}`fp32_min_sub`"),
        r"anything fp32 holds, bf16 holds",
    ),
    "a format's relative spacing lies between 2^-(M+1) and 2^-M, not 2^-M and 2^(1-M)": (
        "chapters/02_number_formats.md",
        "the *relative* spacing stays between",
        ("between $2^{-M-1}$ and $2^{-M}$",),
        r"between \$2\^\{-M\}\$ and\s+\$2\^\{1-M\}\$",
    ),
    "ZeRO-Offload's delayed parameter update is optional and starts after a warm-up": (
        "chapters/06_zero_and_offload.md",
        "one-step delayed parameter update",
        ("optional", "warm-up", "ren2021zerooffload"),
        r"lets\s+the update of step \$t\$ overlap the forward and backward of step \$t\+1\$",
    ),
    "per-axis loss scaling gives the global mean only with equal token counts": (
        "chapters/11_putting_it_together.md",
        "is the gradient of the mean over the global batch",
        ("same number of loss tokens", "`calculate_per_token_loss`"),
        r"is the gradient of the mean over the global batch\.",
    ),
    "chapter 11's summary keeps the equal-token condition of the loss scaling": (
        "chapters/11_putting_it_together.md",
        "and by $1/(d c)$ in the gradient average",
        ("same number of loss tokens",),
        r"and by \$1/\(d c\)\$ in the gradient average\.",
    ),
    "exercise 2: Llama 3's Table 4 prints a d that does not multiply out": (
        "chapters/11_putting_it_together.md",
        "(Table 4",
        ("Table 4 prints a smaller $d$",),
        r"\{cite:p\}`dubey2024llama3` \(Table 4\)\.",
    ),
    "ZeRO stages are named as such beside pipeline stages": (
        "chapters/12_choosing_a_configuration.md",
        "accumulate whole gradients",
        ("ZeRO stages 0 and 1",),
        r"(?<!ZeRO )stages 0 and 1 accumulate",
    ),
    "Megatron-LM's bf16 recipe: an fp32 main_grad in place of the 16-bit gradient, 18 bytes": (
        "chapters/01_where_the_memory_goes.md",
        "That is Megatron-LM's",
        ("`main_grad`", "{glue:text}`bpp_main_grad`", "megatron2025distopt"),
        r"\(\$20\\Psi\$ with an fp32 gradient\s+buffer\), whatever the batch",
    ),
    "with a fused kernel, op-level policies lie between full recomputation and none": (
        "chapters/03_activation_recomputation.md",
        "FlashAttention does the same",
        ("op-level policies",),
        r"so with it, the remaining choice is full recomputation or none\.",
    ),
    "FSDP2 gathers once per step only with reshard_after_forward=False as well": (
        "chapters/06_zero_and_offload.md",
        "`set_reshard_after_backward(False)`",
        ("`reshard_after_forward=False`", "$g + 1$"),
        r"one all-gather instead of \$2g\$\) \{cite",
    ),
    "lab 12 cites chapter 4 for the FLOPs per token": (
        "labs/lab12_choosing_a_configuration.ipynb",
        "$6N + 12 L s h_q$",
        ("chapter 4's",),
        r"chapter 5's\s+\$6N",
    ),
}


@pytest.mark.parametrize("claim", list(CHECKS))
def test_claim_is_stated_as_checked(claim: str) -> None:
    name, anchor, need, forbid = CHECKS[claim]
    text = page(name)
    found = about(text, anchor)
    for phrase in need:
        assert any(phrase in p for p in found), f"{name}: {claim}: missing {phrase!r}"
    if forbid:
        assert not re.search(forbid, text, re.MULTILINE), f"{name}: old wording of: {claim}"


def test_interleaved_first_stage_factor_cites_korthikanti() -> None:
    """The factor 1 + (p - 1)/(p v) is Korthikanti et al.'s (section 4.2.3), not Narayanan et
    al.'s section 2.2.2 (which gives the schedule and its bubble): chapter 9's display of it,
    chapter 12's sentence and the function's docstring cite it so."""
    from minitorch_dist.pipeline import first_stage_activation_factor

    ch9 = page("chapters/09_pipeline_parallelism.md")
    after = ch9.split("1 + \\frac{p-1}{p\\,v}", 1)[1].split("```", 1)[0]
    assert "{cite:p}`korthikanti2022reducing` (section 4.2.3)" in after
    ch12 = " ".join(page("chapters/12_choosing_a_configuration.md").split())
    sentence = ch12.split("a factor $1 + (p - 1)/(pv)$ more on stage 0", 1)[1][:80]
    assert "korthikanti2022reducing" in sentence and "2.2.2" not in sentence
    doc = " ".join(inspect.getdoc(first_stage_activation_factor).split())
    assert "Korthikanti et al. 2022, section 4.2.3" in doc.split("Where it comes from")[0]


OLD = {
    "chapters/02_number_formats.md": (
        "- **bf16 has fp32's range**: both have 8 exponent bits, so anything fp32 holds, bf16 "
        "holds to\n  within rounding, up to {glue:text}`bf16_max`.\n"
    ),
    "chapters/08_context_parallelism.md": (
        "- **Tensor parallelism** with sequence parallelism (chapter 7) divides the stored "
        "activations\n  by $t$, but $t$ is bounded by the key/value heads (Llama-3-8B has "
        "{glue:text}`l8_kv:d`) and\n  by the node.\n"
    ),
    "chapters/12_choosing_a_configuration.md": (
        "* **Pipeline** (chapter 9). The sends run while the next micro-batch computes "
        "(Megatron-LM's\n  `overlap_p2p_comm`, which its interleaved schedule implements).\n"
    ),
}


@pytest.mark.parametrize("name", list(OLD))
def test_the_checks_fail_on_the_old_wording(name: str) -> None:
    """Each of these checks fails on the paragraph the page had before."""
    failing = 0
    for claim, (page_name, anchor, need, forbid) in CHECKS.items():
        if page_name != name or anchor not in " ".join(OLD[name].split()):
            continue
        found = about(OLD[name], anchor)
        missing = [p for p in need if not any(p in f for f in found)]
        old_hit = bool(forbid and re.search(forbid, OLD[name], re.MULTILINE))
        assert missing or old_hit, claim
        failing += 1
    assert failing, f"no check covers {name}'s old paragraph"

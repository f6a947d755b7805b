"""Float formats bit by bit (lab 2, task lab02.1): torch's own casts are the oracle.

Every fp8 bit pattern is decoded and compared with torch's value for it, and every finite value
is encoded back to its pattern; a random sample of 16-bit patterns is decoded the same way; random
fp32 values (all exponents, subnormals, infinities and NaN included) are encoded and compared
with torch's rounding cast.
"""

from __future__ import annotations

import math
import random

import pytest
import torch

from minitorch_dist.precision import (
    FORMATS,
    Fields,
    FloatFormat,
    bits_to_fields,
    decode,
    encode,
    fields_to_bits,
    format_range,
    get_format,
    is_nan,
    round_to_format,
    spacing,
    torch_bits_to_values,
    torch_cast_bits,
)

TORCH_FORMATS = ["fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]
SAMPLE = 20_000


def same(a: float, b: float) -> bool:
    """Equal as values, -0.0 and 0.0 told apart, any NaN equal to any NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def random_fp32(n: int, seed: int) -> list[float]:
    """Random 32-bit patterns read as fp32: every exponent, subnormals, inf and NaN included,
    plus normal values near the 16- and 8-bit ranges and the tie points between them."""
    g = torch.Generator().manual_seed(seed)
    patterns = torch.randint(-(2**31), 2**31, (n,), generator=g, dtype=torch.int64)
    anything = patterns.to(torch.int32).view(torch.float32)
    exps = torch.randint(-30, 20, (n,), generator=g).float()
    near = torch.randn(n, generator=g) * torch.exp2(exps)  # (n,)
    special = torch.tensor(
        [
            0.0,
            -0.0,
            math.inf,
            -math.inf,
            math.nan,
            65504.0,
            65520.0,
            448.0,
            464.0,
            480.0,
            57344.0,
            61440.0,
            2.0**-24,
            2.0**-25,
            3 * 2.0**-26,
            2.0**-9,
            2.0**-10,
            2.0**-16,
            2.0**-17,
        ]
    )
    return torch.cat([anything, near, special]).tolist()


def kind(fields: Fields, name: str) -> str:
    """What a decoder must do with ``fields``: names the rule a wrong decode broke."""
    f = get_format(name)
    if fields.exponent == 0:
        return "a subnormal (exponent field 0): no implicit 1, value 0.m x 2^(1 - B)"
    if fields.exponent == 2**f.exponent_bits - 1:
        return (
            "the all-ones exponent: inf/NaN where the format has inf; in E4M3 only "
            "s.1111.111 is NaN, the rest are normals"
        )
    return "a normal: value (1 + m / 2^M) x 2^(e - B)"


@pytest.mark.lab02
@pytest.mark.task("lab02.1")
@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_every_fp8_pattern_decodes_like_torch(name: str) -> None:
    """Catches a wrong bias, a missing implicit 1, subnormals decoded as normals, or E4M3's top
    binade taken for inf/NaN (only s.1111.111 is NaN there)."""
    want = torch_bits_to_values(list(range(256)), name)
    for bits, value in enumerate(want):
        fields = bits_to_fields(bits, name)
        got = decode(fields, name)
        assert same(got, value), (
            f"{name} pattern {bits:#04x}: decoded {got}, torch says {value}; it is "
            f"{kind(fields, name)}"
        )


@pytest.mark.lab02
@pytest.mark.task("lab02.1")
@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_every_fp8_value_encodes_back_to_its_pattern(name: str) -> None:
    """Catches an encoder that loses the sign of -0, mis-rounds exact values, or misplaces the
    subnormal boundary: every representable value must come back as its own bit pattern."""
    for bits, value in enumerate(torch_bits_to_values(list(range(256)), name)):
        got = encode(value, name)
        if math.isnan(value):
            assert is_nan(got, name), f"{name}: NaN encoded as {got}"
        else:
            assert fields_to_bits(got, name) == bits, f"{name}: {value} encoded as {got}"


@pytest.mark.lab02
@pytest.mark.task("lab02.1")
@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_random_16bit_patterns_decode_like_torch(name: str) -> None:
    """Catches decoding errors outside fp8's few binades: bf16's 8-bit exponent, fp16's
    subnormals, infinities and the many NaN patterns."""
    g = torch.Generator().manual_seed(1)
    patterns = torch.randint(0, 2**16, (SAMPLE,), generator=g).tolist()
    patterns += [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7C01, 0x7F80]
    for bits, value in zip(patterns, torch_bits_to_values(patterns, name)):
        fields = bits_to_fields(bits, name)
        got = decode(fields, name)
        assert same(got, value), (
            f"{name} pattern {bits:#06x}: decoded {got}, torch says {value}; it is "
            f"{kind(fields, name)}"
        )


@pytest.mark.lab02
@pytest.mark.task("lab02.1")
@pytest.mark.parametrize("name", TORCH_FORMATS)
def test_encode_rounds_like_torch_casts(name: str) -> None:
    """Catches truncation instead of round-to-nearest-even, ties broken away from zero, a wrong
    carry into the exponent, and the wrong overflow rule (inf for fp16/bf16/E5M2, saturation
    at +-448 for E4M3, whose torch cast sends even inf to +-448)."""
    values = random_fp32(SAMPLE, seed=2)
    for x, bits in zip(values, torch_cast_bits(values, name)):
        got = encode(x, name)
        if math.isnan(x):
            assert is_nan(got, name), f"{name}: NaN encoded as {got}"
        else:
            assert fields_to_bits(got, name) == bits, (
                f"{name}: {x!r} encoded as {got}, torch casts it to {bits_to_fields(bits, name)}"
            )


@pytest.mark.lab02
@pytest.mark.task("lab02.1")
def test_fp32_and_tf32_round_trip() -> None:
    """Catches an encoder or decoder that only works for the formats torch can check: fp32
    patterns decode to themselves, and tf32 keeps fp32's exponent with 10 mantissa bits."""
    values = random_fp32(2000, seed=3)
    for x, bits in zip(values, torch_cast_bits(values, "fp32")):
        assert same(decode(bits_to_fields(bits, "fp32"), "fp32"), x)
        if not math.isnan(x):
            assert fields_to_bits(encode(x, "fp32"), "fp32") == bits
    got = encode(1.0 + 2.0**-10, "tf32")
    assert got == Fields(0, 127, 1), f"tf32 encodes 1 + 2^-10 as {got}, not (0, 127, 1)"
    got = decode(encode(1.0 + 2.0**-11, "tf32"), "tf32")
    assert got == 1.0, f"1 + 2^-11 is a tie in tf32: it rounds to even (1.0), not to {got}"
    want = round(3e38 / 2.0**117) * 2.0**117  # tf32's spacing there: 2^(127 - 10)
    got = decode(encode(3e38, "tf32"), "tf32")
    assert got == want, (
        f"3e38 in tf32 is {got!r}, not the nearest tf32 value {want!r}: round the dropped "
        "mantissa bits to the nearest (ties to even), do not cut them off"
    )


@pytest.mark.lab02
@pytest.mark.drawn_per_run
@pytest.mark.task("lab02.1")
def test_a_format_torch_does_not_have_drawn_per_run() -> None:
    """Catches an encoder or decoder that hands the work to torch's casts (or a table of torch's
    answers): in a format drawn for this run, one torch has no dtype for, every finite pattern
    decodes to (1 + m / 2^M) 2^(e - B) (0.m 2^(1 - B) when e = 0), the values grow with the
    pattern, and each encodes back to its own pattern; a value halfway between two neighbours
    goes to the one with the even mantissa."""
    e_bits, m_bits = random.randrange(2, 7), random.randrange(1, 6)
    f = FloatFormat(f"e{e_bits}m{m_bits}", e_bits, m_bits, True, False, None)
    where = f"in E{e_bits}M{m_bits} (drawn for this run; bias B = {f.bias}, no torch dtype)"
    values = []
    for e in range(2**e_bits - 1):  # the all-ones exponent is inf or NaN
        for m in range(2**m_bits):
            value = decode((0, e, m), f)
            if e == 0:
                want = m * 2.0 ** (1 - f.bias - m_bits)
            else:
                want = (1 + m / 2**m_bits) * 2.0 ** (e - f.bias)
            assert value == want, f"{where}: (0, {e}, {m}) decodes to {value!r}, not {want!r}"
            assert encode(value, f) == Fields(0, e, m), (
                f"{where}: {value!r} encodes to {encode(value, f)}, not its own pattern "
                f"(0, {e}, {m})"
            )
            values.append(value)
    for (e, lo), hi in zip(enumerate(values[:-1]), values[1:]):
        mid = (lo + hi) / 2
        got = decode(encode(mid, f), f)
        even = lo if e % 2 == 0 else hi  # the pattern index's last bit is the mantissa's
        assert got == even, (
            f"{where}: {mid!r}, halfway between {lo!r} and {hi!r}, encodes to {got!r}, not "
            f"{even!r}: a tie goes to the neighbour with the even mantissa"
        )


@pytest.mark.lab02
@pytest.mark.task("lab02.1")
@pytest.mark.parametrize("name", TORCH_FORMATS + ["fp32"])
def test_format_range_agrees_with_finfo(name: str) -> None:
    """Catches a decoder whose largest value, smallest normal or epsilon disagrees with
    torch.finfo (format_range decodes them from bit patterns)."""
    got, info = format_range(name), torch.finfo(get_format(name).dtype)
    assert got["max"] == info.max
    assert got["min_normal"] == info.smallest_normal
    assert got["eps"] == info.eps
    assert got["min_subnormal"] == 2.0 ** (
        1 - get_format(name).bias - get_format(name).mantissa_bits
    )


# -- helpers around the task (not graded) ------------------------------------------------------
def test_layouts() -> None:
    """Catches a wrong field width: the formats' totals and biases (IEEE 754, OCP FP8)."""
    widths = {n: (f.bits, f.exponent_bits, f.mantissa_bits, f.bias) for n, f in FORMATS.items()}
    assert widths == {
        "fp32": (32, 8, 23, 127),
        "tf32": (19, 8, 10, 127),
        "fp16": (16, 5, 10, 15),
        "bf16": (16, 8, 7, 127),
        "fp8_e4m3": (8, 4, 3, 7),
        "fp8_e5m2": (8, 5, 2, 15),
    }
    assert get_format(torch.bfloat16).name == "bf16"


def test_bits_and_fields_round_trip() -> None:
    """Catches sign/exponent/mantissa packed in the wrong order."""
    assert bits_to_fields(0x3C00, "fp16") == Fields(0, 15, 0)
    assert bits_to_fields(0xC000, "fp16") == Fields(1, 16, 0)
    for bits in range(256):
        assert fields_to_bits(bits_to_fields(bits, "fp8_e5m2"), "fp8_e5m2") == bits


def test_round_to_format_matches_torch() -> None:
    """Catches the vectorised rounding drifting from torch's casts (it simulates tf32 and
    narrow accumulators where torch has no dtype)."""
    x = torch.tensor(random_fp32(5000, seed=4), dtype=torch.float32)
    for name in TORCH_FORMATS:
        want = x.to(get_format(name).dtype).double()
        got = round_to_format(x, name)
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        keep = ~torch.isnan(want)
        assert torch.equal(got[keep], want[keep]), name


def test_spacing() -> None:
    """Catches an off-by-one binade: the gap above 1 is eps, subnormals share one gap."""
    assert spacing(torch.tensor([1.0, 1.5, 2.0]), "fp16").tolist() == [2**-10, 2**-10, 2**-9]
    assert spacing(torch.tensor([0.0, 2.0**-20]), "fp16").tolist() == [2**-24, 2**-24]
    assert spacing(torch.tensor([1.0]), "bf16").item() == torch.finfo(torch.bfloat16).eps


def test_validation() -> None:
    """Catches silently accepting a field that does not fit, or an unknown format."""
    with pytest.raises(ValueError, match="format must be one of"):
        get_format("fp4")
    with pytest.raises(ValueError, match="do not fit fp8_e4m3"):
        decode((0, 16, 0), "fp8_e4m3")
    with pytest.raises(ValueError, match="do not fit"):
        fields_to_bits((2, 0, 0), "fp16")
    with pytest.raises(ValueError, match="bits must be in"):
        bits_to_fields(256, "fp8_e5m2")
    with pytest.raises(ValueError, match="torch has no dtype for tf32"):
        torch_cast_bits([1.0], "tf32")


def test_fp16_flushes_to_zero_at_half_its_smallest_subnormal() -> None:
    """Catches the common claim that fp16 flushes everything below 2^-24 (its smallest subnormal)
    to zero: round-to-nearest-even sends 2^-25 itself to zero but anything above it up to 2^-24,
    in torch's cast and in ours."""
    tiny = 2.0**-24
    half = torch.tensor(tiny / 2)
    above = torch.nextafter(half, torch.tensor(1.0))  # the next fp32 value above 2^-25
    x = torch.stack([half, above, torch.tensor(0.75 * tiny), torch.tensor(tiny)])
    assert x.half().double().tolist() == [0.0, tiny, tiny, tiny]
    assert round_to_format(x, "fp16").tolist() == [0.0, tiny, tiny, tiny]
    assert format_range("fp16")["min_subnormal"] == tiny

"""Floating-point formats as bit fields: layouts, encode/decode, range and spacing (lab02.1).

A binary float with E exponent bits and M mantissa bits stores three unsigned fields (IEEE 754;
for the 16-bit and 8-bit variants Micikevicius et al. 2018, Kalamkar et al. 2019, Micikevicius et
al. 2022, section 2). With bias B = 2^(E-1) - 1, a pattern (sign s, exponent e, mantissa m) means

    e = 0                     (-1)^s * (m / 2^M) * 2^(1 - B)          zero and subnormals
    0 < e < max               (-1)^s * (1 + m / 2^M) * 2^(e - B)      normal numbers
    e = 2^E - 1 (all ones)    inf (m = 0) or NaN (m != 0), in formats that have them

FP8 E4M3 ("fn": finite + NaN) gives up infinities to gain range: its all-ones exponent holds
normal numbers, except the single pattern s.1111.111, which is NaN. So its largest value is
1.75 * 2^8 = 448 instead of 240 (Micikevicius et al. 2022, Table 1).

Rounding is to the nearest value, ties to the one with an even mantissa. What happens past the
largest value depends on the format, as torch casts an fp32 tensor: fp16, bf16 and E5M2 overflow
to inf, while E4M3, which has no inf, saturates at +-448 in torch 2.13 and gives NaN in torch 2.11
(``E4M3_SATURATES`` probes the torch in use, so the encoder matches it either way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch


@dataclass(frozen=True)
class FloatFormat:
    """One binary floating-point format: field widths and what its special patterns mean."""

    name: str  # short name used in the book: "fp16", "bf16", "fp8_e4m3", ...
    exponent_bits: int  # E
    mantissa_bits: int  # M: stored fraction bits (the leading 1 of a normal number is implicit)
    has_inf: bool  # exponent all ones, mantissa 0 means +-inf (False for E4M3)
    saturate: bool  # torch's cast sends overflow to +-max (True) rather than to +-inf (or NaN)
    dtype: torch.dtype | None  # the torch dtype, None where torch has none (tf32)

    @property
    def bits(self) -> int:
        """Total width: 1 sign bit + E + M."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        """B = 2^(E-1) - 1: the stored exponent e means 2^(e - B)."""
        return 2 ** (self.exponent_bits - 1) - 1


class Fields(NamedTuple):
    """The three unsigned integer fields of a float: sign (1 bit), exponent (E), mantissa (M)."""

    sign: int
    exponent: int
    mantissa: int


def _torch_saturates_e4m3() -> bool:
    """Whether this torch casts fp32 overflow to E4M3 as +-448 (torch 2.13) rather than NaN (2.11)."""
    return torch.tensor([1e4]).to(torch.float8_e4m3fn).view(torch.uint8).item() == 0x7E


E4M3_SATURATES = _torch_saturates_e4m3()

FORMATS: dict[str, FloatFormat] = {
    f.name: f
    for f in (
        FloatFormat("fp32", 8, 23, True, False, torch.float32),
        FloatFormat("tf32", 8, 10, True, False, None),  # fp32 range, fp16 precision (19 bits)
        FloatFormat("fp16", 5, 10, True, False, torch.float16),
        FloatFormat("bf16", 8, 7, True, False, torch.bfloat16),
        FloatFormat("fp8_e4m3", 4, 3, False, E4M3_SATURATES, torch.float8_e4m3fn),
        FloatFormat("fp8_e5m2", 5, 2, True, False, torch.float8_e5m2),
    )
}


def get_format(fmt: str | FloatFormat | torch.dtype) -> FloatFormat:
    """The :class:`FloatFormat` named ``fmt`` (a key of :data:`FORMATS`, or a torch dtype)."""
    if isinstance(fmt, FloatFormat):
        return fmt
    for f in FORMATS.values():
        if fmt == f.name or (f.dtype is not None and fmt == f.dtype):
            return f
    raise ValueError(f"format must be one of {', '.join(FORMATS)} (or their dtypes), got {fmt!r}")


def _check_fields(fields: Fields, f: FloatFormat) -> None:
    s, e, m = fields
    if s not in (0, 1) or not 0 <= e < 2**f.exponent_bits or not 0 <= m < 2**f.mantissa_bits:
        raise ValueError(
            f"fields {tuple(fields)} do not fit {f.name}: sign in {{0, 1}}, "
            f"exponent in [0, {2**f.exponent_bits - 1}], mantissa in [0, {2**f.mantissa_bits - 1}]"
        )


def is_nan(fields: Fields, fmt: str | FloatFormat | torch.dtype) -> bool:
    """Whether ``fields`` is a NaN pattern of ``fmt``."""
    f = get_format(fmt)
    top, full = 2**f.exponent_bits - 1, 2**f.mantissa_bits - 1
    if f.has_inf:  # IEEE style: all-ones exponent with a non-zero mantissa
        return fields.exponent == top and fields.mantissa != 0
    return fields.exponent == top and fields.mantissa == full  # E4M3: only s.1111.111


def decode(fields: Fields | tuple[int, int, int], fmt: str | FloatFormat | torch.dtype) -> float:
    """The value of the bit fields ``(sign, exponent, mantissa)`` in ``fmt``, as a Python float.

    Zero and subnormals (exponent 0) have no implicit leading 1 and the exponent of the smallest
    normal, 1 - B; normals are (1 + m / 2^M) 2^(e - B); the all-ones exponent is inf or NaN in
    formats with infinities, and in E4M3 only s.1111.111 is NaN (module docstring).
    """
    f = get_format(fmt)
    fields = Fields(*fields)
    _check_fields(fields, f)
    # BEGIN SOLUTION lab02.1: the value of (sign, exponent, mantissa) in a format
    s, e, m = fields
    sign = -1.0 if s else 1.0
    if is_nan(fields, f):
        return math.nan
    if f.has_inf and e == 2**f.exponent_bits - 1:
        return sign * math.inf  # mantissa 0: is_nan caught the rest
    if e == 0:  # subnormal: 0.m * 2^(1 - B)
        return sign * math.ldexp(m, 1 - f.bias - f.mantissa_bits)
    return sign * math.ldexp(2**f.mantissa_bits + m, e - f.bias - f.mantissa_bits)  # 1.m * 2^(e-B)
    # END SOLUTION


def encode(x: float, fmt: str | FloatFormat | torch.dtype) -> Fields:
    """The fields of the ``fmt`` value nearest to ``x`` (ties to even), as torch would cast it.

    Overflow gives +-inf, or +-max in a saturating format (E4M3, which maps +-inf to +-max too);
    NaN gives a NaN pattern; -0.0 keeps its sign bit. ``x`` is a Python float (a double): pass
    fp32 values to compare with torch's fp32 casts, which round once, from fp32.
    """
    f = get_format(fmt)
    x = float(x)
    # BEGIN SOLUTION lab02.1: the fields of the nearest value in a format (ties to even)
    top = 2**f.exponent_bits - 1
    s = 1 if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):  # a quiet NaN: top mantissa bit set (E4M3: its only NaN, s.1111.111)
        return Fields(
            0, top, 2**f.mantissa_bits - 1 if not f.has_inf else 2 ** (f.mantissa_bits - 1)
        )
    largest = _largest_finite(f)
    if math.isinf(x):
        return _overflow(f, s)
    a = abs(x)
    # the quantum (spacing) where a lives: 2^(e - M) for a in [2^e, 2^(e+1)); subnormals share
    # the smallest normal exponent 1 - B
    e = max(math.frexp(a)[1] - 1, 1 - f.bias) if a else 1 - f.bias
    q = round(math.ldexp(a, f.mantissa_bits - e))  # a / quantum is exact; round() ties to even
    if q == 2 ** (f.mantissa_bits + 1):  # rounded up to the next power of two
        e, q = e + 1, 2**f.mantissa_bits
    if q < 2**f.mantissa_bits:  # no leading 1: subnormal (or zero)
        return Fields(s, 0, q)
    fields = Fields(s, e + f.bias, q - 2**f.mantissa_bits)
    if (fields.exponent, fields.mantissa) > largest[1:]:  # past the largest finite value
        return _overflow(f, s)
    return fields
    # END SOLUTION


def _overflow(f: FloatFormat, sign: int) -> Fields:
    """What a cast gives past the largest finite value: +-max in a saturating format, +-inf
    where the format has one, else NaN (E4M3 in torch 2.11), keeping the sign."""
    top = 2**f.exponent_bits - 1
    if f.saturate:
        return Fields(sign, *_largest_finite(f)[1:])
    return Fields(sign, top, 0) if f.has_inf else Fields(sign, top, 2**f.mantissa_bits - 1)


def _largest_finite(f: FloatFormat) -> Fields:
    """The fields of +max: exponent all ones minus one (all ones in E4M3, mantissa 110)."""
    if f.has_inf:
        return Fields(0, 2**f.exponent_bits - 2, 2**f.mantissa_bits - 1)
    return Fields(0, 2**f.exponent_bits - 1, 2**f.mantissa_bits - 2)


def bits_to_fields(bits: int, fmt: str | FloatFormat | torch.dtype) -> Fields:
    """Split an unsigned ``fmt.bits``-wide integer into (sign, exponent, mantissa)."""
    f = get_format(fmt)
    if not 0 <= bits < 2**f.bits:
        raise ValueError(f"bits must be in [0, 2^{f.bits}) for {f.name}, got {bits}")
    m = bits & (2**f.mantissa_bits - 1)
    e = (bits >> f.mantissa_bits) & (2**f.exponent_bits - 1)
    return Fields(bits >> (f.bits - 1), e, m)


def fields_to_bits(
    fields: Fields | tuple[int, int, int], fmt: str | FloatFormat | torch.dtype
) -> int:
    """Pack (sign, exponent, mantissa) into one unsigned integer: sign | exponent | mantissa."""
    f = get_format(fmt)
    s, e, m = Fields(*fields)
    _check_fields(Fields(s, e, m), f)
    return (s << (f.bits - 1)) | (e << f.mantissa_bits) | m


_UINT = {8: torch.uint8, 16: torch.int16, 32: torch.int32}


def torch_cast_bits(
    values: torch.Tensor | list[float], fmt: str | FloatFormat | torch.dtype
) -> list[int]:
    """torch's own answer: cast fp32 ``values`` to ``fmt``'s dtype, return the unsigned bit patterns."""
    f = get_format(fmt)
    if f.dtype is None:
        raise ValueError(f"torch has no dtype for {f.name}")
    t = torch.as_tensor(values, dtype=torch.float32).to(f.dtype)
    return [b & (2**f.bits - 1) for b in t.view(_UINT[f.bits]).tolist()]


def torch_bits_to_values(bits: list[int], fmt: str | FloatFormat | torch.dtype) -> list[float]:
    """torch's own answer: reinterpret unsigned bit patterns as ``fmt``'s dtype, return floats."""
    f = get_format(fmt)
    if f.dtype is None:
        raise ValueError(f"torch has no dtype for {f.name}")
    signed = [b - 2**f.bits if f.bits > 8 and b >= 2 ** (f.bits - 1) else b for b in bits]
    t = torch.tensor(signed, dtype=_UINT[f.bits]).view(f.dtype)
    return t.double().tolist()


def format_range(fmt: str | FloatFormat | torch.dtype) -> dict[str, float]:
    """Range and precision of ``fmt``, decoded from its bit patterns with :func:`decode`.

    ``max`` (largest finite), ``min_normal`` (exponent 1, mantissa 0), ``min_subnormal``
    (exponent 0, mantissa 1), ``eps`` (the gap above 1.0, 2^-M) and ``decades``
    (log10(max / min_subnormal): the span of magnitudes it can hold). ``torch.finfo`` gives the
    same ``max``, ``smallest_normal`` and ``eps`` (the tests check it).
    """
    f = get_format(fmt)
    one = encode(1.0, f)
    largest, smallest = decode(_largest_finite(f), f), decode((0, 0, 1), f)
    return {
        "max": largest,
        "min_normal": decode((0, 1, 0), f),
        "min_subnormal": smallest,
        "eps": decode((0, one.exponent, 1), f) - 1.0,
        "decades": math.log10(largest / smallest),
    }


def spacing(x: torch.Tensor, fmt: str | FloatFormat | torch.dtype) -> torch.Tensor:
    """The gap between |x| and the next larger value of ``fmt`` (one "unit in the last place").

    2^(floor(log2 |x|) - M) for normal |x|, 2^(1 - B - M) for subnormals: the spacing doubles at
    every power of two, so the *relative* spacing stays between 2^-(M+1) and 2^-M.
    """
    f = get_format(fmt)
    a = torch.as_tensor(x, dtype=torch.float64).abs()
    _, e = torch.frexp(a)  # a = frac * 2^e with frac in [0.5, 1)
    e = torch.clamp(torch.where(a > 0, e - 1, 1 - f.bias), min=1 - f.bias)  # (n,): 0 is subnormal
    return torch.ldexp(torch.ones_like(a), e - f.mantissa_bits)  # (n,)


def round_to_format(x: torch.Tensor, fmt: str | FloatFormat | torch.dtype) -> torch.Tensor:
    """Round every element of ``x`` to the nearest ``fmt`` value (ties to even), in float64.

    The vectorised twin of ``decode(encode(x))``, for formats torch has no dtype for (tf32, or
    an accumulator with fewer mantissa bits). Overflow follows the format (inf or saturate).
    """
    f = get_format(fmt)
    x = torch.as_tensor(x, dtype=torch.float64)
    quantum = spacing(x, f)  # (n,)
    y = torch.round(x / quantum) * quantum  # torch.round ties to even
    largest = decode(_largest_finite(f), f)  # the largest finite value (lab02.1's decode)
    over = y.abs() > largest
    past = largest if f.saturate else (math.inf if f.has_inf else math.nan)
    y = torch.where(over, torch.sign(y) * past, y)
    return torch.where(torch.isnan(x), x, y)

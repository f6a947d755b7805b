"""Number formats and mixed precision (chapter 2, lab 2).

``formats`` stores and reads floats bit by bit (fp32, tf32, fp16, bf16, fp8 E4M3 and E5M2): their
range and spacing; ``loss_scaling`` keeps small fp16 gradients alive (dynamic loss scaling);
``mixed`` trains a 16-bit model with fp32 master weights and optimizer states; ``fp8`` quantises
to fp8 with a scale per tensor or per block (DeepSeek-V3) and simulates fp8 matmuls, alone or
in every linear layer of a model (``fp8_linears``); ``measure`` holds the error and outlier
measures chapter 2 judges them by. ``plots`` draws chapter 2's figures; it is not
imported here, so ``import minitorch_dist.precision`` does not import matplotlib.
"""

from minitorch_dist.precision.formats import (
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
from minitorch_dist.precision.fp8 import (
    FP8_DTYPES,
    Fp8Linear,
    dequantize_blockwise,
    dequantize_per_tensor,
    fp8_linears,
    fp8_matmul,
    fp8_matmul_is_native,
    fp8_max,
    quantize_blockwise,
    quantize_per_tensor,
)
from minitorch_dist.precision.loss_scaling import DynamicLossScaler
from minitorch_dist.precision.measure import outlier_ratio, relative_error
from minitorch_dist.precision.mixed import MixedPrecisionOptimizer

__all__ = [
    "FORMATS",
    "FP8_DTYPES",
    "Fp8Linear",
    "DynamicLossScaler",
    "Fields",
    "FloatFormat",
    "MixedPrecisionOptimizer",
    "bits_to_fields",
    "decode",
    "dequantize_blockwise",
    "dequantize_per_tensor",
    "encode",
    "fields_to_bits",
    "format_range",
    "fp8_linears",
    "fp8_matmul",
    "fp8_matmul_is_native",
    "fp8_max",
    "get_format",
    "is_nan",
    "outlier_ratio",
    "quantize_blockwise",
    "quantize_per_tensor",
    "relative_error",
    "round_to_format",
    "spacing",
    "torch_bits_to_values",
    "torch_cast_bits",
]

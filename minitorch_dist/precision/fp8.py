"""FP8 quantisation with a scale per tensor or per block (lab02.4), and a simulated FP8 matmul.

FP8 has 8 bits: E4M3 (max 448, 3 mantissa bits) for weights and activations, E5M2 (max 57344,
2 mantissa bits) where range matters more, as for gradients (Micikevicius et al. 2022, section
3). Its range is narrow -- E4M3 spans about five decades, fp32 about eighty -- so a tensor is
stored as fp8 values q and a higher-precision scale s, x ~ s * q, with s chosen so the largest
|x| maps to the format's largest value:

    s = amax(|x|) / fp8_max,     q = fp8(x / s),     x_hat = s * q

**Per-tensor** scaling uses one s for the whole tensor: a single outlier makes s large and pushes
every ordinary value down into the subnormals, or to zero. DeepSeek-V3 (DeepSeek-AI 2024,
section 3.3.2 and Figure 7) scales **per block** instead: activations in 1 x 128 tiles (one token,
128 channels), weights in 128 x 128 blocks, so an outlier only costs precision in its own block.
Each block's scale multiplies that block's partial sum, which the GPU accumulates in fp32
(also section 3.3.2). On a CPU there is no fp8 matmul: :func:`fp8_matmul` dequantises both operands to
fp32 and multiplies them there, which computes the same value as scaled fp8 products summed in
fp32. On a GPU with fp8 tensor cores (compute capability 8.9 or more) ``native=True`` runs the
real per-tensor-scaled kernel, ``torch._scaled_mm``.
"""

from __future__ import annotations

import torch

from minitorch_dist.checks import check_divisible, check_int

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


def fp8_max(dtype: torch.dtype) -> float:
    """The largest finite value of an fp8 dtype: 448 (E4M3) or 57344 (E5M2)."""
    if dtype not in FP8_DTYPES:
        raise ValueError(f"dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")
    return torch.finfo(dtype).max


def _check_input(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError("x must be a floating-point tensor")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x must be finite: an inf or NaN has no fp8 scale")


def quantize_per_tensor(
    x: torch.Tensor, dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, s)``: one fp32 scale s = amax(|x|) / fp8_max (1 for an all-zero x), q = fp8(x / s)."""
    _check_input(x)
    top = fp8_max(dtype)
    # BEGIN SOLUTION lab02.4: one scale for the whole tensor, then cast x / s to fp8
    amax = x.detach().abs().max().float()  # ()
    scale = torch.where(amax > 0, amax / top, torch.ones_like(amax))  # ()
    q = (x.float() / scale).to(dtype)  # same shape as x
    return q, scale
    # END SOLUTION


def dequantize_per_tensor(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """x_hat = s * q, in fp32."""
    return q.float() * scale


def _check_blocks(shape: torch.Size, block: tuple[int, int]) -> tuple[int, int]:
    if len(shape) != 2:
        raise ValueError(f"block scaling needs a 2-D tensor, got shape {tuple(shape)}")
    if len(block) != 2:
        raise ValueError(f"block must be two positive integers (rows, cols), got {block!r}")
    check_int("block rows", block[0])
    check_int("block cols", block[1])
    if shape[0] % block[0] or shape[1] % block[1]:
        raise ValueError(f"shape {tuple(shape)} must be divisible by the block {tuple(block)}")
    return block


def quantize_blockwise(
    x: torch.Tensor, block: tuple[int, int] = (1, 128), dtype: torch.dtype = torch.float8_e4m3fn
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scales)``: x (m, n) cut into (r, c) blocks, each with its own scale.

    ``scales`` is (m / r, n / c) fp32, ``scales[i, j] = amax(|block i, j|) / fp8_max`` (1 for an
    all-zero block), and each block of q is fp8(block / its scale): per-tensor quantisation
    applied to every block. DeepSeek-V3 (section 3.3.2) uses (1, 128) for activations and
    (128, 128) for weights.
    """
    _check_input(x)
    r, c = _check_blocks(x.shape, block)
    top = fp8_max(dtype)
    m, n = x.shape
    # BEGIN SOLUTION lab02.4: a scale per (r, c) block, then cast each block / its scale to fp8
    blocks = x.detach().float().reshape(m // r, r, n // c, c)  # (m/r, r, n/c, c)
    amax = blocks.abs().amax(dim=(1, 3))  # (m/r, n/c)
    scales = torch.where(amax > 0, amax / top, torch.ones_like(amax))  # (m/r, n/c)
    q = (blocks / scales[:, None, :, None]).to(dtype).reshape(m, n)  # (m, n)
    return q, scales
    # END SOLUTION


def dequantize_blockwise(
    q: torch.Tensor, scales: torch.Tensor, block: tuple[int, int] = (1, 128)
) -> torch.Tensor:
    """x_hat (m, n) in fp32: every (r, c) block of q times its scale."""
    r, c = _check_blocks(q.shape, block)
    full = scales.repeat_interleave(r, dim=0).repeat_interleave(c, dim=1)  # (m, n)
    return q.float() * full


def _fp8_round_trip(
    x: torch.Tensor, dtype: torch.dtype, scaling: str, tile: tuple[int, int]
) -> torch.Tensor:
    """x quantised to fp8 and back to fp32: one scale (``scaling="tensor"``), or one per ``tile``
    of x seen as a matrix (..., last dim) -> (rows, last dim)."""
    if scaling == "tensor":
        return dequantize_per_tensor(*quantize_per_tensor(x, dtype))
    flat = x.reshape(-1, x.shape[-1])
    return dequantize_blockwise(*quantize_blockwise(flat, tile, dtype), tile).reshape(x.shape)


def _check_scaling(scaling: str) -> None:
    if scaling not in ("tensor", "block"):
        raise ValueError(f"scaling must be 'tensor' or 'block', got {scaling!r}")


def fp8_matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    scaling: str = "block",
    block: int = 128,
    dtype: torch.dtype = torch.float8_e4m3fn,
    native: bool = False,
) -> torch.Tensor:
    """a (m, k) @ b (k, n) with both operands quantised to fp8; the result is fp32 (m, n).

    ``scaling="tensor"``: one scale per operand. ``scaling="block"``: DeepSeek-V3's layout, the
    activations ``a`` in 1 x ``block`` tiles along k and the weights ``b`` in ``block`` x ``block``
    blocks. ``native=True`` (per-tensor only) calls ``torch._scaled_mm`` on a CUDA GPU with fp8
    tensor cores; otherwise the product is simulated in fp32 (module docstring).
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need a (m, k) and b (k, n), got {tuple(a.shape)} and {tuple(b.shape)}")
    _check_scaling(scaling)
    if native:
        if scaling != "tensor" or not fp8_matmul_is_native(a.device):
            raise ValueError("native=True needs scaling='tensor' and a CUDA GPU with fp8 (sm_89+)")
        qa, sa = quantize_per_tensor(a, dtype)
        qb, sb = quantize_per_tensor(b, dtype)
        # _scaled_mm wants b column-major: the transpose of a row-major (n, k) tensor
        qb = qb.t().contiguous().t()
        return torch._scaled_mm(qa, qb, scale_a=sa, scale_b=sb, out_dtype=torch.float32)
    a_hat = _fp8_round_trip(a, dtype, scaling, (1, block))  # (m, k)
    b_hat = _fp8_round_trip(b, dtype, scaling, (block, block))  # (k, n)
    return a_hat @ b_hat  # (m, k) @ (k, n) in fp32


def fp8_matmul_is_native(device: torch.device | str = "cuda") -> bool:
    """Whether ``device`` is a CUDA GPU with fp8 tensor cores (Ada or Hopper: sm_89 and up)."""
    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


class _Fp8Linear(torch.autograd.Function):
    """y = fp8(x) @ fp8(W)^T in the forward pass (E4M3), and E5M2 output gradients in backward:
    the three matmuls of a linear layer with fp8 inputs, simulated in fp32 (module docstring)."""

    @staticmethod
    def forward(ctx, x, weight, scaling, block):  # noqa: ANN001, ANN205
        xq = _fp8_round_trip(x, torch.float8_e4m3fn, scaling, (1, block))  # (..., k)
        wq = _fp8_round_trip(weight, torch.float8_e4m3fn, scaling, (block, block))  # (n, k)
        ctx.save_for_backward(xq, wq)  # saved in fp8 on real hardware: half of bf16's bytes
        ctx.scaling, ctx.block = scaling, block
        return xq @ wq.t()  # (..., n)

    @staticmethod
    def backward(ctx, grad_out):  # noqa: ANN001, ANN205
        xq, wq = ctx.saved_tensors
        g = _fp8_round_trip(grad_out, torch.float8_e5m2, ctx.scaling, (1, ctx.block))  # (..., n)
        grad_x = g @ wq  # (..., k)
        grad_w = g.reshape(-1, g.shape[-1]).t() @ xq.reshape(-1, xq.shape[-1])  # (n, k)
        return grad_x, grad_w, None, None


class Fp8Linear(torch.nn.Linear):
    """An ``nn.Linear`` whose matmuls take fp8 inputs (simulated): see :func:`fp8_linears`."""

    scaling: str = "tensor"
    block: int = 128

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = _Fp8Linear.apply(x, self.weight, self.scaling, self.block)
        return y if self.bias is None else y + self.bias


def fp8_linears(
    model: torch.nn.Module,
    scaling: str = "tensor",
    block: int = 128,
    skip: tuple[str, ...] = ("head",),
) -> torch.nn.Module:
    """Turn ``model``'s ``nn.Linear`` layers (except those named in ``skip``) into
    :class:`Fp8Linear`, in place; returns ``model``.

    Forward: activations and weights rounded to E4M3, with one scale per tensor or, with
    ``scaling="block"``, DeepSeek-V3's layout: activations in 1 x ``block`` tiles, weights in
    ``block`` x ``block`` blocks (section 3.3.2). Backward: the output gradient rounded to E5M2
    (Micikevicius et al. 2022, section 3), per tensor or in 1 x ``block`` tiles. Weights stay fp32
    (the master copy), products are summed in fp32, and the layers named in ``skip`` (the output
    head of :class:`~minitorch_dist.models.Llama`) keep full precision, as DeepSeek-V3 keeps its
    output head (section 3.3.1).
    """
    _check_scaling(scaling)
    check_int("block", block)
    for name, module in model.named_modules():
        if type(module) is not torch.nn.Linear or name.split(".")[-1] in skip:
            continue
        for side in ("in_features", "out_features"):
            if scaling == "block":
                check_divisible(f"{name}: {side}", getattr(module, side), "block", block)
        module.__class__ = Fp8Linear
        module.scaling, module.block = scaling, block
    return model

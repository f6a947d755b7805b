"""FP8 quantisation with per-tensor and per-block scales (lab 2, task lab02.4).

The references are written here independently: the scale amax / fp8_max, torch's own cast of
x / s, and, for blocks, the per-tensor recipe applied to each block in a loop.
"""

from __future__ import annotations

import pytest
import torch

from minitorch_dist.precision import (
    dequantize_blockwise,
    dequantize_per_tensor,
    fp8_matmul,
    fp8_matmul_is_native,
    fp8_max,
    quantize_blockwise,
    quantize_per_tensor,
    relative_error,
)

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def reference(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    scale = x.abs().max() / torch.finfo(dtype).max
    return (x / scale).to(dtype), scale


@pytest.mark.lab02
@pytest.mark.task("lab02.4")
@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_per_tensor_scale_maps_amax_to_the_format_max(dtype: torch.dtype) -> None:
    """Catches a scale upside down (x * amax), the wrong maximum (e.g. 240 or 256 for E4M3), or
    no scale at all: the largest |x| must land exactly on 448 (E4M3) or 57344 (E5M2)."""
    x = randn(64, 48) * 1e-3
    q, s = quantize_per_tensor(x, dtype)
    want_q, want_s = reference(x, dtype)
    assert q.dtype == dtype and q.shape == x.shape and s.dtype == torch.float32
    torch.testing.assert_close(
        s,
        want_s,
        rtol=1e-6,
        atol=0,
        msg=lambda m: (
            f"scale {s.item():.6g}, not amax / format max = {want_s.item():.6g}"
            + (
                ": the amax was not divided by the format's largest value "
                f"({fp8_max(dtype):g}), so x / s only reaches 1"
                if torch.isclose(s, want_s * fp8_max(dtype))
                else ""
            )
            + f" ({m})"
        ),
    )
    assert q.float().abs().max().item() == fp8_max(dtype)
    torch.testing.assert_close(
        q.float(), want_q.float(), rtol=2 ** -torch.finfo(dtype).bits, atol=0
    )
    err = (dequantize_per_tensor(q, s) - x).abs()
    normal = x.abs() / s >= torch.finfo(dtype).smallest_normal  # rounding: half a spacing
    mant = {E4M3: 3, E5M2: 2}[dtype]
    assert (err[normal] <= x.abs()[normal] * 2.0 ** -(mant + 1) * (1 + 1e-6)).all()


@pytest.mark.lab02
@pytest.mark.task("lab02.4")
@pytest.mark.parametrize(
    ("block", "shape"), [((1, 128), (8, 256)), ((128, 128), (256, 384)), ((2, 4), (6, 8))]
)
def test_blockwise_is_per_tensor_applied_to_every_block(block: tuple, shape: tuple) -> None:
    """Catches blocks cut along the wrong axes (a reshape without the transpose), one scale per
    row instead of per tile, or scales laid out in the wrong order."""
    x = randn(*shape, seed=1)
    x[0, :3] = 1e3  # an outlier in the first block only
    q, scales = quantize_blockwise(x, block, E4M3)
    r, c = block
    assert scales.shape == (shape[0] // r, shape[1] // c) and q.shape == x.shape
    for i in range(shape[0] // r):
        for j in range(shape[1] // c):
            tile = x[i * r : (i + 1) * r, j * c : (j + 1) * c]
            want_q, want_s = reference(tile, E4M3)
            torch.testing.assert_close(
                scales[i, j],
                want_s,
                rtol=1e-6,
                atol=0,
                msg=f"scales[{i}, {j}] = {scales[i, j].item():g} is not the amax of its own "
                f"({r}, {c}) tile / 448 (= {want_s.item():g}): tiles cut along the wrong axes "
                "(a reshape to (m/r, r, n/c, c) needs no transpose; (m/r, n/c, r, c) does), or "
                "one scale per row",
            )
            got = q[i * r : (i + 1) * r, j * c : (j + 1) * c].float()
            torch.testing.assert_close(
                got,
                want_q.float(),
                rtol=2**-7,
                atol=0,
                msg=lambda m, i=i, j=j: (
                    f"q's ({r}, {c}) tile [{i}, {j}] is not that tile divided by its own scale "
                    "and cast: tiles cut along the wrong axes (a reshape to (m/r, r, n/c, c) "
                    "needs no transpose; (m/r, n/c, r, c) does), or a tile divided by another "
                    f"tile's scale ({m})"
                ),
            )
    x_hat = dequantize_blockwise(q, scales, block)
    assert relative_error(x_hat, x, None) < 0.05


@pytest.mark.lab02
@pytest.mark.task("lab02.4")
def test_all_zero_blocks_get_scale_one() -> None:
    """Catches 0 / 0 = NaN for a block (or tensor) of zeros, common after ReLU or padding."""
    x = torch.zeros(4, 256)
    x[0, 200] = 3.0
    q, scales = quantize_blockwise(x, (1, 128))
    assert torch.equal(scales[1:], torch.ones(3, 2)) and torch.isfinite(q.float()).all()
    assert torch.equal(dequantize_blockwise(q, scales, (1, 128)), x)
    q, s = quantize_per_tensor(torch.zeros(3))
    assert s.item() == 1.0 and torch.equal(q.float(), torch.zeros(3))


@pytest.mark.lab02
@pytest.mark.task("lab02.4")
def test_block_scaling_beats_per_tensor_with_outliers() -> None:
    """Catches block scaling that is secretly per tensor: with a few entries 1e5 times the
    others, one scale pushes ordinary values into fp8's subnormals (rows lose ~10 % and more),
    while 1 x 128 tiles keep every row near E4M3's ~3.7 %."""
    a, w = randn(128, 512, seed=2), randn(512, 128, seed=3) / 512**0.5
    a.view(-1)[torch.randperm(a.numel(), generator=torch.Generator().manual_seed(4))[:8]] = 1e5
    exact = a @ w
    tensor = relative_error(fp8_matmul(a, w, scaling="tensor"), exact).median()
    block = relative_error(fp8_matmul(a, w, scaling="block"), exact).median()
    assert block < 0.05 < 0.1 < tensor, (
        f"median row error with 8 outliers: per tensor {tensor:.3g}, 1 x 128 blocks {block:.3g}; "
        "blocks must stay under 5 % (each tile scaled by its own amax) and one scale per "
        "tensor lose over 10 %: "
        + (
            "the block scaling is per tensor"
            if block >= 0.05
            else "the per-tensor scale is not amax / max"
        )
    )


# -- not graded ---------------------------------------------------------------------------------
def test_validation() -> None:
    """Catches shapes that do not tile, non-finite inputs and unsupported dtypes."""
    with pytest.raises(ValueError, match="must be divisible by the block"):
        quantize_blockwise(torch.ones(4, 100), (1, 128))
    with pytest.raises(ValueError, match="needs a 2-D tensor"):
        quantize_blockwise(torch.ones(128))
    with pytest.raises(ValueError, match="x must be finite"):
        quantize_per_tensor(torch.tensor([1.0, float("inf")]))
    with pytest.raises(ValueError, match="dtype must be"):
        fp8_max(torch.float16)
    with pytest.raises(ValueError, match="scaling must be"):
        fp8_matmul(torch.ones(2, 2), torch.ones(2, 2), scaling="row")
    with pytest.raises(ValueError, match=r"need a \(m, k\) and b \(k, n\)"):
        fp8_matmul(torch.ones(2, 3), torch.ones(2, 3))


def test_native_needs_an_fp8_gpu() -> None:
    """Catches native=True silently falling back to the simulation where there is no fp8 GPU."""
    if fp8_matmul_is_native():
        pytest.skip("this machine has fp8 tensor cores: see test_native_matches_simulation")
    with pytest.raises(ValueError, match="native=True needs"):
        fp8_matmul(torch.ones(16, 16), torch.ones(16, 16), scaling="tensor", native=True)


@pytest.mark.gpu
@pytest.mark.skipif(not fp8_matmul_is_native(), reason="needs a GPU with fp8 tensor cores")
def test_native_matches_simulation() -> None:
    """Catches a wrong scale convention or operand layout in the torch._scaled_mm call: the
    real fp8 kernel must agree with the fp32 simulation up to accumulation. Hopper's fp8 tensor
    cores accumulate with fewer bits than fp32 (DeepSeek-V3 §3.3.2), so elementwise tolerances
    fail; a wrong scale or layout gives an error near 1, measured on an H100 at 1.3e-4."""
    a, b = randn(256, 512, seed=5).cuda(), randn(512, 128, seed=6).cuda()
    native = fp8_matmul(a, b, scaling="tensor", native=True)
    simulated = fp8_matmul(a, b, scaling="tensor")
    assert relative_error(native, simulated, dim=None) < 1e-3


# -- fp8 linear layers (not graded: built on lab02.4's quantisers) --------------------------------
def test_fp8_linear_forward_is_the_simulated_fp8_matmul() -> None:
    """Catches a layer that quantises something else than its two inputs: the forward equals
    fp8_matmul(x, W^T) per tensor, and differs from the fp32 product."""
    from minitorch_dist.precision import Fp8Linear, fp8_linears

    layer = torch.nn.Linear(64, 32, bias=False)
    x = randn(16, 64, seed=1)
    exact = layer(x)
    fp8_linears(torch.nn.Sequential(layer))
    assert type(layer) is Fp8Linear
    torch.testing.assert_close(layer(x), fp8_matmul(x, layer.weight.t(), scaling="tensor"))
    assert 1e-3 < relative_error(layer(x), exact, dim=None) < 0.05


def test_fp8_linear_gradients_are_close_to_fp32_but_quantised() -> None:
    """Catches a backward that ignores the fp8 inputs (exact gradients) or mixes them up (large
    errors): both gradients land within a few percent of fp32's, and not on them."""
    from minitorch_dist.precision import fp8_linears

    torch.manual_seed(0)
    ref = torch.nn.Linear(128, 256)
    fp8 = fp8_linears(torch.nn.Sequential(torch.nn.Linear(128, 256)), scaling="block")[0]
    fp8.load_state_dict(ref.state_dict())
    x = randn(4, 8, 128, seed=2)
    grads = []
    for layer in (ref, fp8):
        xi = x.clone().requires_grad_()
        (layer(xi) ** 2).sum().backward()
        grads.append((xi.grad, layer.weight.grad, layer.bias.grad))
    for exact, approx in zip(*grads):
        err = relative_error(approx, exact, dim=None).item()
        assert 1e-4 < err < 0.1, err


def test_fp8_training_tracks_fp32_on_the_tiny_model() -> None:
    """Catches an fp8 layer that breaks training: 30 steps of Adam on the tiny Llama with every
    block's matmuls in fp8 (per tensor) end within 0.1 nats of fp32."""
    from minitorch_dist.models import Llama, LlamaConfig, SyntheticTokens, cross_entropy
    from minitorch_dist.precision import Fp8Linear, fp8_linears

    config = LlamaConfig.from_preset("tiny")
    batches = list(SyntheticTokens(config.vocab_size, 4, 32, num_batches=30))
    final = []
    for fp8 in (False, True):
        torch.manual_seed(0)
        model = Llama(config)
        if fp8:
            fp8_linears(model)
            kinds = {type(m) for n, m in model.named_modules() if n == "head"}
            assert kinds == {torch.nn.Linear}  # the output head stays in higher precision
            assert sum(type(m) is Fp8Linear for m in model.modules()) == 7 * config.layers
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for x, y in batches:
            opt.zero_grad()
            loss = cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        final.append(loss.item())
    assert abs(final[0] - final[1]) < 0.1, final


def test_fp8_linears_rejects_bad_arguments() -> None:
    """Catches a silent fallback: an unknown scaling, a bad block, or a layer whose width the
    block does not divide is a ValueError that names the constraint."""
    from minitorch_dist.precision import fp8_linears

    model = torch.nn.Sequential(torch.nn.Linear(96, 128))
    with pytest.raises(ValueError, match="scaling must be"):
        fp8_linears(model, scaling="row")
    with pytest.raises(ValueError, match="block must be"):
        fp8_linears(model, scaling="block", block=0)
    with pytest.raises(ValueError, match="in_features=96 is not divisible by block=128"):
        fp8_linears(model, scaling="block")


def test_outlier_ratio_by_hand() -> None:
    """Catches a ratio against the mean instead of the rms, or without the absolute value:
    x = (-4, 0, 0, 0) has amax 4 and rms 2."""
    from minitorch_dist.precision import outlier_ratio

    assert outlier_ratio(torch.tensor([-4.0, 0.0, 0.0, 0.0])) == 2.0
    assert outlier_ratio(torch.ones(10)) == 1.0
    with pytest.raises(ValueError, match="all zeros"):
        outlier_ratio(torch.zeros(3))

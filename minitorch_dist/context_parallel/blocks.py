"""One block of attention, and the rule that merges blocks into the whole softmax (lab08.1).

Split a query row's keys into parts A and B. With scores ``x_j = q k_j / sqrt(d)``, each part's
attention returns its output and the log of its softmax's denominator (the log-sum-exp):

    lse_A = log sum_{j in A} exp(x_j)        out_A = sum_{j in A} exp(x_j - lse_A) v_j

The softmax over all keys has denominator ``exp(lse_A) + exp(lse_B)``, so

    lse = log(exp(lse_A) + exp(lse_B))
    out = exp(lse_A - lse) out_A + exp(lse_B - lse) out_B

which is exactly ``sum_j exp(x_j - lse) v_j``: each part's weights ``exp(x_j - lse_A)`` are
rescaled by ``exp(lse_A - lse)`` to ``exp(x_j - lse)``. This is the online softmax (Milakov and
Gimelshein 2018, section 3), the rule FlashAttention applies to tiles (Dao et al. 2022,
section 3.1) and ring attention to the key/value blocks that visit a rank (Liu et al. 2023,
section 3). A row with no key in a part (every score masked) has ``lse = -inf`` and weight 0.

Backward of one block (FlashAttention's, Dao et al. 2022, Appendix B.2) needs only the final
``lse`` and ``delta = rowsum(dout * out)``: with ``P = exp(S - lse)`` of the block,
``dV = P^T dO``, ``dP = dO V^T``, ``dS = P (dP - delta)``, ``dQ = dS K / sqrt(d)``,
``dK = dS^T Q / sqrt(d)``. No (s, s) matrix outlives the block.
"""

from __future__ import annotations

import math

import torch

__all__ = ["block_attention", "block_attention_backward", "merge_partials"]

NEG_INF = float("-inf")


def _expand_kv(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(b, KV, s, d) -> (b, H, s, d): each key/value head read by H/KV query heads (GQA)."""
    groups = heads // x.shape[1]
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def _scores(
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, causal: bool, scale: float
) -> torch.Tensor:
    # scale q, not the scores: one (s_q, s_k) matrix, changed in place from here on
    s = (q * scale) @ k.transpose(-2, -1)  # (b, H, s_q, d) @ (b, H, d, s_k) -> (b, H, s_q, s_k)
    if causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril()
        mask = keep if mask is None else mask & keep
    return s if mask is None else s.masked_fill_(~mask, NEG_INF)


def block_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention of one block: ``(out, lse)``, out (b, H, s_q, d), lse (b, H, s_q).

    k and v may have fewer heads than q (grouped-query attention). ``mask`` (s_q, s_k), True
    where a query may see a key (``scaled_dot_product_attention``'s convention); ``causal``
    adds the lower triangle. A row that sees no key gets ``out = 0`` and ``lse = -inf``.
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    k, v = _expand_kv(k, q.shape[1]), _expand_kv(v, q.shape[1])
    s = _scores(q, k, mask, causal, scale)  # (b, H, s_q, s_k)
    lse = torch.logsumexp(s, dim=-1)  # (b, H, s_q); -inf on a fully masked row
    p = s.sub_(lse.masked_fill(lse == NEG_INF, 0.0).unsqueeze(-1)).exp_()  # masked: exp(-inf)=0
    return p @ v, lse  # (b, H, s_q, d), (b, H, s_q)


def block_attention_backward(
    dout: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lse: torch.Tensor,
    delta: torch.Tensor,
    *,
    mask: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This block's share of ``(dq, dk, dv)``, given the rows' FINAL ``lse`` (over every key,
    all blocks) and ``delta = (dout * out).sum(-1)`` of the final output. dk and dv have k's
    (possibly fewer, GQA) heads: the query heads that share a key head add their parts."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    heads, kv_heads = q.shape[1], k.shape[1]
    ke, ve = _expand_kv(k, heads), _expand_kv(v, heads)
    s = _scores(q, ke, mask, causal, scale)  # (b, H, s_q, s_k)
    p = s.sub_(lse.unsqueeze(-1)).exp_()  # the final softmax's entries of this block, in place
    dv = p.transpose(-2, -1) @ dout  # (b, H, s_k, s_q) @ (b, H, s_q, d) -> (b, H, s_k, d)
    dp = dout @ ve.transpose(-2, -1)  # (b, H, s_q, s_k)
    ds = dp.sub_(delta.unsqueeze(-1)).mul_(p)  # softmax's backward, row by row: P (dP - delta)
    dq = ds @ ke * scale  # (b, H, s_q, d)
    dk = ds.transpose(-2, -1) @ q * scale  # (b, H, s_k, d)
    if kv_heads != heads:  # sum over the query heads of each key head's group
        b, _, s_k, d = dk.shape
        dk = dk.view(b, kv_heads, heads // kv_heads, s_k, d).sum(2)
        dv = dv.view(b, kv_heads, heads // kv_heads, s_k, d).sum(2)
    return dq, dk, dv


def merge_partials(
    out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge two partial attention results over disjoint key sets into the result over both.

    out_* (b, H, s, d), lse_* (b, H, s). ``lse = log(exp(lse_a) + exp(lse_b))`` and
    ``out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b``. A row whose keys are all masked
    in one part (lse -inf there) takes the other part as it is; masked in both, out 0 and
    lse -inf -- never NaN.
    """
    # BEGIN SOLUTION lab08.1: the online-softmax (log-sum-exp) merge, safe for -inf rows
    lse = torch.logaddexp(lse_a, lse_b)  # (b, H, s); -inf only if both are
    ref = lse.masked_fill(lse == NEG_INF, 0.0)  # avoid -inf - -inf = NaN
    w_a = torch.exp(lse_a - ref).unsqueeze(-1)  # (b, H, s, 1): rescales part A's weights
    w_b = torch.exp(lse_b - ref).unsqueeze(-1)
    return w_a * out_a + w_b * out_b, lse
    # END SOLUTION

"""Llama configurations: one flat frozen dataclass, and presets of real published checkpoints.

The numbers come from the Hugging Face ``config.json`` of each checkpoint, which follow the papers:
Llama 2 (Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned Chat Models") and Llama 3 /
3.1 (Dubey et al. 2024, "The Llama 3 Herd of Models"). The architecture every preset shares:

- token embedding, ``layers`` pre-norm blocks, final RMSNorm, untied output head, no biases;
- attention with grouped-query attention (GQA, Ainslie et al. 2023): ``heads`` query heads share
  ``kv_heads`` key/value heads, so ``wk`` and ``wv`` map ``hidden -> kv_hidden``;
- rotary position embeddings (RoPE, Su et al. 2021, "RoFormer"), which add no parameters;
- a SwiGLU MLP (Shazeer 2020, "GLU Variants Improve Transformer") with three matrices w1, w2, w3.

``num_params()`` counts exactly those tensors, so it reproduces the published checkpoint sizes
(6,738,415,616 for Llama-2-7B; 8,030,261,248 for Llama-3-8B; ...). The ``tiny`` preset is the lab
model: same shape of architecture, small enough to train in seconds on two CPU cores.
"""

from __future__ import annotations

from dataclasses import dataclass

from minitorch_dist.checks import check_divisible, check_int, check_positive

_POSITIVE_INT_FIELDS = (
    "vocab_size",
    "hidden",
    "layers",
    "heads",
    "kv_heads",
    "ffn_hidden",
    "max_seq_len",
)


@dataclass(frozen=True)
class LlamaConfig:
    """Shape of a Llama-family decoder. Symbols: V=vocab_size, h=hidden, L=layers, f=ffn_hidden."""

    name: str  # preset name, or any label for a custom config
    vocab_size: int  # V: number of token ids (rows of the embedding, columns of the head)
    hidden: int  # h = d_model: width of the residual stream
    layers: int  # L: number of transformer blocks
    heads: int  # query heads; head_dim = hidden // heads
    kv_heads: int  # key/value heads (GQA); == heads is plain multi-head attention, 1 is MQA
    ffn_hidden: int  # f: SwiGLU intermediate size (w1, w3: h -> f; w2: f -> h)
    max_seq_len: int  # longest sequence the RoPE tables are built for
    norm_eps: float  # epsilon inside RMSNorm's square root
    rope_theta: float  # RoPE base: frequencies are theta^(-2i/head_dim)
    tie_embeddings: bool = False  # share embedding and head weights (no published preset does)

    def __post_init__(self) -> None:
        for field in _POSITIVE_INT_FIELDS:
            check_int(field, getattr(self, field))
        check_divisible("hidden", self.hidden, "heads", self.heads)
        check_divisible("heads", self.heads, "kv_heads", self.kv_heads)
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even for RoPE (pairs of dims)")
        check_positive("norm_eps", self.norm_eps)
        check_positive("rope_theta", self.rope_theta)

    @property
    def head_dim(self) -> int:
        """Width of one attention head: hidden // heads."""
        return self.hidden // self.heads

    @property
    def kv_hidden(self) -> int:
        """Width of the key (and of the value) projection: kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @classmethod
    def from_preset(cls, name: str) -> LlamaConfig:
        """The config of a published checkpoint (or ``tiny``, the lab model) by name."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; valid names: {', '.join(preset_names())}")
        return PRESETS[name]

    def param_counts(self) -> dict[str, int]:
        """Parameters by component; the values sum to :meth:`num_params`.

        embedding: V*h · attention: L*(2*h*h + 2*h*kv_hidden) (wq, wo: h->h; wk, wv: h->kv_hidden)
        mlp: L*3*h*f · norms: (2L + 1)*h (two RMSNorm weights per block, one final) ·
        head: V*h, or 0 when tied to the embedding.
        """
        h, kv, f, L, V = self.hidden, self.kv_hidden, self.ffn_hidden, self.layers, self.vocab_size
        return {
            "embedding": V * h,
            "attention": L * (2 * h * h + 2 * h * kv),
            "mlp": L * 3 * h * f,
            "norms": (2 * L + 1) * h,
            "head": 0 if self.tie_embeddings else V * h,
        }

    def num_params(self) -> int:
        """Exact parameter count (equals ``sum(p.numel() for p in Llama(cfg).parameters())``)."""
        return sum(self.param_counts().values())

    def num_params_per_rank(
        self, *, tp: int = 1, pp: int = 1, stage: int = 0, vocab_multiple: int = 128
    ) -> int:
        """Parameters one rank holds under tensor parallelism ``tp`` and pipeline stage ``stage``
        of ``pp``.

        Blocks: :func:`split_layers` gives stage ``stage`` its share; in each, the attention and
        MLP weights are split over tp (Megatron: wq, wk, wv, w1, w3 by columns, wo, w2 by rows) and
        the two RMSNorm weights are replicated. The embedding sits on the first stage and the
        final norm and head on the last; with tp > 1 both are vocab-parallel, the vocabulary padded
        to :func:`padded_vocab_size` (``vocab_multiple``) and split over tp. ``tp=1, pp=1`` gives
        :meth:`num_params`. A ValueError names the constraint tp violates (heads, kv_heads and
        ffn_hidden must divide by tp). With fewer kv heads than tp ranks (tp a multiple of kv_heads)
        each rank holds a copy of one kv head, as tensor-parallel GQA replicates them.
        """
        check_int("tp", tp)
        check_int("stage", stage, minimum=0)
        layers = split_layers(self.layers, pp)
        if stage >= pp:
            raise ValueError(f"stage={stage} must be < pp={pp}")
        check_divisible("heads", self.heads, "tp", tp)
        check_divisible("ffn_hidden", self.ffn_hidden, "tp", tp)
        h, f = self.hidden, self.ffn_hidden
        if self.kv_heads % tp == 0:
            kv_local = self.kv_hidden // tp
        elif tp % self.kv_heads == 0:  # fewer kv heads than ranks: each rank keeps a copy of one
            kv_local = self.head_dim
        else:
            raise ValueError(
                f"kv_heads={self.kv_heads} is not divisible by tp={tp}, nor tp by kv_heads"
            )
        block = (2 * h * h + 3 * h * f) // tp + 2 * h * kv_local + 2 * h
        count = layers[stage] * block
        vocab = (
            self.vocab_size if tp == 1 else padded_vocab_size(self.vocab_size, tp, vocab_multiple)
        )
        if stage == 0:
            count += vocab * h // tp
        if stage == pp - 1:
            count += h + (0 if self.tie_embeddings else vocab * h // tp)
        return count


def split_layers(num_layers: int, pp: int) -> list[int]:
    """Blocks per stage when ``num_layers`` blocks are cut into ``pp`` contiguous stages: as even
    as possible, the first ``num_layers % pp`` stages taking one more (``split_layers(10, 4)`` is
    ``[3, 3, 2, 2]``). ``minitorch_dist.pipeline.split_layers`` and
    ``minitorch_dist.models.split_layers`` are this function.

    A ValueError names the violated constraint: every stage needs at least one block.
    """
    check_int("num_layers", num_layers)
    check_int("pp", pp)
    if num_layers < pp:
        raise ValueError(f"layers={num_layers} < pp={pp}: every stage needs at least one layer")
    base, extra = divmod(num_layers, pp)
    return [base + 1 if stage < extra else base for stage in range(pp)]


def padded_vocab_size(vocab_size: int, tp: int, multiple: int = 128) -> int:
    """Megatron's rule: ``vocab_size`` rounded up to the next multiple of ``multiple * tp``, so
    every rank of a vocab-parallel embedding or head holds the same number of rows, a multiple of
    ``multiple`` (``padded_vocab_size(50257, 8)`` is 51200). The padded rows are never a target;
    their logits must be masked. ``minitorch_dist.tensor_parallel.padded_vocab_size`` is this
    function."""
    check_int("vocab_size", vocab_size)
    check_int("tp", tp)
    check_int("multiple", multiple)
    step = multiple * tp
    return -(-vocab_size // step) * step


def _llama2(
    name: str, hidden: int, layers: int, heads: int, kv_heads: int, ffn: int
) -> LlamaConfig:
    return LlamaConfig(name, 32000, hidden, layers, heads, kv_heads, ffn, 4096, 1e-5, 10000.0)


def _llama3(
    name: str, hidden: int, layers: int, heads: int, kv_heads: int, ffn: int
) -> LlamaConfig:
    # Llama 3.1 raises max_position_embeddings to 131072; the 8B/70B here are the 8192-token Llama 3.
    seq = 131072 if name.startswith("llama-3.1") else 8192
    return LlamaConfig(name, 128256, hidden, layers, heads, kv_heads, ffn, seq, 1e-5, 500000.0)


PRESETS: dict[str, LlamaConfig] = {
    c.name: c
    for c in (
        # name, hidden, layers, heads, kv_heads, ffn_hidden (from each checkpoint's config.json)
        _llama2("llama-2-7b", 4096, 32, 32, 32, 11008),
        _llama2("llama-2-13b", 5120, 40, 40, 40, 13824),
        _llama2("llama-2-70b", 8192, 80, 64, 8, 28672),
        _llama3("llama-3-8b", 4096, 32, 32, 8, 14336),
        _llama3("llama-3-70b", 8192, 80, 64, 8, 28672),
        _llama3("llama-3.1-405b", 16384, 126, 128, 8, 53248),
        # The lab model: byte-level vocabulary, 2 blocks, GQA 4:2, ffn ~ 8/3 * hidden rounded to 16.
        LlamaConfig("tiny", 256, 64, 2, 4, 2, 176, 256, 1e-5, 10000.0),
    )
}


def preset_names() -> list[str]:
    """Names accepted by :meth:`LlamaConfig.from_preset`, in table order."""
    return list(PRESETS)

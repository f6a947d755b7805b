"""Cut a :class:`Llama` into pipeline stages that share its submodules.

    stages = split_model(model, [2, 1, 1])     # blocks 0-1 | 2 | 3 of a 4-layer model
    x = tokens
    for stage in stages:                       # on one process, the same as model(tokens)
        x = stage(x)

Pipeline parallelism (GPipe, Huang et al. 2019; Megatron-LM's 1F1B, Narayanan et al. 2021)
gives each rank a contiguous run of transformer blocks: the first stage also holds the token
embedding, the last the final norm and the head. A :class:`LlamaStage` is that share. It holds the
model's own modules, not copies (``stage.layers[j] is model.layers[start + j]``), so a stage
computes exactly what the same slice of ``Llama.forward`` computes, and its parameters are the
model's: ``stage.parameters()`` yields only this stage's share. The submodule names are the
model's (``embed``, ``layers``, ``norm``, ``head``) with ``layers`` numbered from 0 inside the
stage, as Megatron numbers them; ``start`` gives the offset. A stage is a :class:`Llama` whose missing
parts are None, so it runs the model's one forward; RoPE's tables are made per stage from the
sequence length of what arrives, so a stage keeps no state.

With ``tie_embeddings`` the first and last stages share one weight: on one process its gradient
accumulates from both uses; across ranks a pipeline must all-reduce it between them (Megatron's
"embedding group"). To cut a model too big to build, build it on ``torch.device("meta")``, cut it,
then materialise each rank's stage (``to_empty``) and load or initialise its weights.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from minitorch_dist.checks import check_int
from minitorch_dist.models.configs import split_layers
from minitorch_dist.models.llama import Llama

__all__ = ["LlamaStage", "split_layers", "split_model"]


class LlamaStage(Llama):
    """Blocks ``start`` to ``stop - 1`` of ``model``, with the embedding if ``start == 0`` and
    the final norm and head if ``stop == model.config.layers``.

    A Llama whose missing parts are None, so its forward is :meth:`Llama.forward` itself.
    Input: token ids (b, s) on the first stage, hidden states (b, s, h) on the others. Output:
    logits (b, s, V) on the last stage, hidden states (b, s, h) on the others.
    """

    def __init__(self, model: Llama, start: int, stop: int) -> None:
        nn.Module.__init__(self)  # not Llama.__init__: the modules are the model's, not new ones
        num_layers = model.config.layers
        check_int("start", start, minimum=0)
        check_int("stop", stop, minimum=start + 1)  # every stage holds at least one block
        if stop > num_layers:
            raise ValueError(f"stop={stop} exceeds the model's layers={num_layers}")
        self.config = model.config
        self.start, self.stop = start, stop
        self.embed = model.embed if start == 0 else None
        self.layers = nn.ModuleList(model.layers[start:stop])  # the same Block objects
        self.norm = model.norm if stop == num_layers else None
        self.head = model.head if stop == num_layers else None
        self.positions, self.sequence_shards = model.positions, model.sequence_shards

    @property
    def has_embed(self) -> bool:
        """Whether this is the first stage: it takes token ids and holds the embedding."""
        return self.embed is not None

    @property
    def has_head(self) -> bool:
        """Whether this is the last stage: it returns logits and holds the final norm and head."""
        return self.head is not None

    def model_named_parameters(self) -> dict[str, nn.Parameter]:
        """This stage's parameters under the whole model's names: its ``layers.j`` is the model's
        ``layers.{start + j}``; ``embed``, ``norm`` and ``head`` keep their names."""
        named = {}
        for name, param in self.named_parameters():
            if name.startswith("layers."):
                j, rest = name.split(".", 2)[1:]
                name = f"layers.{self.start + int(j)}.{rest}"
            named[name] = param
        return named

    def extra_repr(self) -> str:
        return f"layers {self.start}..{self.stop - 1} of {self.config.layers}"


def split_model(model: Llama, layers_per_stage: Sequence[int]) -> list[LlamaStage]:
    """Cut ``model`` into ``len(layers_per_stage)`` consecutive stages of that many blocks each.

    ``layers_per_stage`` is a list of counts, as ``pipeline.split_layers(num_layers, pp)``
    returns, so the two compose: ``split_model(model, split_layers(model.config.layers, pp))``.
    """
    sizes = list(layers_per_stage)
    if not sizes or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in sizes):
        raise ValueError(f"layers_per_stage must be ints >= 1, one per stage, got {sizes}")
    if sum(sizes) != model.config.layers:
        raise ValueError(
            f"layers_per_stage must sum to the model's layers={model.config.layers}, "
            f"got sum({sizes}) = {sum(sizes)}"
        )
    bounds = [0]
    for n in sizes:
        bounds.append(bounds[-1] + n)
    return [LlamaStage(model, a, b) for a, b in zip(bounds[:-1], bounds[1:])]

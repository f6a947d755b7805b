"""What every benchmark script shares: the model flags and the config they describe."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from minitorch_dist.models import LlamaConfig

# command-line flag -> LlamaConfig field
MODEL_FLAGS = {
    "hidden": "hidden",
    "layers": "layers",
    "heads": "heads",
    "kv-heads": "kv_heads",
    "ffn": "ffn_hidden",
    "vocab": "vocab_size",
}


def add_model_args(
    parser: argparse.ArgumentParser, *, seq_len: int = 64, micro_batch: int = 4
) -> None:
    """``--preset`` plus one flag per overridable field, ``--seq-len`` and ``--micro-batch``."""
    parser.add_argument("--preset", default="tiny", help="LlamaConfig preset to start from")
    for flag in MODEL_FLAGS:
        parser.add_argument(f"--{flag}", type=int, help=f"override the preset's {flag}")
    parser.add_argument("--seq-len", type=int, default=seq_len)
    parser.add_argument("--micro-batch", type=int, default=micro_batch, help="sequences per rank")


def config_from_args(args: argparse.Namespace) -> LlamaConfig:
    """The preset with the flags' overrides; ``max_seq_len`` grows to fit ``--seq-len``."""
    config = LlamaConfig.from_preset(args.preset)
    changes = {
        field: getattr(args, flag.replace("-", "_"))
        for flag, field in MODEL_FLAGS.items()
        if getattr(args, flag.replace("-", "_")) is not None
    }
    if changes:
        changes["name"] = f"{config.name}-custom"
    changes["max_seq_len"] = max(config.max_seq_len, args.seq_len)
    return dataclasses.replace(config, **changes)


def markdown_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    """The lines of a Markdown table: the column titles, the rule, one line per row."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def emit(text: str, out: str | None) -> None:
    """Print the report and, with ``--out PATH``, also write it there."""
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
        print(f"\nwrote {out}")


def device_tag(device: str) -> tuple[str, str]:
    """The device in words and the result-file prefix ``minitorch_dist.results`` knows:
    ``("NVIDIA H200", "h200")`` on a GPU, ``("x86_64", "cpu")`` on the CPU."""
    import platform

    if device == "cuda":
        import torch

        name = torch.cuda.get_device_name()
        words = name.split()
        return name, words[1].lower() if len(words) > 1 else "gpu"
    return platform.processor() or platform.machine(), "cpu"


def write_result(text: str, out: str | None, filename: str) -> None:
    """Print the report and, with ``--out DIR``, also write ``DIR/filename``."""
    print(text)
    if out:
        path = Path(out) / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")

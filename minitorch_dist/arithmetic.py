"""The arithmetic layer: the package's closed forms, memory predictor and planner, torch-free.

Everything the book predicts before anything runs is arithmetic on a model's shape: the bytes
of the model states and activations (:mod:`minitorch_dist.memory.prediction`, chapter 1), the
bytes each technique sends (the ``cost`` modules of chapters 5-10), the FLOPs of a step
(:mod:`minitorch_dist.memory.flops`) and the planner that combines them into a ranking of layouts
(:mod:`minitorch_dist.planner`, chapter 12). None of it needs torch, numpy or matplotlib, and it
must not import them: the book's live widgets run this layer in the reader's browser (Pyodide:
CPython and its standard library, no torch), and a reader can try the planner without
installing torch.

:data:`ARITHMETIC_MODULES` names the entry modules; :func:`arithmetic_files` lists the package's
files needed to import them, found honestly: the entry modules are imported in a fresh
interpreter in which importing torch, numpy or matplotlib raises ImportError
(:func:`run_blocked`), and the package's modules it loaded are the answer. What keeps the list
short: package ``__init__`` files export their names lazily (:mod:`minitorch_dist.lazy`), and a
closed-form module imports only other closed forms and the standard library.
``tests/test_layout_arithmetic.py`` runs the layer with those imports blocked and holds its
numbers equal to the same calls with torch present.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

__all__ = ["ARITHMETIC_MODULES", "BLOCKED", "arithmetic_files", "run_blocked"]

ROOT = Path(__file__).resolve().parent.parent  # the repository (the folder holding the package)

# The entry modules: what the live widgets and a torch-free reader import.
ARITHMETIC_MODULES = (
    "minitorch_dist.planner",
    "minitorch_dist.memory.prediction",
    "minitorch_dist.memory.estimate",
    "minitorch_dist.memory.peak",
    "minitorch_dist.models.configs",
    "minitorch_dist.models.moe_configs",
    "minitorch_dist.memory.flops",
    "minitorch_dist.comm.cost",
    "minitorch_dist.zero.cost",
    "minitorch_dist.tensor_parallel.cost",
    "minitorch_dist.context_parallel.cost",
    "minitorch_dist.pipeline.cost",
    "minitorch_dist.expert_parallel.cost",
)

BLOCKED = ("torch", "numpy", "matplotlib")  # absent in the browser; absent for the layer

# Run first in the blocked interpreter: a finder ahead of all others that refuses BLOCKED.
_BLOCKER = """
import sys
class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"{{name}} is blocked: the arithmetic layer runs without it")
        return None
sys.meta_path.insert(0, _Blocked())
"""


def run_blocked(code: str, *, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (this one's executable, from the repository root)
    where importing torch, numpy or matplotlib raises ImportError; its output, not checked."""
    program = _BLOCKER.format(blocked=set(BLOCKED)) + code
    return subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def arithmetic_files() -> list[Path]:
    """The package's ``.py`` files that importing :data:`ARITHMETIC_MODULES` and every name they
    export (``__all__``) loads with torch, numpy and matplotlib blocked: paths relative to the repository root, sorted. RuntimeError
    (with the interpreter's error) if an entry module cannot be imported that way."""
    code = f"""
import importlib, json
for name in {ARITHMETIC_MODULES!r}:
    module = importlib.import_module(name)
    for export in getattr(module, "__all__", ()):  # a lazy package loads its names on use
        getattr(module, export)
ours = [m for m in sys.modules if m == "minitorch_dist" or m.startswith("minitorch_dist.")]
print(json.dumps(sorted(sys.modules[m].__file__ for m in ours)))
"""
    run = run_blocked(code)
    if run.returncode != 0:
        raise RuntimeError(f"the arithmetic layer does not import torch-free:\n{run.stderr}")
    files = json.loads(run.stdout.strip().splitlines()[-1])
    return sorted(Path(f).resolve().relative_to(ROOT) for f in files)

"""The arithmetic layer (``minitorch_dist.arithmetic``) imports and runs with torch, numpy and
matplotlib absent, and gives the same numbers as with them; lazy package exports keep every
public name importable.

The layer runs in a fresh interpreter where importing torch, numpy or matplotlib raises
(``arithmetic.run_blocked``): a memory prediction, a small planner search, the step time and
peak memory of one layout. Their exact reprs are compared with the same calls made here, with
torch imported. ``tests/fixtures/public_names.json`` is the snapshot of every package's exported
names taken before the package ``__init__`` files became lazy: each must still import.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

from minitorch_dist import arithmetic

ROOT = Path(__file__).resolve().parent.parent

# The work both interpreters do; it prints one JSON object of exact reprs.
WORK = """
import json
from minitorch_dist import planner
from minitorch_dist.memory.peak import predict_peak
from minitorch_dist.memory.prediction import predict
from minitorch_dist.models import PRESETS

out = {}
out["predict"] = repr(predict(PRESETS["llama-3-8b"], seq_len=4096, micro_batch=1,
                              recompute="selective", zero_stage=1, dp=8, offload=True))
cluster = planner.Cluster.from_preset("dgx-h100", 16)
result = planner.plan("llama-3-8b", cluster, global_batch=64, seq_len=4096,
                      only={"cp": 1, "ep": 1, "v": 1})
out["plan"] = [repr((r.config, r.fits, r.time, r.memory)) for r in result.rows[:8]]
out["plan_size"] = len(result.rows)
config = planner.ParallelConfig(dp=2, tp=4, pp=2, sp=True, zero=1)
model = planner.as_model("llama-3-8b")
out["step_time"] = repr(planner.step_time(model, cluster, config, seq_len=4096,
                                          global_batch=64))
out["peak_memory"] = repr(planner.peak_memory(model, config, seq_len=4096,
                                              global_batch=64))
moe = planner.as_model("mixtral-8x7b")  # the MoE path: expert parallelism's closed forms
moe_config = planner.ParallelConfig(dp=8, tp=2, ep=4, zero=1)
out["moe"] = repr((planner.step_time(moe, cluster, moe_config, seq_len=4096, global_batch=64),
                   planner.peak_memory(moe, moe_config, seq_len=4096, global_batch=64)))
out["peak"] = repr(predict_peak("llama-3-8b", seq_len=4096, micro_batch=1, zero_stage=2, dp=8))
print(json.dumps(out))
"""


def _work_here() -> dict:
    """WORK run in this interpreter, where torch is present (and imported first)."""
    import contextlib
    import io

    import torch  # noqa: F401  (present: the numbers must not depend on it)

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(WORK, {})
    return json.loads(buffer.getvalue())


def _work_blocked() -> dict:
    run = arithmetic.run_blocked(WORK)
    assert run.returncode == 0, f"the arithmetic layer failed with torch blocked:\n{run.stderr}"
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_layer_runs_torch_free_with_the_same_numbers():
    """Catches a closed form, the predictor or the planner importing torch, numpy or matplotlib
    (directly or through an eager package ``__init__``), and a torch-free path that computes
    other numbers than the usual one."""
    blocked = _work_blocked()
    assert blocked["plan_size"] > 8 and len(blocked["plan"]) == 8  # a real search ran
    assert blocked == _work_here()


def test_the_blocker_blocks():
    """Catches a blocker that blocks nothing, which would make the test above pass vacuously:
    each blocked package (installed here) fails to import in the blocked interpreter, and so does
    a package module that imports torch."""
    for name in (*arithmetic.BLOCKED, "minitorch_dist.memory.track"):
        run = arithmetic.run_blocked(f"import {name}")
        assert run.returncode != 0 and "is blocked" in run.stderr, (name, run.stderr)


def test_arithmetic_files_import_no_blocked_package_at_top_level():
    """Catches a file of the layer with a module-level ``import torch`` (or numpy, matplotlib),
    which the Pyodide build would copy and fail to import; and a list missing an entry module."""
    files = arithmetic.arithmetic_files()
    names = {".".join(f.with_suffix("").parts).removesuffix(".__init__") for f in files}
    assert set(arithmetic.ARITHMETIC_MODULES) <= names
    assert Path("minitorch_dist/lazy.py") in files and files == sorted(files)
    bad = []
    for path in files:
        tree = ast.parse((ROOT / path).read_text())
        top = [t for t in tree.body if not isinstance(t, (ast.FunctionDef, ast.ClassDef))]
        for node in (n for t in top for n in ast.walk(t)):  # module level, in if/try blocks too
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                mods = [node.module or ""]
            bad += [f"{path}: {m}" for m in mods if m.split(".")[0] in arithmetic.BLOCKED]
    assert not bad, bad


PUBLIC = json.loads((ROOT / "tests" / "fixtures" / "public_names.json").read_text())


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_every_public_name_still_imports(package: str):
    """Catches a lazy ``__init__`` that lost a name the eager one exported (or maps it to the
    wrong module): ``from minitorch_dist.<package> import <name>`` for every name of the
    snapshot, with torch present, and each name still listed by ``__all__`` and ``dir()``."""
    module = importlib.import_module(package)
    missing = [n for n in PUBLIC[package] if not hasattr(module, n)]
    assert not missing, f"{package} no longer exports {missing}"
    listed = set(getattr(module, "__all__", ())) | set(dir(module))
    assert not set(PUBLIC[package]) - listed, set(PUBLIC[package]) - listed


def test_an_export_wins_over_its_module_of_the_same_name():
    """Catches the import system's binding of a submodule on its package shadowing the export of
    the same name (``pipeline.simulate`` is the function, even after ``pipeline/simulate.py`` is
    imported directly, as with the eager ``__init__``)."""
    run = arithmetic.run_blocked(
        "import minitorch_dist.pipeline.simulate, minitorch_dist.pipeline as p\n"
        "from minitorch_dist.pipeline import simulate\n"
        "assert callable(simulate) and p.simulate is simulate, simulate\n"
    )
    assert run.returncode == 0, run.stderr


def test_attach_refuses_an_unmapped_public_name():
    """Catches a lazy ``__init__`` whose ``__all__`` names something no module provides: the
    package fails at import, naming it, instead of at some reader's first use."""
    import sys
    import types

    from minitorch_dist.lazy import attach

    probe = sys.modules["_lazy_probe"] = types.ModuleType("_lazy_probe")
    probe.__path__ = []  # a package with no submodules
    try:
        with pytest.raises(ImportError, match="typo_name"):
            attach("_lazy_probe", {"math": ("sqrt",)}, ["sqrt", "typo_name"])
        getattr_, dir_ = attach("_lazy_probe", {"math": ("sqrt",)}, ["sqrt"])
        assert getattr_("sqrt")(4.0) == 2.0 and "sqrt" in dir_()
        with pytest.raises(AttributeError, match="nothing_here"):
            getattr_("nothing_here")
    finally:
        del sys.modules["_lazy_probe"]

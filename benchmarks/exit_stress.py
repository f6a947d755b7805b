"""Do ranks exit cleanly under load? Ours and torch's DDP, side by side.

    python benchmarks/exit_stress.py --runs 50 --hogs 6 --out benchmarks/results/cpu-2core_exit_stress.md

Each run starts two fresh Python processes, as an outside test harness does (not the package's
forked ranks, whose processes end with ``os._exit``): each joins a gloo group through
environment variables, builds the toy model of the data-parallel tests, wraps it in one
variant, trains three steps with AdamW, destroys the group and returns from its script, so the
interpreter's shutdown runs (Python's finalisers, then C++'s static destructors). A C++ thread
still joinable then calls ``std::terminate``: "terminate called without an active exception"
and SIGABRT, after the work itself has passed. Meanwhile ``--hogs`` busy-looping processes keep
the cores loaded, which changes the order in which threads finish. The table counts, per
variant, the runs that ended in a signal or a non-zero exit.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

VARIANTS = (
    "ours_ddp_naive",
    "ours_ddp_bucketed",
    "ours_zero1",
    "ours_zero2",
    "ours_zero3",
    "ours_apply_zero3",
    "torch_ddp",
)


def worker(variant: str) -> None:
    """One rank of one run (``RANK``, ``WORLD_SIZE``, ``MASTER_*`` in the environment)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from minitorch_dist.data_parallel import DataParallelBucket, DataParallelNaive, TiedToy
    from minitorch_dist.reference import make_batches, run_training
    from minitorch_dist.zero import STAGES, apply_zero3

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TiedToy(vocab=31, hidden=16)
    if variant == "ours_ddp_naive":
        model = DataParallelNaive(model)
    elif variant == "ours_ddp_bucketed":
        model = DataParallelBucket(model, bucket_cap_mb=0.001)  # several buckets, async work
    elif variant == "torch_ddp":
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    elif variant == "ours_apply_zero3":
        model = apply_zero3(model)
    if variant.startswith("ours_zero"):
        stage = int(variant[-1])
        opt = STAGES[stage](model if stage == 3 else model.parameters(), torch.optim.AdamW)
    else:
        opt = torch.optim.AdamW(model.parameters())
    run_training(model, opt, make_batches(31, 8, 8, 3), rank=rank, world_size=world, weights=None)
    if os.environ.get("EXIT_STRESS_KEEP_GROUP") != "1":  # --keep-group: as a careless script
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _verdict(code: int, err: str) -> str:
    """'ok', or how a rank ended: ``code`` as subprocess gives it (negative: the signal)."""
    if code < 0:
        return f"signal {-code}" + (" (terminate called)" if "terminate" in err else "")
    if code > 0:
        return f"exit {code}: {err.strip().splitlines()[-1][:80] if err.strip() else ''}"
    return "ok"


def spawned_run(variant: str, timeout: float) -> str:
    """As :func:`one_run`, each rank a fresh interpreter (``--spawn``; seconds per rank)."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    env["WORLD_SIZE"] = "2"
    cmd = [sys.executable, __file__, "--worker", variant]
    procs = [
        subprocess.Popen(cmd, env={**env, "RANK": str(r)}, stderr=subprocess.PIPE, text=True)
        for r in range(2)
    ]
    outcome = "ok"
    for p in procs:
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            outcome = "timeout" if outcome == "ok" else outcome
            continue
        outcome = _verdict(p.returncode, err) if outcome == "ok" else outcome
    return outcome


def one_run(variant: str, timeout: float) -> str:
    """'ok', or what went wrong: the signal or exit code of the first rank that failed.

    Each rank is forked from this process, which imported torch once (a fresh interpreter
    per rank costs seconds), and leaves by raising ``SystemExit`` up through this script, so
    its interpreter shuts down as a script's does -- not ``os._exit`` as a forked rank of
    ``launch`` does."""
    port = str(_free_port())
    pids, errs = [], []
    for r in range(2):
        err = tempfile.TemporaryFile()
        pid = os.fork()
        if pid == 0:  # the rank
            os.dup2(err.fileno(), 2)
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE="2")
            os.environ["RANK"] = str(r)
            try:
                worker(variant)
                code = 0
            except BaseException:  # noqa: BLE001 - reported by the exit code and stderr
                traceback.print_exc()
                code = 1
            raise SystemExit(code)  # up through main(): a normal interpreter shutdown
        pids.append(pid)
        errs.append(err)
    outcome, deadline = "ok", time.monotonic() + timeout
    for pid, err in zip(pids, errs):
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            outcome = "timeout" if outcome == "ok" else outcome
            continue
        err.seek(0)
        text = err.read().decode(errors="replace")
        code = os.waitstatus_to_exitcode(status)  # negative: the signal, as subprocess says
        outcome = _verdict(code, text) if outcome == "ok" else outcome
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="runs of each variant")
    parser.add_argument("--hogs", type=int, default=6, help="busy-looping processes for load")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--out", type=Path, help="write the Markdown table here too")
    parser.add_argument("--spawn", action="store_true", help="fresh interpreters, not forks")
    parser.add_argument("--keep-group", action="store_true", help="never destroy the group")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.keep_group:
        os.environ["EXIT_STRESS_KEEP_GROUP"] = "1"
    if args.worker:
        worker(args.worker)
        return
    run = spawned_run if args.spawn else one_run
    import torch  # noqa: F401 - imported once, before the ranks are forked

    import minitorch_dist.zero  # noqa: F401

    # plain processes: a forked rank's shutdown must not know of them (multiprocessing's would
    # terminate its "children")
    busy = [sys.executable, "-c", "while True: pass"]
    hogs = [subprocess.Popen(busy) for _ in range(args.hogs)]
    variants = args.variants.split(",")
    counts = {v: {} for v in variants}
    start, parent = time.monotonic(), os.getpid()
    try:
        for i in range(args.runs):  # interleaved, so that each variant sees the same load
            for v in variants:
                for _ in range(3):  # the free port was taken before rank 0 bound it: again
                    outcome = run(v, args.timeout)
                    if "failed to listen" not in outcome:
                        break
                counts[v][outcome] = counts[v].get(outcome, 0) + 1
                if outcome != "ok":
                    print(f"run {i} {v}: {outcome}", flush=True)
            print(f"runs done: {i + 1} of each variant", flush=True)
    finally:
        if os.getpid() == parent:  # a rank leaving by SystemExit passes here too
            for h in hogs:
                h.kill()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    how = "fresh interpreters" if args.spawn else "forked from one interpreter"
    ends = "never destroying the group" if args.keep_group else "destroying the group"
    lines = [
        f"Two ranks per run ({how}, each {ends} and returning from its script), "
        f"{args.runs} runs of each variant, {args.hogs} busy-looping "
        f"processes beside them on {os.cpu_count()} cores (load average at the end {load:.1f}); "
        f"{time.monotonic() - start:.0f} s in all.",
        "",
        "| variant | runs | clean exits | aborted or failed | how |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for v in variants:
        bad = {k: n for k, n in counts[v].items() if k != "ok"}
        how = ", ".join(f"{k}: {n}" for k, n in sorted(bad.items())) or "-"
        ok = counts[v].get("ok", 0)
        lines.append(f"| {v} | {args.runs} | {ok} | {sum(bad.values())} | {how} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text("# Exit under load: ours and torch's DDP\n\n" + text)


if __name__ == "__main__":
    main()

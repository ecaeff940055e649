"""The first run of the CLI on an empty numba cache: how long it compiles, and where.

``python -m benchmarks.cold_start [--json] [--commands simulate,calibrate]
[--rounds N] [--against DIR] [--profile]`` runs each command of the README
on the shipped synthetic table, as a fresh process with an empty
``NUMBA_CACHE_DIR`` (and, for ``calibrate``, an empty SQLite MLflow store),
and prints its wall time (``simulate_s``, ``calibrate_s``: the best of
``--rounds``, default 1).  With ``--against DIR``, another checkout (e.g.
``git worktree add DIR REV``) runs the same command at the same time, one
process per core, so that the machine's load touches both alike:
``simulate_ratio`` is this checkout's time over the other's.

``--profile`` instead compiles ``contactfit simulate`` in this process with a
listener on numba's compile events and prints each kernel's exclusive
compile time (its own, without the kernels it compiled on the way) and the
share of it in LLVM: numba re-optimises the code of every kernel a kernel
links in, so a level of the call tree costs what it holds below it.
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._emit import emit

ROOT = Path(__file__).resolve().parents[1]
DATASET = "datasets/synthetic-table"


def _args(command, out):
    if command == "simulate":
        return ["simulate", DATASET, "--out", out]
    return ["calibrate", DATASET, "--out", out]


def _start(tree, command, scratch):
    """Start ``contactfit COMMAND`` of checkout ``tree`` on an empty cache and store."""
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=str(scratch / "numba"),
               MLFLOW_TRACKING_URI=f"sqlite:///{scratch / 'mlflow.db'}",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1")
    env.pop("MLFLOW_REGISTRY_URI", None)
    with open(scratch / "log", "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "flows.cli", *_args(command, str(scratch / "out"))],
            cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)


def timed(trees, command):
    """Wall times [s] of ``command`` run at the same time in each of ``trees``."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        procs = []
        for k, tree in enumerate(trees):
            scratch = Path(tmp) / str(k)
            scratch.mkdir()
            procs.append(_start(tree, command, scratch))
        ends = [None] * len(procs)
        while None in ends:
            for k, p in enumerate(procs):
                if ends[k] is None and p.poll() is not None:
                    ends[k] = time.perf_counter() - t0
            time.sleep(0.05)
        for k, (tree, p) in enumerate(zip(trees, procs)):
            if p.returncode:
                log = (Path(tmp) / str(k) / "log").read_text()
                raise SystemExit(f"{tree}: contactfit {command} failed:\n{log}")
        return ends


def profile(top=25):
    """Compile ``contactfit simulate`` here, timing numba's compile events:
    ``(total_s, llvm_s, rows)``, rows ``(kernel, exclusive_s, llvm_s, overloads)``."""
    from numba.core import event

    records = []

    class Listener(event.Listener):
        def on_start(self, ev):
            records.append((True, ev.kind, time.perf_counter(), ev.data))

        def on_end(self, ev):
            records.append((False, ev.kind, time.perf_counter(), ev.data))

    listener = Listener()
    for kind in ("numba:compile", "numba:llvm_lock"):
        event.register(kind, listener)
    with tempfile.TemporaryDirectory() as tmp:
        # Before simcore is imported: its kernels find their cache directory then.
        os.environ["NUMBA_CACHE_DIR"] = str(Path(tmp) / "numba")
        from flows import cli

        t0 = time.perf_counter()
        cli.main(_args("simulate", str(Path(tmp) / "out")))
        total = time.perf_counter() - t0
    excl, llvm, count = collections.Counter(), collections.Counter(), collections.Counter()
    stack, llvm_depth, llvm_t0, llvm_total = [], 0, 0.0, 0.0
    for start, kind, t, data in records:
        if kind == "numba:compile":
            f = data["dispatcher"].py_func
            if start:
                stack.append([f"{f.__module__}.{f.__qualname__}", t, 0.0])
                continue
            name, t_start, inner = stack.pop()
            excl[name] += t - t_start - inner
            count[name] += 1
            if stack:
                stack[-1][2] += t - t_start
        elif start:
            llvm_depth += 1
            llvm_t0 = t if llvm_depth == 1 else llvm_t0
        else:
            llvm_depth -= 1
            if llvm_depth == 0:
                llvm_total += t - llvm_t0
                if stack:
                    llvm[stack[-1][0]] += t - llvm_t0
    rows = [(name, s, llvm[name], count[name]) for name, s in excl.most_common(top)]
    return total, llvm_total, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--commands", default="simulate,calibrate")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--against", help="another checkout, run at the same time")
    ap.add_argument("--profile", action="store_true", help="compile times per kernel")
    args = ap.parse_args(argv)
    if args.profile:
        total, llvm_total, rows = profile()
        print(f"contactfit simulate, empty cache: {total:.1f} s, of which LLVM {llvm_total:.1f} s")
        print(f"{'exclusive s':>11} {'LLVM s':>7} {'overloads':>9}  kernel")
        for name, s, ls, n in rows:
            print(f"{s:11.1f} {ls:7.1f} {n:9d}  {name}")
        return
    trees = [ROOT] + ([Path(args.against).resolve()] if args.against else [])
    out = {}
    for command in args.commands.split(","):
        runs = [timed(trees, command) for _ in range(args.rounds)]
        out[f"{command}_s"] = round(min(r[0] for r in runs), 1)
        if args.against:
            out[f"{command}_other_s"] = round(min(r[1] for r in runs), 1)
            out[f"{command}_ratio"] = round(out[f"{command}_s"] / out[f"{command}_other_s"], 3)
    emit(out, args.json)


if __name__ == "__main__":
    main()

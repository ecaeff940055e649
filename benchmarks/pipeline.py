"""The calibrate flow at scale: wall time and the share spent outside simcore.

``python -m benchmarks.pipeline [--json] [--data DIR] [--scenarios N]``
calibrates the 8 coefficients on a generated dataset of ``N`` (10,000)
scenarios x 2 s sampled at 1 kHz (made once into ``DIR`` by
:func:`simcore.data.synth.generate`, seed 11, and reused while its recorded
generator settings match), through :func:`flows.pipeline.calibrate` run as
the CLI runs it (:func:`flows.pipeline.run`: the default thread runner,
task-run logs at WARNING, no heartbeats on the temporary server), with a
temporary SQLite MLflow store and Prefect's temporary local server.

Figures: ``wall_s`` is the flow's wall time, after the temporary server is
up and the MLflow store exists: the server's start-up (``server_start_s``)
and the creation of the SQLite store's tables and experiment
(``store_init_s``) are paid once, by the first flow of a process and the
first run of a store, not by a calibration.
``overhead_fraction`` is the share of ``wall_s`` during which no simcore
computation ran: the union over threads of the busy intervals of
``Problem.from_dataset``, ``Problem.evaluate``, ``Problem.loss_only``,
``Problem.subset``, ``Problem.truncated`` and ``replay``'s
``simulate_dataset``, ``residuals``, ``residual_table`` and ``paths`` is
simcore time; everything else (Prefect, MLflow, reading and validating the
files, hashing, plots) is overhead.
"""

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import yaml

from benchmarks._emit import emit

SETTINGS = dict(seed=11, rate=1000.0, duration=2.0)


class Busy:
    """Wall-clock intervals during which at least one wrapped call ran."""

    def __init__(self):
        self.spans, self.lock = [], threading.Lock()

    def wrap(self, fn):
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                with self.lock:
                    self.spans.append((t0, time.perf_counter()))
        return timed

    def union(self, lo, hi):
        total, end = 0.0, lo
        for a, b in sorted(self.spans):
            a, b = max(a, end), min(b, hi)
            if b > a:
                total += b - a
                end = b
        return total


def _dataset(path, scenarios):
    from simcore.data import synth

    path = Path(path)
    want = dict(SETTINGS, scenarios=scenarios)
    meta = path / "dataset.yaml"
    if meta.is_file():
        got = yaml.safe_load(meta.read_text()).get("generator", {})
        if all(got.get(k) == v for k, v in want.items()):
            return path
    synth.generate(path, synth.GeneratorSettings(**want))
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--scenarios", type=int, default=10_000)
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(),
                                                   "contactfit-bench-pipeline"))
    args = ap.parse_args(argv)
    data = _dataset(args.data, args.scenarios)

    work = Path(tempfile.mkdtemp(prefix="contactfit-bench-"))
    (work / ".prefect").mkdir()
    os.environ.setdefault("PREFECT_HOME", str(work / ".prefect"))
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{work}/mlflow.db"
    os.chdir(work)

    from prefect import flow

    from flows import pipeline, settings, tracking
    from simcore.data import replay
    from simcore.identify.problem import Problem

    busy = Busy()
    for name in ("from_dataset", "evaluate", "loss_only", "subset", "truncated"):
        raw = getattr(Problem, name)
        if name == "from_dataset":
            setattr(Problem, name, classmethod(busy.wrap(raw.__func__)))
        else:
            setattr(Problem, name, busy.wrap(raw))
    for name in ("simulate_dataset", "residuals", "residual_table", "paths"):
        setattr(replay, name, busy.wrap(getattr(replay, name)))

    @flow
    def warm_up():
        return 0

    t = time.perf_counter()
    warm_up()
    server = time.perf_counter() - t
    t = time.perf_counter()
    tracking.client(settings.tracking())
    store = time.perf_counter() - t
    t0 = time.perf_counter()
    try:
        doc = pipeline.run(pipeline.calibrate, str(data))
    except pipeline.CalibrationFailed as exc:  # the figures still stand
        doc = exc.doc
    t1 = time.perf_counter()
    wall = t1 - t0
    simcore_s = busy.union(t0, t1)
    out = {"wall_s": wall, "overhead_fraction": 1.0 - simcore_s / wall, "simcore_s": simcore_s,
           "server_start_s": server, "store_init_s": store, "fit_s": doc["fit_s"], "iterations": doc["iterations"],
           "evaluations": doc["evaluations"], "scenarios": args.scenarios,
           "samples": doc["dataset"]["rows"]["trajectories"], "converged": doc["converged"],
           "status": doc["status"]}
    emit(out, args.json, width=18)


if __name__ == "__main__":
    main()

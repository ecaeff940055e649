"""Ingestion throughput: ``python -m benchmarks.ingest [--json] [--samples N]``.

Writes a dataset of N trajectory samples (default 10 million: 10,000
scenarios x 2 bodies x 500 samples (``--per-body``), as Parquet) with vectorised NumPy and
dictionary-encoded ids, then, each in a fresh process so its peak memory
is its own:

- validates it as ``contactfit validate`` does
  (:func:`simcore.data.dataset.validate_stream`: the trajectories read in
  batches, every contract check and the summary, collision detection
  included), in bounded memory;
- reads it whole into memory as a calibration does
  (:func:`simcore.data.dataset.read`: column projection, casts, unit
  conversion, every check).

Prints rows per second and peak resident memory of each.  JSON keys:
``rows``, ``validate_s``, ``rows_per_s``, ``peak_rss_mb`` (the streamed
validation), ``read_s``, ``read_peak_rss_mb``, ``parquet_mb``.
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from simcore.data import dataset


def write_big(root, samples, nbody=2, per_body=500, seed=0):
    rng = np.random.default_rng(seed)
    nscen = max(1, samples // (nbody * per_body))
    ids = pa.array([f"s{s:06d}" for s in range(nscen)])
    radius = 0.028575
    # bodies: side by side on the ground
    b_scen = np.repeat(np.arange(nscen, dtype=np.int32), nbody)
    b_body = np.tile(np.arange(nbody), nscen)
    pq.write_table(pa.table({
        "scenario_id": pa.DictionaryArray.from_arrays(b_scen, ids),
        "body_id": b_body, "shape": pa.array(["sphere"] * (nscen * nbody)),
        "radius": np.full(nscen * nbody, radius), "mass": np.full(nscen * nbody, 0.17),
    }), root / "bodies.parquet")
    # trajectories: a slow random walk per body, 100 Hz
    n = nscen * nbody * per_body
    scen = np.repeat(np.arange(nscen, dtype=np.int32), nbody * per_body)
    body = np.tile(np.repeat(np.arange(nbody), per_body), nscen)
    t = np.tile(np.arange(per_body) * 0.01, nscen * nbody)
    x = body * 0.2 + np.cumsum(rng.normal(0, 1e-4, n)).reshape(-1, per_body).T.ravel(order="F")
    y = rng.normal(0, 1e-3, n)
    z = np.full(n, radius)
    pq.write_table(pa.table({
        "scenario_id": pa.DictionaryArray.from_arrays(scen, ids), "body_id": body, "t": t,
        "x": x, "y": y, "z": z,
    }), root / "trajectories.parquet", row_group_size=1_000_000)
    (root / "dataset.yaml").write_text(yaml.safe_dump({
        "name": "ingest-benchmark", "units": {"length": "m", "time": "s"}}))
    return n


def run(samples, per_body=500):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        rows = write_big(root, samples, per_body=per_body)
        write_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in root.iterdir()) / 1e6
        res = {mode: json.loads(subprocess.run(
            [sys.executable, "-m", "benchmarks.ingest", "--child", mode, str(root)],
            capture_output=True, text=True, check=True).stdout) for mode in ("validate", "read")}
    val, rd = res["validate"], res["read"]
    return {"rows": int(rows), "write_s": write_s, "validate_s": val["s"],
            "rows_per_s": rows / val["s"], "peak_rss_mb": val["peak_rss_mb"],
            "read_s": rd["s"], "read_peak_rss_mb": rd["peak_rss_mb"],
            "parquet_mb": size, "scenarios": val["scenarios"]}


def peak_mb():
    """This process's peak resident memory: ``VmHWM`` (its own address space;
    ``ru_maxrss`` would keep the high-water mark of the parent it was forked
    from), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(mode, root):
    """One timed step in this (fresh) process: ``validate`` (in batches) or ``read``."""
    base = peak_mb()
    t0 = time.perf_counter()
    if mode == "validate":
        report, summary = dataset.validate_stream(root)
        if report:
            raise SystemExit(report.text())
        scenarios = summary["scenarios"]
    else:
        scenarios = len(dataset.read(root).scenario_ids())
    s = time.perf_counter() - t0
    print(json.dumps({"s": s, "peak_rss_mb": peak_mb(), "base_rss_mb": base,
                      "scenarios": scenarios}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--per-body", type=int, default=500,
                    help="samples per body (the bodies are samples / per-body)")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    out = run(args.samples, args.per_body)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['rows']:,} samples in {out['scenarios']:,} scenarios "
          f"({out['parquet_mb']:.0f} MB Parquet, written in {out['write_s']:.1f} s)")
    print(f"  validate (in batches)  {out['validate_s']:.2f} s = {out['rows_per_s']:.3g} rows/s, "
          f"peak memory {out['peak_rss_mb']:.0f} MB")
    print(f"  read whole           {out['read_s']:.2f} s = {out['rows'] / out['read_s']:.3g} rows/s, "
          f"peak memory {out['read_peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()

"""Ingestion throughput: ``python -m benchmarks.ingest [--json] [--samples N]``.

Writes a dataset of N trajectory samples (default 10 million: 10,000
scenarios x 2 bodies x 500 samples, as Parquet) with vectorised NumPy and
dictionary-encoded ids, then times :func:`simcore.dataset.validate` on it:
the full read (column projection, casts, unit conversion), every contract
check and the summary (collision detection included), in a fresh process.
Prints rows per second and that process's peak resident memory.
JSON keys: ``rows``, ``validate_s``, ``rows_per_s``, ``peak_rss_mb``,
``parquet_mb``.
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

from simcore import dataset


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


def run(samples):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        rows = write_big(root, samples)
        write_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in root.iterdir()) / 1e6
        # Validate in a fresh process, so its peak memory is its own.
        child = subprocess.run([sys.executable, "-m", "benchmarks.ingest", "--validate-only",
                                str(root)], capture_output=True, text=True, check=True)
        res = json.loads(child.stdout)
    return {"rows": int(rows), "write_s": write_s, "validate_s": res["validate_s"],
            "rows_per_s": rows / res["validate_s"], "peak_rss_mb": res["peak_rss_mb"],
            "parquet_mb": size, "scenarios": res["scenarios"]}


def validate_only(root):
    t0 = time.perf_counter()
    _, report, summary = dataset.validate(root)
    validate_s = time.perf_counter() - t0
    if report:
        raise SystemExit(report.text())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"validate_s": validate_s, "peak_rss_mb": peak,
                      "scenarios": summary["scenarios"]}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--validate-only", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.validate_only:
        validate_only(args.validate_only)
        return
    out = run(args.samples)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['rows']:,} samples in {out['scenarios']:,} scenarios "
          f"({out['parquet_mb']:.0f} MB Parquet, written in {out['write_s']:.1f} s)")
    print(f"  read + validate  {out['validate_s']:.2f} s  = {out['rows_per_s']:.3g} rows/s")
    print(f"  peak memory      {out['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()

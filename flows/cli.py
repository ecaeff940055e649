"""The ``contactfit`` command line.

``contactfit simulate DATASET --params PARAMS.json --out DIR``
    Simulates every scenario of a dataset and writes
    ``DIR/trajectories.parquet`` (scenario_id, body_id, t, x, y, z, vx, vy, vz
    at the dataset's trajectory sample times), ``DIR/events.parquet`` and
    ``DIR/final.parquet``.  PARAMS.json is a flat JSON object of parameter
    names to numbers; missing names take the dataset's fixed values, then
    the defaults; an unknown name is an error.

``contactfit validate DATASET``
    Prints a summary of a valid dataset, or the grouped report of every
    violation (table, column, row, scenario); exit code 0 or 1.

``contactfit generate OUT [--scenarios N] [--seed S] [--noise-mm X] ...``
    Writes a synthetic dataset with known coefficients.

Bad input prints one line naming the file, parameter or field and exits 1;
it never shows a traceback.
"""

import argparse
import json
import sys
import time
from pathlib import Path


def _params(path, fixed):
    from simcore import params as P

    values = dict(fixed)
    if path:
        try:
            given = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read a JSON object ({exc})") from None
        if not isinstance(given, dict):
            raise ValueError(f"{path}: expected a flat JSON object of parameter names to numbers")
        for k, v in given.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"{path}: parameter {k} = {v!r}: expected a number")
        unknown = sorted(set(given) - set(P.NAMES))
        if unknown:
            raise ValueError(f"{path}: unknown parameter name(s) {unknown}; "
                             f"expected some of {list(P.NAMES)}")
        values.update(given)
    return P.vector(values)


def cmd_simulate(args):
    from simcore import dataset, replay
    from simcore import params as P

    t_start = time.perf_counter()
    ds = dataset.read(args.dataset)
    vec = _params(args.params, ds.fixed_params)
    tables = replay.simulate_dataset(ds, P.as_dict(vec), integrator=args.integrator)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        dataset.write_table(table, out / f"{name}.parquet")
    nscen = len(set(tables["final"]["scenario_id"]))
    print(f"simulated {nscen} scenarios ({len(tables['final']['body_id'])} bodies, "
          f"{len(tables['events']['t'])} events) in {time.perf_counter() - t_start:.2f} s "
          f"-> {out}/")
    return 0


def cmd_validate(args):
    from simcore import dataset

    _, report, summary = dataset.validate(args.dataset)
    if report:
        print(f"{args.dataset}: INVALID\n{report.text()}")
        return 1
    d = summary["duration_s"]
    lines = [f"{args.dataset}: valid",
             f"  scenarios   {summary['scenarios']}",
             f"  bodies      {summary['bodies']}",
             f"  samples     {summary['samples']}",
             f"  duration    {d['min']:.3g}-{d['max']:.3g} s per scenario, {d['total']:.4g} s in all",
             f"  sample rate {summary['sample_rate_hz']:.4g} Hz (median)",
             f"  walls {summary['walls']}, controls {summary['controls']}, events {summary['events']}"]
    if "collisions" in summary:
        c = summary["collisions"]
        lines.append(f"  collisions  {c['body-body']} body-body, {c['body-wall']} body-wall, "
                     f"{c['body-ground']} body-ground (events table)")
    if "collisions_detected" in summary:
        lines.append(f"  collisions  {summary['collisions_detected']} body-impacts detected from "
                     "velocity jumps (simcore/targets.py)")
    lines.append(f"  initial velocity {summary['initial_velocity']}")
    if args.time_offset:
        offsets = dataset.time_offsets(dataset.read(args.dataset))
        if not offsets:
            lines.append("  time offset: no collisions with body 0 to estimate it from")
        for b, (dt, n) in offsets.items():
            lines.append(f"  time offset of body {b} vs body 0: {dt * 1e3:+.2f} ms ({n} collisions)")
    print("\n".join(lines))
    return 0


def cmd_generate(args):
    from simcore import synth

    cfg = synth.GeneratorSettings(scenarios=args.scenarios, seed=args.seed,
                                  duration=args.duration, rate=args.rate,
                                  noise_mm=args.noise_mm, fmt=args.format)
    out = synth.generate(args.out, cfg)
    print(f"wrote {cfg.scenarios} scenarios to {out}/")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="contactfit", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="simulate a dataset's scenarios with given coefficients")
    sim.add_argument("dataset")
    sim.add_argument("--params", help="JSON object of parameter names to numbers")
    sim.add_argument("--out", required=True, help="output directory")
    sim.add_argument("--integrator", choices=["exact", "symplectic"], default="exact")
    sim.set_defaults(func=cmd_simulate)
    val = sub.add_parser("validate", help="check a dataset against the contract")
    val.add_argument("dataset")
    val.add_argument("--time-offset", action="store_true",
                     help="estimate a constant time offset of each body id's samples vs body 0")
    val.set_defaults(func=cmd_validate)
    gen = sub.add_parser("generate", help="write a synthetic dataset with known coefficients")
    gen.add_argument("out")
    gen.add_argument("--scenarios", type=int, default=40)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--duration", type=float, default=2.0)
    gen.add_argument("--rate", type=float, default=100.0, help="sample rate [Hz]")
    gen.add_argument("--noise-mm", type=float, default=1.0)
    gen.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    gen.set_defaults(func=cmd_generate)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"contactfit {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

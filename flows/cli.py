"""The ``contactfit`` command line.

``contactfit simulate DATASET --params PARAMS.json --out DIR``
    Simulates every scenario of a dataset and writes
    ``DIR/trajectories.parquet`` (scenario_id, body_id, t, x, y, z, vx, vy, vz
    at the dataset's trajectory sample times), ``DIR/events.parquet`` and
    ``DIR/final.parquet``.  PARAMS.json is a flat JSON object of parameter
    names to numbers, or a calibration's ``fit.json`` (its ``params``);
    missing names take the dataset's fixed values, then the defaults; an
    unknown name is an error.

``contactfit validate DATASET``
    Prints a summary of a valid dataset, or the grouped report of every
    violation (table, column, row, scenario); exit code 0 or 1.

``contactfit generate OUT [--shape sphere|box] [--scenarios N] [--seed S] [--noise-mm X] ...``
    Writes a synthetic dataset with known coefficients (``--materials``,
    ``--wall-material`` and ``--truth`` for per-material ones); ``--shape
    box``: cube tosses on a table (1.2 s at 148 Hz unless given, with
    ``--noise-deg`` on the orientations).

``contactfit params [DATASET]``
    Prints every coefficient (default, bounds, unit, meaning, what carries
    its signal); with a dataset, also its materials and the per-material
    names they allow (``mu_bb@A+B``, ``mu_s@MAT``, ...).

``contactfit calibrate DATASET [--config C.yaml] [--fit mu_k,mu_s,...]
[--method lm|gd|adam] [--out DIR] [--task-runner threads|dask]
[--dask-address tcp://HOST:PORT]``
    Runs the ``calibrate`` Prefect flow (MLflow run, registered model
    version) and writes ``DIR/fit.json``; prints progress for fits longer
    than a second, then the fitted coefficients.  Exit code 1 when the fit
    fails (``fit.json`` is written all the same, with ``converged: false``).

``contactfit recalibrate DATASET [same options]``
    Fits from the champion's coefficients and moves the ``champion`` alias
    only when the challenger wins on the data's test split.

``contactfit serve DATASET [--cron "0 3 * * *"] [--config C.yaml]``
    Serves the scheduled ``recalibrate`` deployment (flows/deploy.py).

``contactfit export FIT --to mujoco|drake|pooltool --out PATH [--dataset D] [--timestep S] [--match N]``
    Writes the fit (a ``fit.json`` or a ``models:/`` URI) in the target
    simulator's own terms (``simcore.export``): MuJoCo's MJCF, Drake's
    SDFormat, pooltool's parameters, with a dataset its scene; prints one
    line per coefficient the target can only approximate.  ``--match N``
    (MuJoCo, with a dataset): the contact matched in MuJoCo on contactfit's
    own trajectories of N training scenarios (``simcore.export.mujoco_match``).

``contactfit ui [--port P]``
    Starts the MLflow UI on 127.0.0.1 for the configured store.

Bad input prints one line naming the file, parameter or field and exits 1;
it never shows a traceback.
"""

import argparse
import contextlib
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

from flows import progress
from flows.server import VERBOSE_ENV


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
        if isinstance(given.get("params"), dict):
            given = given["params"]  # a calibration's fit.json: its fitted coefficients
        for k, v in given.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ValueError(f"{path}: parameter {k} = {v!r}: expected a number")
        for k in given:
            try:
                P.parse(k)
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
        values.update(given)
    return values


def _registered(uri):
    """``(params, laws, spin)`` of a registered model (``models:/NAME@ALIAS``
    or ``models:/NAME/VERSION``) in the configured registry (``spin`` None
    for models registered before the spinning model)."""
    import mlflow

    from flows import settings, store

    track = settings.tracking()
    mlflow.set_tracking_uri(store.store_uri(track.tracking_uri))
    mlflow.set_registry_uri(store.store_uri(track.registry_uri))
    try:
        config = mlflow.pyfunc.load_model(uri).model_config
    except mlflow.exceptions.MlflowException as exc:
        raise ValueError(f"{uri}: {exc.message} (registry {track.registry_uri})") from None
    return (dict(config["params"]), dict(config.get("laws") or {}) or None,
            (config.get("model") or {}).get("spin"))


def cmd_simulate(args):
    from dataclasses import replace

    from simcore.data import dataset, impacts, replay
    from simcore.laws import registry as contact_laws

    t_start = time.perf_counter()
    if impacts.is_impacts(args.dataset):
        return _simulate_impacts(args, t_start)
    ds = dataset.read(args.dataset)
    laws = spin = None
    if args.params and args.params.startswith("models:/"):
        given, laws, spin = _registered(args.params)
        values = dict(ds.fixed_params, **given)
    else:
        values = _params(args.params, ds.fixed_params)
    if spin is not None and bool(spin) != bool(ds.spin):
        raise ValueError(f"{args.params} was fitted under the {'spinning' if spin else 'sliding'} "
                         f"model; {args.dataset} uses the {'spinning' if ds.spin else 'sliding'} "
                         "one (dataset.yaml model: spin): calibrate this dataset, or simulate "
                         "one of that model")
    if laws is not None:
        fitted_under = contact_laws.resolve(laws, ds.spin)
        if fitted_under != ds.laws:
            differ = {k: (fitted_under.get(k), ds.laws.get(k)) for k in ds.laws
                      if fitted_under.get(k) != ds.laws.get(k)}
            raise ValueError(f"{args.params} was fitted under other contact laws than "
                             f"{args.dataset}'s: " + ", ".join(
                                 f"{k} {a} (fit) against {b} (dataset)"
                                 for k, (a, b) in differ.items()))
        ds = replace(ds, laws=fitted_under)
    ds.layout(values).vector(values)  # a bad name, material or value fails before compiling
    cold = _compile_notice("simulate", ds)
    notes = []
    try:
        tables = replay.simulate_dataset(ds, values, integrator=args.integrator, notes=notes,
                                         strict=args.strict)
    finally:
        progress.done()
    if cold:
        _compiled(cold)
    for line in notes:
        print(line)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        dataset.write_table(table, out / f"{name}.parquet")
    nscen = len(set(tables["final"]["scenario_id"]))
    print(f"simulated {nscen} scenarios ({len(tables['final']['body_id'])} bodies, "
          f"{len(tables['events']['t'])} events) in {time.perf_counter() - t_start:.2f} s "
          f"-> {out}/")
    return 0


def _simulate_impacts(args, t_start):
    """``simulate`` of a dataset of measured impacts: ``OUT/impacts.parquet``."""
    from simcore.data import impacts

    data = impacts.read(args.dataset)
    if args.params and args.params.startswith("models:/"):
        values, laws, _ = _registered(args.params)
        if laws:
            data.laws = dict(data.laws, **laws)
        values = dict(data.fixed_params, **values)
    else:
        values = _params(args.params, data.fixed_params)
    data.layout(values).vector(values)  # a bad name or value fails before compiling
    post = impacts.simulate(data, values)
    path = impacts.write_predictions(data, post, args.out)
    print(f"simulated {data.count} impacts ({int(data.cptr[-1])} contact points) under "
          f"{', '.join(sorted(set(data.laws.values())))} in "
          f"{time.perf_counter() - t_start:.2f} s -> {path}")
    return 0


def _validate_impacts(path):
    import numpy as np

    from simcore.data import impacts

    data, report = impacts.validate(path)
    if report:
        print(f"{path}: INVALID\n{report.text()}")
        return 1
    counts = np.diff(data.cptr)
    print("\n".join([
        f"{path}: valid (measured impacts)",
        f"  events      {data.count} ({int(data.flagged.sum())} flagged, "
        f"{int(np.isfinite(data.post).all(axis=1).sum())} with a post-impact state)",
        f"  contacts    {int(data.cptr[-1])} ({counts.min()}-{counts.max()} per event)",
        f"  laws        {', '.join(f'{k}: {v}' for k, v in data.laws.items())}",
        f"  pyramid     {data.edges} edges"]))
    return 0


def _fit_source(text):
    """A fit to export: a calibration's ``fit.json`` (or a flat JSON object of
    coefficients) or a registered model URI, as :class:`simcore.export.Fitted`."""
    from simcore.export import Fitted

    if text.startswith("models:/"):
        given, laws, spin = _registered(text)
        return Fitted.from_doc({"params": given, "laws": laws, "model": {"spin": bool(spin)}},
                               text)
    try:
        doc = json.loads(Path(text).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{text}: cannot read a fit's JSON ({exc})") from None
    return Fitted.from_doc(doc, text)


def cmd_export(args):
    from simcore import export
    from simcore.data import dataset

    fitted = _fit_source(args.fit)
    scene = None
    if args.dataset:
        ds = dataset.read(args.dataset)
        scene = export.Scene.from_dataset(ds, fitted)
    text, notes = export.write(fitted, args.to, scene, args.timestep)
    if args.match:
        text, line = _matched(text, fitted, ds if args.dataset else None, scene, args)
        notes = (*notes, line)
    out = Path(args.out)
    if out.is_dir() or args.out.endswith(("/", "\\")):
        out = out / f"contactfit{export.TARGETS[args.to][1]}"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")  # never a half-written file at OUT
    partial.write_text(text)
    partial.replace(out)
    what = f"the scene of {scene.name} (scenario {scene.scenario})" if scene else "default classes"
    print(f"wrote {out}: {args.to}, {what}")
    for line in notes:
        print(f"  approximated: {line}")
    return 0


def _matched(xml, fitted, ds, scene, args):
    """``export --match N``: the MJCF ``xml`` with its body-ground contact
    matched on contactfit's trajectories of the dataset's first ``N``
    training scenarios (:mod:`simcore.export.mujoco_match`), and its line."""
    from simcore import params as P
    from simcore.data import dataset
    from simcore.export import mujoco, mujoco_match
    from simcore.identify.problem import Problem

    if args.to != "mujoco" or ds is None:
        raise ValueError("--match: give --to mujoco and --dataset (the scenes it matches on)")
    if args.match < 1:
        raise ValueError(f"--match {args.match}: expected a number of scenarios >= 1")
    try:
        import mujoco as _  # noqa: F401
    except ImportError:
        raise ValueError("--match runs MuJoCo, which is not installed: pip install "
                         "'contactfit[export]'") from None
    split = dataset.split(ds)
    ids = sorted(s for s, v in split.items() if v == "train") or sorted(split)
    names = [k for k in fitted.params if "@" in k or P.BY_NAME[P.base(k)].named]
    problem = Problem.from_dataset(ds, order=ids[:args.match], coefficients=names)
    layout = problem.model.layout
    theta = layout.vector({k: v for k, v in fitted.params.items() if k in layout.names})
    mujoco_match.check(problem, scene)
    h = mujoco.TIMESTEP if args.timestep is None else args.timestep
    return mujoco_match.match(xml, problem, theta, h)


def cmd_validate(args):
    from simcore.data import dataset, impacts

    if impacts.is_impacts(args.dataset):
        return _validate_impacts(args.dataset)

    # In batches: a dataset of any length is checked in bounded memory.
    report, summary = dataset.validate_stream(args.dataset)
    if report:
        print(f"{args.dataset}: INVALID\n{report.text()}")
        return 1
    d = summary["duration_s"]
    lines = [f"{args.dataset}: valid",
             f"  scenarios   {summary['scenarios']}",
             f"  bodies      {summary['bodies']}",
             f"  samples     {summary['samples']}",
             f"  duration    {d['min']:.3g}-{d['max']:.3g} s per scenario, {d['total']:.4g} s in all",
             f"  sample rate {summary['sample_rate_hz']:.4g} Hz (median over bodies)",
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


def cmd_params(args):
    from rich.console import Console
    from rich.table import Table

    from simcore import params as P
    from simcore.data import dataset
    from simcore.laws import registry as contact_laws

    table = Table(title="coefficients", title_justify="left")
    for col in ("name", "default", "bounds", "unit", "per material", "law", "meaning",
                "signal from"):
        table.add_column(col, overflow="fold")
    address = {"ground": "NAME@MAT", "wall": "NAME@MAT, NAME@A+B", "body": "NAME@A+B",
               "any": "NAME@MAT, NAME@A+B", "mass": "NAME@MAT", "global": "-"}
    for p in P.REGISTRY:
        default = f"= {P.DEFAULT_FROM[p.name]}" if p.name in P.DEFAULT_FROM else f"{p.default:g}"
        table.add_row(p.name, default, f"[{p.bounds[0]:g}, {p.bounds[1]:g}]", p.unit,
                      address[p.contact], p.law or ("spin model" if p.model else
                                                   "rigid bodies" if p.named else "all"),
                      p.meaning, p.signal)
    console = Console(width=max(120, Console().width))
    console.print(table)
    laws = Table(title="contact laws (dataset.yaml laws: {KIND: NAME})", title_justify="left")
    for col in ("name", "kinds", "meaning", "source"):
        laws.add_column(col, overflow="fold")
    for law in contact_laws.REGISTRY:
        laws.add_row(law.name, ", ".join(law.kinds), law.meaning, law.source)
    console.print(laws)
    if args.dataset and _impacts(args.dataset):
        from simcore.data import impacts

        data = impacts.read(args.dataset)
        layout = data.layout()
        values = layout.as_dict(layout.vector(data.fixed_params))
        console.print(f"{data.name}: measured impacts, laws "
                      + ", ".join(f"{k} {data.laws[k]}" for k in ("body_ground", "body_wall"))
                      + f"; its contacts read {', '.join(data.read_coefficients())} (now "
                      + ", ".join(f"{n} = {values[n]:g}" for n in data.read_coefficients())
                      + ")")
        return 0
    if args.dataset:
        ds = dataset.read(args.dataset)
        console.print(f"{ds.name}: laws " + ", ".join(f"{k} {v}" for k, v in ds.laws.items())
                      + (", spinning model" if ds.spin else ""))
        layout = ds.layout()
        values = layout.as_dict(layout.vector(ds.fixed_params))
        mine = Table(title=f"{ds.name}: its coefficients (dataset.yaml params, else defaults)",
                     title_justify="left")
        for col in ("name", "value", "unit"):
            mine.add_column(col)
        for name, value in values.items():
            mine.add_row(name, f"{value:g}", P.unit(name, values))
        console.print(mine)
        mats = ds.materials
        if not mats:
            console.print(f"{ds.name}: no materials (every contact takes the plain names)")
            return 0
        pairs = [f"{a}+{b}" for i, a in enumerate(mats) for b in mats[i:]]
        console.print(f"{ds.name}: materials {', '.join(mats)}\n"
                      f"  ground, wall without material: NAME@MAT with MAT in {', '.join(mats)}\n"
                      f"  body-body, body-wall: NAME@A+B with A+B in {', '.join(pairs)}")
    return 0


def _impacts(path):
    from simcore.data import impacts

    return impacts.is_impacts(path)


def _laws(items):
    """``{kind: law}`` of ``--law KIND=NAME`` options (checked by the model)."""
    out = {}
    for item in items or ():
        kind, eq, name = item.partition("=")
        if not eq:
            raise ValueError(f"--law {item!r}: expected KIND=NAME, e.g. "
                             "body_body=frictional_inelastic")
        out[kind.strip()] = name.strip()
    return out


def cmd_generate(args):
    from simcore.data import synth

    if args.shape == "impacts":
        return _generate_impacts(args)
    box = args.shape == "box"
    if box and (args.materials or args.wall_material):
        raise ValueError("--materials and --wall-material are for the sphere scenes "
                         "(the box tosses have one cube on a table)")
    cfg = synth.GeneratorSettings(scenarios=args.scenarios, seed=args.seed,
                                  duration=args.duration or (1.2 if box else 2.0),
                                  rate=args.rate or (148.0 if box else 100.0),
                                  noise_mm=args.noise_mm, fmt=args.format,
                                  materials=[m for m in (args.materials or "").split(",") if m],
                                  wall_material=args.wall_material or "",
                                  laws=_laws(args.law), shape=args.shape,
                                  noise_deg=args.noise_deg)
    truth = (_params(args.truth, synth.TRUTH_BOX if box else synth.TRUTH) if args.truth
             else None)
    out = synth.generate(args.out, cfg, truth, name=args.name or Path(args.out).name)
    print(f"wrote {cfg.scenarios} scenarios to {out}/")
    return 0


def _generate_impacts(args):
    """``generate --shape impacts``: measured-impact data with known
    coefficients (:func:`simcore.data.impacts.generate`)."""
    from simcore.data import impacts

    laws = _laws(args.law) or {}
    unknown = set(laws) - {"body_ground"}
    if unknown:
        raise ValueError(f"--law {sorted(unknown)[0]}: the generated impacts strike the ground; "
                         "name a law for body_ground")
    from simcore.laws import registry as contact_laws

    contact_laws.resolve(laws, impacts=True)  # a law that is no impact map: one line, now
    if not (args.noise_mps >= 0 and args.scenarios >= 1):
        raise ValueError("--noise-mps must be >= 0 and --scenarios >= 1")
    truth = _params(args.truth, {}) if args.truth else None
    out = impacts.generate(args.out, args.scenarios, truth,
                           law=laws.get("body_ground", "poisson_lcp"),
                           noise=args.noise_mps, seed=args.seed,
                           name=args.name or Path(args.out).name)
    print(f"wrote {args.scenarios} impacts to {out}/")
    return 0


def cmd_import(args):
    from dataclasses import replace

    from simcore.data import importers

    if args.format == "fazeli-square":
        given = None if args.tracker_turn is None else math.radians(args.tracker_turn)
        out, turn = importers.square_drops(args.src, args.out, test_share=_share(args, 0.2),
                                           turn=given)
        print(f"wrote {out}/: the tracker's angle, turned {math.degrees(turn):+.2f} degrees "
              f"against the square's faces{' at rest' if given is None else ' (given)'}, "
              "taken off")
        return 0
    if args.format == "fazeli-ellipse":
        from simcore.data import impacts

        out = impacts.fazeli_ellipse(args.src, args.out, test_share=_share(args, 0.25))
        data = impacts.read(out)
        print(f"wrote {out}/: {data.count} impacts, {int(data.flagged.sum())} flagged upstream "
              "(a calibration leaves them out unless use_flagged: true)")
        return 0

    model = importers.TossModel.like(args.like) if args.like else importers.TossModel()
    given = {k: v for k, v in (("gravity", args.gravity), ("ground_z", args.ground_z),
                               ("com", _com(args.com))) if v is not None}
    model = replace(model, **given)
    out = importers.cube_tosses(args.src, args.out, duplicates=args.duplicates,
                                test_share=_share(args, importers.TEST_SHARE), model=model)
    print(f"wrote {out}/")
    gravity = importers.TossModel.like(out).gravity
    try:
        g, tosses = importers.imported_flight_gravity(out)
    except ValueError:  # no toss flies long enough to tell
        print(f"no toss flies long enough to measure its free fall; the model's gravity: "
              f"{gravity} m/s^2 (dataset.yaml)")
        return 0
    print(f"free fall in the recorded poses: {g:.3f} m/s^2 ({tosses} tosses); the model's "
          f"gravity: {gravity} m/s^2 (dataset.yaml)")
    if abs(g - gravity) > importers.FLIGHT_MISMATCH:
        print(f"  these tosses fall otherwise than the model: set gravity in {out}/dataset.yaml "
              "to their free fall, or import without --gravity to measure it")
    return 0


def _share(args, default):
    """``--test-share``, or the format's default."""
    return default if args.test_share is None else args.test_share


def _com(text):
    """``--com X,Y,Z`` [m] as a tuple (None: not given)."""
    if text is None:
        return None
    try:
        com = tuple(float(v) for v in text.split(","))
    except ValueError:
        com = ()
    if len(com) != 3:
        raise ValueError(f"--com {text}: expected three numbers X,Y,Z in metres")
    return com


def _fit_config(args):
    """The calibration config (:class:`flows.settings.CalibrationConfig`) of
    ``--config`` and the command-line options, checked."""
    from flows import settings

    overrides = {"method": args.method, "task_runner": args.task_runner,
                 "integrator": args.integrator,
                 "dask_address": args.dask_address,
                 "fit": [n.strip() for n in args.fit.split(",") if n.strip()] if args.fit
                 else None}
    return settings.calibration(args.config, **overrides)


def _print_fit(doc, written):
    """The fit's verdict, its coefficients as a table (rich, which ships with
    Prefect), its scores and the files ``written`` (:func:`_artifacts`)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from flows import report

    # a pipe or a log file gets a table as wide as its rows, not 80 columns
    console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
    console.print(f"{doc['status']}: {doc['message']}", markup=False)
    console.print(f"strategy: {doc['strategy']}", markup=False)
    if doc.get("integrator"):
        console.print(doc["integrator"], markup=False)
    if doc.get("interval"):
        console.print(f"intervals: {doc['interval']}", markup=False)
    clustered = bool(doc.get("stderr_cluster"))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    table.add_column("coefficient")
    table.add_column("value", justify="right")
    table.add_column("stderr", justify="right")
    table.add_column("95 % interval")
    if clustered:
        table.add_column("stderr, clustered by scenario", justify="right")
    spread = doc.get("spread")
    if spread:
        table.add_column(f"range over {spread['finite']} starts")
    for n, v in doc["params"].items():
        if n not in doc["free"]:
            row = [n, f"{v:.6g}", "", "fixed"]
        elif not doc["identifiability"][n]["identifiable"]:
            row = [n, f"{v:.6g}", "", "not identifiable: held at its start"]
        else:
            val, se, ci = report.estimate(doc, n)
            row = [n, val, se, ci]
        if clustered:
            cl = doc["stderr_cluster"].get(n)
            row.append(f"{cl:.2g}" if cl is not None else "")
        if spread:
            got = spread["params"].get(n)
            row.append(f"[{got['min']:.6g}, {got['max']:.6g}]" if got else "")
        table.add_row(*row)
    console.print(table)
    lines = []
    corr = ", ".join(f"{c['a']}~{c['b']} {c['r']:+.2f}" for c in doc.get("correlations", []))
    if corr:
        lines.append(f"correlated estimates (|r| >= {report.CORRELATION_MIN}): {corr}")
    if spread:
        lines.append(f"multi-start: {spread['agree']} of {spread['starts']} starts reach the best "
                     f"loss, {spread['starts'] - spread['finite']} could not be simulated")
    scores = doc.get("scores", {})
    test = f", {scores['test_loss']:.4e} (test)" if "test_loss" in scores else ""
    lines.append(f"loss {doc['loss']:.4e} (train){test}, a mean squared residual per term")
    if "train_rms_m" in scores:
        noise = doc.get("noise_m")
        test = (f", {scores['test_rms_m'] * 1e3:.3g} mm (test)" if "test_rms_m" in scores
                else "")
        lines.append(f"rms position error {scores['train_rms_m'] * 1e3:.3g} mm (train){test}; "
                     f"{report.against_noise(scores['train_rms_m'], noise)}")
    if "train_fazeli_median" in scores:
        test = (f"; test {scores['test_fazeli_median']:.3f}, {scores['test_fazeli_mean']:.3f}"
                if "test_fazeli_median" in scores else "")
        lines.append(f"post-impact velocity error |v*+ - v+| / |v*+| (Fazeli et al.), median and "
                     f"mean: train {scores['train_fazeli_median']:.3f}, "
                     f"{scores['train_fazeli_mean']:.3f}{test}; rms residual "
                     f"{scores['train_rms_mps']:.4g} m/s ({doc.get('verdict', '')})")
    version = (f"registered as {doc['model_uri']} (champion: {doc['champion_uri']})"
               if doc.get("model_uri") else f"model version {doc['model_version']}")
    lines.append(f"{doc['iterations']} iterations; MLflow run {doc['mlflow_run_id']}, {version}")
    if "decision" in doc:
        lines.append(f"champion: {doc['decision']}")
    lines.append(f"wrote {', '.join(map(str, written))}; see the runs with: contactfit ui")
    console.print("\n".join(lines), markup=False)


#: The signals that end a flow as Ctrl-C does: Ctrl-C, SIGTERM, and the
#: hang-up of a terminal closed mid-fit.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: Set once an interrupt ends the run: the server watch then stays silent
#: (the handler stops the server itself and exits with the signal's code).
_ENDING = threading.Event()


def _interrupted(signum, frame):
    """Ctrl-C, SIGTERM or a hang-up during a flow: mark the open MLflow runs FAILED (and
    undo a registration not yet finished), stop the temporary Prefect server
    this process started, and exit at once: waiting for Prefect to report the
    flow's end to a server the same Ctrl-C has killed would take minutes."""
    from flows import server, tracking

    # Inside an MLflow call the main thread may hold the store's write lock:
    # mark the runs once that call has returned (it is one statement away).
    if tracking.deferred(lambda: _interrupted(signum, frame)):
        return
    name = signal.Signals(signum).name
    _ENDING.set()  # the server this handler stops is not "lost" (_server_lost)
    with contextlib.suppress(Exception):  # (the terminal's cursor back)
        progress.done()
    tracking.abandon(f"interrupted by {name}")
    with contextlib.suppress(Exception):
        server.stop_temporary_server()
    with contextlib.suppress(OSError):  # a hung-up terminal takes no more lines
        print(f"contactfit: {name}: the run is marked FAILED, nothing registered",
              file=sys.stderr, flush=True)
    os._exit(128 + signum)


def _server_lost():
    """The Prefect server stopped during a flow: mark the open MLflow runs
    FAILED (undoing a registration not yet finished) and exit at once,
    rather than wait minutes for Prefect's client to give up on it."""
    from flows import server, tracking

    if _ENDING.is_set():  # an interrupt is ending the run and stopped the server itself
        return
    with contextlib.suppress(Exception):
        progress.done()
    tracking.abandon("the Prefect server stopped during the run")
    with contextlib.suppress(Exception):
        server.stop_temporary_server()
    print("contactfit: error: the Prefect server stopped during the run; the run is marked "
          "FAILED, nothing registered", file=sys.stderr, flush=True)
    os._exit(1)


def _run_flow(args, which):
    from flows import settings
    from simcore.data import dataset as D
    from simcore.data import impacts as measured_impacts

    cfg = _fit_config(args)
    config = cfg.as_dict()
    print(f"reading and checking {args.dataset} ...", flush=True)
    # A bad dataset, or a config that does not fit it, is reported before any
    # flow starts, and before Prefect and MLflow are even imported (seconds).
    impacts_data = measured_impacts.is_impacts(args.dataset)
    if impacts_data:
        if which != "calibrate":
            raise ValueError(f"{args.dataset}: {which} reads trajectories; a dataset of "
                             "measured impacts is fitted by contactfit calibrate")
        measured_impacts.read(args.dataset)
    else:
        ds = D.read(args.dataset)  # (no collision-detection pass)
        settings.check_against(cfg, ds, str(args.config) if args.config else "options")
    from flows import pipeline, report, server, tracking

    # A bad mlflow.yml or environment, or a store locked elsewhere, is named
    # before any flow starts (and stale runs on the store are reaped here).
    c, _ = tracking.client(settings.tracking())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    flow_fn = pipeline.calibrate if which == "calibrate" else pipeline.recalibrate
    if impacts_data:
        from flows import impacts

        flow_fn = impacts.calibrate
    else:
        pipeline.preload(args.dataset, ds)  # the flow's load reuses it
    cold = _compile_notice(which, None if impacts_data else ds)
    try:
        with server.kept_signals({s: _interrupted for s in INTERRUPTS}):
            try:
                doc = pipeline.run(flow_fn, args.dataset, config, on_server_lost=_server_lost)
            finally:
                progress.done()
    except pipeline.CalibrationFailed as exc:
        (out / "fit.json").write_text(report.dumps(exc.doc))
        wrote = ", ".join(map(str, _artifacts(c, exc.doc, out)))
        print(f"contactfit {which}: fit failed, run {exc.doc['mlflow_run_id']} marked FAILED, "
              f"nothing registered: {exc}\nwrote {wrote}", file=sys.stderr)
        return 1
    except tracking.StoreLost as exc:
        print(f"contactfit {which}: error: {exc}", file=sys.stderr)
        return 1
    if cold:
        _compiled(cold)
    (out / "fit.json").write_text(report.dumps(doc))
    _print_fit(doc, _artifacts(c, doc, out))
    return 0


#: The run's artifacts a calibration copies beside its fit.json.
OUT_ARTIFACTS = ("report.html", "convergence.png", "overlays.png", "residuals.parquet")


def _artifacts(c, doc, out):
    """Copy the report, plots and residual table of the run ``doc`` names
    from the MLflow store (client ``c``) into ``out``, beside its
    ``fit.json``; the paths of ``out`` the calibration wrote, ``fit.json``
    first (the run may have no others: impacts have no plots)."""
    written = [Path(out) / "fit.json"]
    run_id = doc.get("mlflow_run_id")
    if not run_id:
        return written
    have = {a.path for a in c.list_artifacts(run_id)}
    for name in OUT_ARTIFACTS:
        if name in have:
            written.append(Path(c.download_artifacts(run_id, name, str(out))))
    return written


def cmd_calibrate(args):
    return _run_flow(args, "calibrate")


def cmd_recalibrate(args):
    return _run_flow(args, "recalibrate")


def cmd_ui(args):
    import subprocess

    from flows import settings, tracking

    track = settings.tracking()
    # The experiment exists before the UI starts (and a new store is made
    # once, here): its runs view is the page to open, not MLflow's start page.
    _, exp_id = tracking.client(track)
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", track.tracking_uri,
           "--registry-store-uri", track.registry_uri, "--host", "127.0.0.1",
           "--port", str(args.port), "--workers", "1"]
    # (quiet: no deprecation warnings of the server's own dependencies)
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false", PYTHONWARNINGS="ignore")
    print(f"starting the MLflow UI for {track.tracking_uri} ...", flush=True)
    proc = subprocess.Popen(cmd, env=env)
    try:
        # The URL once the server answers: printed at once it would open on
        # an error page for the half minute MLflow takes to start.
        if _answers(f"http://127.0.0.1:{args.port}/health", proc):
            print(f"MLflow UI: the runs of experiment {track.experiment!r} at "
                  f"http://127.0.0.1:{args.port}/#/experiments/{exp_id}/runs (Ctrl-C stops)",
                  flush=True)
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        with contextlib.suppress(Exception):
            proc.wait(timeout=10)
        return 0


def _answers(url, proc, timeout_s=180.0):
    """Whether the server at ``url`` answers before ``proc`` exits or
    ``timeout_s`` passes (polled every quarter second)."""
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            urllib.request.urlopen(url, timeout=2)
            return True
        time.sleep(0.25)
    return False


def cmd_serve(args):
    from prefect.settings import PREFECT_API_URL

    from flows import deploy, settings

    if not PREFECT_API_URL.value():
        # On the temporary server a bare flow run starts, cron never fires.
        print("contactfit serve: error: no Prefect server is configured, and schedules never "
              "fire without one; start one with `prefect server start`, then run\n"
              f"  PREFECT_API_URL=http://127.0.0.1:4200/api contactfit serve {args.dataset} "
              f"--cron \"{args.cron}\"", file=sys.stderr)
        return 1
    config = settings.calibration(args.config).as_dict() if args.config else None
    print(f"serving deployment contactfit-recalibrate/{deploy.NAME} on cron '{args.cron}' "
          f"for {args.dataset} (needs `prefect server start`; Ctrl-C pauses it)")
    deploy.serve(str(Path(args.dataset).resolve()), args.cron, config)
    return 0


def build_parser():
    from simcore.sliding.integrate import INTEGRATORS

    parser = argparse.ArgumentParser(prog="contactfit", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="simulate a dataset's scenarios with given coefficients")
    sim.add_argument("dataset")
    sim.add_argument("--params", help="coefficients: a JSON object of names to numbers, a "
                                      "calibration's fit.json, or a registered model "
                                      "(models:/NAME@champion, models:/NAME/VERSION)")
    sim.add_argument("--out", required=True, help="output directory")
    sim.add_argument("--integrator", choices=list(INTEGRATORS),
                     help="default: dataset.yaml's model.integrator, else the one the "
                          "events' density chooses (docs/ARCHITECTURE.md)")
    sim.add_argument("--strict", action="store_true",
                     help="time-stepper (boxes, penalty laws): refuse a dt over the contacts' "
                          "stable step instead of sub-stepping")
    sim.set_defaults(func=cmd_simulate)
    exp = sub.add_parser("export", help="write a fit in another simulator's terms")
    from simcore.export import TARGETS

    exp.add_argument("fit", help="a calibration's fit.json, or a registered model "
                                 "(models:/NAME@champion, models:/NAME/VERSION)")
    exp.add_argument("--to", required=True, choices=list(TARGETS), help="the target simulator")
    exp.add_argument("--out", required=True, help="the file to write (or a directory)")
    exp.add_argument("--dataset", help="also write this dataset's scene: its bodies (with the "
                                       "fit's centre of mass and inertia), walls, ground and "
                                       "free fall")
    exp.add_argument("--timestep", type=float,
                     help="the target's timestep [s] the contacts are matched at (MuJoCo: "
                          "default 0.002)")
    exp.add_argument("--match", type=int, default=0, metavar="N",
                     help="MuJoCo with --dataset: match the contact on contactfit's own "
                          "trajectories of the dataset's first N training scenarios (runs "
                          "MuJoCo; needs the export extra)")
    exp.set_defaults(func=cmd_export)
    val = sub.add_parser("validate", help="check a dataset against the contract")
    val.add_argument("dataset")
    val.add_argument("--time-offset", action="store_true",
                     help="estimate a constant time offset of each body id's samples vs body 0")
    val.set_defaults(func=cmd_validate)
    par = sub.add_parser("params", help="list the coefficients (and a dataset's materials)")
    par.add_argument("dataset", nargs="?")
    par.set_defaults(func=cmd_params)
    imp = sub.add_parser("import", help="write measured data of another format as a dataset")
    imp.add_argument("format", choices=["cube-toss", "fazeli-ellipse", "fazeli-square"],
                     help="cube-toss: the ContactNets long table (toss_id, step, t, x, y, z, "
                          "qw..qz, vx..vz, wx..wz in the body frame); fazeli-ellipse: planar "
                          "impacts of the ellipse_impacts.parquet format (Fazeli et al.) as a "
                          "dataset of measured impacts; fazeli-square: planar drops of the "
                          "square_drops.parquet format as box trajectories")
    imp.add_argument("src")
    imp.add_argument("out")
    imp.add_argument("--duplicates", help="CSV of toss_a, toss_b pairs recorded twice (kept "
                                          "on one side of the split)")
    imp.add_argument("--test-share", type=float, default=None,
                     help="share of the toss groups (cube-toss, default 0.2), drops "
                          "(fazeli-square, 0.2) or events (fazeli-ellipse, 0.25) in the test "
                          "split")
    imp.add_argument("--like", metavar="DATASET",
                     help="take the model (gravity, table, cube, centre of mass, step, laws) "
                          "from an imported dataset, e.g. datasets/cube-toss for held-out tosses")
    imp.add_argument("--gravity", type=float,
                     help="the recording's free fall [m/s^2] (default: measured from the "
                          "tosses' flights)")
    imp.add_argument("--ground-z", type=float, help="the table's height [m] (default 0)")
    imp.add_argument("--tracker-turn", type=float, metavar="DEG",
                     help="fazeli-square: the tracker's angle minus the square's [degrees], "
                          "taken off every angle (default: measured from the drops at rest; "
                          "0 keeps the angles as recorded)")
    imp.add_argument("--com", metavar="X,Y,Z",
                     help="the cube's centre of mass from its centre, body frame [m] "
                          "(default 0,0,0)")
    imp.set_defaults(func=cmd_import)
    gen = sub.add_parser("generate", help="write a synthetic dataset with known coefficients")
    gen.add_argument("out")
    gen.add_argument("--scenarios", type=int, default=40)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--shape", choices=["sphere", "box", "impacts"], default="sphere",
                     help="sphere: table scenes with pushes and walls; box: cube tosses; "
                          "impacts: measured-impact data of planar boxes striking the ground "
                          "(--scenarios events, --law body_ground=L, --noise-mps)")
    gen.add_argument("--duration", type=float,
                     help="seconds per scenario (default 2.0; boxes 1.2)")
    gen.add_argument("--rate", type=float, help="sample rate [Hz] (default 100; boxes 148)")
    gen.add_argument("--noise-mm", type=float, default=1.0)
    gen.add_argument("--noise-deg", type=float, default=0.5,
                     help="orientation noise of the box tosses [degrees per axis]")
    gen.add_argument("--noise-mps", type=float, default=0.02,
                     help="velocity noise of the generated impacts [m/s]")
    gen.add_argument("--format", choices=["parquet", "csv"], default="parquet")
    gen.add_argument("--name", help="the dataset's name (default: the output directory's)")
    gen.add_argument("--materials", help="comma-separated body materials, drawn per body")
    gen.add_argument("--wall-material", help="the walls' material (default: none)")
    gen.add_argument("--law", action="append", metavar="KIND=NAME",
                     help="a contact law per kind (body_ground, body_body, body_wall), "
                          "e.g. body_body=frictional_inelastic; repeatable")
    gen.add_argument("--truth", help="JSON object of true coefficients (per-material names "
                                     "such as mu_bb@resin+rubber too); the rest: the defaults "
                                     "of the generator")
    gen.set_defaults(func=cmd_generate)
    for name, func, text in (("calibrate", cmd_calibrate, "fit the coefficients (Prefect flow, "
                              "MLflow run, registered model version)"),
                             ("recalibrate", cmd_recalibrate, "fit from the champion and "
                              "promote the challenger if it wins on the test split")):
        cal = sub.add_parser(name, help=text)
        cal.add_argument("dataset")
        cal.add_argument("--config", help="calibration options (YAML; flows/settings.py)")
        cal.add_argument("--fit", help="comma-separated coefficients to fit "
                         "(default: all not fixed by the dataset)")
        cal.add_argument("--method", choices=["lm", "gd", "adam"])
        cal.add_argument("--integrator", choices=list(INTEGRATORS),
                         help="default: dataset.yaml's model.integrator, else the one the "
                              "events' density chooses (docs/ARCHITECTURE.md)")
        cal.add_argument("--out", default="calibration", help="directory of fit.json, report.html, the plots and residuals.parquet")
        cal.add_argument("--task-runner", choices=["threads", "dask"])
        cal.add_argument("--dask-address", help="scheduler address (default: a local cluster)")
        cal.set_defaults(func=func)
    srv = sub.add_parser("serve", help="run the scheduled recalibration deployment")
    srv.add_argument("dataset")
    srv.add_argument("--cron", default="0 3 * * *", help="schedule (default: daily 03:00 UTC)")
    srv.add_argument("--config", help="calibration options (YAML)")
    srv.set_defaults(func=cmd_serve)
    ui = sub.add_parser("ui", help="start the MLflow UI on 127.0.0.1")
    ui.add_argument("--port", type=int, default=5000)
    ui.set_defaults(func=cmd_ui)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="more lines: every task run, MLflow's store, Dask's cluster")
    for command in sub.choices.values():  # (also after the command: contactfit calibrate ... -v)
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                             help="more lines: every task run, MLflow's store, Dask's cluster")
    return parser


#: Seconds the first run of a command spends compiling the kernels with an
#: empty numba cache on 2 cores (docs/PERFORMANCE.md, "Cold start").
COMPILE_S = {"simulate": 55, "calibrate": 70, "recalibrate": 70}


def _kernels(command, ds=None):
    """The compile marker of a command's kernels: a recalibration runs a
    calibration's, and each engine (the sliding, spinning and rigid-body
    ones) has kernels of its own, so the marker names the dataset's."""
    base = "calibrate" if command == "recalibrate" else command
    if ds is None:
        return base
    boxes = "shape" in ds.tables["bodies"].column_names and "box" in set(
        ds.tables["bodies"].column("shape").to_pylist())
    return f"{base}-{'rigid' if boxes else 'spin' if ds.spin else 'sliding'}"


def _compile_notice(command, ds=None):
    """Say so before a command's first run on this engine compiles its
    kernels (once its input was read and checked); returns the marker to
    pass :func:`_compiled` once the run succeeded, or None when they are
    cached."""
    from simcore.kernel import config

    marker = _kernels(command, ds)
    engine = " ".join(filter(None, ("the", marker.partition("-")[2], "engine")))
    then = "and simulating" if command == "simulate" else "and starting the fit"
    if command not in COMPILE_S or config.compiled(marker):
        progress.waiting("simulating" if command == "simulate" else
                         "starting the fit (its first evaluations)")
        return None
    text = f"compiling {engine}, first run only, about {COMPILE_S[command]} s"
    if progress.live():
        progress.waiting(f"{text}, {then}")
    else:
        print(text, flush=True)
    return marker


def _compiled(marker):
    from simcore.kernel import config

    config.mark_compiled(marker)


#: Loggers that speak at INFO on every run and are quiet unless ``-v``:
#: MLflow's store creating or migrating its tables, and alembic's migrations.
CHATTY = ("mlflow.store.db.utils", "alembic")


def main(argv=None):
    # No internet here: Prefect's local server would log a telemetry error at
    # each start, and its client prints a telemetry notice on a terminal.
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    args = build_parser().parse_args(argv)
    if args.verbose:
        os.environ[VERBOSE_ENV] = "1"  # (read by flows.server.run_settings, Dask's workers too)
    else:
        for name in CHATTY:
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return args.func(args)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"contactfit {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

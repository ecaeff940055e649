"""Exports verified in the target engines: the real cube's held-out tosses
re-simulated in MuJoCo and in Drake from exported files, scored as
contactfit's own prediction is; the billiards shots re-simulated in
pooltool.

``python -m benchmarks.export [--json] [--params fit.json] [--timesteps S ...]
[--match N] [--no-drake] [--pooltool-python PY [--billiards-params fit.json]]``: reads
``datasets/cube-toss``, takes the coefficients of ``--params`` (a
calibration's ``fit.json``; default: fits them on the training tosses as
``benchmarks.cube_toss`` does, a few minutes), exports them with the
dataset's scene, and simulates every held-out toss in the target from the
same start contactfit's prediction takes (sample 0's state), open-loop to
its last sample.  Printed: contactfit's own figures (``contactfit_*``, those
of ``benchmarks.cube_toss``); per MuJoCo timestep ``dt_<ms>ms``:
``mujoco_pos_cm``, ``mujoco_rot_deg``, ``mujoco_e_q``,
``mujoco_right_face``, their ratios to contactfit's (``ratio_pos``,
``ratio_rot``) and ``mujoco_s`` (MuJoCo's wall time); with ``--match N``,
``dt_<ms>ms_matched`` the same for the export whose contact is matched on
contactfit's trajectories of the first N training tosses (``contactfit
export --match N``, :mod:`simcore.export.mujoco_match`; ``match_s`` its
wall time); under ``drake`` the
same for Drake (point contact, TAMSI at :data:`DRAKE_STEP`); and the models
the published study identified on the same recording (Acosta, Yang, Posa
2022: MuJoCo 2.4 cm, Drake 1.48 cm).  Needs the ``export`` extra (``pip
install -e '.[export]'``: MuJoCo and Drake).

The targets' positions and orientations at the measured sample times:
MuJoCo's interpolated between its steps (linearly; the quaternion
normalised), Drake's its discrete state at each time.

``--pooltool-python PY`` (an interpreter where pooltool 0.6 imports, with
pyarrow, pandas and PyYAML: pooltool pins a numba, llvmlite and panda3d of
its own, so it lives in a venv of its own, as for ``benchmarks.billiards``):
also exports ``--billiards-params`` (a ``fit.json`` of
``datasets/billiards``; default the dataset's ``truth``) to pooltool and
simulates the 60 shots there from the file alone (its ball parameters,
resolver and cushion height; the dataset's starts and table size),
printing under ``pooltool``: ``rest_mm_max`` and ``rest_mm_median`` (each
ball's rest position against contactfit's with the same coefficients) and
``rms_vs_contactfit_mm`` (over every sample).
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks import cube_toss
from benchmarks._emit import emit

#: The position error of MuJoCo identified on these tosses by Acosta, Yang
#: and Posa (RA-L 2022, table II) [cm].
PUBLISHED_MUJOCO_POS_CM = 2.4
#: The same study's Drake (identified on 550 tosses): 1.48 cm.
PUBLISHED_DRAKE_POS_CM = 1.48
TIMESTEPS = (0.002, 0.001, 0.0005, 0.00025)


def _fit_of(params, ds):
    """The fit a benchmark exports: a ``fit.json`` (``params``), else the
    dataset's ``truth`` under its laws and motion model."""
    from simcore.export import Fitted

    doc = json.loads(Path(params).read_text()) if params else {
        "params": {**ds.fixed_params, **ds.truth},
        "dataset": {"laws": dict(ds.laws), "model": {"spin": ds.spin}}}
    return Fitted.from_doc(doc, str(params or "the dataset's truth"))


def drake_starts(state, sample_times, body=0):
    """The starts :func:`drake_predict` reads, one per scenario of ``state``."""
    return [{"pos": state.body_pos[s, body].tolist(), "quat": state.body_quat[s, body].tolist(),
             "vel": state.body_vel[s, body].tolist(), "omega": state.body_omega[s, body].tolist(),
             "times": (np.asarray(ts) - state.time[s]).tolist()}
            for s, ts in enumerate(sample_times)]


BILLIARDS = Path(__file__).resolve().parents[1] / "datasets" / "billiards"
#: Drake's plant step [s] and its discrete contact approximation: TAMSI,
#: which solves the Hunt-Crossley point contact the export sets (the
#: default "lagged" one lags the friction behind a stiff contact and, at
#: 1 ms, tumbles the cube off its path within the first bounce).
DRAKE_STEP = 1e-3
DRAKE_APPROXIMATION = "tamsi"


def drake_predict(sdf_path, starts_path, step=DRAKE_STEP, gravity=9.81):
    """Body ``body_0`` of the SDFormat at ``sdf_path`` simulated in Drake
    (run where pydrake imports) from each start of the JSON file
    ``starts_path`` (``[{pos, quat, vel, omega, times}]``: the centre's
    position and world velocity, the orientation, the world angular
    velocity, the sample times from the start): ``{"pos", "quat", "vel"}``
    (the origin's world velocity) at every sample time, point contact, discrete at ``step``
    (TAMSI: Drake's solver of Hunt-Crossley point contact), under
    ``gravity`` [m/s^2] (a model file cannot carry it: the export says it)."""
    import numpy as np
    from pydrake.all import (
        AddMultibodyPlant,
        DiagramBuilder,
        MultibodyPlantConfig,
        Parser,
        Quaternion,
        RigidTransform,
        Simulator,
        SpatialVelocity,
    )

    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlant(MultibodyPlantConfig(
        time_step=step, contact_model="point",
        discrete_contact_approximation=DRAKE_APPROXIMATION), builder)
    Parser(plant).AddModels(str(sdf_path))
    plant.mutable_gravity_field().set_gravity_vector([0.0, 0.0, -gravity])
    plant.Finalize()
    diagram = builder.Build()
    body = plant.GetBodyByName("body_0")
    pos, quat, vel = [], [], []
    for start in json.loads(Path(starts_path).read_text()):
        sim = Simulator(diagram)
        ctx = plant.GetMyMutableContextFromRoot(sim.get_mutable_context())
        plant.SetFreeBodyPose(ctx, body, RigidTransform(Quaternion(start["quat"]), start["pos"]))
        plant.SetFreeBodySpatialVelocity(ctx, body, SpatialVelocity(w=start["omega"],
                                                                     v=start["vel"]))
        for t in start["times"]:
            sim.AdvanceTo(t)
            pose = plant.EvalBodyPoseInWorld(ctx, body)
            pos.append(list(pose.translation()))
            quat.append(list(pose.rotation().ToQuaternion().wxyz()))
            vel.append(list(plant.EvalBodySpatialVelocityInWorld(ctx, body).translational()))
    return {"pos": np.array(pos).tolist(), "quat": np.array(quat).tolist(),
            "vel": np.array(vel).tolist()}


def drake_figures(fit, scene, test, base):
    """The ``drake`` figures of the held-out tosses ``test`` (module docstring)."""
    import tempfile

    from simcore.export import drake

    text, _ = drake.write(fit, scene)
    starts = drake_starts(test.state, test.targets.sample_times)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cube.sdf").write_text(text)
        (Path(tmp) / "starts.json").write_text(json.dumps(starts))
        t0 = time.perf_counter()
        got = drake_predict(Path(tmp) / "cube.sdf", Path(tmp) / "starts.json",
                            gravity=scene.gravity)
    row = cube_toss.summary(cube_toss._score(test, np.array(got["pos"]), np.array(got["quat"])),
                            "drake_")
    row["drake_s"] = time.perf_counter() - t0
    row["ratio_pos"] = row["drake_pos_cm"] / base["contactfit_pos_cm"]
    row["ratio_rot"] = row["drake_rot_deg"] / base["contactfit_rot_deg"]
    row["published_drake_pos_cm"] = PUBLISHED_DRAKE_POS_CM
    return row


def pooltool_shots(export_path, dataset=BILLIARDS):
    """Each shot of ``dataset`` simulated in pooltool (run where it imports)
    from the exported file at ``export_path`` alone: ``{scenario: {body_id:
    [[t, x, y], ...]}}`` at the dataset's sample times."""
    import numpy as np
    import pooltool as pt
    import pyarrow.parquet as pq
    import yaml
    from pooltool.objects.table.specs import BilliardTableSpecs
    from pooltool.physics.engine import PhysicsEngine
    from pooltool.physics.resolve.resolver import Resolver

    doc = yaml.safe_load(Path(export_path).read_text())
    params = pt.BallParams(**doc["ball_params"])
    own = Path(export_path).with_name("resolver.yaml")  # the section as pooltool's own file
    own.write_text(yaml.safe_dump(doc["resolver"], sort_keys=False))
    resolver = Resolver.load(own)
    bodies = pq.read_table(Path(dataset) / "bodies.parquet").to_pylist()
    walls = pq.read_table(Path(dataset) / "walls.parquet").to_pylist()
    samples = pq.read_table(Path(dataset) / "trajectories.parquet",
                            columns=["scenario_id", "body_id", "t"]).to_pandas()
    width = -next(w["d"] for w in walls if w["nx"] < 0)  # the cushions x = w and y = l
    length = -next(w["d"] for w in walls if w["ny"] < 0)
    table = pt.Table.from_table_specs(BilliardTableSpecs(
        l=length, w=width, cushion_height=doc["table"]["cushion_height"]))
    engine = PhysicsEngine(resolver=resolver)
    shots = {}
    for b in bodies:
        shots.setdefault(b["scenario_id"], []).append(b)
    out = {}
    for sid, balls in sorted(shots.items()):
        made = {}
        for b in sorted(balls, key=lambda r: r["body_id"]):
            ball = pt.Ball.create(str(b["body_id"]), xy=(b["x0"], b["y0"]))
            ball.params = params
            ball.state.rvw = np.array([[b["x0"], b["y0"], b["z0"]], [b["vx0"], b["vy0"], b["vz0"]],
                                       [b["wx0"], b["wy0"], b["wz0"]]], float)
            ball.state.s = (pt.constants.sliding if np.any(ball.state.rvw[1:])
                            else pt.constants.stationary)
            made[str(b["body_id"])] = ball
        system = pt.System(cue=pt.Cue(cue_ball_id="0"), table=table, balls=made)
        pt.simulate(system, engine=engine, inplace=True)
        pt.continuize(system, dt=1e-3, inplace=True)
        out[sid] = {}
        for bid, ball in system.balls.items():
            hist = ball.history_cts
            t = np.array([s.t for s in hist.states])
            xy = np.array([s.rvw[0][:2] for s in hist.states])
            want = samples[(samples.scenario_id == sid) & (samples.body_id == int(bid))]["t"]
            want = np.sort(want.to_numpy())
            out[sid][int(bid)] = [[float(w), float(np.interp(w, t, xy[:, 0])),
                                   float(np.interp(w, t, xy[:, 1]))] for w in want]
    return out


def pooltool_figures(python, params=None, dataset=BILLIARDS):
    """The ``pooltool`` figures (module docstring), pooltool run in ``python``."""
    import subprocess
    import tempfile

    from simcore.data import dataset as D
    from simcore.engine import simulate
    from simcore.export import Scene, pooltool

    ds = D.read(dataset)
    fit = _fit_of(params, ds)
    text, _ = pooltool.write(fit, Scene.from_dataset(ds, fit))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pooltool.yaml"
        path.write_text(text)
        code = ("import json, sys; sys.path.insert(0, %r); from benchmarks.export import "
                "pooltool_shots; print(json.dumps(pooltool_shots(%r, %r)))"
                % (str(Path(__file__).resolve().parents[1]), str(path), str(dataset)))
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise SystemExit(f"pooltool in {python} failed:\n{done.stderr[-2000:]}")
    peer = json.loads(done.stdout.strip().splitlines()[-1])
    model, state, times, ids = D.scenarios(ds, coefficients=list(fit.params))
    model = model.with_params({k: v for k, v in fit.params.items() if k in model.layout.names})
    sim = simulate(model, state, times)
    ptr = np.r_[0, np.cumsum([len(t) for t in times])]
    rest, sq = [], []
    for s, (sid, _) in enumerate(ids):
        for b, rows in peer[sid].items():
            rows = np.array(rows)
            at = ptr[s] + np.searchsorted(times[s], rows[:, 0])
            mine = sim.samp_pos[at, int(b), :2]
            gap = np.linalg.norm(rows[:, 1:] - mine, axis=1)
            rest.append(gap[-1])
            sq.append(gap ** 2)
    return {"shots": len(ids), "rest_mm_max": 1e3 * max(rest),
            "rest_mm_median": 1e3 * float(np.median(rest)),
            "rms_vs_contactfit_mm": 1e3 * float(np.sqrt(np.mean(np.concatenate(sq))))}


SPHERES = Path(__file__).resolve().parents[1] / "datasets" / "synthetic-table"


def sphere_figures(params=None, dataset=SPHERES, timestep=1e-3):
    """The ``spheres`` figures: every scenario of a sphere dataset (the
    sliding model: walls, collisions, pushes) simulated in MuJoCo from an
    export of ``params`` (a ``fit.json``; default the dataset's ``truth``)
    with each scenario's own scene, pushes applied at the centres over their
    windows, against contactfit's simulation with the same coefficients:
    ``rms_mm`` of each against the measured positions, ``gap_mm`` between
    the two (rms over every sample; ``gap_mm_median``: the median over
    scenarios of each one's, which a few chaotic scenes do not sway),
    ``rest_gap_mm_median``."""
    import mujoco as mj

    from simcore.data import dataset as D
    from simcore.engine import simulate
    from simcore.export import Scene, mujoco
    from simcore.export.mujoco_match import between
    from simcore.identify.problem import Problem

    ds = D.read(dataset)
    fit = _fit_of(params, ds)
    problem = Problem.from_dataset(ds, coefficients=list(fit.params))
    layout = problem.model.layout
    theta = layout.vector({k: v for k, v in fit.params.items() if k in layout.names})
    times = problem.targets.sample_times
    ours = simulate(problem.model.with_params(theta), problem.state, times).samp_pos
    controls = ds.tables["controls"].to_pandas() if "controls" in ds.tables else None
    st = problem.state
    theirs = np.full_like(ours, np.nan)
    ptr = np.r_[0, np.cumsum([len(t) for t in times])]
    t0 = time.perf_counter()
    for s, sid in enumerate(problem.ids):
        scene = Scene.from_dataset(ds, fit, sid)
        xml, _ = mujoco.write(fit, scene, timestep)
        model = mj.MjModel.from_xml_string(xml)
        data = mj.MjData(model)
        n = len(scene.bodies)
        for k, b in enumerate(scene.bodies):
            data.qpos[3 * k:3 * k + 3] = st.body_pos[s, k] - np.asarray(b.pos)
            data.qvel[3 * k:3 * k + 3] = st.body_vel[s, k]
        pushes = [] if controls is None else [
            (int(r.body_id), r.t0 - st.time[s], r.t1 - st.time[s], (r.fx, r.fy, r.fz))
            for r in controls[controls.scenario_id == sid].itertuples()]
        t = np.asarray(times[s]) - st.time[s]
        steps = int(np.ceil(t[-1] / timestep)) + 1
        track = np.empty((steps + 1, n, 3))
        track[0] = st.body_pos[s, :n]
        for k in range(steps):
            now = k * timestep
            data.xfrc_applied[:] = 0.0
            for body, a, b, force in pushes:
                if a <= now < b:
                    data.xfrc_applied[body + 1, :3] = force
            mj.mj_step(model, data)
            track[k + 1] = (data.qpos[:3 * n].reshape(n, 3)
                            + np.array([b.pos for b in scene.bodies]))
        i, f = between(t, timestep, steps)
        f = f[:, :, None]
        theirs[ptr[s]:ptr[s + 1], :n] = track[i] * (1 - f) + track[i + 1] * f
    wall = time.perf_counter() - t0
    meas = problem.targets.measured
    ok = np.isfinite(meas[..., 0])

    def rms(a, b):
        return 1e3 * float(np.sqrt(np.mean(np.sum((a - b) ** 2, axis=-1)[ok])))

    last = ptr[1:] - 1
    rest = np.linalg.norm(theirs[last] - ours[last], axis=-1)
    each = [1e3 * float(np.sqrt(np.nanmean(np.sum((theirs[a:b] - ours[a:b]) ** 2, axis=-1)[
        ok[a:b]]))) for a, b in zip(ptr[:-1], ptr[1:])]
    return {"scenarios": problem.nscen, "timestep": timestep, "mujoco_rms_mm": rms(theirs, meas),
            "contactfit_rms_mm": rms(ours, meas), "gap_mm": rms(theirs, ours),
            "gap_mm_median": float(np.median(each)),
            "rest_gap_mm_median": 1e3 * float(np.nanmedian(rest[np.isfinite(rest)])),
            "mujoco_s": wall}


def run(params=None, timesteps=TIMESTEPS, dataset=cube_toss.DATASET, with_drake=True, match=0):
    from flows import settings
    from simcore.data import dataset as D
    from simcore.export import Fitted, Scene, mujoco, mujoco_match
    from simcore.identify.problem import Problem

    ds = D.read(dataset)
    cfg = settings.calibration(Path(dataset) / "calibrate.yaml")
    split = D.split(ds)
    train_ids = sorted(s for s, v in split.items() if v == "train")
    test_ids = sorted(s for s, v in split.items() if v == "test")
    whole = Problem.from_dataset(ds, cfg.weights, order=train_ids + test_ids,
                                 coefficients=cfg.named())
    test = whole.subset(np.arange(len(train_ids), whole.nscen))
    theta, fitted = cube_toss.fit_or_read(whole, len(train_ids), cfg, params, ds)
    layout = whole.model.layout
    doc = json.loads(Path(params).read_text()) if params else {
        "params": dict(zip(layout.names, map(float, theta))),
        "dataset": {"laws": dict(layout.laws), "model": {"spin": False}}}
    fit = Fitted.from_doc(doc, str(params or "the fit"))
    scene = Scene.from_dataset(ds, fit)
    ours, _ = cube_toss._predict(test, theta)
    out = {"test_tosses": len(test_ids), **cube_toss.summary(ours, "contactfit_"),
           "published_mujoco_pos_cm": PUBLISHED_MUJOCO_POS_CM, **fitted}
    on = whole.subset(np.arange(min(match, len(train_ids))))  # (the CLI's first N training ids)
    for h in timesteps:
        xml, _ = mujoco.write(fit, scene, h)
        kinds = [("", xml)]
        if match:
            t0 = time.perf_counter()
            kinds.append(("_matched", mujoco_match.match(xml, on, theta, h)[0]))
            match_s = time.perf_counter() - t0
        for suffix, text in kinds:
            t0 = time.perf_counter()
            pos, quat = mujoco_match.rollout(text, test.state, test.targets.sample_times)
            row = cube_toss.summary(cube_toss._score(test, pos, quat), "mujoco_")
            row["mujoco_s"] = time.perf_counter() - t0
            row["ratio_pos"] = row["mujoco_pos_cm"] / out["contactfit_pos_cm"]
            row["ratio_rot"] = row["mujoco_rot_deg"] / out["contactfit_rot_deg"]
            if suffix:
                row["match_s"] = match_s
            out[f"dt_{1e3 * h:g}ms{suffix}"] = row
    if with_drake:
        out["drake"] = drake_figures(fit, scene, test, out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--params", help="a calibration's fit.json (default: fit the training tosses)")
    ap.add_argument("--timesteps", type=float, nargs="+", default=TIMESTEPS, metavar="S",
                    help="MuJoCo timesteps [s] to export and re-simulate at")
    ap.add_argument("--no-drake", action="store_true", help="MuJoCo only")
    ap.add_argument("--sphere-params", help="a fit.json of datasets/synthetic-table (default: "
                                            "the dataset's truth)")
    ap.add_argument("--pooltool-python", help="an interpreter where pooltool 0.6 imports: also "
                                              "re-simulate the billiards shots there")
    ap.add_argument("--billiards-params", help="a fit.json of datasets/billiards (default: "
                                               "the dataset's truth)")
    ap.add_argument("--match", type=int, default=0, metavar="N",
                    help="also export with the contact matched on contactfit's trajectories "
                         "of the first N training tosses (contactfit export --match N)")
    args = ap.parse_args(argv)
    out = run(args.params, args.timesteps, with_drake=not args.no_drake, match=args.match)
    out["spheres"] = sphere_figures(args.sphere_params)
    if args.pooltool_python:
        out["pooltool"] = pooltool_figures(args.pooltool_python, args.billiards_params)
    emit(out, args.json, width=24)


if __name__ == "__main__":
    main()

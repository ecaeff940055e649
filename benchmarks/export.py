"""Exports verified in the target engine: the real cube's held-out tosses
re-simulated in MuJoCo from an exported file, scored as contactfit's own
prediction is.

``python -m benchmarks.export [--json] [--params fit.json] [--timesteps S ...]``:
reads ``datasets/cube-toss``, takes the coefficients of ``--params`` (a
calibration's ``fit.json``; default: fits them on the training tosses as
``benchmarks.cube_toss`` does, a few minutes), writes the MuJoCo export of
them with the dataset's scene (``simcore.export.mujoco.write``) at each
timestep, and simulates every held-out toss in MuJoCo from the same start
contactfit's prediction takes (sample 0's state), open-loop to its last
sample.  Per timestep ``dt_<ms>ms``: ``mujoco_pos_cm``,
``mujoco_rot_deg``, ``mujoco_e_q``, ``mujoco_right_face`` (the figures of
``benchmarks.cube_toss``), their ratios to contactfit's own
(``ratio_pos``, ``ratio_rot``), and ``mujoco_s`` (MuJoCo's wall time);
beside them contactfit's own figures (``contactfit_*``) and the MuJoCo
model identified by the published study (Acosta, Yang, Posa 2022, on the
same recording: 2.4 cm), as ``published_mujoco_pos_cm``.  Needs the
``export`` extra (``pip install -e '.[export]'``).

MuJoCo's positions and orientations at the measured sample times are
interpolated between its steps (linearly; the quaternion normalised).
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
TIMESTEPS = (0.002, 0.001, 0.0005, 0.00025)


def mujoco_predict(xml, state, sample_times, body=0):
    """Positions and orientations (w, x, y, z) of body ``body`` at every
    sample time (rows of all scenarios in order) simulated in MuJoCo from
    ``xml`` with each scenario's start in ``state`` (a
    :class:`simcore.model.State`: the centre's position and velocity, the
    world-frame angular velocity, the orientation)."""
    import mujoco

    from simcore.geometry.rigid import quat_matrix

    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    h = model.opt.timestep
    pos, quat = [], []
    for s, ts in enumerate(sample_times):
        mujoco.mj_resetData(model, data)
        q0 = state.body_quat[s, body]
        data.qpos[0:3] = state.body_pos[s, body]
        data.qpos[3:7] = q0
        data.qvel[0:3] = state.body_vel[s, body]
        data.qvel[3:6] = quat_matrix(q0).T @ state.body_omega[s, body]  # body frame
        t = np.asarray(ts) - state.time[s]
        steps = int(np.ceil(t[-1] / h)) + 1
        xp = np.empty((steps + 1, 3))
        xq = np.empty((steps + 1, 4))
        xp[0], xq[0] = data.qpos[0:3], data.qpos[3:7]
        for k in range(steps):
            mujoco.mj_step(model, data)
            xp[k + 1], xq[k + 1] = data.qpos[0:3], data.qpos[3:7]
        u = t / h
        i = np.minimum(np.floor(u).astype(int), steps - 1)
        f = (u - i)[:, None]
        pos.append(xp[i] * (1 - f) + xp[i + 1] * f)
        a, b = xq[i], xq[i + 1]
        b = np.where((np.sum(a * b, axis=1) < 0)[:, None], -b, b)
        q = a * (1 - f) + b * f
        quat.append(q / np.linalg.norm(q, axis=1, keepdims=True))
    return np.concatenate(pos), np.concatenate(quat)


def run(params=None, timesteps=TIMESTEPS, dataset=cube_toss.DATASET):
    from flows import settings
    from simcore.data import dataset as D
    from simcore.export import Fitted, Scene, mujoco
    from simcore.identify.problem import Problem

    ds = D.read(dataset)
    cfg = settings.calibration(Path(dataset) / "calibrate.yaml")
    split = D.split(ds)
    train_ids = sorted(s for s, v in split.items() if v == "train")
    test_ids = sorted(s for s, v in split.items() if v == "test")
    whole = Problem.from_dataset(ds, cfg.weights, order=train_ids + test_ids,
                                 coefficients=cfg.fit or ())
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
    for h in timesteps:
        xml, _ = mujoco.write(fit, scene, h)
        t0 = time.perf_counter()
        pos, quat = mujoco_predict(xml, test.state, test.targets.sample_times)
        row = cube_toss.summary(cube_toss._score(test, pos, quat), "mujoco_")
        row["mujoco_s"] = time.perf_counter() - t0
        row["ratio_pos"] = row["mujoco_pos_cm"] / out["contactfit_pos_cm"]
        row["ratio_rot"] = row["mujoco_rot_deg"] / out["contactfit_rot_deg"]
        out[f"dt_{1e3 * h:g}ms"] = row
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--params", help="a calibration's fit.json (default: fit the training tosses)")
    ap.add_argument("--timesteps", type=float, nargs="+", default=TIMESTEPS, metavar="S",
                    help="MuJoCo timesteps [s] to export and re-simulate at")
    args = ap.parse_args(argv)
    emit(run(args.params, args.timesteps), args.json, width=24)


if __name__ == "__main__":
    main()

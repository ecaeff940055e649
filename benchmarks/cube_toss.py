"""Real cube tosses: calibrate on the training split, predict the held-out
tosses open-loop, and score the predictions as published work does.

``python -m benchmarks.cube_toss [--json] [--dataset DIR] [--config YAML]
[--train N] [--params fit.json] [--spread N] [--ceiling] [--curve]``: reads
``datasets/cube-toss`` (``contactfit import cube-toss``
of the ContactNets tosses; its ``scenarios.split`` holds the duplicate-aware
validation split), fits the coefficients ``datasets/cube-toss/calibrate.yaml``
names on the ``train`` tosses (the first ``N`` of them with ``--train``),
simulates every ``test`` toss from its first sample to its last with the
fitted coefficients (or those of ``--params``, a calibration's ``fit.json``:
no fit then, and no ``fit_s``), and prints, for contactfit and for the trivial
baseline computed the same way:

* ``pos_cm``, ``pos_cm_median``: the centre's position error averaged over
  a toss's samples, then the mean and median over tosses [cm];
* ``rot_deg``, ``rot_deg_median``: the same for the geodesic rotation error
  ``2 atan2(|vec(q_p q_m*)|, |w(q_p q_m*)|)`` [degrees];
* ``e_q``: the mean over tosses of the mean over samples of ``(|p_p -
  p_m| / h)^2 + theta^2`` (Acosta, Yang, Posa, RA-L 2022; ``h`` the half
  width, ``theta`` in radians; the dataset README writes ``|dp|^2 / h``,
  read here as the square of the error in half widths, which makes the
  baseline's figure the README's 1.0);
* ``right_face``: the share of tosses whose predicted final face down is
  the measured one (the body axis nearest the vertical and its sign);
* ``fit_s``: the calibration's wall time [s]; ``fit_loss`` its training
  loss (what compares model variants on the training tosses alone);
* ``moreau_*``: the same figures of the same tosses and coefficients on the
  Moreau-Jean stepper (integrator ``moreau``, :func:`on_moreau`).

``--spread N``: how far a single open-loop prediction can be trusted at
all.  A tumbling toss is chaotic, and sample 0's velocity is itself
uncertain (the data set's README: it is not a difference of the poses).
The held-out tosses are simulated again ``N`` times from sample 0's state
with its velocity and angular velocity perturbed by independent normal
noise (``SPREAD_VEL`` m/s and ``SPREAD_OMEGA`` rad/s per axis, seed 0),
and the benchmark prints ``spread_face_agree``, the share of (toss, copy)
pairs whose final face is the unperturbed prediction's (were the model
exact, about the share of final faces its start's uncertainty would still
leave right), and the perturbed copies' mean ``spread_right_face``,
``spread_pos_cm`` and ``spread_rot_deg``.

``--ceiling``: how far the model itself is from the target, whatever the
calibration.  The held-out tosses are simulated with every coefficient set
of :data:`CEILING_GRID` (225: ``mu_k``, ``e_bg``, ``mu_s`` and the table's
``ground_offset``), and the benchmark prints the best mean position error,
rotation error and ``e_q`` and the largest right-face share any of them
reaches (``ceiling_*``; each may come from another set): figures chosen on
the very tosses they score, which no fit on other tosses can beat.

``--com-z MM [MM ...]``: the profile of the training loss along the cube's
centre of mass: for each height [mm] along the cube's body z axis (the
``com_z`` coefficient held there, not fitted), the fit and its
``fit_loss`` beside the held-out figures, one row each.

``--curve``: the data-efficiency curve instead, as the ContactNets paper
plots it: for 1, 4, 16, 64, 256 and all training tosses (the first ``N``
in id order), the held-out figures and the fitted coefficients, one row
each under ``curve``.

The baseline (``baseline_*``): ballistic flight from the first sample until
the lowest corner meets the table, then snapped flat onto the face nearest
below (the smallest rotation), sliding in a straight line at the touchdown's
horizontal velocity, decelerated at ``BASELINE_MU g`` to rest.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

from benchmarks._emit import emit

DATASET = Path(__file__).resolve().parents[1] / "datasets" / "cube-toss"
#: The baseline's sliding deceleration over g: the tosses' median flat
#: sliding deceleration (the data set's README).
BASELINE_MU = 0.219
#: The training set sizes of the data-efficiency curve (``--curve``).
CURVE = (1, 4, 16, 64, 256, 10 ** 6)
#: The start's uncertainty of ``--spread``, per axis: of the size by which
#: sample 0's recorded velocity and angular velocity differ from those
#: fitted to the toss's first six flight samples (medians 0.034 m/s and
#: 0.14 rad/s in magnitude).
SPREAD_VEL = 0.02
SPREAD_OMEGA = 0.1
#: The coefficient sets ``--ceiling`` tries (every combination; ``mu_s``
#: below ``mu_k`` is taken as ``mu_k``): around the fits of every variant in
#: the data set's README, each range twice as wide as the fits spread.
CEILING_GRID = {"mu_k": (0.16, 0.175, 0.19, 0.205, 0.22), "e_bg": (0.15, 0.25, 0.32, 0.4, 0.5),
                "mu_s": (0.0, 0.36, 0.6), "ground_offset": (-1.5e-3, -0.75e-3, 0.0)}


def face_down(q):
    """The face a box rests on: (body axis index, sign) of the body axis
    nearest world -z, as one code ``2 k + (sign < 0)``."""
    from simcore.geometry.rigid import quat_matrix

    col = quat_matrix(q)[2]  # world z of each body axis
    k = int(np.argmax(np.abs(col)))
    return 2 * k + int(col[k] > 0)  # the axis pointing down is -sign


def scores(pred_pos, pred_quat, meas_pos, meas_quat, ptr, half):
    """Per-toss figures of predictions against measurements (rows split by
    ``ptr``): mean position error [m], mean rotation error [rad], e_q,
    right final face."""
    from simcore.geometry.rigid import quat_angle

    out = {"pos": [], "rot": [], "e_q": [], "face": []}
    for a, b in zip(ptr[:-1], ptr[1:]):
        dp = np.linalg.norm(pred_pos[a:b] - meas_pos[a:b], axis=-1)
        th = quat_angle(pred_quat[a:b], meas_quat[a:b])
        out["pos"].append(dp.mean())
        out["rot"].append(th.mean())
        out["e_q"].append(np.mean((dp / half) ** 2 + th ** 2))
        out["face"].append(face_down(pred_quat[b - 1]) == face_down(meas_quat[b - 1]))
    return {k: np.array(v, dtype=np.float64) for k, v in out.items()}


def summary(s, prefix=""):
    return {f"{prefix}pos_cm": 100 * s["pos"].mean(), f"{prefix}pos_cm_median": 100 * np.median(s["pos"]),
            f"{prefix}rot_deg": np.degrees(s["rot"].mean()),
            f"{prefix}rot_deg_median": np.degrees(np.median(s["rot"])),
            f"{prefix}e_q": s["e_q"].mean(), f"{prefix}right_face": s["face"].mean()}


def baseline(problem, mu=BASELINE_MU, gravity=None):
    """The trivial baseline's positions and orientations at the sample times
    of ``problem``'s scenarios (see the module docstring), under ``gravity``
    [m/s^2] (default: the model's)."""
    from simcore.geometry.collision import SHAPE_BOX
    from simcore.geometry.rigid import integrate_orientation, quat_matrix
    from simcore.geometry.shapes import lowest

    st, m = problem.state, problem.model
    gravity = m.gravity if gravity is None else gravity
    ground = m.ground_z
    pos, quat = [], []
    for s, ts in enumerate(problem.targets.sample_times):
        p0, v0 = st.body_pos[s, 0], st.body_vel[s, 0]
        w0, q0 = st.body_omega[s, 0], st.body_quat[s, 0]
        ext = m.body_ext[s, 0]
        t = np.asarray(ts) - st.time[s]

        def pose(tt):
            p = p0 + v0 * tt + 0.5 * np.array([0, 0, -gravity]) * tt * tt
            q = q0.copy()
            integrate_orientation(q, w0[0], w0[1], w0[2], tt)
            return p, q

        # touchdown: the first time on a fine grid the lowest corner meets the table
        grid = np.arange(0.0, max(t[-1], 1e-3) + 1e-3, 5e-4)
        hit = next((g for g in grid if lowest(SHAPE_BOX, *pose(g), ext) <= ground), grid[-1])
        p_hit, q_hit = pose(hit)
        col = quat_matrix(q_hit)[2]
        k = int(np.argmax(np.abs(col)))
        target = np.zeros(3)
        target[k] = -np.sign(col[k])  # that body axis, in the world, should point down
        down = quat_matrix(q_hit) @ target  # where it points now
        axis = np.cross(down, [0.0, 0.0, -1.0])
        sin, cos = np.linalg.norm(axis), float(np.dot(down, [0.0, 0.0, -1.0]))
        q_flat = q_hit.copy()
        if sin > 1e-12:
            rate = axis / sin * np.arctan2(sin, cos)
            integrate_orientation(q_flat, rate[0], rate[1], rate[2], 1.0)
        v_h = np.array([v0[0], v0[1], 0.0])
        speed = np.linalg.norm(v_h)
        stop = speed / (mu * gravity) if speed > 0 else 0.0
        for tt in t:
            if tt < hit:
                p, q = pose(tt)
            else:
                d = min(tt - hit, stop)
                run = speed * d - 0.5 * mu * gravity * d * d
                p = np.array([p_hit[0], p_hit[1], ground + ext[2]])
                if speed > 0:
                    p[:2] += v_h[:2] / speed * run
                q = q_flat
            pos.append(p)
            quat.append(q)
    return np.array(pos), np.array(quat)


def _predict(problem, theta, state=None):
    """Open-loop predictions of ``problem``'s tosses with the coefficients
    ``theta`` (from ``state``, default the problem's), scored: (per-toss
    :func:`scores`, final face codes)."""
    from simcore.engine import simulate

    sim = simulate(problem.model.with_params(theta), problem.state if state is None else state,
                   problem.targets.sample_times)
    ptr = np.r_[0, np.cumsum([len(t) for t in problem.targets.sample_times])]
    return (_score(problem, sim.samp_pos[:, 0], sim.samp_quat[:, 0]),
            np.array([face_down(sim.samp_quat[b - 1, 0]) for b in ptr[1:]]))


def _score(problem, pos, quat):
    """Per-toss :func:`scores` of predicted positions and orientations (one
    row per measured sample of ``problem``'s tosses) against the measured ones."""
    tg = problem.targets
    ptr = np.r_[0, np.cumsum([len(t) for t in tg.sample_times])]
    return scores(pos, quat, tg.measured[:, 0], tg.states["quat"][:, 0], ptr,
                  float(problem.model.body_ext[0, 0, 0]))


def spread(problem, theta, copies, seed=0):
    """The ``--spread`` figures (module docstring) of ``copies`` perturbed
    starts."""
    from dataclasses import replace

    rng = np.random.default_rng(seed)
    _, nominal = _predict(problem, theta)
    st = problem.state
    agree, rows = [], []
    for _ in range(copies):
        moved = replace(st, body_vel=st.body_vel + rng.normal(0.0, SPREAD_VEL, st.body_vel.shape),
                        body_omega=st.body_omega + rng.normal(0.0, SPREAD_OMEGA,
                                                              st.body_omega.shape))
        s, faces = _predict(problem, theta, moved)
        agree.append(faces == nominal)
        rows.append(summary(s))
    return {"spread_copies": copies, "spread_face_agree": float(np.mean(agree)),
            **{f"spread_{k}": float(np.mean([r[k] for r in rows]))
               for k in ("right_face", "pos_cm", "rot_deg")}}


def ceiling(problem, theta, grid=None):
    """The ``--ceiling`` figures: the best each score of :func:`summary`
    reaches on ``problem``'s tosses over the coefficient sets of ``grid``
    (default :data:`CEILING_GRID`; the others as in ``theta``), each set
    chosen on the very tosses it is scored on.  No calibration of the model
    can predict them better than this (within the grid's spacing): the
    distance to the target is the model's, not the fit's."""
    import itertools

    grid = CEILING_GRID if grid is None else grid
    layout = problem.model.layout
    base = dict(zip(layout.names, theta))
    rows = []
    for values in itertools.product(*grid.values()):
        p = {**base, **dict(zip(grid, values))}
        p["mu_s"] = max(p["mu_s"], p["mu_k"])
        s, _ = _predict(problem, layout.vector(p))
        rows.append(summary(s))
    best = {k: min(r[k] for r in rows) for k in ("pos_cm", "rot_deg", "e_q")}
    return {"ceiling_points": len(rows), **{f"ceiling_{k}": v for k, v in best.items()},
            "ceiling_right_face": max(r["right_face"] for r in rows)}


def run(dataset=DATASET, config=None, train=None, params=None, copies=0, grid=False,
        com_z=None):
    """The figures (see the module docstring); ``com_z`` [m]: the cube's
    centre of mass along its body z axis, held there (not fitted)."""
    from dataclasses import replace

    from flows import settings
    from simcore.data import dataset as D
    from simcore.identify.problem import Problem

    ds = D.read(dataset)
    cfg = settings.calibration(config or Path(dataset) / "calibrate.yaml")
    split = D.split(ds)
    train_ids = sorted(s for s, v in split.items() if v == "train")
    test_ids = sorted(s for s, v in split.items() if v == "test")
    if train:
        train_ids = train_ids[:train]
    whole = Problem.from_dataset(ds, cfg.weights, order=train_ids + test_ids,
                                 coefficients=cfg.named())
    if com_z is not None:  # held at com_z: a start, not a free coefficient
        whole = whole.with_coefficients(["com_z"])
        cfg = cfg.model_copy(update={"fit": [n for n in cfg.fit if n != "com_z"],
                                     "start": dict(cfg.start or {}, com_z=com_z)})
    test = whole.subset(np.arange(len(train_ids), whole.nscen))
    theta, fitted = fit_or_read(whole, len(train_ids), cfg, params, ds)
    if com_z is not None:  # (a fit held it there already; read coefficients take it too)
        theta[whole.model.layout.index("com_z")] = com_z
    ours, _ = _predict(test, theta)
    moreau = {}
    if com_z is None:  # the same tosses and coefficients on the Moreau-Jean stepper
        moreau = summary(_predict(on_moreau(ds, test, test_ids), theta)[0], "moreau_")
    base = _score(test, *baseline(replace(test, model=test.model.with_params(theta))))
    return {"train_tosses": len(train_ids), "test_tosses": len(test_ids),
            **summary(ours), **moreau, **summary(base, "baseline_"), **fitted,
            **(spread(test, theta, copies) if copies else {}),
            **(ceiling(test, theta) if grid else {})}


def on_moreau(ds, problem, ids):
    """``problem`` (scenarios ``ids`` of the dataset ``ds``, in that order) on
    the Moreau-Jean stepper: the same scenarios, coefficients' layout, states
    and targets, integrator ``moreau``."""
    from dataclasses import replace

    from simcore.data import dataset as D

    model, state, _, all_ids = D.scenarios(ds, integrator="moreau",
                                           coefficients=problem.model.layout.extra)
    where = {sid: k for k, (sid, _) in enumerate(all_ids)}
    pick = np.array([where[sid] for sid in ids])
    return replace(problem, model=model.subset(pick), state=state.subset(pick))


def fit_or_read(whole, ntrain, cfg, params=None, ds=None):
    """``(theta, figures)``: the coefficients fitted on the first ``ntrain``
    scenarios of ``whole`` as ``cfg`` says, with the calibration's gate as
    the fit's yardstick (the noise of dataset ``ds``), as the CLI fits
    (its wall time, status, loss and values in ``figures``: ``fitted_*``
    the free ones, ``scanned_*`` those of the scan it held at a grid
    point), or those of ``params`` (a calibration's ``fit.json``; no
    figures)."""
    from flows import report
    from simcore.data import dataset as D
    from simcore.identify import fit as F

    layout = whole.model.layout
    if params is not None:
        doc = json.loads(Path(params).read_text())
        return layout.vector({k: v for k, v in doc.get("params", doc).items()
                              if k in layout.names}), {}
    part = whole.subset(np.arange(ntrain))
    t0 = time.perf_counter()
    limit = report.rms_limit(D.position_noise(ds) if ds is not None else None, cfg.gate_k,
                             cfg.gate_floor_m)
    r = F.fit(part, params0=cfg.start or None, free=cfg.fit,
              enough=report.at_noise(limit, part.weights), **cfg.chosen(part).fit_options())
    return layout.vector(r.params), {
        "fit_s": time.perf_counter() - t0, "fit_status": r.message, "fit_loss": r.loss,
        **{f"fitted_{k}": r.params[k] for k in r.free},
        **{f"scanned_{k}": r.params[k] for k in cfg.scan if k not in r.free},
        **{f"ci95_{k}": list(r.ci95[k]) for k in r.free if k in r.ci95}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dataset", default=str(DATASET))
    ap.add_argument("--config", help="calibration settings (default: the dataset's calibrate.yaml)")
    ap.add_argument("--train", type=int, help="fit on the first N training tosses only")
    ap.add_argument("--params", help="score this fit.json's coefficients instead of fitting")
    ap.add_argument("--spread", type=int, default=0, metavar="N",
                    help="also simulate the held-out tosses from N perturbed starts")
    ap.add_argument("--curve", action="store_true",
                    help="held-out figures against the number of training tosses")
    ap.add_argument("--com-z", type=float, nargs="+", metavar="MM",
                    help="fit and score with the cube's centre of mass at each of these "
                         "heights along its body z axis [mm], one row each")
    ap.add_argument("--ceiling", action="store_true",
                    help="also the best figures any coefficient set of a grid reaches, "
                         "chosen on the held-out tosses themselves")
    args = ap.parse_args(argv)
    if args.curve:
        rows = {}
        for n in CURVE:
            row = run(args.dataset, args.config, n)
            rows[f"train_{row['train_tosses']}"] = {k: v for k, v in row.items()
                                                    if not k.startswith("baseline_")}
            if row["train_tosses"] < n:
                break
        emit(rows, args.json, width=24)
        return
    if args.com_z:
        emit({f"com_z_{mm:g}mm": {k: v for k, v in run(args.dataset, args.config, args.train,
                                                         com_z=mm * 1e-3).items()
                                  if not k.startswith("baseline_")} for mm in args.com_z},
             args.json, width=24)
        return
    emit(run(args.dataset, args.config, args.train, args.params, args.spread, args.ceiling),
         args.json, width=24)


if __name__ == "__main__":
    main()

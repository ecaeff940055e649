"""Real planar square drops (``datasets/fazeli-square``): calibrate on the
training drops, predict the held-out ones open loop from their first state,
and score them as the data's README scores MuJoCo.

    python -m benchmarks.square_drops [--params fit.json] [--json] [--mujoco-fit]
        [--moreau-fit] [--splits 1,2,3] [--folds 5]

Fits what ``datasets/fazeli-square/calibrate.yaml`` names on the ``train``
drops (the calibration's own strategy, chosen from the data), simulates
every ``test`` drop from its first state to its last sample with the
time-stepper, and prints for it and for two trivial baselines computed the
same way:

* ``pos_cm``: the centre's position error averaged over a drop's samples,
  then the mean over drops [cm] (``pos_cm_median``: the median);
* ``angle_deg``: the planar angle's error taken modulo the square's 90
  degrees (the number of quarter turns is chaotic), averaged likewise;
* ``rest_cm``: the position error at the last sample (at rest).

``moreau_*``: the same test drops and coefficients simulated on the
Moreau-Jean stepper (integrator ``moreau``); ``moreau_fitted_*`` (with
``--moreau-fit``): the coefficients fitted on the Moreau-Jean stepper itself
(its exact sensitivities, the same settings), scored the same way.

Baselines: ``frozen``, the body held at its first state; ``flat``,
ballistic flight until a corner meets the ground, then settled flat there
(``benchmarks.cube_toss.baseline`` without the slide).  The MuJoCo figures
of the data's README (identified on the same training drops, scored on
unseen ones) are printed beside them for reference, and
``mujoco_identified_this_split_*``: that identified MuJoCo model
(:data:`MUJOCO_IDENTIFIED`, MuJoCo installed) run on this benchmark's own
test drops and scored the same way, the like-for-like comparison (the
README's unseen drops are other drops; these 56 were among the 300 it
was identified on); with ``--mujoco-fit``, ``mujoco_fitted_*``: MuJoCo
identified on this benchmark's training drops as the README identified it
(:func:`fit_mujoco`), scored on its test drops: the issue's comparison on
one split; with ``--splits 1,2,3`` as well, both identified again on the
training drops of other seeded splits of the same drops and scored on
their held-out ones (:func:`other_splits`: ``splits`` per split,
``splits_mean_*``), since one split's figures move by a few millimetres
with the drops it holds; with ``--folds 5``, every drop predicted by a
fit on the other four fifths beside the README's identified model on the
same drops, and the ratio of the two carried to the README's unseen
drops (:func:`cross_validated`).
"""

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from ._emit import emit
from .cube_toss import baseline, fit_or_read, on_moreau

DATASET = Path(__file__).resolve().parents[1] / "datasets" / "fazeli-square"
#: ``../shared/data/fazeli-planar/README.md``: MuJoCo 4.0 identified on the
#: 300 training drops, 200 unseen drops: position, angle mod 90, rest.
MUJOCO = {"mujoco_identified_pos_cm": 3.84, "mujoco_identified_angle_deg": 10.1,
          "mujoco_identified_rest_cm": 5.1, "mujoco_defaults_pos_cm": 10.1,
          "frozen_pos_cm (README)": 16.7, "flat_pos_cm (README)": 11.0}
#: The MuJoCo model that README identified (friction, solref's time constant and
#: damping ratio, the ground's height [m], the step [s]; elliptic cone), which
#: :func:`mujoco_identified` runs on this benchmark's own test drops.
MUJOCO_IDENTIFIED = {"friction": 0.118, "timeconst": 0.002, "dampratio": 1.08,
                     "ground": -0.37e-3, "timestep": 1e-3}
#: Runs of :func:`fit_mujoco`'s Nelder-Mead (``--mujoco-fit``).
MUJOCO_EVALS = 80


def planar_angle(quat):
    """The planar angle (counter-clockwise in x-z) of turns about y: ``q =
    (cos(th/2), 0, -sin(th/2), 0)``."""
    return -2.0 * np.arctan2(quat[..., 2], quat[..., 0])


def scores(pos, quat, meas_pos, meas_quat, ptr):
    """Per-drop mean position error [m], mean angle error modulo 90 degrees
    [degrees], last-sample position error [m]."""
    d = np.degrees(planar_angle(quat) - planar_angle(meas_quat))
    d = np.abs((d + 45.0) % 90.0 - 45.0)
    err = np.linalg.norm(pos - meas_pos, axis=-1)
    out = {"pos": [], "angle": [], "rest": []}
    for a, b in zip(ptr[:-1], ptr[1:]):
        out["pos"].append(err[a:b].mean())
        out["angle"].append(d[a:b].mean())
        out["rest"].append(err[b - 1])
    return {k: np.array(v) for k, v in out.items()}


def summary(s, prefix=""):
    return {f"{prefix}pos_cm": 100 * s["pos"].mean(),
            f"{prefix}pos_cm_median": 100 * np.median(s["pos"]),
            f"{prefix}angle_deg": float(s["angle"].mean()),
            f"{prefix}rest_cm": 100 * s["rest"].mean()}


def _score(problem, pos, quat):
    tg = problem.targets
    ptr = np.r_[0, np.cumsum([len(t) for t in tg.sample_times])]
    return scores(pos, quat, tg.measured[:, 0], tg.states["quat"][:, 0], ptr)


def mujoco_xml(gravity, mass, half, friction, timeconst, dampratio, ground, timestep):
    """The planar square in MuJoCo: slides along x and z and a hinge about y
    (a uniform cube of ``mass`` [kg] and half side ``half`` [m]: its moment
    about y is the plate's ``m s^2 / 6``) over a plane at height ``ground``,
    with one friction and ``solref`` on both geoms, an elliptic cone."""
    contact = f'friction="{friction} 0.005 0.0001" solref="{timeconst} {dampratio}"'
    return (f'<mujoco><option timestep="{timestep}" gravity="0 0 {-gravity}" cone="elliptic"/>'
            f'<worldbody><geom type="plane" size="5 5 0.1" pos="0 0 {ground}" {contact}/>'
            '<body name="square"><joint name="x" type="slide" axis="1 0 0"/>'
            '<joint name="z" type="slide" axis="0 0 1"/>'
            '<joint name="th" type="hinge" axis="0 1 0"/>'
            f'<geom type="box" size="{half} {half} {half}" mass="{mass}" {contact}/>'
            '</body></worldbody></mujoco>')


def mujoco_identified(problem, values=MUJOCO_IDENTIFIED):
    """Positions and orientations of the problem's drops simulated in MuJoCo
    with the data README's identified model (:data:`MUJOCO_IDENTIFIED`; the
    square's mass and size and the gravity the problem's), open loop from
    each drop's first state as contactfit's are, linearly interpolated
    between MuJoCo's steps: that model scored on this benchmark's own
    held-out drops, beside its figures on the README's."""
    import mujoco

    from simcore.export.mujoco_match import between

    m = problem.model
    model = mujoco.MjModel.from_xml_string(mujoco_xml(
        m.gravity, m.body_mass[0, 0], m.body_ext[0, 0, 0], **values))
    data = mujoco.MjData(model)
    h = model.opt.timestep
    st = problem.state
    pos, quat = [], []
    for s, ts in enumerate(problem.targets.sample_times):
        mujoco.mj_resetData(model, data)
        # the hinge's angle about +y from q = (cos(a/2), 0, sin(a/2), 0)
        q0 = st.body_quat[s, 0]
        data.qpos[:] = st.body_pos[s, 0, 0], st.body_pos[s, 0, 2], 2 * np.arctan2(q0[2], q0[0])
        data.qvel[:] = st.body_vel[s, 0, 0], st.body_vel[s, 0, 2], st.body_omega[s, 0, 1]
        t = np.asarray(ts) - st.time[s]
        steps = int(np.ceil(t[-1] / h)) + 1
        path = np.empty((steps + 1, 3))
        path[0] = data.qpos
        for k in range(steps):
            mujoco.mj_step(model, data)
            path[k + 1] = data.qpos
        i, f = between(t, h, steps)
        x, z, a = (path[i] * (1 - f) + path[i + 1] * f).T
        pos.append(np.stack([x, np.zeros_like(x), z], 1))
        quat.append(np.stack([np.cos(a / 2), np.zeros_like(a), np.sin(a / 2), np.zeros_like(a)],
                             1))
    return np.concatenate(pos), np.concatenate(quat)


def _objective(problem, values):
    """The data README's fitting objective for MuJoCo: the mean centre
    position error [m] plus 0.03 m times the mean angle error [rad]
    (modulo 90 degrees), over ``problem``'s drops."""
    s = _score(problem, *mujoco_identified(problem, values))
    return float(s["pos"].mean() + 0.03 * np.radians(s["angle"].mean()))


def fit_mujoco(problem, evals=MUJOCO_EVALS):
    """MuJoCo identified on ``problem``'s drops as the data README identified
    it: friction, solref's time constant and damping ratio and the ground's
    height by Nelder-Mead on :func:`_objective` (``evals`` runs), from
    :data:`MUJOCO_IDENTIFIED` (its grid's answer), the time constant kept at
    or above two steps (MuJoCo's floor).  Returns the values."""
    from scipy.optimize import minimize

    start = MUJOCO_IDENTIFIED
    floor = 2.0 * start["timestep"]
    scale = np.array([0.02, 0.001, 0.3, 5e-4])  # the simplex's first steps
    x0 = np.array([start[k] for k in ("friction", "timeconst", "dampratio", "ground")])

    def values(x):
        return dict(start, friction=x[0], timeconst=x[1], dampratio=x[2], ground=x[3])

    def cost(x):
        if x[0] <= 0.0 or x[1] < floor * (1 - 1e-12) or x[2] <= 0.0:
            return np.inf
        return _objective(problem, values(x))

    simplex = np.vstack([x0, x0 + np.diag(scale)])
    r = minimize(cost, x0, method="Nelder-Mead",
                 options={"maxfev": evals, "initial_simplex": simplex})
    return values(r.x)


def _mujoco_fitted(whole, ntrain, test):
    """``(values, scores)``: MuJoCo identified on the first ``ntrain`` drops
    of ``whole`` (:func:`fit_mujoco`) and its scores on ``test``'s drops."""
    values = fit_mujoco(whole.subset(np.arange(ntrain)))
    return values, _score(test, *mujoco_identified(test, values))


def frozen(problem):
    """The body held at its first state, at every sample."""
    st = problem.state
    counts = [len(t) for t in problem.targets.sample_times]
    return (np.repeat(st.body_pos[:, 0], counts, axis=0),
            np.repeat(st.body_quat[:, 0], counts, axis=0))


def _fitted(ds, cfg, train_ids, test_ids, params=None):
    """``(whole, test, theta, fitted, ours)``: the drops ``train_ids`` then
    ``test_ids`` of the dataset ``ds`` as one problem and its test part, the
    coefficients fitted on the training drops as ``cfg`` says (or read from
    ``params``) with the fit's figures, and the test drops' scores."""
    from simcore.engine import simulate
    from simcore.identify.problem import Problem

    whole = Problem.from_dataset(ds, cfg.weights, order=train_ids + test_ids,
                                 coefficients=cfg.named())
    test = whole.subset(np.arange(len(train_ids), whole.nscen))
    theta, fitted = fit_or_read(whole, len(train_ids), cfg, params, ds)
    sim = simulate(test.model.with_params(theta), test.state, test.targets.sample_times)
    return whole, test, theta, fitted, _score(test, sim.samp_pos[:, 0], sim.samp_quat[:, 0])


def other_splits(ds, cfg, seeds, share=0.2):
    """contactfit and MuJoCo, each identified on the training drops of
    other seeded splits of the same drops (``share`` held out by the
    stable hash of their ids with each of ``seeds``, as the importer
    splits; contactfit by the calibration, MuJoCo by :func:`fit_mujoco`),
    scored on their held-out drops: one split's figures move by a few
    millimetres with the drops it holds.  Per split and their means."""
    from simcore.data import dataset as D

    names = sorted(D.split(ds))
    rows = []
    for seed in seeds:
        out = D.held_out(names, share, seed)
        train_ids = [n for n, o in zip(names, out) if not o]
        test_ids = [n for n, o in zip(names, out) if o]
        whole, test, _, fitted, ours = _fitted(ds, cfg, train_ids, test_ids)
        _, theirs = _mujoco_fitted(whole, len(train_ids), test)
        rows.append({"seed": seed, "test_drops": len(test_ids), **summary(ours),
                     **summary(theirs, "mujoco_fitted_"),
                     **{k: v for k, v in fitted.items() if k.startswith(("fitted_", "scanned_"))}})
    keys = ("pos_cm", "angle_deg", "rest_cm", "mujoco_fitted_pos_cm",
            "mujoco_fitted_angle_deg", "mujoco_fitted_rest_cm")
    return {"splits": rows, **{f"splits_mean_{k}": float(np.mean([r[k] for r in rows]))
                               for k in keys}}


def cross_validated(ds, cfg, k, seed=0, resamples=2000, known=None):
    """Every drop predicted once by a fit that did not see it: the drops cut
    into ``k`` folds (:func:`~simcore.data.dataset.folds`; fold 0 is the
    dataset's own test split at ``k = 5``), contactfit calibrated on the
    other folds and scored on each, beside the data README's identified
    MuJoCo model (:data:`MUJOCO_IDENTIFIED`) on the same drops, which were
    among its own training drops.  ``cv_*``: contactfit over all drops,
    ``cv_readme_*``: that model, ``cv_ratio_*``: the ratio of their means
    with a 90 % bootstrap interval over drops, and ``cv_projected_*``: the
    README's figure on its 200 unseen drops times that ratio, the paired
    estimate of contactfit's figure there (an estimate: the unseen drops
    are not in this data).  ``known``: ``{test ids: (test problem, fit
    figures, scores)}`` of folds already calibrated (the dataset's own
    split, which :func:`run` fitted), reused instead of fitted again."""
    from simcore.data import dataset as D

    names = sorted(D.split(ds))
    fold = D.folds(names, k, seed)
    ours, theirs, rows = [], [], []
    for j in range(k):
        train_ids = [n for n, f in zip(names, fold) if f != j]
        test_ids = [n for n, f in zip(names, fold) if f == j]
        if tuple(test_ids) in (known or {}):
            test, fitted, mine = known[tuple(test_ids)]
        else:
            _, test, _, fitted, mine = _fitted(ds, cfg, train_ids, test_ids)
        readme = _score(test, *mujoco_identified(test))
        ours.append(mine)
        theirs.append(readme)
        rows.append({"fold": j, "test_drops": len(test_ids), **summary(mine),
                     **summary(readme, "readme_"),
                     **{n: v for n, v in fitted.items() if n.startswith(("fitted_", "scanned_"))}})
    ours, theirs = ({m: np.concatenate([s[m] for s in x]) for m in ("pos", "angle", "rest")}
                    for x in (ours, theirs))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(names), (resamples, len(names)))
    out = {"folds": rows, **summary(ours, "cv_"), **summary(theirs, "cv_readme_")}
    for m, unit in (("pos", "pos_cm"), ("angle", "angle_deg"), ("rest", "rest_cm")):
        ratio = ours[m].mean() / theirs[m].mean()
        lo, hi = np.quantile(ours[m][draws].mean(1) / theirs[m][draws].mean(1), [0.05, 0.95])
        out[f"cv_ratio_{unit}"] = [float(ratio), float(lo), float(hi)]
        out[f"cv_projected_{unit}"] = [float(x * MUJOCO[f"mujoco_identified_{unit}"])
                                       for x in (ratio, lo, hi)]
    out["cv_drops_ours_better_pos"] = float(np.mean(ours["pos"] < theirs["pos"]))
    return out


def run(dataset=DATASET, params=None, moreau_fit=False, mujoco_fit=False, splits=(), folds=0):
    from flows import settings
    from simcore.data import dataset as D
    from simcore.engine import simulate

    ds = D.read(dataset)
    cfg = settings.calibration(Path(dataset) / "calibrate.yaml")
    split = D.split(ds)
    train_ids = sorted(s for s, v in split.items() if v == "train")
    test_ids = sorted(s for s, v in split.items() if v == "test")
    whole, test, theta, fitted, ours = _fitted(ds, cfg, train_ids, test_ids, params)
    # the same drops and coefficients on the Moreau-Jean stepper
    mtest = on_moreau(ds, test, test_ids)
    t0 = time.perf_counter()
    msim = simulate(mtest.model.with_params(theta), mtest.state, test.targets.sample_times)
    moreau_s = time.perf_counter() - t0
    theirs = _score(test, msim.samp_pos[:, 0], msim.samp_quat[:, 0])
    refit = {}
    if moreau_fit:
        mwhole = on_moreau(ds, whole, train_ids + test_ids)
        mtheta, mfitted = fit_or_read(mwhole, len(train_ids), cfg, ds=ds)
        msim = simulate(mtest.model.with_params(mtheta), mtest.state, test.targets.sample_times)
        refit = {**summary(_score(test, msim.samp_pos[:, 0], msim.samp_quat[:, 0]),
                           "moreau_fitted_"),
                 **{f"moreau_{k}": v for k, v in mfitted.items()}}
    flat = _score(test, *baseline(replace(test, model=test.model.with_params(theta)), mu=1e9))
    still = _score(test, *frozen(test))
    try:
        peer = summary(_score(test, *mujoco_identified(test)),
                       "mujoco_identified_this_split_")
        if mujoco_fit:
            t0 = time.perf_counter()
            values, theirs = _mujoco_fitted(whole, len(train_ids), test)
            peer.update(summary(theirs, "mujoco_fitted_"))
            peer.update({f"mujoco_fitted_{k}": v for k, v in values.items()},
                        mujoco_fit_s=time.perf_counter() - t0)
        if splits:
            peer.update(other_splits(ds, cfg, splits))
        if folds:
            # the dataset's own split, when fitted here, is one of the folds
            known = {} if params else {tuple(test_ids): (test, fitted, ours)}
            peer.update(cross_validated(ds, cfg, folds, known=known))
    except ImportError:
        peer = {"mujoco_identified_this_split": "not installed (pip install -e .[bench])"}
    return {"train_drops": len(train_ids), "test_drops": len(test_ids), **summary(ours),
            **summary(theirs, "moreau_"), "moreau_simulate_s": moreau_s, **refit,
            **summary(flat, "flat_"), **summary(still, "frozen_"), **fitted, **peer, **MUJOCO}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--dataset", default=str(DATASET))
    ap.add_argument("--params", help="a calibration's fit.json (no fit then)")
    ap.add_argument("--moreau-fit", action="store_true",
                    help="also fit the coefficients on the Moreau-Jean stepper")
    ap.add_argument("--mujoco-fit", action="store_true",
                    help="also identify MuJoCo on the training drops (Nelder-Mead on the data "
                         "README's objective) and score it on the test drops")
    ap.add_argument("--splits", type=lambda v: [int(x) for x in v.split(",")], default=(),
                    metavar="SEEDS", help="also fit contactfit and MuJoCo on other seeded "
                    "splits of the drops (e.g. 1,2,3) and score each on its held-out drops")
    ap.add_argument("--folds", type=int, default=0, metavar="K",
                    help="also cross-validate: calibrate on all but one of K folds of the drops, "
                    "score each fold, and project the README's figure on its unseen drops")
    args = ap.parse_args(argv)
    emit(run(args.dataset, args.params, args.moreau_fit, args.mujoco_fit, args.splits,
             args.folds),
         args.json, width=30)


if __name__ == "__main__":
    main()

"""Box-steps per second of the time-stepper, against MuJoCo at the same step.

``python -m benchmarks.rigid [--json] [--tosses N] [--duration S] [--repeat R]``:
``N`` cube tosses (seeded, shaped like the real ContactNets tosses: a
0.1048 m cube of 0.37 kg and inertia 0.00081 kg m^2 thrown at about
1.5 m/s with a few rad/s of spin from 0.1-0.25 m above a table, tumbling,
sliding and coming to rest), each run for ``S`` seconds:

* ``step`` [s]: the time-stepper's stable step for these tosses under the
  default Hunt-Crossley contact (:func:`simcore.laws.penalty.stable_step`); both
  engines run at it;
* ``box_steps_per_s`` (one core, the serial driver) and
  ``box_steps_per_s_parallel`` (the ``prange`` driver over every core),
  each the best of ``--repeat``;
* ``mujoco_steps_per_s`` and ``mujoco_steps_per_s_parallel``: MuJoCo (the
  ``bench`` extra, ``pip install -e .[bench]``) rolling out the same tosses
  at the same step with ``mujoco.rollout`` (its C++ threaded rollout: one
  thread, then one per core), a free box on a plane with friction 0.3;
* ``speedup`` and ``speedup_parallel``: ours over MuJoCo's, measured in the
  same run (this machine is shared and noisy; ratios hold better than rates);
* ``moreau_box_steps_per_s`` (one core), ``..._parallel`` and
  ``moreau_speedup``, ``moreau_speedup_parallel``: the Moreau-Jean stepper
  (:mod:`simcore.rigid.moreau`) on the same tosses at the same step, over
  MuJoCo's (its flights taken at once and its resting boxes asleep count
  as the steps they span), on the elliptic cone (the model's default);
  ``moreau_gradient_cost_ratio``: its run with the four directions over its
  forward run (a run with directions takes every step);
  ``moreau_pyramid_box_steps_per_s``, ``moreau_pyramid_speedup``: on the
  pyramid of 4 edges (``cone: pyramidal``; MuJoCo's default cone is a
  pyramid too), one core;
* ``gradient_cost_ratio``: the same rollouts with the exact sensitivities of
  their final states to four coefficients (``mu_s``, ``mu_k``, ``e_bg``,
  ``k_hc``; :mod:`simcore.rigid.rigid_tangent`) over the forward run alone, one
  core, the two alternated;
* ``recovery`` (skipped by ``--no-recovery``): the identification of
  :data:`RECOVERY_FREE` from the defaults on ``contactfit generate --shape
  box`` (40 noisy tosses, 1 mm and 0.5 degrees, known truth) with the
  settings a user of box tosses is told to use (:data:`RECOVERY_FIT`:
  horizon continuation with secant derivatives): the truth, the fitted
  values, their errors in per cent and the fit's wall time ``fit_s``.

MuJoCo's contact model (soft constraints, its own solver) is not ours: the
comparison is of rollout rates at an equal step, not of trajectories.
"""

import argparse
import os
from dataclasses import replace

import numpy as np

from benchmarks._emit import best, best_alternated, emit

HALF = 0.0524
MASS = 0.37
INERTIA = 0.00081
#: The recovery row: the coefficients identified and how.
RECOVERY_FREE = ("mu_s", "mu_k", "e_bg")
RECOVERY_FIT = dict(secant=(0.01, 0.003), step_sigma=0.0, max_iter=40)


def recovery(tosses=40, seed=7):
    """Fit :data:`RECOVERY_FREE` from the defaults on ``tosses`` generated
    box tosses; the row of the ``recovery`` key."""
    import tempfile
    import time

    from simcore.data import synth
    from simcore.identify import fit as F
    from simcore.identify.problem import Problem

    with tempfile.TemporaryDirectory() as tmp:
        cfg = synth.GeneratorSettings(shape="box", scenarios=tosses, seed=seed, duration=1.2,
                                      rate=148.0)
        synth.generate(tmp, cfg, name="box-recovery")
        problem = Problem.from_dataset(tmp)
    t0 = time.perf_counter()
    r = F.fit(problem, free=list(RECOVERY_FREE), **RECOVERY_FIT)
    wall = time.perf_counter() - t0
    truth = synth.TRUTH_BOX
    return {"tosses": tosses, "status": r.message,
            **{f"{k}_truth": truth[k] for k in RECOVERY_FREE},
            **{f"{k}_fit": r.params[k] for k in RECOVERY_FREE},
            **{f"{k}_error_pct": 100.0 * (r.params[k] / truth[k] - 1.0) for k in RECOVERY_FREE},
            "fit_s": wall}


def tosses(n, seed=0):
    """``n`` cube tosses: initial positions, velocities, angular velocities
    (world) and orientations."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    pos = np.c_[rng.uniform(-0.2, 0.2, (n, 2)), rng.uniform(0.1, 0.25, n) + np.sqrt(3) * HALF]
    heading = rng.uniform(0, 2 * np.pi, n)
    speed = rng.uniform(1.0, 2.0, n)
    vel = np.c_[speed * np.cos(heading), speed * np.sin(heading), rng.uniform(-1.0, 0.0, n)]
    omega = rng.normal(scale=3.0, size=(n, 3))
    return pos, vel, omega, q


def _ours(n, duration, integrator=None, step=None, cone="elliptic"):
    """The tosses on the time-stepper (``integrator`` None: the penalty
    stepper at its stable step; ``moreau``: the Moreau-Jean stepper at
    ``step``) with the friction ``cone``: ``(step, run, grads)``,
    ``run(parallel, directions)`` the box-steps of one rollout of them all."""
    from simcore import engine as E
    from simcore import model as M

    pos, vel, omega, q = tosses(n)
    scen = [M.Scenario(radius=[np.nan], mass=[MASS], pos=[pos[k]], vel=[vel[k]], omega=[omega[k]],
                       quat=[q[k]], t_end=duration, dt=step, shape=("box",),
                       extent=[[HALF] * 3], inertia=[[INERTIA] * 3]) for k in range(n)]
    model, state = M.build(scen, params={"mu_s": 0.3, "mu_k": 0.3, "e_bg": 0.5},
                           integrator=integrator, cone=cone)
    step = float(model.scen_dt.min())
    model = replace(model, scen_dt=np.full(n, step))  # every scenario at the one step

    grads = E.Directions.build(params=[model.layout.index(n) for n in GRADIENT_COEFFICIENTS])

    def run(parallel, directions=None):
        # (the steps alone: no contact log, as MuJoCo's rollout keeps none)
        res = E.simulate(model, state, None, parallel=parallel, directions=directions,
                         event_capacity=0)
        return int(res.steps.sum())

    run(True), run(False)  # compile
    run(False, grads)
    return step, run, grads


#: The coefficients of the gradient row.
GRADIENT_COEFFICIENTS = ("mu_s", "mu_k", "e_bg", "k_hc")


def _mujoco(pos, vel, omega, q, step, duration, threads):
    import mujoco
    from mujoco import rollout

    xml = f"""<mujoco><option timestep="{step}"/>
      <worldbody><geom type="plane" size="5 5 0.1" friction="0.3"/>
      <body><freejoint/><geom type="box" size="{HALF} {HALF} {HALF}" friction="0.3"/>
      <inertial pos="0 0 0" mass="{MASS}" diaginertia="{INERTIA} {INERTIA} {INERTIA}"/></body>
      </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    data = mujoco.MjData(model)
    init = np.empty((pos.shape[0], mujoco.mj_stateSize(model, spec)))
    for k in range(pos.shape[0]):
        mujoco.mj_resetData(model, data)
        data.qpos[:] = np.r_[pos[k], q[k]]
        # the free joint's angular velocity is in the body frame
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, q[k])
        data.qvel[:] = np.r_[vel[k], rot.reshape(3, 3).T @ omega[k]]
        mujoco.mj_getState(model, data, init[k], spec)
    nstep = int(round(duration / step))
    datas = [mujoco.MjData(model) for _ in range(threads)]
    out = np.empty((pos.shape[0], nstep, init.shape[1]))

    def run():
        rollout.rollout(model, datas, init, nstep=nstep, state=out)
        return pos.shape[0] * nstep

    run()
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--tosses", type=int, default=64)
    ap.add_argument("--duration", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-recovery", action="store_true", help="skip the 40-toss fit")
    args = ap.parse_args(argv)
    step, run, grads = _ours(args.tosses, args.duration)
    steps = run(False)
    forward, gradient = best_alternated((lambda: run(False), lambda: run(False, grads)),
                                        args.repeat)
    out = {"tosses": args.tosses, "duration_s": args.duration, "step": step,
           "box_steps": steps,
           "box_steps_per_s": steps / forward,
           "box_steps_per_s_parallel": steps / best(lambda: run(True), args.repeat),
           "gradient_cost_ratio": gradient / forward}
    _, moreau, m_grads = _ours(args.tosses, args.duration, "moreau", step)
    m_steps = moreau(False)
    m_forward, m_gradient = best_alternated((lambda: moreau(False),
                                             lambda: moreau(False, m_grads)), args.repeat)
    out["moreau_box_steps_per_s"] = m_steps / m_forward
    out["moreau_gradient_cost_ratio"] = m_gradient / m_forward
    out["moreau_box_steps_per_s_parallel"] = m_steps / best(lambda: moreau(True), args.repeat)
    _, pyramid, _ = _ours(args.tosses, args.duration, "moreau", step, "pyramidal")
    out["moreau_pyramid_box_steps_per_s"] = pyramid(False) / best(lambda: pyramid(False),
                                                                   args.repeat)
    try:
        import mujoco  # noqa: F401
    except ImportError:
        out["mujoco"] = "not installed (pip install -e .[bench])"
    else:
        pos, vel, omega, q = tosses(args.tosses)
        cores = os.cpu_count() or 1
        for key, threads in (("mujoco_steps_per_s", 1), ("mujoco_steps_per_s_parallel", cores)):
            peer = _mujoco(pos, vel, omega, q, step, args.duration, threads)
            n = peer()
            out[key] = n / best(peer, args.repeat)
        out["speedup"] = out["box_steps_per_s"] / out["mujoco_steps_per_s"]
        out["speedup_parallel"] = (out["box_steps_per_s_parallel"]
                                   / out["mujoco_steps_per_s_parallel"])
        out["moreau_speedup"] = out["moreau_box_steps_per_s"] / out["mujoco_steps_per_s"]
        out["moreau_pyramid_speedup"] = (out["moreau_pyramid_box_steps_per_s"]
                                         / out["mujoco_steps_per_s"])
        out["moreau_speedup_parallel"] = (out["moreau_box_steps_per_s_parallel"]
                                          / out["mujoco_steps_per_s_parallel"])
    if not args.no_recovery:
        out["recovery"] = recovery()
    emit(out, args.json, width=28)


if __name__ == "__main__":
    main()

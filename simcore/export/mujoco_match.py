"""MuJoCo's contact matched on contactfit's own trajectories (``contactfit
export FIT --to mujoco --dataset D --match N``).

The export of :mod:`simcore.export.mujoco` sets a contact's ``solref`` so
that a point mass dropped at 1 m/s rebounds at the fitted ratio and lasts
as long as the fitted law's contact.  A tumbling box meets the ground on
corners and edges while it turns, where MuJoCo's soft contact (a linear
spring-damper whose damping acts from the touch, friction relaxed over its
own time constant) and the fitted law part: on the real cube tosses MuJoCo
re-simulates contactfit's trajectories of the training tosses 1.1 cm
apart on average at the drop-matched values.  The match measures the
closest equivalent on the scenes themselves: it takes the dataset's first
``N`` training scenarios (sorted by id), simulates them with contactfit at
the fit's coefficients, and scales every body-ground ``<pair>``'s friction,
``solref`` (time constant and damping ratio) and ``solreffriction`` time
constant by four common factors found by Nelder-Mead (from the
drop-matched values, at most :data:`EVALS` MuJoCo runs) so that MuJoCo,
started from the same states, follows contactfit's trajectories: the mean
over scenarios of the mean distance between the two centres at the
scenario's sample times.  No measurement enters: the match reproduces the
fit, not the data.  A time constant stays at or above
:data:`simcore.export.mujoco.STEPS` ``[0]`` timesteps (the export's
floor for consistent rebounds); friction within (0, 5].

Needs the ``mujoco`` package (``pip install 'contactfit[export]'``) and
scenes of one free body (box or sphere tosses) of the same shape and mass
as the written scene's.
"""

import re

import numpy as np

#: The MuJoCo runs (over the matched scenarios) the Nelder-Mead search may take.
EVALS = 45
#: The initial simplex's step of each log-factor.
SIMPLEX = 0.3
_PAIR = re.compile(r'<pair [^>]*geom2="ground"[^>]*/>')


def between(t, h, steps):
    """Each time of ``t`` between two of ``steps`` steps of ``h``: the
    earlier step's index and the weight of the later one (``(n, 1)``)."""
    u = np.asarray(t) / h
    i = np.minimum(np.floor(u).astype(int), steps - 1)
    return i, (u - i)[:, None]


def rollout(xml, state, sample_times, body=0):
    """Positions and orientations (w, x, y, z) of body ``body`` at every
    sample time (rows of all scenarios in order) simulated in MuJoCo from
    ``xml`` with each scenario's start in ``state`` (a
    :class:`simcore.model.State`: the centre's position and velocity, the
    world-frame angular velocity, the orientation), linearly interpolated
    between MuJoCo's steps (orientations normalised)."""
    import mujoco

    from ..geometry.rigid import quat_matrix

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
        i, f = between(t, h, steps)
        pos.append(xp[i] * (1 - f) + xp[i + 1] * f)
        a, b = xq[i], xq[i + 1]
        b = np.where((np.sum(a * b, axis=1) < 0)[:, None], -b, b)
        q = a * (1 - f) + b * f
        quat.append(q / np.linalg.norm(q, axis=1, keepdims=True))
    return np.concatenate(pos), np.concatenate(quat)


def _numbers(tag, attr):
    return [float(x) for x in re.search(rf'{attr}="([^"]*)"', tag).group(1).split()]


def scaled(xml, factors):
    """``xml`` with every body-ground ``<pair>``'s friction, ``solref`` time
    constant and damping ratio and ``solreffriction`` time constant
    multiplied by ``factors`` (four numbers, in that order)."""
    fm, ft, fd, ff = factors

    def one(m):
        tag = m.group(0)
        mu = _numbers(tag, "friction")
        tc, dr = _numbers(tag, "solref")
        tcf, drf = _numbers(tag, "solreffriction")
        mu[0] *= fm
        mu[1] *= fm
        tag = re.sub(r'friction="[^"]*"', 'friction="' + " ".join(f"{x:.10g}" for x in mu) + '"',
                     tag, count=1)
        tag = re.sub(r' solref="[^"]*"', f' solref="{tc * ft:.10g} {dr * fd:.10g}"', tag)
        return re.sub(r'solreffriction="[^"]*"', f'solreffriction="{tcf * ff:.10g} {drf:.10g}"',
                      tag)

    return _PAIR.sub(one, xml)


def _distance(xml, problem, target):
    """The mean over ``problem``'s scenarios of the mean distance [m] between
    MuJoCo's centre and ``target``'s (rows of every sample)."""
    pos, _ = rollout(xml, problem.state, problem.targets.sample_times)
    d = np.linalg.norm(pos - target, axis=1)
    ptr = np.r_[0, np.cumsum([len(t) for t in problem.targets.sample_times])]
    return float(np.mean([d[a:b].mean() for a, b in zip(ptr[:-1], ptr[1:])]))


def check(problem, scene):
    """Raise ``ValueError`` (one line) unless every scenario of ``problem`` is
    one free body shaped and weighed as ``scene``'s (a rigid body's model:
    boxes, or spheres on a penalty law)."""
    m = problem.model
    if len(scene.bodies) != 1 or np.any(m.body_count != 1) or m.body_ext is None:
        raise ValueError("--match takes scenes of one free rigid body (box tosses, or spheres "
                         "on a penalty law)")
    b = scene.bodies[0]
    half = np.asarray(b.size * 3 if b.shape == "sphere" else b.size, dtype=np.float64)
    same = np.isclose(m.body_mass[:, 0], b.mass, rtol=1e-9) & np.all(
        np.isclose(m.body_ext[:, 0], half, rtol=1e-9), axis=1)
    if not np.all(same):
        s = int(np.flatnonzero(~same)[0])
        raise ValueError(f"--match: scenario {problem.ids[s]!r} has another body than the "
                         f"written scene's ({scene.scenario}): match on scenes of one body")


def match(xml, problem, theta, timestep, evals=EVALS):
    """``(xml, line)``: ``xml`` (a scene written by :func:`simcore.export.mujoco.write`
    at ``timestep``) with its body-ground contact matched on ``problem``'s
    scenarios simulated by contactfit at ``theta`` (module docstring), and
    one line saying what the match did."""
    from scipy.optimize import minimize

    from ..engine import simulate
    from .mujoco import STEPS

    tags = _PAIR.findall(xml)
    if not tags:
        raise ValueError("--match: the scene has no body-ground <pair> to match")
    sim = simulate(problem.model.with_params(theta), problem.state, problem.targets.sample_times)
    target = sim.samp_pos[:, 0]
    floor = STEPS[0] * timestep
    least_tc = min(_numbers(t, "solref")[0] for t in tags)
    least_tcf = min(_numbers(t, "solreffriction")[0] for t in tags)
    most_mu = max(_numbers(t, "friction")[0] for t in tags)

    def factors(z):
        return np.exp(np.asarray(z))

    seen = {}  # (the start is the simplex's first vertex too: run it once)

    def cost(z):
        f = factors(z)
        if min(least_tc * f[1], least_tcf * f[3]) < floor * (1 - 1e-12) or most_mu * f[0] > 5.0:
            return np.inf
        key = tuple(np.asarray(z, dtype=np.float64))
        if key not in seen:
            seen[key] = _distance(scaled(xml, f), problem, target)
        return seen[key]

    before = cost(np.zeros(4))
    simplex = np.vstack([np.zeros(4), SIMPLEX * np.eye(4)])
    res = minimize(cost, np.zeros(4), method="Nelder-Mead",
                   options={"maxfev": int(evals), "initial_simplex": simplex})
    if not (np.isfinite(res.fun) and res.fun < before):
        return xml, (f"contact matched on {problem.nscen} scenarios of contactfit's: no change "
                     f"came closer than the drop-matched values ({100 * before:.3g} cm apart)")
    f = factors(res.x)
    return scaled(xml, f), (
        f"contact matched on contactfit's trajectories of {problem.nscen} training scenarios "
        f"(mean centre distance {100 * before:.3g} -> {100 * res.fun:.3g} cm): friction x"
        f"{f[0]:.3g}, solref time constant x{f[1]:.3g} and damping ratio x{f[2]:.3g}, "
        f"solreffriction time constant x{f[3]:.3g} of the drop-matched values")

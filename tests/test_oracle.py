"""The numba kernel against the NumPy oracle on random scenarios.

Both implementations round differently, so they can only be held to 1e-12
where the scenario itself does not amplify rounding by more than 100x.
Some random scenes are chaotic at that level (a cluster of balls of unequal
radii bulldozed by a push: every impact's normal tilts, the balls hop, and
each impact multiplies the sensitivity).  Each scenario's conditioning is
measured on the kernel itself, by moving the initial positions by 1e-15 m
and watching the sampled positions and velocities; the ill-conditioned ones
are left out, and at least 200 well-conditioned ones must agree.
"""

import numpy as np

import simcore
from simcore import params as P
from simcore.kernel.events import EVENT_KINDS

from .oracle import KINDS, Oracle
from .scenes import box_walls, random_params, random_scenario

NSCEN = 230
NEED = 200
NSAMP = 25
TOL = 1e-12
PERTURB = 1e-15
MAX_GAIN = 100
DV_TOL = 1e-9
T_TOL = 1e-11
MICRO_T_TOL = 1e-9


def _samples(res, s, nb):
    _, pos, vel = res.samples(s)
    return pos[:, :nb], vel[:, :nb]


def test_kernel_matches_oracle():
    rng = np.random.default_rng(2026)
    scenarios = [random_scenario(rng, name=f"r{s}") for s in range(NSCEN)]
    params = random_params(rng)
    vec = P.vector(params)
    times = [np.linspace(sc.t0, sc.t_end, NSAMP) for sc in scenarios]
    model, state = simcore.build(scenarios, params=params)
    res = simcore.simulate(model, state, times)
    nudged = state.copy()
    nudged.body_pos[:, :, :2] += PERTURB
    res_nudged = simcore.simulate(model, nudged, times)

    checked = 0
    # The sliding model's kinds (the spinning model's are tests/test_spin.py's).
    kinds = dict.fromkeys(KINDS, 0)
    for s, sc in enumerate(scenarios):
        nb = len(sc.radius)
        pos, vel = _samples(res, s, nb)
        pos_n, vel_n = _samples(res_nudged, s, nb)
        spread = max(np.abs(pos_n - pos).max(), np.abs(vel_n - vel).max())
        if spread > MAX_GAIN * PERTURB:
            continue  # ill-conditioned: it amplifies rounding over MAX_GAIN times
        checked += 1
        orc = Oracle(sc.radius, sc.mass, sc.pos, sc.vel, sc.walls, sc.controls, sc.t0,
                     sc.t_end, sc.dt, vec)
        samples = orc.run(times[s])
        np.testing.assert_allclose(pos, [p for p, _ in samples], rtol=TOL, atol=TOL,
                                   err_msg=sc.name)
        np.testing.assert_allclose(vel, [v for _, v in samples], rtol=TOL, atol=TOL,
                                   err_msg=sc.name)
        np.testing.assert_allclose(res.final.body_pos[s, :nb], orc.p, rtol=TOL, atol=TOL,
                                   err_msg=sc.name)
        got = res.events(s)
        assert len(got["t"]) == len(orc.events), sc.name
        t_micro = -np.inf
        for k, ev in enumerate(orc.events):
            where = (sc.name, k)
            assert EVENT_KINDS[got["kind"][k]] == ev["kind"], where
            assert (got["a"][k], got["b"][k]) == (ev["a"], ev["b"]), where
            assert got["slip"][k] == ev["slip"], where
            # An event time is a rounding over a rate: a stop's is the
            # velocity's (1e-12 m/s) over the deceleration, a contact's the
            # gap's (eps |p|) over the approach speed, which falls to
            # V_CONTACT = 1e-5 m/s for micro-events (|dv| < 1 mm/s).
            micro = np.abs(ev["dva"]).max() < 1e-3 and ev["kind"] not in ("stop", "start")
            if micro:
                t_micro = ev["t"]
            micro = micro or abs(ev["t"] - t_micro) <= MICRO_T_TOL  # same instant
            np.testing.assert_allclose(got["t"][k], ev["t"], rtol=TOL,
                                       atol=MICRO_T_TOL if micro else T_TOL,
                                       err_msg=f"{where} {ev}")
            np.testing.assert_allclose(got["normal"][k], ev["n"], atol=1e-11)
            # Velocity changes are held to DV_TOL [m/s] (1e-9 of the 1 m/s
            # scale): a body pressed into a wall bounces ever smaller, and a
            # bounce whose excursion is 1e-9 m, computed from positions of
            # 0.4 m, carries 1e-7 relative rounding in any implementation.
            # Impulses likewise, times the mass.
            np.testing.assert_allclose(got["dva"][k], ev["dva"], atol=DV_TOL)
            np.testing.assert_allclose(got["dvb"][k], ev["dvb"], atol=DV_TOL)
            np.testing.assert_allclose(got["jn"][k], ev["jn"],
                                       atol=DV_TOL * sc.mass[ev["a"]])
            kinds[ev["kind"]] += 1
    assert checked >= NEED, f"only {checked} of {NSCEN} scenarios are well-conditioned"
    # The random set exercises every kind of event, many times.
    assert all(c >= 10 for c in kinds.values()), kinds


def test_impacts_inside_a_rotating_push_match_the_oracle():
    """Where a push turns the motion, the kernel skips its event search over
    dt steps that a motion bound proves free of events (``_quiet_time``); the
    oracle searches every step.  A ball pushed across its motion curves into
    a resting ball and then into a wall, both inside the push window, while
    a third ball slides free: the events and the samples must agree."""
    r, m = 0.05, 0.2
    sc = simcore.Scenario(
        radius=np.full(3, r), mass=np.full(3, m),
        pos=np.array([[-0.3, -0.2, r], [0.0, 0.05, r], [0.2, -0.35, r]]),
        vel=np.array([[0.9, 0.0, 0.0], [0.0, 0.0, 0.0], [-0.4, 0.1, 0.0]]), t_end=1.5,
        dt=1e-3, walls=box_walls(), controls=np.array([[0, 0.05, 1.2, 0.0, 0.9, 0.0]]), name="curve")
    params = {"mu_k": 0.15, "mu_s": 0.2, "v_th": 0.03}
    vec = P.vector(params)
    times = [np.linspace(0.0, 1.5, 301)]
    model, state = simcore.build([sc], params=params)
    res = simcore.simulate(model, state, times)
    orc = Oracle(sc.radius, sc.mass, sc.pos, sc.vel, sc.walls, sc.controls, sc.t0, sc.t_end,
                 sc.dt, vec)
    samples = orc.run(times[0])
    pos, vel = _samples(res, 0, 3)
    np.testing.assert_allclose(pos, [p for p, _ in samples], rtol=TOL, atol=TOL)
    np.testing.assert_allclose(vel, [v for _, v in samples], rtol=TOL, atol=TOL)
    got = res.events(0)
    kinds = [EVENT_KINDS[k] for k in got["kind"]]
    assert kinds == [ev["kind"] for ev in orc.events]
    np.testing.assert_allclose(got["t"], [ev["t"] for ev in orc.events], rtol=TOL, atol=T_TOL)
    inside = (got["t"] > 0.05) & (got["t"] < 1.2) & (got["a"] == 0)
    hit = {EVENT_KINDS[k] for k in got["kind"][inside]}
    assert {"body-body", "body-wall"} <= hit, kinds  # both impacts during the push


def test_a_row_pressed_into_a_wall_outgrows_the_first_contact_room_and_matches_the_oracle():
    """Ten touching balls in a row, pushed along it into a wall, then the
    first pulled away: with the ground, nine ball contacts, the wall and the
    resting bodies' static forces the contact system has 40 unknowns, more
    than a scenario's first room holds (``2 nb + contact.FIRST_ROOM`` with
    the ``2 nb`` kept for bodies put back at rest): the kernel grows it
    mid-run and must still agree with the oracle."""
    from simcore.sliding import contact

    r, m, nb = 0.03, 0.2, 10
    half = 0.5
    pos = np.zeros((nb, 3))
    pos[:, 0] = half - r - 2 * r * np.arange(nb)[::-1]
    pos[:, 2] = r
    push = [[0, 0.05, 0.25, 2.5, 0.0, 0.0], [0, 0.3, 0.5, -3.0, 0.0, 0.0]]
    sc = simcore.Scenario(radius=np.full(nb, r), mass=np.full(nb, m), pos=pos,
                          vel=np.zeros((nb, 3)), t_end=0.6, dt=1e-3, walls=box_walls(half),
                          controls=np.array(push), name="row")
    assert (nb + (nb - 1) + 1 + 2 * nb) + 2 * nb > 2 * nb + contact.FIRST_ROOM
    params = {"mu_k": 0.2, "mu_s": 0.3, "v_th": 0.03}
    times = [np.linspace(0.0, 0.6, 61)]
    model, state = simcore.build([sc], params=params)
    res = simcore.simulate(model, state, times)
    orc = Oracle(sc.radius, sc.mass, sc.pos, sc.vel, sc.walls, sc.controls, sc.t0, sc.t_end,
                 sc.dt, P.vector(params))
    samples = orc.run(times[0])
    pos_k, vel_k = _samples(res, 0, nb)
    np.testing.assert_allclose(pos_k, [p for p, _ in samples], rtol=TOL, atol=TOL)
    np.testing.assert_allclose(vel_k, [v for _, v in samples], rtol=TOL, atol=TOL)
    # The row held against the wall under the push, then the first ball left.
    np.testing.assert_allclose(pos_k[20, 1:], pos[1:], atol=1e-12)
    assert pos_k[-1, 0, 0] < pos[0, 0] - 0.1

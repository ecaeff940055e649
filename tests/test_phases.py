"""The time-steppers' contact phases as events (simcore/rigid/phases.py):
each phase's impulse against the velocity change the steps show, the
kinds, partners and normals, a body-body impact as Newton says, the
re-run of a log that overflowed, and the events table of ``simulate``."""

import numpy as np
import pytest

from simcore import EVENT_KINDS
from simcore import engine as E
from simcore import model as M

from .test_rigid import MASS, G, H, bodies, cube, quat_about

INTEGRATORS = ("penalty", "moreau")


def _run(scenarios, params, integrator, samples=None, **kw):
    model, state = M.build(scenarios, params=params, integrator=integrator)
    return E.simulate(model, state, samples, **kw)


def _kinds(sim, s=0):
    return [EVENT_KINDS[k] for k in sim.events(s)["kind"]]


def _tumbling_drop(dt):
    q = quat_about((1.0, 0.4, 0.2), 0.7)
    return cube((0.0, 0.0, 0.2), vel=(0.6, -0.2, 0.0), omega=(3.0, -2.0, 1.0), quat=q,
                t_end=1.0, dt=dt)


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_each_phase_carries_the_impulse_the_steps_show(integrator):
    """A cube tumbling onto the ground, sampled at every step: the velocity
    change of each ground phase, less the free fall over it, is exactly the
    phase's ``dva`` (the ground is the only contact); the phases alternate
    start, end, each end after its start; ``jn`` is the normal impulse
    (positive, the ground's normal up) and ``jt`` no more than mu_k of it
    over the cone's corners."""
    mu = 0.3
    model, state = M.build([_tumbling_drop(1e-3)], params={"e_bg": 0.5, "mu_k": mu, "mu_s": mu},
                           integrator=integrator)
    dt = float(model.scen_dt[0])  # (the stability guard's step: sampled at every step)
    times = np.arange(1, int(0.9 / dt)) * dt
    sim = E.simulate(model, state, [times])
    ev = sim.events(0)
    kinds = _kinds(sim)
    assert kinds[0] == "body-ground start" and len(kinds) >= 6
    assert kinds[::2] == ["body-ground start"] * len(kinds[::2])
    assert kinds[1::2] == ["body-ground end"] * len(kinds[1::2])
    assert np.all(ev["b"] == -1) and np.all(ev["a"] == 0) and np.all(ev["slip"] == -1)
    assert np.all(np.diff(ev["t"]) > 0)
    t_all = np.r_[0.0, times]
    v_all = np.r_[state.body_vel[:, 0], sim.samp_vel[:, 0]]
    ends = np.flatnonzero(ev["kind"] == ev["kind"][1])
    for k in ends:
        t0, t1 = ev["t"][k - 1], ev["t"][k]
        i0, i1 = np.searchsorted(t_all, [t0 - dt / 2, t1 - dt / 2])
        dv = v_all[i1] - v_all[i0] - np.array([0, 0, -G]) * (t1 - t0)
        assert ev["dva"][k] == pytest.approx(dv, abs=1e-9)
        assert ev["jn"][k] == pytest.approx(MASS * dv[2], rel=1e-6, abs=1e-9)
        assert ev["normal"][k] == pytest.approx([0, 0, 1], abs=1e-12)
        assert ev["jn"][k] > 0 and ev["jt"][k] <= np.sqrt(2) * mu * ev["jn"][k] + 1e-12
        assert np.all(ev["dvb"][k] == 0.0)
    assert np.all(ev["jn"][ev["kind"] == ev["kind"][0]] == 0.0)  # the starts carry none


def test_a_moreau_bounce_is_one_phase_whose_impulse_is_newtons():
    """A frictionless flat drop on the Moreau-Jean stepper: the first
    phase's velocity change is (1 + e) times the approach speed plus the
    impact step's free fall, which the contact held (Newton's law at the
    velocity level; the step after it, still within the skin, adds none)."""
    dt, e = 1e-3, 0.5
    times = np.arange(1, 300) * dt
    sim = _run([cube((0, 0, H + 0.05), t_end=0.3, dt=dt)], {"e_bg": e, "mu_k": 0.0, "mu_s": 0.0},
               "moreau", [times])
    vz = sim.samp_vel[:, 0, 2]
    k = int(np.argmax(np.diff(vz) > 0)) + 1  # the impact step ends at times[k]
    ev = sim.events(0)
    assert _kinds(sim)[:2] == ["body-ground start", "body-ground end"]
    assert ev["t"][0] == pytest.approx(times[k - 1])
    assert ev["dva"][1][2] == pytest.approx((1 + e) * -vz[k - 1] + G * dt, abs=1e-12)


@pytest.mark.parametrize("e", [0.0, 1.0])
def test_boxes_colliding_head_on_log_a_body_body_phase_with_newtons_velocity_changes(e):
    """The head-on impact of tests/test_moreau.py: a body-body phase of
    bodies 0 and 1 (normal from 0 to 1, +x) whose velocity changes are
    Newton's: ``v1 - 1`` and ``v2``; momentum kept (``m dva = -2m dvb``)."""
    sc = bodies([dict(shape="box", ext=[H] * 3, pos=(0.0, 0, H), vel=(1.0, 0, 0)),
                 dict(shape="box", ext=[H] * 3, mass=2 * MASS, pos=(0.3, 0, H))],
                t_end=0.5, dt=1e-3)
    free = {"mu_s": 0.0, "mu_k": 0.0, "mu_bb_s": 0.0, "mu_bb": 0.0, "e_bg": 0.0, "e_bb": e}
    sim = _run([sc], free, "moreau", [np.array([0.4])])
    ev = sim.events(0)
    kinds = _kinds(sim)
    assert kinds.count("body-ground start") == 2  # both rest on the ground from the start
    k = kinds.index("body-body start")
    assert (ev["a"][k], ev["b"][k]) == (0, 1)
    assert ev["normal"][k] == pytest.approx([1, 0, 0], abs=1e-12)
    if e == 1.0:  # they part: the end row has the totals
        end = kinds.index("body-body end")
        assert ev["dva"][end][0] == pytest.approx((1 - 2 * e) / 3 - 1, abs=1e-6)
        assert ev["dvb"][end][0] == pytest.approx((1 + e) / 3, abs=1e-6)
        assert ev["dva"][end][0] == pytest.approx(-2 * ev["dvb"][end][0], abs=1e-9)
        assert ev["jn"][end] == pytest.approx(MASS * (1 + e) * 2 / 3, rel=1e-6)
    else:  # they stay together: no end
        assert "body-body end" not in kinds


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_a_wall_phase_names_its_wall_and_its_normal(integrator):
    """A box sliding into the second of two walls: a body-wall phase with
    ``b`` the wall's index and the wall's inward normal; its impulse turns
    the box back (``dva`` along -x, about (1 + e) v)."""
    walls = [[1.0, 0, 0, -0.3], [-1.0, 0, 0, -0.3]]
    sc = cube((0, 0, H), vel=(1.0, 0, 0), t_end=0.5, dt=1e-4, walls=walls)
    sim = _run([sc], {"mu_s": 0.0, "mu_k": 0.0, "e_bg": 0.0, "e_bw": 0.5}, integrator,
               [np.array([0.45])])
    ev = sim.events(0)
    kinds = _kinds(sim)
    k = kinds.index("body-wall end")
    assert ev["b"][k] == 1 and ev["b"][kinds.index("body-wall start")] == 1
    assert ev["normal"][k] == pytest.approx([-1, 0, 0], abs=1e-9)
    assert ev["dva"][k][0] == pytest.approx(-1.5, rel=0.03)


def test_a_log_that_overflows_is_run_again_with_the_same_answer():
    """Room for 2 events per scenario: the scenarios that logged more run
    again and the events equal those of a run with room for all."""
    scenes = [_tumbling_drop(1e-3), cube((0, 0, H + 0.01), t_end=0.3, dt=1e-3)]
    params = {"e_bg": 0.5, "mu_k": 0.3}
    small = _run(scenes, params, "penalty", [np.array([0.2])] * 2, event_capacity=2)
    big = _run(scenes, params, "penalty", [np.array([0.2])] * 2, event_capacity=500)
    assert small.event_count.max() > 2
    for f in ("ptr", "t", "kind", "a", "b", "normal", "jn", "jt", "dva", "dvb"):
        assert np.array_equal(getattr(small, "event_" + f), getattr(big, "event_" + f))
    assert np.array_equal(small.samp_pos, big.samp_pos)
    none = _run(scenes, params, "penalty", [np.array([0.2])] * 2, event_capacity=0)
    assert none.event_ptr[-1] == 0 and np.array_equal(none.samp_pos, big.samp_pos)

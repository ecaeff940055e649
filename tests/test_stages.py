"""Each stage of the event loop alone, against closed forms.

The records come from ``engine.scenario_records``; the stages run as the
driver (``engine._scenario``) calls them.
"""

import numpy as np
import pytest

import simcore
from simcore import params as P
from simcore import resolve, stages
from simcore.engine import Directions, scenario_records
from simcore.events import EventKind

G = 9.81
R = 0.03
M = 0.17
PRM = {"mu_s": 0.3, "mu_k": 0.2, "v_th": 0.05, "e_bw": 0.6}


def _records(pos, vel, walls=(), controls=(), params=PRM, times=(), directions=None, t_end=1.0):
    n = len(pos)
    sc = simcore.Scenario(radius=[R] * n, mass=[M] * n, pos=pos, vel=vel, t_end=t_end,
                          walls=np.array(walls, float).reshape(-1, 4),
                          controls=np.array(controls, float).reshape(-1, 6), name="stage")
    model, state = simcore.build([sc], params=params)
    return scenario_records(model, state, sample_times=times, directions=directions)


def test_setup_planes_coefficients_and_initial_contacts():
    """The ground (raised by ground_offset) and the walls become planes; a
    ball resting on the nominal ground rests on the raised one (its height's
    tangent along the offset is 1); a ball in the air has no contact; the
    per-body coefficients come through the material tables."""
    prm = dict(PRM, ground_offset=1e-3)
    dirs = Directions.build(params=[P.GROUND_OFFSET])
    sc, pos, vel, log, sens, w, tw = _records([[0, 0, R], [0.3, 0, 0.2]], np.zeros((2, 3)),
                                              walls=[[1, 0, 0, -0.5]], params=prm,
                                              directions=dirs)
    nd = stages.setup(sc, w, tw, sens, pos, vel)
    assert nd == 0
    assert w.plane_n.tolist() == [[0, 0, 1], [1, 0, 0]] and w.plane_d.tolist() == [1e-3, -0.5]
    assert pos[0, 2] == pytest.approx(R + 1e-3, abs=1e-15) and pos[1, 2] == 0.2
    assert w.plane_contact.tolist() == [[True, False], [False, False]]
    assert w.resting.tolist() == [True, False]
    assert tw.tpos[0, 2, 0] == 1.0 and tw.tpos[1, 2, 0] == 0.0
    assert w.g_mu_s.tolist() == [0.3, 0.3] and w.g_mu_k.tolist() == [0.2, 0.2]
    assert w.pl_e[:, 1].tolist() == [0.6, 0.6] and w.inv_m.tolist() == [1 / M, 1 / M]


def test_forces_windows_and_lag():
    """A window [t0, t1) acts at t0 <= t < t1, shifted by time_offset; the
    free acceleration is F/m - g z; the next edge is the nearest window end."""
    push = [0, 0.1, 0.3, 0.5, -0.2, 0.0]
    for lag, t, active, edge in ((0.0, 0.2, True, 0.3), (0.0, 0.3, False, 1.0),
                                 (0.05, 0.12, False, 0.15), (0.05, 0.34, True, 0.35)):
        sc, pos, vel, log, sens, w, tw = _records([[0, 0, R]], [[0, 0, 0]], controls=[push],
                                                  params=dict(PRM, time_offset=lag))
        stages.setup(sc, w, tw, sens, pos, vel)
        next_edge, window_edge = stages.forces(sc, w, tw, sens, t)
        f = np.array(push[3:]) if active else np.zeros(3)
        assert w.free_acc[0] == pytest.approx(f / M - [0, 0, G], abs=1e-15)
        assert next_edge == pytest.approx(edge, abs=1e-15) and window_edge == (edge < 1.0)


def test_sustained_contacts_slide_hold_and_start():
    """On the ground: a slide decelerates at mu_k g against the motion; a push
    within mu_s m g is held; a push beyond it starts the ball (a start event)
    with friction mu_s (below v_th) against the push."""
    cases = (([[1.0, 0, 0]], [], [-0.2 * G, 0, 0], 0),
             ([[0, 0, 0]], [[0, 0, 1, 0.9 * 0.3 * M * G, 0, 0]], [0, 0, 0], 0),
             ([[0, 0, 0]], [[0, 0, 1, 2 * 0.3 * M * G, 0, 0]], [0.3 * G, 0, 0], 1))
    for v, push, acc, starts in cases:
        sc, pos, vel, log, sens, w, tw = _records([[0, 0, R]], v, controls=push)
        stages.setup(sc, w, tw, sens, pos, vel)
        stages.forces(sc, w, tw, sens, 0.0)
        rotating, nd = stages.sustained_contacts(sc, w, tw, sens, log, pos, vel, 0.0, 1e-3)
        assert not rotating and nd == 0
        assert w.acc[0] == pytest.approx(acc, abs=1e-12)
        assert log.count[0] == starts
        if starts:
            assert log.kind[0] == EventKind.START and log.n[0].tolist() == [1, 0, 0]


def _ready(pos, vel, **kw):
    sc, pos, vel, log, sens, w, tw = _records(pos, vel, **kw)
    stages.setup(sc, w, tw, sens, pos, vel)
    stages.forces(sc, w, tw, sens, 0.0)
    stages.sustained_contacts(sc, w, tw, sens, log, pos, vel, 0.0, 1e-3)
    w.dacc[:] = w.acc
    return sc, pos, vel, log, sens, w, tw


def test_next_event_stop_vth_wall_and_body():
    """The earliest event of each kind at its closed-form time."""
    v0 = 1.0
    # No wall: the slide reaches v_th first at (v0 - v_th) / (mu_k g).
    sc, pos, vel, log, sens, w, tw = _ready([[0, 0, R]], [[v0, 0, 0]])
    s, code, i, j = stages.next_event(sc, w, pos, vel, 0, 10.0, False)
    assert (code, i) == (stages.VTH, 0)
    assert s == pytest.approx((v0 - 0.05) / (0.2 * G), rel=1e-14)
    # Below v_th at mu_s: a stop at v / (mu_s g).
    sc, pos, vel, log, sens, w, tw = _ready([[0, 0, R]], [[0.04, 0, 0]])
    s, code, i, j = stages.next_event(sc, w, pos, vel, 0, 10.0, False)
    assert code == stages.STOP and s == pytest.approx(0.04 / (0.3 * G), rel=1e-14)
    # A wall 0.1 m ahead of the ball's surface: x(s) = v0 s - mu_k g s^2 / 2 = 0.1.
    sc, pos, vel, log, sens, w, tw = _ready([[0, 0, R]], [[v0, 0, 0]],
                                            walls=[[-1, 0, 0, -(0.1 + R)]])
    s, code, i, j = stages.next_event(sc, w, pos, vel, 0, 10.0, False)
    a = 0.2 * G
    assert (code, i, j) == (stages.IMPACT_PLANE, 0, 1)
    assert s == pytest.approx((v0 - np.sqrt(v0 ** 2 - 2 * a * 0.1)) / a, rel=1e-13)
    # Another ball at rest 0.1 m ahead (surface to surface).
    sc, pos, vel, log, sens, w, tw = _ready([[0, 0, R], [0.1 + 2 * R, 0, R]],
                                            [[v0, 0, 0], [0, 0, 0]])
    s, code, i, j = stages.next_event(sc, w, pos, vel, 0, 10.0, False)
    assert (code, i, j) == (stages.IMPACT_BODY, 0, 1)
    assert s == pytest.approx((v0 - np.sqrt(v0 ** 2 - 2 * a * 0.1)) / a, rel=1e-12)
    # A quiet step searches nothing.
    assert stages.next_event(sc, w, pos, vel, 0, 1e-3, True)[1] == stages.NONE


def test_advance_samples_on_the_parabola():
    """Samples within the segment are p + v s + a s^2 / 2; the state ends at
    the segment's end; the next sample index is returned."""
    times = np.array([0.0, 0.05, 0.1, 0.25])
    sc, pos, vel, log, sens, w, tw = _ready([[0, 0, R]], [[1.0, 0.5, 0]], times=times)
    out_pos = np.zeros((4, 1, 3))
    out_vel = np.zeros((4, 1, 3))
    a = -0.2 * G * np.array([1.0, 0.5, 0.0]) / np.hypot(1.0, 0.5)
    ks, nd = stages.advance(sc, w, tw, sens, pos, vel, out_pos, out_vel, stages.NONE, -1, -1,
                            0.0, 0.1, 0, False)
    assert (ks, nd) == (3, 0)
    for k, t in enumerate(times[:3]):
        assert out_pos[k, 0] == pytest.approx([t, 0.5 * t, R] + 0.5 * a * t * t, abs=1e-15)
        assert out_vel[k, 0] == pytest.approx([1.0, 0.5, 0] + a * t, abs=1e-15)
    assert pos[0] == pytest.approx(out_pos[2, 0], abs=0) and vel[0] == pytest.approx(out_vel[2, 0])


def test_resolve_wall_impact_and_stop():
    """A ball hitting a wall head on leaves at -e_bw times its speed, the
    impulse (1 + e) m v logged as a body-wall event; a stop zeroes the
    velocity and logs a stop."""
    sc, pos, vel, log, sens, w, tw = _ready([[0, 0, R]], [[0.8, 0, 0]],
                                            walls=[[-1, 0, 0, -R]])
    flags = resolve.resolve(stages.IMPACT_PLANE, 0, 1, 0.0, sc, w, tw, sens, log, pos, vel)
    assert flags == 0
    assert vel[0] == pytest.approx([-0.6 * 0.8, 0, 0], abs=1e-15)
    assert log.count[0] == 1 and log.kind[0] == EventKind.BODY_WALL and log.b[0] == 0
    assert log.jn[0] == pytest.approx(1.6 * M * 0.8, rel=1e-14)
    assert log.dva[0] == pytest.approx([-1.6 * 0.8, 0, 0], rel=1e-14)
    sc, pos, vel, log, sens, w, tw = _ready([[0, 0, R]], [[1e-3, 0, 0]])
    resolve.resolve(stages.STOP, 0, -1, 0.5, sc, w, tw, sens, log, pos, vel)
    assert vel[0].tolist() == [0, 0, 0] and w.resting[0]
    assert log.kind[0] == EventKind.STOP and log.t[0] == 0.5

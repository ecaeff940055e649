"""Each stage of the event loop alone, against its closed form."""

import numpy as np
import pytest

from simcore.kernel.eventlog import EventLog
from simcore.kernel.events import (
    EVF_DVA,
    EVF_N,
    EVF_T,
    EVF_WIDTH,
    EVI_A,
    EVI_KIND,
    EVI_WIDTH,
    EventKind,
)
from simcore.sliding import contact
from simcore.sliding import stages as S

G = 9.81
R = 0.03


def _work(nb, walls=()):
    """A scenario's scratch with the ground (and ``walls`` as (n, d) rows) set."""
    (plane_n, plane_d, inv_m, gc, pc, start_dir, force, free_acc, acc, dacc, v3,
     fl) = S.scratch(nb, len(walls) + 1, np.zeros(3, np.int64))
    plane_n[0, 2] = 1.0
    for k, (n, d) in enumerate(walls):
        plane_n[k + 1] = n
        plane_d[k + 1] = d
    return dict(plane_n=plane_n, plane_d=plane_d, inv_m=inv_m, gc=gc, pc=pc, start_dir=start_dir,
                force=force, free_acc=free_acc, acc=acc, dacc=dacc, v3=v3, fl=fl)


def _fric(w):
    """The contact solve's friction tables: ground ``mu_s``, ``mu_k``, walls, bodies."""
    return w["gc"].mu_s, w["gc"].mu_k, w["pc"].pl_mu, w["pc"].b_mu


def _log(cap=8, nt=0):
    return EventLog(np.zeros((cap, EVF_WIDTH)), np.zeros((cap, EVI_WIDTH), np.int64),
                      np.zeros((cap, nt)), np.zeros((cap, 3, nt)), np.zeros((cap, 3, nt)))


def test_forces_sum_the_active_windows_and_find_the_next_edge():
    w = _work(2)
    w["inv_m"][:] = [1 / 0.5, 1 / 2.0]
    c_body = np.array([0, 0, 1])
    c_t0 = np.array([0.0, 0.5, 0.2])
    c_t1 = np.array([1.0, 0.8, 0.3])
    c_force = np.array([[1.0, 0, 0], [0, 2.0, 0], [0, 0, 4.0]])
    edge, found = S.forces(0.6, 0.0, 5.0, G, w["inv_m"], c_body, c_t0, c_t1, c_force, w["force"],
                           w["free_acc"])
    np.testing.assert_array_equal(w["force"], [[1, 2, 0], [0, 0, 0]])
    np.testing.assert_allclose(w["free_acc"], [[2, 4, -G], [0, 0, -G]])
    assert (edge, found) == (0.8, True)
    # A lag shifts every window: with lag 0.35, windows [0.35, 1.35), [0.85, 1.15)
    # and [0.55, 0.65): at 0.6 the first and the last act, the next edge is 0.65.
    edge, found = S.forces(0.6, 0.35, 5.0, G, w["inv_m"], c_body, c_t0, c_t1, c_force,
                           w["force"], w["free_acc"])
    np.testing.assert_array_equal(w["force"], [[1, 0, 0], [0, 0, 4]])
    assert edge == 0.3 + 0.35 and found  # c_t1[2] + lag, as the kernel adds them
    assert edge == pytest.approx(0.65)
    edge, found = S.forces(1.4, 0.35, 5.0, G, w["inv_m"], c_body, c_t0, c_t1, c_force,
                           w["force"], w["free_acc"])
    assert (edge, found) == (5.0, False)


def test_contact_solve_gives_coulomb_deceleration_and_static_hold():
    """A body sliding on the ground decelerates at ``mu_k g`` against its
    velocity; a resting one pushed under ``mu_s m g`` stays."""
    w = _work(2)
    mass = np.array([0.2, 0.2])
    pos = np.array([[0.0, 0, R], [1.0, 0, R]])
    vel = np.array([[0.6, 0.8, 0], [0.0, 0, 0]])
    w["gc"].mu_s[:] = 0.3
    w["gc"].mu_k[:] = 0.2
    fl = w["fl"]
    fl.plane_contact[:, 0] = True
    fl.modes[contact.ABOVE, 0] = True
    fl.modes[contact.RESTING, 1] = True
    w["free_acc"][:] = [[0, 0, -G], [0.25 * G, 0, -G]]   # a push of 0.25 m g on body 1
    cw, rm = contact.work(2, w["plane_n"].shape[0]), contact.room(8)
    answer = contact.solve(mass, pos, vel, w["free_acc"], w["plane_n"], _fric(w), fl,
                           w["start_dir"], w["acc"], 0.0, cw, rm)
    assert answer == contact.STEADY
    np.testing.assert_allclose(w["acc"][0], [-0.2 * G * 0.6, -0.2 * G * 0.8, 0], atol=1e-15)
    np.testing.assert_array_equal(w["acc"][1], 0.0)
    assert fl.modes[contact.RESTING, 1] and not fl.modes[contact.STARTED, 1]
    # Over mu_s m g it starts, against the static force: along the push.
    w["free_acc"][1, 0] = 0.35 * G
    contact.solve(mass, pos, vel, w["free_acc"], w["plane_n"], _fric(w), fl, w["start_dir"],
                  w["acc"], 0.0, cw, rm)
    assert fl.modes[contact.STARTED, 1] and not fl.modes[contact.RESTING, 1]
    np.testing.assert_allclose(w["start_dir"][1], [1, 0, 0])
    np.testing.assert_allclose(w["acc"][1], [0.35 * G - 0.3 * G, 0, 0], rtol=1e-12)


def _pressed_row(room):
    """Three resting bodies in a row pushed into a wall (ground, wall and body
    contacts: the general system), solved with work arrays of ``room`` unknowns
    (None: room for every contact the three could have); returns the
    answers, the state and ``acc``."""
    w = _work(3, walls=[((-1.0, 0, 0), -0.09)])
    mass = np.array([0.2, 0.3, 0.25])
    pos = np.array([[-0.03, 0, R], [0.03, 0, R], [0.09, 0, R]])
    vel = np.zeros((3, 3))
    w["gc"].mu_s[:] = 0.3
    w["gc"].mu_k[:] = 0.2
    w["pc"].pl_mu[:] = 0.1
    fl = w["fl"]
    fl.plane_contact[:, 0] = True
    fl.plane_contact[2, 1] = True
    fl.body_contact[[0, 1, 1, 2], [1, 0, 2, 1]] = True
    fl.modes[contact.RESTING, :] = True
    w["free_acc"][:] = [[0.5 * G, 0.1 * G, -G], [0.2 * G, 0, -G], [0.1 * G, -0.2 * G, -G]]
    cw, rm = contact.work(3, 2), contact.room(3 * 2 * 5 + 4 * 3 if room is None else room)
    w["acc"][:] = np.nan
    answers = []
    for _ in range(2):
        answers.append(contact.solve(mass, pos, vel, w["free_acc"], w["plane_n"], _fric(w), fl,
                                     w["start_dir"], w["acc"], 0.0, cw, rm))
        if answers[-1] >= 0:
            break
        assert np.isnan(w["acc"]).all(), "a solve without room wrote accelerations"
        assert fl.modes[contact.RESTING].all() and fl.body_contact.sum() == 4
        rm = contact.room(-answers[-1], rm.ints.shape[0] // 3)
    return answers, fl, w["start_dir"], w["acc"]


def test_contact_solve_asks_for_room_and_solves_the_same_once_grown():
    """The system of 6 contacts and 3 resting bodies needs 12 + 2 nb = 18
    unknowns: a room of 4 is refused before anything is written, and the
    grown room gives bit for bit the forces of a room with space to spare."""
    answers, fl, start_dir, acc = _pressed_row(4)
    assert answers[0] == -18 and answers[1] >= 0
    ref_answers, ref_fl, ref_dir, ref_acc = _pressed_row(None)
    assert ref_answers == answers[1:]
    np.testing.assert_array_equal(acc, ref_acc)
    np.testing.assert_array_equal(start_dir, ref_dir)
    for got, ref in zip(fl, ref_fl):
        np.testing.assert_array_equal(got, ref)
    # The row really is solved: the pressed bodies do not move into the wall.
    assert acc[2, 0] <= 1e-12 and np.isfinite(acc).all()


def test_log_starts_logs_the_started_bodies_once():
    w = _work(3)
    modes = w["fl"].modes
    modes[contact.STARTED, [0, 2]] = True
    modes[contact.ABOVE, :] = True
    w["start_dir"][2] = [0.0, 1.0, 0.0]
    ev = _log()
    n_ev, any_started = S.log_starts(0, 1.5, modes, w["start_dir"], ev, np.zeros(0),
                                     np.zeros((3, 0)), w["v3"].zero3)
    assert n_ev == 2 and any_started
    assert list(ev.i[:2, EVI_KIND]) == [EventKind.START] * 2 and list(ev.i[:2, EVI_A]) == [0, 2]
    np.testing.assert_array_equal(ev.f[1, EVF_N:EVF_N + 3], [0, 1, 0])
    assert ev.f[0, EVF_T] == 1.5
    assert list(modes[contact.ABOVE]) == [False, True, False]


def test_kick_is_symplectic_euler_and_a_slide_never_reverses():
    w = _work(2)
    fl = w["fl"]
    fl.plane_contact[:, 0] = True
    vel = np.array([[1.0, 0, 0], [0.01, 0, 0]])
    w["acc"][:] = [[-2.0, 0, 0], [-2.0, 0, 0]]
    w["gc"].v_th[:] = 0.05
    ev = _log()
    n_ev = S.kick(1e-3, 0, 0.7, vel, w["acc"], w["dacc"], w["gc"].v_th, fl, ev, w["v3"])
    np.testing.assert_allclose(vel[0], [1.0 - 2e-3, 0, 0], rtol=1e-15)
    assert n_ev == 0 and vel[1, 0] == pytest.approx(0.008)  # slower, still forward
    # A kick that would reverse body 1 stops it instead, logged, at rest.
    n_ev = S.kick(1e-2, 0, 0.7, vel, w["acc"], w["dacc"], w["gc"].v_th, fl, ev, w["v3"])
    assert n_ev == 1 and ev.i[0, EVI_KIND] == EventKind.STOP and ev.i[0, EVI_A] == 1
    assert vel[1, 0] == 0.0 and fl.modes[contact.RESTING, 1]
    assert ev.f[0, EVF_DVA] == pytest.approx(-(0.008 - 0.02))
    np.testing.assert_array_equal(w["dacc"], 0.0)


def test_slide_events_find_the_stop_and_the_v_th_crossing():
    """A slide at ``v0`` decelerating at ``a`` crosses ``v_th`` at ``(v0 - v_th)/a``
    and stops at ``v0 / a``."""
    w = _work(1)
    fl = w["fl"]
    fl.plane_contact[0, 0] = True
    fl.modes[contact.ABOVE, 0] = True
    pos = np.array([[0.0, 0, R]])
    vel = np.array([[0.6, 0, 0]])
    acc = np.array([[-1.5, 0, 0]])
    v_th = np.array([0.1])
    v3 = w["v3"]
    args = (np.zeros(1, np.int64), pos, vel, acc, v_th, fl.plane_contact, fl.body_contact,
            fl.modes, v3.nrm, v3.rel, v3.at)
    code, i, j, s = S.slide_events(10.0, *args)
    assert (code, i) == (S.VTH, 0) and s == pytest.approx((0.6 - 0.1) / 1.5, rel=1e-12)
    fl.modes[contact.ABOVE, 0] = False
    vel[0, 0] = 0.09
    code, i, j, s = S.slide_events(10.0, *args)
    assert (code, i) == (S.STOP, 0) and s == pytest.approx(0.09 / 1.5, rel=1e-12)
    code, *_ = S.slide_events(0.01, *args)  # beyond the horizon: nothing
    assert code == S.NONE


def test_impact_events_find_the_ground_and_the_pair_in_closed_form():
    w = _work(2)
    fl = w["fl"]
    shape = np.zeros(2, np.int64)
    radius = np.full(2, R)
    # Body 0 falls from rest at height h: it reaches z = R at sqrt(2 (h - R) / g).
    pos = np.array([[0.0, 0, 0.5], [5.0, 0, R]])
    vel = np.zeros((2, 3))
    acc = np.array([[0, 0, -G], [0, 0, 0]])
    fl.plane_contact[1, 0] = True
    code, i, j, s = S.impact_events((S.NONE, -1, -1, 10.0), shape, pos, vel, acc, radius,
                                    S.Planes(w["plane_n"], w["plane_d"]), fl, w["v3"].nrm)
    assert (code, i, j) == (S.IMPACT_PLANE, 0, 0)
    assert s == pytest.approx(np.sqrt(2 * (0.5 - R) / G), rel=1e-12)
    # Two bodies closing at 2 m/s from a gap of 0.1 m meet at 0.05 s.
    pos = np.array([[0.0, 0, R], [2 * R + 0.1, 0, R]])
    vel = np.array([[1.0, 0, 0], [-1.0, 0, 0]])
    acc = np.zeros((2, 3))
    fl.plane_contact[:, 0] = True
    code, i, j, s = S.impact_events((S.NONE, -1, -1, 10.0), shape, pos, vel, acc, radius,
                                    S.Planes(w["plane_n"], w["plane_d"]), fl, w["v3"].nrm)
    assert (code, i, j) == (S.IMPACT_BODY, 0, 1) and s == pytest.approx(0.05, rel=1e-12)
    shape[1] = 7  # no time-of-impact function for that pair
    code, *_ = S.impact_events((S.NONE, -1, -1, 10.0), shape, pos, vel, acc, radius,
                               S.Planes(w["plane_n"], w["plane_d"]), fl, w["v3"].nrm)
    assert code == S.UNSUPPORTED_PAIR


def test_quiet_time_is_a_lower_bound_of_the_first_event():
    """Whatever the rotating push does within its bound, no event comes sooner."""
    rng = np.random.default_rng(2)
    for _ in range(200):
        w = _work(2, walls=[((1.0, 0, 0), -0.6), ((-1.0, 0, 0), -0.6)])
        fl = w["fl"]
        fl.plane_contact[:, 0] = True
        pos = np.array([[rng.uniform(-0.4, 0.4), 0, R], [rng.uniform(-0.4, 0.4), 0.3, R]])
        vel = np.zeros((2, 3))
        vel[:, :2] = rng.normal(0, 0.5, (2, 2))
        w["gc"].mu_s[:] = 0.3
        w["gc"].mu_k[:] = 0.2
        w["gc"].v_th[:] = 0.05
        fl.modes[contact.ABOVE] = np.hypot(vel[:, 0], vel[:, 1]) >= 0.05
        w["free_acc"][:] = [[0, 0, -G]] * 2
        w["acc"][:, :2] = -0.2 * G * vel[:, :2] / np.hypot(vel[:, 0], vel[:, 1])[:, None]
        q = S.quiet_time(np.zeros(2, np.int64), pos, vel, w["acc"], w["free_acc"],
                         np.full(2, R), S.Planes(w["plane_n"], w["plane_d"]), fl, w["gc"])
        v3 = w["v3"]
        _, _, _, s_slide = S.slide_events(10.0, np.zeros(2, np.int64), pos, vel, w["acc"],
                                          w["gc"].v_th, fl.plane_contact, fl.body_contact,
                                          fl.modes, v3.nrm, v3.rel, v3.at)
        _, _, _, s_hit = S.impact_events((S.NONE, -1, -1, 10.0), np.zeros(2, np.int64), pos,
                                         vel, w["acc"], np.full(2, R),
                                         S.Planes(w["plane_n"], w["plane_d"]), fl, v3.nrm)
        assert 0.0 <= q <= min(s_slide, s_hit)


def test_sample_segment_writes_the_parabola_up_to_the_event():
    pos = np.array([[0.0, 0, 1.0]])
    vel = np.array([[1.0, 0, 2.0]])
    acc = np.array([[0, 0, -G]])
    samp_t = np.array([0.1, 0.2, 0.25, 0.4])
    out_pos = np.zeros((4, 1, 3))
    out_vel = np.zeros((4, 1, 3))
    ks = S.sample_segment(0.05, 0.25, 0, pos, vel, acc, samp_t, out_pos, out_vel)
    assert ks == 3  # a sample on the event time is the state before it
    for k in range(3):
        s = samp_t[k] - 0.05
        np.testing.assert_allclose(out_pos[k, 0], [s, 0, 1.0 + 2.0 * s - 0.5 * G * s * s],
                                   rtol=1e-14)
        np.testing.assert_allclose(out_vel[k, 0], [1.0, 0, 2.0 - G * s], rtol=1e-14)
    np.testing.assert_array_equal(out_pos[3], 0.0)


def _resolved(code, vel, plane_contact=True):
    """``resolve`` of event ``code`` of body 0 (against body 1 or the ground)."""
    w = _work(2)
    fl = w["fl"]
    fl.plane_contact[:, 0] = plane_contact
    pos = np.array([[0.0, 0, R], [2 * R, 0, R]])
    mass = np.array([0.2, 0.2])
    w["inv_m"][:] = 1.0 / mass
    w["pc"].b_e[:] = 0.9
    w["pc"].pl_e[:] = 0.5
    w["gc"].v_th[:] = 0.05
    bodies = S.Bodies(np.zeros(2, np.int64), pos, vel, w["acc"], np.full(2, R), mass, w["inv_m"])
    planes = S.Planes(w["plane_n"], w["plane_d"])
    z = np.zeros((2, 3, 0))
    tg = S.Tangents(z, z.copy(), np.zeros((3, 0)), np.zeros((3, 0)), np.zeros(0),
                    np.full(10, -1), np.zeros(0, np.int64), np.zeros(2, np.int64),
                    np.zeros(0, np.int64), np.zeros((1, 4), np.int64),
                    np.zeros((1, 1, 2), np.int64), np.zeros((1, 1, 2), np.int64))
    ev = _log()
    n_ev, flags = S.resolve((code, 0, 1 if code == S.IMPACT_BODY else 0), 0, 0.3, bodies, planes,
                            w["gc"], w["pc"], fl, w["v3"], ev, tg)
    return n_ev, flags, ev, fl


def test_resolve_applies_each_event():
    vel = np.array([[0.03, 0.04, 0], [0, 0, 0]])
    n_ev, _, ev, fl = _resolved(S.STOP, vel)
    assert n_ev == 1 and ev.i[0, EVI_KIND] == EventKind.STOP
    np.testing.assert_array_equal(vel[0], 0.0)
    assert fl.modes[contact.RESTING, 0]
    # A head-on impact of equal masses: the struck body leaves at (1 + e) / 2 v.
    vel = np.array([[1.0, 0, 0], [0, 0, 0]])
    n_ev, _, ev, _ = _resolved(S.IMPACT_BODY, vel)
    assert ev.i[0, EVI_KIND] == EventKind.BODY_BODY
    np.testing.assert_allclose(vel[:, 0], [0.05, 0.95], rtol=1e-12)
    # A ground bounce from 2 m/s down with e = 0.5.
    vel = np.array([[0, 0, -2.0], [0, 0, 0]])
    n_ev, _, ev, fl = _resolved(S.IMPACT_PLANE, vel, plane_contact=False)
    assert ev.i[0, EVI_KIND] == EventKind.BODY_GROUND and vel[0, 2] == pytest.approx(1.0)
    assert not fl.plane_contact[0, 0]

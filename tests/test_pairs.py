"""The shape-pair table: every row's contact functions through the kernels'
dispatchers, and a pair without a row reported by every one of them."""

import numpy as np
import pytest

import simcore
from simcore.geometry import collision as C

SPHERE = C.SHAPE_SPHERE
#: A shape code no row of the table has (a shape added without its functions).
UNKNOWN = len(C.SHAPE_NAMES) + 3


def test_every_body_shape_has_its_rows():
    """Every shape the event-exact integrators run has its rows (boxes are
    the time-stepper's, with the contact points of simcore/faces.py)."""
    from simcore.sliding.integrate import REGISTRY

    shapes = {s for it in REGISTRY if it.kind == "event-driven" for s in it.shapes}
    C.check_shapes(shapes)
    for a in shapes:
        assert C.pair(a, "plane").shapes == (a, "plane") == C.pair("plane", a).shapes
    assert {row.code for row in C.PAIRS} == set(range(len(C.PAIRS)))


def test_a_pair_without_a_row_is_a_clear_error():
    with pytest.raises(ValueError, match=r"no contact functions for shapes 'sphere' and 'box' "
                                         r"\(simcore/collision.py PAIRS has sphere-sphere"):
        C.pair("sphere", "box")
    with pytest.raises(ValueError, match="'box' and 'plane'"):
        C.check_shapes(["sphere", "box"])


def test_sphere_sphere_row_through_the_dispatchers():
    pi, pj = np.array([0.1, -0.2, 0.3]), np.array([0.4, 0.2, 0.3])
    ri, rj = 0.1, 0.15
    dist = 0.5
    gap = C.gap_body_body(SPHERE, SPHERE, pi, ri, pj, rj)
    assert gap == pytest.approx(dist - ri - rj, abs=1e-15)
    n = np.empty(3)
    assert C.contact_normal_body_body(SPHERE, SPHERE, pi, pj, n)
    np.testing.assert_allclose(n, (pj - pi) / dist, atol=1e-15)
    qi, qj = np.empty(3), np.empty(3)
    assert C.contact_points_body_body(SPHERE, SPHERE, pi, ri, pj, rj, n, qi, qj)
    np.testing.assert_allclose(qi, pi + ri * n, atol=1e-15)
    np.testing.assert_allclose(qj, pj - rj * n, atol=1e-15)
    # Touching spheres share their contact point.
    pj_touch = pi + (ri + rj) * n
    C.contact_points_body_body(SPHERE, SPHERE, pi, ri, pj_touch, rj, n, qi, qj)
    np.testing.assert_allclose(qi, qj, atol=1e-15)
    # Approaching head on at 2 m/s from a gap of 0.25 m: impact at 0.125 s.
    zero = np.zeros(3)
    s = C.toi_body_body(SPHERE, SPHERE, pi, zero, zero, ri, pj, -2.0 * n, zero, rj, 1.0)
    assert s == pytest.approx(0.125, rel=1e-14)


def test_sphere_plane_row_through_the_dispatchers():
    p, r = np.array([0.0, 0.0, 0.3]), 0.1
    pn, pd = np.array([0.0, 0.0, 1.0]), 0.05
    assert C.gap_body_plane(SPHERE, p, r, pn, pd) == pytest.approx(0.15, abs=1e-15)
    q = np.empty(3)
    assert C.contact_point_body_plane(SPHERE, p, r, pn, q)
    np.testing.assert_allclose(q, [0.0, 0.0, 0.2], atol=1e-15)
    zero = np.zeros(3)
    s = C.toi_body_plane(SPHERE, p, np.array([0.0, 0.0, -3.0]), zero, r, pn, pd, 1.0)
    assert s == pytest.approx(0.05, rel=1e-14)


def test_every_dispatcher_reports_a_pair_without_a_row():
    p, q, zero, out, out2 = np.ones(3), np.zeros(3), np.zeros(3), np.empty(3), np.empty(3)
    for a, b in ((SPHERE, UNKNOWN), (UNKNOWN, SPHERE), (UNKNOWN, UNKNOWN)):
        assert C.toi_body_body(a, b, p, zero, zero, 0.1, q, zero, zero, 0.1, 1.0) == C.UNSUPPORTED
        assert np.isnan(C.gap_body_body(a, b, p, 0.1, q, 0.1))
        assert not C.contact_normal_body_body(a, b, p, q, out)
        assert not C.contact_points_body_body(a, b, p, 0.1, q, 0.1, out, out, out2)
    assert C.body_pair(UNKNOWN, SPHERE) == (C.NO_PAIR, True)
    assert C.body_pair(SPHERE, SPHERE) == (C.PAIR_SPHERE_SPHERE, False)
    pn = np.array([0.0, 0.0, 1.0])
    assert C.toi_body_plane(UNKNOWN, p, zero, zero, 0.1, pn, 0.0, 1.0) == C.UNSUPPORTED
    assert np.isnan(C.gap_body_plane(UNKNOWN, p, 0.1, pn, 0.0))
    assert not C.contact_point_body_plane(UNKNOWN, p, 0.1, pn, out)


def test_a_batch_with_a_shape_pair_without_a_row_stops_with_its_status(monkeypatch):
    """A shape code past the table (as a new shape without its functions would
    be) is refused by ``simulate`` before the engine runs; and past that check,
    the kernels stop the scenario with STATUS_UNSUPPORTED_PAIR, never a
    sphere's answer."""
    from simcore import engine as E

    sc = simcore.Scenario(radius=[0.05, 0.05], mass=[0.2, 0.2],
                          pos=[[0.0, 0.0, 0.05], [0.3, 0.0, 0.05]],
                          vel=[[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], t_end=0.5)
    model, state = simcore.build([sc])
    model.body_shape[0, 1] = UNKNOWN
    with pytest.raises(ValueError, match="has no kernel in the sliding engine"):
        simcore.simulate(model, state)
    monkeypatch.setattr(E, "_refuse_unknown", lambda model, engine: None)
    with pytest.raises(RuntimeError, match="a pair of shapes has no contact function"):
        simcore.simulate(model, state)

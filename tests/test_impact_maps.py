"""Rigid impact maps (simcore/laws/impact_maps.py) and the LCP solver under
them (simcore/kernel/lcp.py), against the NumPy oracle (tests/impact_oracle.py),
the sphere laws they generalise, energy, and central differences."""

import numpy as np
import pytest

from simcore.kernel import lcp
from simcore.kernel.status import (
    STATUS_IMPACT_JAM,
    STATUS_OK,
    STATUS_ONE_POINT,
    STATUS_SLIP_TURNS,
)
from simcore.laws import impact_maps as IM
from simcore.laws import impulse
from simcore.laws.registry import LAW_IMPULSE
from simcore.spin import spin_impact

from . import impact_oracle as O
from .rigid_oracle import rot

LAWS = (IM.LAW_NEWTON_LCP, IM.LAW_POISSON_LCP, IM.LAW_STRONGE_ENERGETIC)
Z = np.array([0.0, 0.0, 1.0])


def _body(rng, m=None):
    """``G`` of a random body: mass, principal inertia, orientation."""
    m = rng.uniform(0.1, 2.0) if m is None else m
    q = rng.normal(size=4)
    R = rot(q / np.linalg.norm(q))
    Iw = R @ np.diag(rng.uniform(0.2, 1.0, 3) * m * 0.01) @ R.T
    G = np.zeros((6, 6))
    G[:3, :3] = np.eye(3) / m
    G[3:, 3:] = np.linalg.inv(Iw)
    return G


def _random_impact(rng, nc):
    """A random body striking the ground at ``nc`` points (approaching at one
    at least), its friction and restitution."""
    while True:
        G = _body(rng)
        arms = np.array([rng.normal(size=3) * 0.1 - [0, 0, 0.1] for _ in range(nc)])
        normals = np.tile(Z, (nc, 1))
        v = np.r_[rng.normal(size=3), rng.normal(size=3) * 5]
        if (O.rows(arms, normals, 4)[0] @ v).min() < -0.05:
            return G, arms, normals, v, rng.uniform(0.1, 1.0, nc), rng.uniform(0.3, 0.95, nc)


def _rod(rng):
    """A thin planar rod (length 1 m, 1 kg) striking the floor with its lower
    end, turning about y: ``G``, arm, velocity (the end approaching)."""
    th = rng.uniform(0.1, 1.4)
    r = np.array([-0.5 * np.cos(th), 0.0, -0.5 * np.sin(th)])
    G = np.diag([1.0, 1.0, 1.0, 12.0, 12.0, 12.0])
    while True:
        v = np.r_[rng.uniform(-2, 2), 0.0, rng.uniform(-2, -0.1), 0.0, rng.uniform(-5, 5), 0.0]
        if (v[:3] + np.cross(v[3:], r))[2] < -0.05:
            return G, r[None], Z[None], v


def _run(law, G, arms, normals, v, mu, e, nd=4, nt=0, dv=None, dmu=None, de=None):
    nc = len(arms)
    dv = np.zeros((6, nt)) if dv is None else dv
    dmu = np.zeros((nc, dv.shape[1])) if dmu is None else dmu
    de = np.zeros((nc, dv.shape[1])) if de is None else de
    post, dpost = np.zeros(6), np.zeros((6, dv.shape[1]))
    st = IM.impact(law, G, np.asarray(arms, float), np.asarray(normals, float), v,
                   np.asarray(mu, float), np.asarray(e, float), nd, (dv, dmu, de), (post, dpost))
    return st, post, dpost


def test_lemke_solves_what_enumeration_solves():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 7))
        A = rng.normal(size=(n, n))
        S = rng.normal(size=(n, n))
        M = A @ A.T + (S - S.T) + 0.05 * np.eye(n)  # positive definite plus skew
        q = rng.normal(size=n)
        z, b = np.zeros(n), np.zeros(n, bool)
        assert lcp.lemke(M, q, z, b) == lcp.LCP_OK
        w = M @ z + q
        assert z.min() >= 0 and w.min() > -1e-12 and abs(w @ z) < 1e-12
        np.testing.assert_allclose(z, O.lcp_enumerate(M, q), atol=1e-12)


def test_a_warm_start_gives_the_cold_solution_and_falls_back_when_its_basis_fails():
    """lemke_warm from the basis of a nearby problem (the next step's): the
    enumerated solution, by the basis when it still holds (no pivots: the
    basis array is left as it was) or by the pivots when it does not; no
    start (ridge -1) and a ridged start run the pivots."""
    rng = np.random.default_rng(5)
    held = fell = 0
    for _ in range(200):
        n = int(rng.integers(2, 7))
        A = rng.normal(size=(n, n))
        S = rng.normal(size=(n, n))
        M = A @ A.T + (S - S.T) + 0.05 * np.eye(n)
        q = rng.normal(size=n)
        z, b, ridge = np.zeros(n), np.zeros(n, bool), np.array([-1])
        assert lcp.lemke_warm(M, q, z, b, ridge) == lcp.LCP_OK and ridge[0] == 0
        q2 = q + rng.normal(scale=rng.choice([1e-6, 1.0]), size=n)
        basis = b.copy()
        assert lcp.lemke_warm(M, q2, z, b, ridge) == lcp.LCP_OK
        np.testing.assert_allclose(z, O.lcp_enumerate(M, q2), atol=1e-10)
        if np.array_equal(b, basis):
            held += 1
        else:
            fell += 1
    assert held > 50 and fell > 20  # both paths taken
    # a start that solved a ridged problem is not tried: the pivots run
    M, q = np.array([[1.0, 1.0], [1.0, 1.0]]), np.array([-1.0, -1.0])
    z, b, ridge = np.zeros(2), np.array([True, True]), np.array([3])
    assert lcp.lemke_warm(M, q, z, b, ridge) == lcp.LCP_OK
    w = M @ z + q
    assert z.min() >= 0 and abs(w).max() < 1e-9 and ridge[0] >= 0


def test_lemke_on_contact_problems_and_degenerate_ones():
    rng = np.random.default_rng(1)
    for _ in range(60):
        nc = int(rng.integers(1, 3))
        G, arms, normals, v, mu, e = _random_impact(rng, nc)
        N, D = O.rows(arms, normals, 4)
        M = O.lcp_matrix(G, N, D, mu, 4)
        q = np.r_[N @ v, D @ v, np.zeros(nc)]  # q's slip rows are 0: degenerate
        z, b = np.zeros(len(q)), np.zeros(len(q), bool)
        assert lcp.lemke(M, q, z, b) == lcp.LCP_OK
        w = M @ z + q
        scale = np.abs(q).max()
        assert z.min() >= 0 and w.min() > -1e-9 * scale and abs(w @ z) < 1e-9 * scale
    # an infeasible problem ends on a ray
    assert lcp.lemke(np.array([[-1.0]]), np.array([-1.0]), np.zeros(1),
                     np.zeros(1, bool)) == lcp.LCP_RAY


def test_basis_tangent_matches_central_differences():
    rng = np.random.default_rng(2)
    for _ in range(50):
        n = int(rng.integers(2, 6))
        A = rng.normal(size=(n, n))
        M = A @ A.T + 0.1 * np.eye(n)
        q = rng.normal(size=n)
        dM, dq = rng.normal(size=(n, n)), rng.normal(size=n)
        z, b = np.zeros(n), np.zeros(n, bool)
        lcp.lemke(M, q, z, b)
        dz = lcp.basis_tangent(M, b, (dM @ z + dq)[:, None])[:, 0]
        h = 1e-7
        zp, zm = np.zeros(n), np.zeros(n)
        lcp.lemke(M + h * dM, q + h * dq, zp, b.copy())
        lcp.lemke(M - h * dM, q - h * dq, zm, b.copy())
        np.testing.assert_allclose(dz, (zp - zm) / (2 * h), atol=1e-6 * max(1, abs(dz).max()))


@pytest.mark.parametrize("nc", [1, 2])
def test_newton_matches_the_oracle(nc):
    rng = np.random.default_rng(10 + nc)
    for _ in range(40):
        G, arms, normals, v, mu, e = _random_impact(rng, nc)
        N, D = O.rows(arms, normals, 4)
        st, post, _ = _run(IM.LAW_NEWTON_LCP, G, arms, normals, v, mu, e)
        assert st == STATUS_OK
        ref = O.newton(G, N, D, v, mu, e, 4)
        np.testing.assert_allclose(post, ref, rtol=0, atol=1e-10 * np.abs(ref).max())
        # restitution: every contact leaves at least e times its approach speed
        assert np.all(N @ post >= -e * np.minimum(N @ v, 0) - 1e-10)


def test_poisson_matches_the_oracle_at_one_point():
    rng = np.random.default_rng(20)
    for _ in range(40):
        G, arms, normals, v, mu, e = _random_impact(rng, 1)
        N, D = O.rows(arms, normals, 4)
        st, post, _ = _run(IM.LAW_POISSON_LCP, G, arms, normals, v, mu, e)
        assert st == STATUS_OK
        ref = O.poisson(G, N, D, v, mu, e, 4)
        np.testing.assert_allclose(post, ref, rtol=0, atol=1e-10 * np.abs(ref).max())


def test_stronge_matches_the_stepped_oracle():
    rng = np.random.default_rng(30)
    for _ in range(8):
        G, arm, n, v = _rod(rng)
        mu, e = rng.uniform(0.05, 1.0), rng.uniform(0.2, 0.95)
        st, post, _ = _run(IM.LAW_STRONGE_ENERGETIC, G, arm, n, v, [mu], [e])
        assert st == STATUS_OK
        ref = O.stronge(G, arm[0], n[0], v, mu, e, steps=20000)
        np.testing.assert_allclose(post, ref, rtol=0, atol=2e-3 * np.abs(v).max())


def _sphere(rng, spin):
    """A sphere (radius 0.05 m, 0.2 kg) striking the floor, its slip along x
    (an edge of the pyramid), spinning or not (the patent's sliding model:
    infinite rotational inertia)."""
    m, R = 0.2, 0.05
    G = np.zeros((6, 6))
    G[:3, :3] = np.eye(3) / m
    if spin:
        G[3:, 3:] = np.eye(3) / (0.4 * m * R * R)
    v = np.r_[rng.normal(size=2), -rng.uniform(0.5, 3.0), rng.normal(size=3) * 20 * spin]
    arm = np.array([0.0, 0.0, -R])
    v[1] -= (v[:3] + np.cross(v[3:], arm))[1]  # no slip along y
    return m, R, G, arm, v


@pytest.mark.parametrize("law", LAWS)
def test_every_law_is_the_sphere_law_on_spheres(law):
    rng = np.random.default_rng(40)
    for k in range(40):
        mu, e = rng.uniform(0.0, 0.8), rng.uniform(0.2, 0.95)
        spin = k % 2 == 1
        m, R, G, arm, v = _sphere(rng, spin)
        st, post, _ = _run(law, G, arm[None], Z[None], v, [mu], [e])
        assert st == STATUS_OK
        if spin:  # the spinning model's ball-cushion impulse law
            dv, dw = np.zeros(3), np.zeros(3)
            spin_impact.ball_cushion(LAW_IMPULSE, e, mu, 1.8, v[:3].copy(), v[3:].copy(), m, R,
                                     Z, dv, dw)
            ref = v + np.r_[dv, dw]
        else:  # the patent's sliding sphere
            vel = v[:3].copy()
            imp = impulse.plane_impact(vel, Z, e, mu)
            impulse.apply_plane(vel, Z, imp, np.zeros(3))
            ref = np.r_[vel, v[3:]]
        np.testing.assert_allclose(post, ref, rtol=0, atol=1e-12 * np.abs(v).max())


def test_newton_creates_energy_on_an_eccentric_impact_and_the_others_do_not():
    """Kane's example: a rod striking a rough floor near its end, at an angle,
    Newton's restitution with friction (e = 0.98, mu = 0.44): the rod leaves
    with more kinetic energy than it came with."""
    th = 0.9504
    r = np.array([[-0.5 * np.cos(th), 0.0, -0.5 * np.sin(th)]])
    G = np.diag([1.0, 1.0, 1.0, 12.0, 12.0, 12.0])
    v = np.array([-0.1529, 0.0, -0.9244, 0.0, -4.7281, 0.0])
    T0 = O.kinetic(G, v)
    gains = {law: O.kinetic(G, _run(law, G, r, Z[None], v, [0.4361], [0.9823])[1]) / T0 - 1
             for law in LAWS}
    assert gains[IM.LAW_NEWTON_LCP] > 0.3
    assert gains[IM.LAW_POISSON_LCP] < 0 and gains[IM.LAW_STRONGE_ENERGETIC] < 0
    # Over random rods: Stronge's law never gains (by construction), nor does
    # Poisson's two-phase map on any drawn (not a proof).
    rng = np.random.default_rng(50)
    for _ in range(200):
        G, arm, n, v = _rod(rng)
        mu, e = rng.uniform(0.05, 1.5), rng.uniform(0.3, 1.0)
        for law in (IM.LAW_POISSON_LCP, IM.LAW_STRONGE_ENERGETIC):
            st, post, _ = _run(law, G, arm, n, v, [mu], [e])
            if law == IM.LAW_STRONGE_ENERGETIC and _jams(G, arm[0], n[0], v, mu):
                assert st == STATUS_IMPACT_JAM
                continue
            assert st == STATUS_OK
            assert O.kinetic(G, post) <= O.kinetic(G, v) * (1 + 1e-12)


def _jams(G, r, n, v, mu):
    """Whether a slipping impact's normal velocity falls under its friction
    (K_nn - mu K_nt sign(slip) <= 0, Painleve's jam)."""
    s = v[:3] + np.cross(v[3:], r)
    t = s - (s @ n) * n
    J = np.array([O.row(r, n), O.row(r, t / np.linalg.norm(t))])
    K = J @ G @ J.T
    return K[0, 0] - mu * K[0, 1] <= 0


def test_poisson_at_several_points_dissipates():
    rng = np.random.default_rng(60)
    for _ in range(100):
        G, arms, normals, v, mu, e = _random_impact(rng, 2)
        st, post, _ = _run(IM.LAW_POISSON_LCP, G, arms, normals, v, mu, e)
        assert st == STATUS_OK
        assert O.kinetic(G, post) <= O.kinetic(G, v) * (1 + 1e-12)


def test_stronge_refuses_what_it_does_not_model():
    rng = np.random.default_rng(70)
    G, arms, normals, v, mu, e = _random_impact(rng, 2)
    assert _run(IM.LAW_STRONGE_ENERGETIC, G, arms, normals, v, mu, e)[0] == STATUS_ONE_POINT
    # a generic body: the slip direction would turn during the impact
    G, arms, normals, v, mu, e = _random_impact(rng, 1)
    assert _run(IM.LAW_STRONGE_ENERGETIC, G, arms, normals, v, mu, e)[0] == STATUS_SLIP_TURNS


def _cases(rng):
    """Random impacts every law takes: rods (planar) and spheres, and 3-D
    bodies on one or two points for the complementarity laws."""
    for _ in range(6):
        G, arm, n, v = _rod(rng)
        yield LAWS, G, arm, n, v, [rng.uniform(0.05, 0.8)], [rng.uniform(0.2, 0.95)]
        m, R, G, arm, v = _sphere(rng, True)
        v[1] += 0.3  # a slip off the pyramid's edges: still isotropic
        yield LAWS, G, arm[None], Z[None], v, [rng.uniform(0.05, 0.8)], [rng.uniform(0.2, 0.9)]
        for nc in (1, 2):
            G, arms, normals, v, mu, e = _random_impact(rng, nc)
            yield LAWS[:2], G, arms, normals, v, mu, e


def test_sensitivities_match_central_differences():
    """Along the pre-impact velocity's six components, every contact's mu and
    every contact's e: 1e-6 relative to each column's size.  On a planar rod
    along the directions that keep it planar: off the plane Stronge's slip
    would turn (it refuses the impact), and the pyramid's edges across the
    plane are degenerate (both at zero velocity and zero impulse, a kink of
    the complementarity laws' map)."""
    rng = np.random.default_rng(80)
    checked = 0
    for laws, G, arms, normals, v, mu, e in _cases(rng):
        nc = len(arms)
        mu, e = np.asarray(mu, float), np.asarray(e, float)
        nt = 6 + 2
        dv = np.zeros((6, nt))
        dv[:, :6] = np.eye(6)
        dmu = np.zeros((nc, nt))
        dmu[:, 6] = 1.0
        de = np.zeros((nc, nt))
        de[:, 7] = 1.0
        for law in laws:
            st, post, dpost = _run(law, G, arms, normals, v, mu, e, nt=nt, dv=dv, dmu=dmu, de=de)
            assert st == STATUS_OK
            planar = v[1] == 0.0
            for d in ((0, 2, 4, 6, 7) if planar else range(nt)):
                h = 1e-6 * (np.abs(v).max() if d < 6 else 1.0)
                up = _run(law, G, arms, normals, v + h * dv[:, d], mu + h * dmu[:, d],
                          e + h * de[:, d])[1]
                down = _run(law, G, arms, normals, v - h * dv[:, d], mu - h * dmu[:, d],
                            e - h * de[:, d])[1]
                fd = (up - down) / (2 * h)
                scale = max(np.abs(fd).max(), 1e-2)  # (a vanishing column: rounding)
                assert np.abs(dpost[:, d] - fd).max() <= 1e-6 * scale, (law, d, dpost[:, d], fd)
            checked += 1
    assert checked >= 40

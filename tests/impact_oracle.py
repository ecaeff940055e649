"""A NumPy reference of the rigid impact maps (simcore/laws/impact_maps.py).

Written apart from the kernels: the LCP is solved by enumerating every
complementary basis (2^n of them: small problems only) instead of Lemke's
pivots, the matrices are built with ``np.block`` and ``np.linalg.solve``,
and Stronge's impact is integrated over the normal impulse in many small
steps instead of the kernels' piecewise closed form.  The same formulation
otherwise (the pyramid's edges, the restitution terms), so results agree to
rounding (Stronge's: to the integration's step).
"""

import itertools

import numpy as np


def lcp_enumerate(M, q, tol=1e-12):
    """Every solution of ``w = M z + q >= 0, z >= 0, w.z = 0`` found by trying
    each complementary basis (``z_B = -M_BB^-1 q_B``), the first feasible one
    (bases by increasing size)."""
    n = len(q)
    scale = max(1.0, np.abs(q).max())
    for size in range(n + 1):
        for B in itertools.combinations(range(n), size):
            B = list(B)
            z = np.zeros(n)
            if B:
                try:
                    z[B] = np.linalg.solve(M[np.ix_(B, B)], -q[B])
                except np.linalg.LinAlgError:
                    continue
            w = M @ z + q
            if z.min() >= -tol * scale and w.min() >= -tol * scale:
                return z
    raise ValueError("no complementary basis solves the LCP")


def tangents(n):
    """The contact's fixed tangent pair: t1 from world x (world y when the
    normal is near x), t2 = n x t1."""
    a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = a - (a @ n) * n
    t1 /= np.linalg.norm(t1)
    return t1, np.cross(n, t1)


def row(r, d):
    """The Jacobian row of direction ``d`` at arm ``r``: d.(v + w x r)."""
    return np.r_[d, np.cross(r, d)]


def rows(arms, normals, nd):
    """``N (nc, 6)`` and ``D (nc * nd, 6)`` (contact c's edges at rows c*nd..)."""
    N = np.array([row(r, n) for r, n in zip(arms, normals)])
    D = []
    for r, n in zip(arms, normals):
        t1, t2 = tangents(n)
        for k in range(nd):
            phi = 2.0 * np.pi * k / nd
            D.append(row(r, np.cos(phi) * t1 + np.sin(phi) * t2))
    return N, np.array(D)


def lcp_matrix(G, N, D, mu, nd):
    nc = len(N)
    E = np.kron(np.eye(nc), np.ones((nd, 1)))
    return np.block([[N @ G @ N.T, N @ G @ D.T, np.zeros((nc, nc))],
                     [D @ G @ N.T, D @ G @ D.T, E],
                     [np.diag(mu), -E.T, np.zeros((nc, nc))]])


def newton(G, N, D, v, mu, e, nd):
    """Newton restitution with Coulomb friction (Stewart-Trinkle)."""
    nc = len(N)
    q = np.r_[N @ v + e * np.minimum(N @ v, 0.0), D @ v, np.zeros(nc)]
    z = lcp_enumerate(lcp_matrix(G, N, D, mu, nd), q)
    return v + G @ (N.T @ z[:nc] + D.T @ z[nc:nc + nc * nd])


def poisson(G, N, D, v, mu, e, nd):
    """Compression (Newton's LCP with e = 0), then restitution: normal
    impulses e times the compression's, friction from its own LCP."""
    nc = len(N)
    z = lcp_enumerate(lcp_matrix(G, N, D, mu, nd), np.r_[N @ v, D @ v, np.zeros(nc)])
    lam = z[:nc]
    vc = v + G @ (N.T @ lam + D.T @ z[nc:nc + nc * nd])
    lr = e * lam
    vr = vc + G @ (N.T @ lr)
    E = np.kron(np.eye(nc), np.ones((nd, 1)))
    Mf = np.block([[D @ G @ D.T, E], [-E.T, np.zeros((nc, nc))]])
    zf = lcp_enumerate(Mf, np.r_[D @ vr, mu * lr])
    return vr + G @ (D.T @ zf[:nc * nd])


def stronge(G, r, n, v, mu, e, steps=200000):
    """Stronge's energetic impact at one point, by small steps of the normal
    impulse: the friction opposite the slip (or holding stick where the
    cone allows), the compression's work of the normal force measured, the
    restitution ended when it has given back e^2 of it."""
    s = v[:3] + np.cross(v[3:], r)
    ut = s - (s @ n) * n
    t = ut / np.linalg.norm(ut) if np.linalg.norm(ut) > 0 else tangents(n)[0]
    J = np.array([row(r, n), row(r, t)])
    K = J @ G @ J.T
    u = J @ v
    un0 = u[0]
    # the impulse needed to reach u_n = 0 sets the step
    dp = -un0 / K[0, 0] / steps * 4.0
    p, W, Wc, comp = 0.0, 0.0, None, True
    P = np.zeros(2)
    for _ in range(50 * steps):
        if abs(u[1]) > 1e-9 * abs(un0):
            f = -mu * np.sign(u[1])
        elif abs(K[1, 0] / K[1, 1]) <= mu:
            f = -K[1, 0] / K[1, 1]
        else:
            f = -mu * np.sign(K[1, 0])
        du = K @ np.array([1.0, f]) * dp
        unew = u + du
        if u[1] != 0 and unew[1] * u[1] < 0 and abs(K[1, 0] / K[1, 1]) <= mu:
            unew[1] = 0.0  # slip stops: stick from here
        W += 0.5 * (u[0] + unew[0]) * dp
        u = unew
        P += np.array([1.0, f]) * dp
        p += dp
        if comp and u[0] >= 0:
            comp, Wc = False, W
        if not comp and W >= Wc * (1 - e * e):
            break
    return v + G @ (J.T @ P)


def kinetic(G, v):
    """Kinetic energy 1/2 v^T M v."""
    return 0.5 * v @ np.linalg.solve(G, v)

"""Rigid-body impact maps (``002_*``: contact as a unilateral constraint):
a body's velocity just after an impact from its velocity just before, at
one or several contact points against fixed surfaces.

Notation.  Generalised velocity ``v = (v_x, v_y, v_z, w_x, w_y, w_z)`` of the
body's centre of mass, world frame [m/s, rad/s]; ``G = M^-1 (6, 6)``, the
inverse of ``diag(m I, I_world)``.  Contact ``c`` at arm ``r_c`` (from the
centre of mass to the contact point, world) with unit normal ``n_c``
pointing from the surface into the body: its normal velocity is ``N_c v =
n_c . (v + w x r_c)`` (negative while approaching), the Jacobian row of a
direction ``d`` is ``(d, r_c x d)``.  The friction cone is a pyramid of
``nd`` edges ``d_ck = cos(2 pi k / nd) t1 + sin(2 pi k / nd) t2`` over the
contact's fixed tangents (:func:`frame`: ``t1`` from world x, or world y
when the normal is near x; ``t2 = n x t1``), rows ``D``.  A slip along an
edge is resisted exactly opposite it, as by a circular cone; a slip between
edges by the pyramid's facets (every planar impact slips along an edge).
``v`` here is the *free* velocity: the measured pre-impact velocity plus
the other forces' impulse over the interval between the two samples
(gravity ``h g``), as in a time-stepping scheme.

Laws (``dataset.yaml`` ``laws:``, the ``rigid_impact`` family of
:mod:`simcore.laws.registry`), with the contact kind's restitution ``e`` and
friction ``mu`` (``e_bg``, ``mu_k`` on the ground; ``e_bw``, ``mu_w`` on a
wall):

* ``newton_lcp``: Newton's kinematic restitution with Coulomb friction,
  the Stewart-Trinkle / Anitescu-Potra complementarity problem in the
  impulses ``lambda (nc)``, ``beta (nc nd)`` and the slip speeds ``gamma
  (nc)``::

      0 <= lambda  _|_  N v+ + e min(N v, 0)       >= 0
      0 <= beta    _|_  D v+ + E gamma             >= 0
      0 <= gamma   _|_  mu lambda - E^T beta       >= 0,
      v+ = v + G (N^T lambda + D^T beta)

  (``E`` sums a contact's edges).  Its restitution acts on velocities, so
  on an eccentric impact with friction it can give the body more energy
  than it had (Kane's example of a rod striking a rough floor; a test
  shows it).
* ``poisson_lcp``: Poisson's restitution in two phases, as Anitescu and
  Potra: the compression is the problem above with ``e = 0`` (impulses
  ``lambda_c``, velocity ``v_c``); the restitution applies the normal
  impulses ``e lambda_c`` at every contact and the friction they allow,
  ``0 <= beta_r _|_ D v+ + E gamma_r >= 0``, ``0 <= gamma_r _|_ mu e
  lambda_c - E^T beta_r >= 0``, from ``v_c + G N^T e lambda_c``.  Coulomb's
  law holds over the whole impact.  Dissipative on every impact the tests
  draw (planar rods, random bodies on one or two points); not proven so
  in general.  (The baseline of the Fazeli data's README scales the
  compression's normal impulse by ``1 + e`` and applies no friction during
  restitution.)
* ``stronge_energetic``: Stronge's energetic restitution, one contact
  point: the impulse grows along the normal impulse ``p``; the contact
  velocity ``u = (u_n, u_t)`` changes by ``du = K (1, f) dp`` with ``K`` the
  contact's ``J G J^T`` on the normal and the slip direction; ``f = -mu
  sign(u_t)`` while slipping, ``f = -K_tn / K_tt`` while sticking (when
  ``|K_tn| <= mu K_tt``; otherwise the slip reverses, ``f = -mu
  sign(K_tn)``).  Compression ends at ``u_n = 0`` after the normal force
  did the work ``W_c < 0``; restitution ends when it has given back
  ``-e^2 W_c``.  Each phase is linear in ``p``, so the map is a few closed
  form segments (slip, stop, stick or reverse slip), and by construction it
  never creates energy.  The slip direction must not turn during the
  impact: the contact's ``K`` must not couple the tangent normal to the
  slip with the normal or the slip (planar motion, an isotropic contact
  such as a sphere's); otherwise the law refuses the impact
  (``STATUS_SLIP_TURNS``).  A normal velocity that does not grow under the
  friction (``K_nn + K_nt f <= 0``, Painleve's jam) is refused too.

For a sphere the three laws agree with the patent's impulse law (and the
spinning model's ball-cushion law) wherever the slip lies along an edge.

Sensitivities (:func:`impact`'s ``dpost``) along directions given as the
tangents of ``v``, ``mu`` and ``e``: for the complementarity laws by
differentiating the solution on its basis
(:func:`simcore.kernel.lcp.basis_tangent`; at a change of basis, one side's
derivative; where a basis is degenerate, the derivative of the basis the
pivots ended in, which a perturbation may not follow: a planar impact that
sticks has its edges across the plane at zero velocity and zero impulse,
so its derivatives along out-of-plane directions are not the map's), for
Stronge's by a complex step through the closed form (its
branches decided on the real parts, as in :mod:`simcore.spin.spin_tangent`).
"""

import numpy as np

from ..kernel.config import jit
from ..kernel.lcp import LCP_MAX, LCP_OK, basis_tangent, lemke, lemke_warm
from ..kernel.status import (
    STATUS_IMPACT_JAM,
    STATUS_LCP_FAILED,
    STATUS_OK,
    STATUS_ONE_POINT,
    STATUS_SLIP_TURNS,
    STATUS_SWEEPS,
    STATUS_UNKNOWN_LAW,
)

NEWTON = "newton_lcp"
POISSON = "poisson_lcp"
STRONGE = "stronge_energetic"
FAMILY = "rigid_impact"
LAW_NEWTON_LCP = 6
LAW_POISSON_LCP = 7
LAW_STRONGE_ENERGETIC = 8
CODES = (LAW_NEWTON_LCP, LAW_POISSON_LCP, LAW_STRONGE_ENERGETIC)

#: Edges of the friction pyramid per contact point (default).
EDGES = 4
#: ``nd`` of the elliptic cone (:mod:`simcore.laws.elliptic`): no pyramid,
#: each contact's two tangent axes as its rows.
DISK = 0
#: Block Gauss-Seidel (:func:`step_newton_sweeps`): sweeps allowed, and the
#: violation of the contacts' conditions [m/s], relative to the velocities'
#: size (at least 1), at which it has converged.
SWEEPS = 20000
SWEEP_TOL = 1e-9
#: The complex step of Stronge's sensitivities.
CSTEP = 1e-30
#: Coupling of the tangent normal to the slip, relative to ``K``'s largest
#: entry, under which a slip direction counts as unable to turn.
TURN_TOL = 1e-9


@jit
def frame(n):
    """The contact's fixed tangents ``(t1, t2)`` of unit normal ``n`` (two
    3-tuples): ``t1`` the world x axis (y where ``n`` is near x) made normal
    to ``n``, ``t2 = n x t1``."""
    a0, a1 = (1.0, 0.0) if abs(n[0]) < 0.9 else (0.0, 1.0)
    an = a0 * n[0] + a1 * n[1]
    t0, t1_, t2_ = a0 - an * n[0], a1 - an * n[1], -an * n[2]
    norm = np.sqrt(t0 * t0 + t1_ * t1_ + t2_ * t2_)
    t0, t1_, t2_ = t0 / norm, t1_ / norm, t2_ / norm
    return (t0, t1_, t2_), (n[1] * t2_ - n[2] * t1_, n[2] * t0 - n[0] * t2_,
                            n[0] * t1_ - n[1] * t0)


@jit
def frame_tangent(n, t1, dn):
    """The tangents ``(dt1, dt2)`` of :func:`frame`'s axes when the unit
    normal ``n`` moves by ``dn`` (``t1`` its first axis): ``t1 = a / |a|``
    with ``a = e - (e . n) n`` moves by ``(da - t1 (t1 . da)) / |a|``, ``t2
    = n x t1`` by ``dn x t1 + n x dt1`` (two 3-tuples)."""
    e0, e1 = (1.0, 0.0) if abs(n[0]) < 0.9 else (0.0, 1.0)
    dot = e0 * n[0] + e1 * n[1]
    a0, a1, a2 = e0 - dot * n[0], e1 - dot * n[1], -dot * n[2]
    norm = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    ddot = e0 * dn[0] + e1 * dn[1]
    da0, da1, da2 = -ddot * n[0] - dot * dn[0], -ddot * n[1] - dot * dn[1], -ddot * n[2] - dot * dn[2]
    along = t1[0] * da0 + t1[1] * da1 + t1[2] * da2
    d0, d1, d2 = ((da0 - t1[0] * along) / norm, (da1 - t1[1] * along) / norm,
                  (da2 - t1[2] * along) / norm)
    return (d0, d1, d2), (dn[1] * t1[2] - dn[2] * t1[1] + n[1] * d2 - n[2] * d1,
                          dn[2] * t1[0] - dn[0] * t1[2] + n[2] * d0 - n[0] * d2,
                          dn[0] * t1[1] - dn[1] * t1[0] + n[0] * d1 - n[1] * d0)


@jit
def tangent_rows(nd):
    """A contact's tangential rows: the pyramid's ``nd`` edges, or the
    elliptic cone's two axes (:data:`DISK`)."""
    return 2 if nd == DISK else nd


@jit
def edge(t1, t2, k, nd):
    """Edge ``k`` of ``nd`` of the friction pyramid over the tangents ``t1``,
    ``t2``: ``cos(phi) t1 + sin(phi) t2``, ``phi = 2 pi k / nd`` (a 3-tuple);
    with ``nd`` :data:`DISK`, axis ``k`` (``t1``, ``t2``)."""
    if nd == DISK:
        return t1 if k == 0 else t2
    phi = 2.0 * np.pi * k / nd
    c, s = np.cos(phi), np.sin(phi)
    return c * t1[0] + s * t2[0], c * t1[1] + s * t2[1], c * t1[2] + s * t2[2]


@jit
def jac_row(r, d, out):
    """The Jacobian row ``(d, r x d)`` of direction ``d`` at arm ``r``."""
    out[0], out[1], out[2] = d[0], d[1], d[2]
    out[3] = r[1] * d[2] - r[2] * d[1]
    out[4] = r[2] * d[0] - r[0] * d[2]
    out[5] = r[0] * d[1] - r[1] * d[0]


@jit
def rows(arms, normals, nd):
    """``W (nc (1 + m), 6)``: the normal rows of every contact, then each
    contact's ``m`` tangential rows (:func:`tangent_rows`: its ``nd`` edges,
    or the elliptic cone's two axes)."""
    nc, m = arms.shape[0], tangent_rows(nd)
    W = np.zeros((nc * (1 + m), 6))
    for c in range(nc):
        jac_row(arms[c], normals[c], W[c])
        t1, t2 = frame(normals[c])
        for k in range(m):
            jac_row(arms[c], edge(t1, t2, k, nd), W[nc + c * m + k])
    return W


@jit
def wgw(W, G):
    """``W G W^T`` (loops: these matrices are a few rows of 6 columns per
    body, where a BLAS call costs more than its arithmetic; a row's zero
    entries, the bodies it does not touch, skipped)."""
    n, D = W.shape
    WG = np.zeros((n, D))
    for i in range(n):
        for k in range(D):
            if W[i, k] != 0.0:
                for j in range(D):
                    WG[i, j] += W[i, k] * G[k, j]
    A = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            a = 0.0
            for k in range(D):
                a += WG[i, k] * W[j, k]
            A[i, j] = a
            A[j, i] = a
    return A


@jit
def times(W, v):
    """``W v`` (loops, as :func:`wgw`)."""
    out = np.zeros(W.shape[0])
    for i in range(W.shape[0]):
        for k in range(W.shape[1]):
            out[i] += W[i, k] * v[k]
    return out


@jit
def _respond(G, W, z, v, post):
    """``post = v + G W^T z``: the velocity after the impulses ``z`` along
    the rows of ``W`` (``D`` columns: 6 per body)."""
    D = W.shape[1]
    p = np.zeros(D)
    for i in range(W.shape[0]):
        if z[i] != 0.0:
            for k in range(D):
                p[k] += W[i, k] * z[i]
    for k in range(D):
        a = v[k]
        for j in range(D):
            a += G[k, j] * p[j]
        post[k] = a


@jit
def _friction_block(A, nc, nd, off, out):
    """Write the friction rows of the LCP matrix: ``D G D^T`` at ``out[off:,
    off:]``, the edge sums ``E`` and ``-E^T``; ``A = W G W^T``."""
    nb = nc * nd
    for a in range(nb):
        for b in range(nb):
            out[off + a, off + b] = A[nc + a, nc + b]
        out[off + a, off + nb + a // nd] = 1.0
        out[off + nb + a // nd, off + a] = -1.0


@jit
def _contact_lcp(A, nc, nd, mu):
    """The matrix of the Stewart-Trinkle problem in ``(lambda, beta, gamma)``."""
    nb = nc * nd
    n = 2 * nc + nb
    Mx = np.zeros((n, n))
    _friction_block(A, nc, nd, nc, Mx)
    for c in range(nc):  # the normal rows and columns, and the cone's mu
        for b in range(nc + nb):
            Mx[c, b] = A[c, b]
            Mx[b, c] = A[b, c]
        Mx[nc + nb + c, c] = mu[c]
    return Mx


@jit
def _newton(G, W, nc, nd, vv, mu, e, dv, dmu, de, post, dpost):
    """``newton_lcp`` (``e`` of every contact; ``e = 0`` is the compression
    of ``poisson_lcp``) on the free velocity ``v`` with restitution on the
    normal velocity of ``vref``: ``vv = (v, vref, dvref, warm, geo)`` (an
    impact map: ``vref = v``; the Moreau-Jean step: the velocity at the
    step's start, :mod:`simcore.rigid.moreau`), ``dvref`` the tangents of
    ``vref``, ``warm = (basic (LCP_MAX,), ridge (1,))`` the LCP's start
    (:func:`simcore.kernel.lcp.lemke_warm`; :func:`cold`: none), ``geo =
    (dW (rows, 6, nt), dG (6, 6, nt))`` the tangents of the rows and of the
    inverse mass matrix when the contacts and the body's orientation move
    along the directions (:func:`fixed_geometry`: they do not).  With them
    ``dM z = dW G p + W dG p + W G dW^T z`` (``p = W^T z``), ``dq = dW v``
    (and the restitution's ``e dN vref`` on approach), and the velocity's
    ``dpost`` gains ``dG p + G dW^T z``.
    Returns ``(status, z, dlambda)``: ``z (nc (1 + nd),)`` the impulses along
    the rows of ``W`` (the normal ones ``lambda`` first), ``dlambda (nc, nt)``
    the normal ones' tangents."""
    v, vref, dvref, warm, geo = vv
    nb = nc * nd
    m = nc + nb
    nt = dv.shape[1]
    A = wgw(W, G)
    Mx = _contact_lcp(A, nc, nd, mu)
    n = Mx.shape[0]
    wv = times(W, v)
    wref = times(W[:nc], vref)
    q = np.zeros(n)
    for c in range(nc):
        q[c] = wv[c] + e[c] * min(wref[c], 0.0)
    for a in range(nb):
        q[nc + a] = wv[nc + a]
    z = np.zeros(n)
    basic = warm[0][:n]
    st = lemke_warm(Mx, q, z, basic, warm[1])
    lam = z[:m].copy()  # (the normal impulses, then each contact's edges')
    dlam = np.zeros((nc, nt))
    if st != LCP_OK:
        return STATUS_LCP_FAILED, lam, dlam
    _respond(G, W[:m], z[:m], v, post)
    if nt == 0:
        return STATUS_OK, lam, dlam
    # tangents: r = dM z + dq
    wdv = W @ dv
    wdref = W[:nc] @ dvref
    r = np.zeros((n, nt))
    for c in range(nc):
        approach = wref[c] < 0.0
        for d in range(nt):
            r[c, d] = (wdv[c, d] + (e[c] * wdref[c, d] if approach else 0.0)
                       + de[c, d] * min(wref[c], 0.0))
            r[nc + nb + c, d] = dmu[c, d] * z[c]
    for a in range(nb):
        for d in range(nt):
            r[nc + a, d] = wdv[nc + a, d]
    dW, dG = geo
    if dW.shape[0]:
        _geometry_tangent(G, W[:m], dW[:m], dG, z[:m], (v, vref, wref, e, nc), r)
    dz = basis_tangent(Mx, basic, r)
    dpost[:, :] = dv + G @ (W[:m].T @ dz[:m])
    if dW.shape[0]:
        p = times(W[:m].T, z[:m])
        for d in range(nt):
            dpost[:, d] += moved(G, dW[:m], dG, z[:m], p, d)
    dlam[:, :] = dz[:nc]
    return STATUS_OK, lam, dlam


@jit
def _geometry_tangent(G, W, dW, dG, z, at, r):
    """Add to ``r (n, nt)`` the terms of ``dM z + dq`` from the moving rows
    and inverse mass matrix (:func:`_newton`); ``at = (v, vref, wref, e,
    nc)``."""
    v, vref, wref, e, nc = at
    m = W.shape[0]
    p = times(W.T, z)
    gp = times(G, p)
    for d in range(dW.shape[2]):
        inner = moved(G, dW, dG, z, p, d)
        for a in range(m):
            s = 0.0
            for k in range(W.shape[1]):
                s += dW[a, k, d] * (gp[k] + v[k]) + W[a, k] * inner[k]
            if a < nc and wref[a] < 0.0:
                for k in range(W.shape[1]):
                    s += e[a] * dW[a, k, d] * vref[k]
            r[a, d] += s


@jit
def moved(G, dW, dG, z, p, d):
    """``dG p + G dW^T z`` along direction ``d`` (``p = W^T z``): the
    velocity change of impulses ``z`` when the rows and the masses move."""
    D = G.shape[0]
    out = np.zeros(D)
    for k in range(D):
        s = 0.0
        for j in range(D):
            s += dG[k, j, d] * p[j]
            t = 0.0
            for a in range(dW.shape[0]):
                t += dW[a, j, d] * z[a]
            s += G[k, j] * t
        out[k] = s
    return out


@jit
def fixed_geometry(nt):
    """``geo`` of :func:`_newton` for rows and masses that do not move."""
    return np.zeros((0, 6, nt)), np.zeros((6, 6, nt))


@jit
def drows(darms, normals, nd):
    """``dW (nc (1 + m), 6, nt)``: the tangents of :func:`rows` when the
    arms move by ``darms (nc, 3, nt)`` and the normals stay: ``(0, dr x
    d)`` for each row's direction ``d``."""
    nc, _, nt = darms.shape
    dW = np.zeros((nc * (1 + tangent_rows(nd)), 6, nt))
    for d in range(nt):
        W = rows(np.ascontiguousarray(darms[:, :, d]), normals, nd)
        for a in range(W.shape[0]):
            for k in range(3, 6):
                dW[a, k, d] = W[a, k]
    return dW


@jit
def _poisson(G, W, nc, nd, v, mu, e, dv, dmu, de, post, dpost):
    """``poisson_lcp``: compression, then restitution (see the module docstring)."""
    nb = nc * nd
    nt = dv.shape[1]
    zero = np.zeros(nc)
    vc = np.zeros(6)
    dvc = np.zeros((6, nt))
    st, z, dlam = _newton(G, W, nc, nd, (v, v, dv, cold(), fixed_geometry(nt)), mu, zero, dv, dmu,
                          np.zeros((nc, nt)), vc, dvc)
    if st != STATUS_OK:
        return st
    lam = z[:nc]
    # restitution's normal impulses e lambda_c
    lr = e * lam
    dlr = np.zeros((nc, nt))
    for c in range(nc):
        for d in range(nt):
            dlr[c, d] = de[c, d] * lam[c] + e[c] * dlam[c, d]
    vr = vc + G @ (W[:nc].T @ lr)
    dvr = dvc + G @ (W[:nc].T @ dlr)
    # its friction: 0 <= beta _|_ D v+ + E gamma >= 0, 0 <= gamma _|_ mu lr - E^T beta >= 0
    A = W @ G @ W.T
    n = nb + nc
    Mf = np.zeros((n, n))
    _friction_block(A, nc, nd, 0, Mf)
    wv = W @ vr
    wdv = W @ dvr
    q = np.zeros(n)
    r = np.zeros((n, nt))
    for a in range(nb):
        q[a] = wv[nc + a]
        for d in range(nt):
            r[a, d] = wdv[nc + a, d]
    for c in range(nc):
        q[nb + c] = mu[c] * lr[c]
        for d in range(nt):
            r[nb + c, d] = dmu[c, d] * lr[c] + mu[c] * dlr[c, d]
    z = np.zeros(n)
    basic = np.zeros(n, np.bool_)
    if lemke(Mf, q, z, basic) != LCP_OK:
        return STATUS_LCP_FAILED
    D = W[nc:]
    post[:] = vr + G @ (D.T @ z[:nb])
    dz = basis_tangent(Mf, basic, r)
    dpost[:, :] = dvr + G @ (D.T @ dz[:nb])
    return STATUS_OK


@jit
def _csign(x):
    return 1.0 if x.real > 0.0 else -1.0


@jit
def stronge_contact(a, b, c, un0, ut0, mu, e):
    """Stronge's energetic impact in contact coordinates: ``K = [[a, b], [b,
    c]]`` on (normal, slip), initial normal velocity ``un0 < 0`` and slip
    ``ut0 >= 0`` (along the slip direction), friction ``mu``, energetic
    restitution ``e``.  Returns ``(status, p_n, p_t)``, the normal and
    tangential impulses (real or complex; the real parts decide)."""
    p = 0.0 * un0
    pt = 0.0 * un0
    un = un0
    ut = ut0
    W = 0.0 * un0
    Wc = 0.0 * un0
    comp = True
    tiny = 1e-14 * abs(un0.real)
    for _ in range(16):
        # the friction ratio f = dp_t / dp of this segment
        slipping = abs(ut.real) > tiny
        if slipping:
            f = -mu * _csign(ut)
        elif abs(b.real) <= mu.real * c.real:
            f = -b / c  # stick holds
            ut = 0.0 * un0
        else:
            f = -mu * _csign(b)  # slip reverses
            slipping = True
        dun = a + b * f
        dut = b + c * f
        # the first event: slip stops, compression ends, restitution ends
        kind = 0
        step = np.inf + 0.0 * un0
        if comp:
            if dun.real <= 0.0:
                return STATUS_IMPACT_JAM, p, pt
            step = -un / dun
            kind = 1
        else:
            rem = -e * e * Wc - (W - Wc)
            disc = un * un + 2.0 * dun * rem
            if disc.real < 0.0:
                return STATUS_IMPACT_JAM, p, pt
            step = 2.0 * rem / (un + np.sqrt(disc)) if rem.real > 0.0 else 0.0 * un0
            kind = 2
        if slipping and dut.real * ut.real < 0.0:
            stop = -ut / dut
            if stop.real < step.real:
                step = stop
                kind = 3
        W = W + un * step + 0.5 * dun * step * step
        un = un + dun * step
        ut = ut + dut * step
        p = p + step
        pt = pt + f * step
        if kind == 3:
            ut = 0.0 * un0
        elif kind == 1:
            un = 0.0 * un0
            comp = False
            Wc = W
            if e.real <= 0.0:
                return STATUS_OK, p, pt
        elif kind == 2:
            return STATUS_OK, p, pt
    return STATUS_IMPACT_JAM, p, pt


@jit
def _stronge_once(G, arm, n, v, mu, e, post):
    """One evaluation of ``stronge_energetic`` (complex ``v``, ``mu``, ``e``),
    ``post`` (6,) complex."""
    t1, t2 = frame(n)
    jn = np.zeros(6)
    j1 = np.zeros(6)
    j2 = np.zeros(6)
    jac_row(arm, n, jn)
    jac_row(arm, t1, j1)
    jac_row(arm, t2, j2)
    un0 = 0.0 * v[0]
    u1 = 0.0 * v[0]
    u2 = 0.0 * v[0]
    for k in range(6):
        un0 += jn[k] * v[k]
        u1 += j1[k] * v[k]
        u2 += j2[k] * v[k]
    ut = np.sqrt(u1 * u1 + u2 * u2)
    if ut.real > 1e-14 * abs(un0.real):
        s1, s2 = u1 / ut, u2 / ut
    else:
        s1, s2 = 1.0 + 0.0 * un0, 0.0 * un0
        ut = 0.0 * un0
    js = s1 * j1 + s2 * j2  # the slip direction's row
    jp = -s2 * j1 + s1 * j2  # the tangent normal to it
    gn = np.zeros(6, np.complex128)
    gs = np.zeros(6, np.complex128)
    for i in range(6):
        for k in range(6):
            gn[i] += G[i, k] * jn[k]
            gs[i] += G[i, k] * js[k]
    a = 0.0 * un0
    b = 0.0 * un0
    c = 0.0 * un0
    pn = 0.0 * un0
    ps = 0.0 * un0
    for k in range(6):
        a += jn[k] * gn[k]
        b += jn[k] * gs[k]
        c += js[k] * gs[k]
        pn += jp[k] * gn[k]
        ps += jp[k] * gs[k]
    scale = max(abs(a.real), abs(c.real))
    if abs(pn.real) > TURN_TOL * scale or abs(ps.real) > TURN_TOL * scale:
        return STATUS_SLIP_TURNS
    if un0.real >= 0.0:
        post[:] = v  # not approaching: no impact
        return STATUS_OK
    st, p_n, p_t = stronge_contact(a, b, c, un0, ut, mu, e)
    if st != STATUS_OK:
        return st
    post[:] = v + p_n * gn + p_t * gs
    return STATUS_OK


@jit
def _stronge(G, arms, normals, v, mu, e, dv, dmu, de, post, dpost):
    """``stronge_energetic``, its tangents by complex steps."""
    if arms.shape[0] != 1:
        return STATUS_ONE_POINT
    nt = dv.shape[1]
    out = np.zeros(6, np.complex128)
    vc = v.astype(np.complex128)
    st = _stronge_once(G, arms[0], normals[0], vc, mu[0] + 0.0j, e[0] + 0.0j, out)
    if st != STATUS_OK:
        return st
    post[:] = out.real
    for d in range(nt):
        vd = vc + 1j * CSTEP * dv[:, d]
        st = _stronge_once(G, arms[0], normals[0], vd, mu[0] + 1j * CSTEP * dmu[0, d],
                           e[0] + 1j * CSTEP * de[0, d], out)
        if st != STATUS_OK:
            return st
        dpost[:, d] = out.imag / CSTEP
    return STATUS_OK


@jit
def impact(law, G, arms, normals, v, mu, e, nd, tangents, out):
    """The post-impact velocity of a body of inverse mass matrix ``G (6,
    6)`` with free velocity ``v (6,)`` at contacts ``arms``, ``normals (nc,
    3)`` with friction ``mu`` and restitution ``e (nc,)`` under ``law`` (a
    code of :data:`CODES`), ``nd`` pyramid edges.  ``tangents = (dv, dmu,
    de)``: the tangents of ``v (6, nt)``, ``mu`` and ``e (nc, nt)`` along
    ``nt`` directions; ``out = (post (6,), dpost (6, nt))`` receives the
    velocity and its tangents.  Returns a status of :mod:`simcore.kernel.status`."""
    nc = arms.shape[0]
    dv, dmu, de = tangents
    post, dpost = out
    if law == LAW_STRONGE_ENERGETIC:
        return _stronge(G, arms, normals, v, mu, e, dv, dmu, de, post, dpost)
    W = rows(arms, normals, nd)
    if law == LAW_NEWTON_LCP:
        return _newton(G, W, nc, nd, (v, v, dv, cold(), fixed_geometry(dv.shape[1])), mu, e,
                       dv, dmu, de, post, dpost)[0]
    if law == LAW_POISSON_LCP:
        return _poisson(G, W, nc, nd, v, mu, e, dv, dmu, de, post, dpost)
    return STATUS_UNKNOWN_LAW


@jit
def cold():
    """An LCP start of no previous solve (``warm`` of :func:`_newton`)."""
    return np.zeros(LCP_MAX, np.bool_), np.full(1, -1, np.int64)


@jit
def step_newton(G, W, v, vref, mu, e, nd, out, warm, tangents):
    """``newton_lcp`` on the free velocity ``v (D,)`` of bodies of inverse
    mass matrix ``G (D, D)`` (6 columns per body) at contacts of rows ``W``
    (:func:`rows`: ``nc`` normal rows, then each contact's ``nd`` edge
    rows), with the restitution of the normal velocities of ``vref`` (the
    Moreau-Jean step's velocity at the step's start): ``out = (post (D,),
    dpost (D, nt))``; ``warm``: the LCP's start (the previous step's on the
    same contacts, or :func:`cold`), updated; ``tangents = (dv, dvref (D,
    nt), dmu, de (nc, nt), dW (rows, D, nt), dG (D, D, nt))`` along ``nt``
    directions (0: none; ``dW`` of no rows: rows and masses that do not
    move).  Returns ``(status, z)``: the impulses along the rows of ``W``."""
    nc = mu.shape[0]
    dv, dvref, dmu, de, dW, dG = tangents
    post, dpost = out
    st, z, _ = _newton(G, W, nc, nd, (v, vref, dvref, warm, (dW, dG)), mu, e, dv, dmu, de, post,
                       dpost)
    return st, z


@jit
def step_newton_sweeps(G, W, v, vref, mu, e, nd, post, z):
    """:func:`step_newton`'s problem (no tangents) by block Gauss-Seidel over
    the contacts (non-smooth Gauss-Seidel, Jean and Moreau): each contact's
    own Stewart-Trinkle problem (its normal, its ``nd`` edges, its slip
    speed) solved exactly by Lemke's pivots with the others' impulses held,
    in turn, sweep after sweep, until every contact's conditions hold at
    the velocities the sweep ends with, to :data:`SWEEP_TOL` of their size
    (at most :data:`SWEEPS` sweeps: then ``STATUS_SWEEPS``).  For
    the problems of several bodies in contact (a stack: four coplanar points
    per face, their problem degenerate, where the pivots over the whole
    problem need ridges that err by the ridge) the sweeps converge to one of
    its solutions, every contact's conditions exact at its own turn.
    ``z (nc, 2 + nd)``: each contact's impulses, the start (the previous
    step's) and the answer; ``post (D,)``.  Returns the status."""
    nc = mu.shape[0]
    D = G.shape[0]
    m = 1 + nd
    vc = v.copy()
    Wc = np.zeros((nc, m, D))
    GWt = np.zeros((nc, D, m))
    Ml = np.zeros((nc, m + 1, m + 1))
    bias = np.zeros(nc)
    for c in range(nc):
        for k in range(m):
            row = c if k == 0 else nc + c * nd + k - 1
            for j in range(D):
                Wc[c, k, j] = W[row, j]
        for j in range(D):
            for k in range(m):
                a = 0.0
                for i in range(D):
                    a += G[j, i] * Wc[c, k, i]
                GWt[c, j, k] = a
        Ml[c] = _contact_lcp(wgw(Wc[c], G), 1, nd, mu[c:c + 1])
        bias[c] = e[c] * min(times(Wc[c, :1], vref)[0], 0.0)
        for k in range(m):
            for j in range(D):
                vc[j] += GWt[c, j, k] * z[c, k]
    q = np.zeros(m + 1)
    zl = np.zeros(m + 1)
    basic = np.zeros(m + 1, np.bool_)
    for _ in range(SWEEPS):
        for c in range(nc):
            _local(Wc[c], GWt[c], bias[c], vc, z[c], q, m, True)
            if lemke(Ml[c], q, zl, basic) != LCP_OK:
                return STATUS_LCP_FAILED
            for k in range(m + 1):
                z[c, k] = zl[k]
            _local(Wc[c], GWt[c], bias[c], vc, z[c], q, m, False)
        if _violation(Wc, bias, vc, z, m) <= SWEEP_TOL * max(1.0, np.abs(vc).max()):
            post[:] = vc
            return STATUS_OK
    return STATUS_SWEEPS


@jit
def _local(Wc, GWt, bias, vc, zc, q, m, take):
    """``take``: take contact ``c``'s impulses ``zc`` out of the velocity
    ``vc`` and write its local problem's ``q`` (the velocities along its
    rows without them, its restitution's bias); else put them back."""
    D = vc.shape[0]
    sign = -1.0 if take else 1.0
    for k in range(m):
        for j in range(D):
            vc[j] += sign * GWt[j, k] * zc[k]
    if take:
        u = times(Wc, vc)
        q[0] = u[0] + bias
        for k in range(1, m):
            q[k] = u[k]
        q[m] = 0.0


@jit
def _violation(Wc, bias, vc, z, m):
    """How far the impulses ``z`` are from solving every contact's problem
    at the velocity ``vc``: the largest velocity-row violation, ``|w|``
    where the impulse is not zero, ``-w`` where it is [m/s].  A contact's
    ``w`` at ``vc`` (its own impulses in it): the normal row's velocity plus
    the restitution's bias, each edge row's plus the slip speed ``z[m]``."""
    worst = 0.0
    for c in range(z.shape[0]):
        u = times(Wc[c], vc)
        for k in range(m):
            w = u[k] + (bias[c] if k == 0 else z[c, m])
            worst = max(worst, abs(w) if z[c, k] > 0.0 else -w)
    return worst

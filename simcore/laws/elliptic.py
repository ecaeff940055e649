"""The Moreau-Jean step's contact problem over the elliptic Coulomb cone
(``002_*``; the model's ``cone: elliptic``, the default): Newton's
restitution and Coulomb friction whose tangential impulse lies in the
disk ``|p_t| <= mu p_n`` (isotropic friction: the same law in every
sliding direction, as the penalty stepper's elliptic cone and the
patent's impulse law), where :mod:`simcore.laws.impact_maps`' pyramid
takes ``nd`` edges.

Rows and unknowns.  Contact ``c`` of ``nc`` has three rows in ``W``:
its normal ``n`` at row ``c`` and its tangents ``t1``, ``t2``
(:func:`simcore.laws.impact_maps.frame`) at rows ``nc + 2 c`` and ``nc +
2 c + 1`` (the pyramid's ordering with ``nd`` :data:`~simcore.laws.
impact_maps.DISK`: two axes, not edges), each ``(d, r x d)`` per body;
its impulse ``p_c = (p_n, p_t1, p_t2)`` along them, ``z`` the impulses
in row order.  The velocity after the step is ``v+ = v + G W^T z``;
contact ``c``'s velocity ``u_c = W_c v+``, its restitution's bias ``b_c =
e_c min(n . vref, 0)`` (``vref``: the velocity at the step's start).  The
conditions:

* ``0 <= p_n _|_ u_n + b >= 0``;
* stick: ``|p_t| <= mu p_n`` and ``u_t = 0``; slip: ``p_t = -mu p_n s``
  with ``s = u_t / |u_t|`` (the friction opposes the slip: maximal
  dissipation).

Method (stated, ``002_*`` leaves it open).  One contact's problem is
solved exactly (:func:`local`): separating when its normal velocity
without its impulse satisfies the bias; else sticking when the impulse
that zeroes its velocity, ``-A_cc^-1 (u0 + b n)``, lies in the disk; else
slipping, its slip direction the angle ``phi`` where the tangential
velocity of the impulse ``p_n (1, -mu cos phi, -mu sin phi)``, ``p_n``
from the normal condition, is parallel to and along ``(cos phi, sin
phi)``: a root of one smooth function of ``phi``, found from the
frictionless slip's direction (exact for a contact whose tangent does
not couple with its normal, a sphere's or a translating body's), else
bracketed on a scan of :data:`SCAN` angles around it and narrowed to
rounding by Illinois' regula falsi (the slip case of
Bertails-Descoteaux, Acary and Daviet's enumerative local solver, there a
quartic).  A body on several contacts
(:func:`step_elliptic`): rounds of Stewart-Trinkle problems over
pyramids turned so that an edge lies along each contact's friction (a
slip along an edge is resisted as by the disk), each round's active set
(separate, stick, slip) finished by Newton's iterations on the disk's
equations, until the disk's conditions hold (a round's own answer to
:data:`PIVOTS` times the sweeps' tolerance); failing that, non-smooth
block Gauss-Seidel over the contacts (Jean and Moreau,
:func:`step_elliptic_sweeps`), each contact's local problem in turn with
the others' impulses held, until the conditions hold at the sweep's end
to :data:`~simcore.laws.impact_maps.SWEEP_TOL` of the velocities' size.

Sensitivities: the converged impulses differentiated on their active set
(each contact separating, sticking or slipping) by the implicit function
theorem: the conditions above, with ``du = A dz + dW v+ + W (dv + dG W^T
z + G dW^T z)`` and ``ds = (I - s s^T) du_t / |u_t|``, give one linear
system in ``dz``, solved in least squares (a box resting on a face has
four coplanar contacts and many impulses that do the same: the minimum
norm one is taken; ``G W^T dz``, the velocity, is the same for all).
"""

import numpy as np

from ..kernel.config import jit
from ..kernel.dense import min_norm
from ..kernel.lcp import solve
from ..kernel.status import STATUS_IMPACT_JAM, STATUS_OK, STATUS_SWEEPS
from .impact_maps import SWEEP_TOL, SWEEPS, moved, step_newton, times, wgw

#: Angles scanned for a slip direction that has no closed form.
SCAN = 64
#: A stick impulse outside the cone by this much of ``(mu p_n)^2`` (rounding)
#: is a stick (:func:`local`).
EDGE_TOL = 1e-9
#: The aligned pyramids of :func:`step_elliptic`: edges, and rounds at most.
ALIGNED_EDGES = 8
ROUNDS = 40
#: A round's pyramid answer is the disk's when it meets the disk's
#: conditions to this many times the sweeps' tolerance, 1e-7 m/s (the
#: pivots on a face's degenerate contacts, whose ridges the pyramid's
#: stepper takes as its answers too, leave slips of a few 1e-8 m/s).
PIVOTS = 100.0
#: Newton's iterations on an active set (:func:`_polish`), at most.
POLISH = 20
#: Singular values of the active set's Jacobian below this fraction of the
#: largest are zero: its steps and tangents are the least-norm ones
#: (:func:`simcore.kernel.dense.min_norm`).
RCOND = 1e-12
#: A contact's states on its active set.
SEPARATE, STICK, SLIP = 0, 1, 2


@jit
def _slip_at(A, u0, un, mu, phi):
    """The slip of direction ``phi``: ``(p_n, g, along)`` with ``p_n`` from
    the normal condition, ``g`` the cross product of the tangential velocity
    with ``s = (cos phi, sin phi)`` (zero at a root) and ``along`` their dot
    product (a root must have it non-negative); ``p_n <= 0`` where the
    normal velocity does not grow under that friction (Painleve's jam)."""
    c, s = np.cos(phi), np.sin(phi)
    den = A[0, 0] - mu * (A[0, 1] * c + A[0, 2] * s)
    if den <= 0.0:
        return -1.0, 0.0, 0.0
    pn = -un / den
    w1 = u0[1] + pn * (A[1, 0] - mu * (A[1, 1] * c + A[1, 2] * s))
    w2 = u0[2] + pn * (A[2, 0] - mu * (A[2, 1] * c + A[2, 2] * s))
    return pn, w1 * s - w2 * c, w1 * c + w2 * s


@jit
def _root(A, u0, un, mu, bracket):
    """The root of :func:`_slip_at`'s ``g`` in ``bracket = (lo, hi, g_lo,
    g_hi)`` (``g`` of opposite signs at the ends), to rounding: the Illinois
    method (regula falsi, the value at an end kept twice in a row halved),
    bisecting where the secant leaves the bracket."""
    lo, hi, glo, ghi = bracket
    side = 0
    for _ in range(200):
        if hi - lo <= 4e-16 * (1.0 + abs(lo) + abs(hi)):
            break
        mid = (lo * ghi - hi * glo) / (ghi - glo)
        if not (lo < mid < hi):
            mid = 0.5 * (lo + hi)
        _, g, _ = _slip_at(A, u0, un, mu, mid)
        if g == 0.0:
            return mid
        if (g < 0.0) == (glo < 0.0):
            lo, glo = mid, g
            if side == -1:
                ghi *= 0.5
            side = -1
        else:
            hi, ghi = mid, g
            if side == 1:
                glo *= 0.5
            side = 1
    return lo if abs(glo) <= abs(ghi) else hi


@jit
def _slip_direction(A, u0, un, mu):
    """The slip direction's angle (module docstring), or NaN: none with a
    growing normal velocity (a jam)."""
    pn0 = -un / A[0, 0]
    w1, w2 = u0[1] + pn0 * A[1, 0], u0[2] + pn0 * A[2, 0]
    start = np.arctan2(w2, w1)
    pn, g, along = _slip_at(A, u0, un, mu, start)
    scale = abs(w1) + abs(w2) + 1e-300
    if pn > 0.0 and along >= 0.0 and abs(g) <= 1e-13 * scale:
        return start
    step = 2.0 * np.pi / SCAN
    best, gap = np.nan, np.inf
    pa, ga, _ = _slip_at(A, u0, un, mu, start - np.pi)
    for k in range(SCAN):
        lo = start - np.pi + k * step
        pb, gb, _ = _slip_at(A, u0, un, mu, lo + step)
        if pa > 0.0 and pb > 0.0 and (ga < 0.0) != (gb < 0.0):
            phi = _root(A, u0, un, mu, (lo, lo + step, ga, gb))
            pn, _, along = _slip_at(A, u0, un, mu, phi)
            if pn > 0.0 and along >= 0.0 and abs(phi - start) < gap:
                best, gap = phi, abs(phi - start)
        pa, ga = pb, gb
    return best


@jit
def local(A, u0, b, mu, p):
    """One contact's problem (module docstring): its ``A_cc (3, 3)``, its
    velocity ``u0 (3,)`` without its own impulse (normal, t1, t2), its
    restitution's bias ``b``, friction ``mu``; the impulse into ``p (3,)``.
    Returns its state (:data:`SEPARATE`, :data:`STICK`, :data:`SLIP`), -1
    for a jam."""
    un = u0[0] + b
    if un >= 0.0:
        p[:] = 0.0
        return SEPARATE
    r = np.empty((3, 1))
    r[0, 0], r[1, 0], r[2, 0] = -un, -u0[1], -u0[2]
    x = solve(A, r)[:, 0]
    if x[0] > 0.0 and x[1] * x[1] + x[2] * x[2] <= (mu * x[0]) ** 2:
        p[:] = x
        return STICK
    if mu == 0.0:
        p[0], p[1], p[2] = -un / A[0, 0], 0.0, 0.0
        return SLIP
    phi = _slip_direction(A, u0, un, mu)
    if np.isnan(phi):
        # a stick on the cone's edge to rounding: the slip there has no
        # direction to find (its velocity along the friction is zero)
        if x[0] > 0.0 and x[1] * x[1] + x[2] * x[2] <= (mu * x[0]) ** 2 * (1.0 + EDGE_TOL):
            p[:] = x
            return STICK
        return -1
    pn, _, _ = _slip_at(A, u0, un, mu, phi)
    p[0], p[1], p[2] = pn, -mu * pn * np.cos(phi), -mu * pn * np.sin(phi)
    return SLIP


@jit
def _contact_rows(W, nc):
    """Each contact's rows ``Wc (nc, 3, D)`` (normal, t1, t2) from ``W``."""
    Wc = np.zeros((nc, 3, W.shape[1]))
    for c in range(nc):
        for k in range(3):
            Wc[c, k, :] = W[c if k == 0 else nc + 2 * c + k - 1, :]
    return Wc


@jit
def _blocks(G, W, nc):
    """Each contact's rows ``Wc (nc, 3, D)``, ``G Wc^T (nc, D, 3)`` and
    ``A_cc (nc, 3, 3)``."""
    D = G.shape[0]
    Wc = _contact_rows(W, nc)
    GWt = np.zeros((nc, D, 3))
    Acc = np.zeros((nc, 3, 3))
    for c in range(nc):
        for j in range(D):
            for k in range(3):
                a = 0.0
                for i in range(D):
                    a += G[j, i] * Wc[c, k, i]
                GWt[c, j, k] = a
        Acc[c] = wgw(Wc[c], G)
    return Wc, GWt, Acc


@jit
def _push(GWt, p, sign, vc):
    """``vc += sign G Wc^T p``: a contact's impulse ``p`` on the velocity."""
    for j in range(vc.shape[0]):
        vc[j] += sign * (GWt[j, 0] * p[0] + GWt[j, 1] * p[1] + GWt[j, 2] * p[2])


@jit
def step_elliptic_sweeps(G, W, v, vref, mu, e, out, z, tangents):
    """The step's problem (module docstring) on the free velocity ``v
    (D,)`` of bodies of inverse mass matrix ``G (D, D)``, rows ``W (3 nc,
    D)``, restitution on ``vref``'s normal velocities: ``out = (post (D,),
    dpost (D, nt))``; ``z (nc, 3)``: each contact's impulse ``(p_n, p_t1,
    p_t2)``, the start (the previous step's) and the answer; ``tangents``
    as :func:`simcore.laws.impact_maps.step_newton`'s (``dW`` in ``W``'s
    rows).  Returns the status (``STATUS_SWEEPS``: not converged in
    :data:`~simcore.laws.impact_maps.SWEEPS` sweeps; ``STATUS_IMPACT_JAM``:
    a contact without a slip that makes its normal velocity grow)."""
    nc = mu.shape[0]
    post, dpost = out
    Wc, GWt, Acc = _blocks(G, W, nc)
    bias = np.empty(nc)
    vc = v.copy()
    for c in range(nc):
        bias[c] = e[c] * min(_dot(Wc[c, 0], vref), 0.0)
        _push(GWt[c], z[c], 1.0, vc)
    p = np.empty(3)
    states = np.empty(nc, np.int64)
    done = False
    for _ in range(SWEEPS):
        for c in range(nc):
            _push(GWt[c], z[c], -1.0, vc)
            states[c] = local(Acc[c], times(Wc[c], vc), bias[c], mu[c], p)
            if states[c] < 0:
                return STATUS_IMPACT_JAM
            z[c, :] = p
            _push(GWt[c], p, 1.0, vc)
        if nc == 1 or _violation(Wc, bias, vc, z, mu) <= SWEEP_TOL * max(1.0, _absmax(vc)):
            done = True
            break
    if not done:
        return STATUS_SWEEPS
    post[:] = vc
    if dpost.shape[1]:
        _tangents(G, W, (v, vref, post), (mu, e, states), z, tangents, dpost)
    return STATUS_OK


@jit
def _violation(Wc, bias, vc, z, mu):
    """How far the impulses ``z (nc, 3)`` are from solving every contact's
    conditions at the velocity ``vc`` [m/s]: the normal's ``|u_n + b|``
    where it pushes, ``-(u_n + b)`` where it does not; a stick's slip
    ``|u_t|``; a slip's velocity across the friction and along it (the
    friction must oppose the slip)."""
    worst = 0.0
    for c in range(z.shape[0]):
        u = _rows3(Wc[c], vc)
        w = u[0] + bias[c]
        worst = max(worst, abs(w) if z[c, 0] > 0.0 else -w)
        pt = np.sqrt(z[c, 1] ** 2 + z[c, 2] ** 2)
        if mu[c] == 0.0:  # (no friction: any slip)
            continue
        if pt < mu[c] * z[c, 0] * (1.0 - 1e-12) or pt == 0.0:
            worst = max(worst, np.sqrt(u[1] ** 2 + u[2] ** 2) if z[c, 0] > 0.0 else 0.0)
            continue
        along = (u[1] * z[c, 1] + u[2] * z[c, 2]) / pt
        worst = max(worst, abs(u[1] * z[c, 2] - u[2] * z[c, 1]) / pt, along)
    return worst


@jit
def _absmax(x):
    """``max |x|`` over an array of any shape (0 when empty)."""
    m = 0.0
    for v in x.flat:
        m = max(m, abs(v))
    return m


@jit
def _rows3(Wc, v):
    """A contact's velocity ``(u_n, u_t1, u_t2) = Wc v`` (``Wc (3, D)``)."""
    return _dot(Wc[0], v), _dot(Wc[1], v), _dot(Wc[2], v)


@jit
def _dot(a, b):
    """``a . b`` of two vectors, strided or not."""
    s = 0.0
    for k in range(a.shape[0]):
        s += a[k] * b[k]
    return s


@jit
def _rowed(zc, nc):
    """Each contact's ``(p_n, p_t1, p_t2)`` as impulses in row order."""
    z = np.empty(3 * nc)
    for c in range(nc):
        z[c], z[nc + 2 * c], z[nc + 2 * c + 1] = zc[c, 0], zc[c, 1], zc[c, 2]
    return z


@jit
def _jacobian(A, u, z, mu, states, nc):
    """The active set's conditions ``F (3 nc,)`` at the row-ordered
    impulses ``z`` and velocities ``u`` (the bias not added: the caller's)
    and their Jacobian ``J = dF/dz`` (``du = A dz``): a separating
    contact's ``p = 0``; a sticking one's ``u = 0``; a slipping one's
    ``u_n = 0`` and ``p_t + mu p_n s``, ``s = u_t / |u_t|`` (a slip too slow
    to have a direction sticks, except without friction: ``p_t = 0``).  Also returns each contact's slip
    direction's factor ``(s1, s2, mu p_n / |u_t|)`` (``proj (nc, 3)``) and
    the states taken (``eff``), what the tangents need."""
    n = 3 * nc
    J = np.empty((n, n))
    F = np.empty(n)
    proj = np.empty((nc, 3))
    eff = np.empty(nc, np.int64)
    _jacobian_into(A, u, z, mu, states, (F, J, proj, eff))
    return F, J, proj, eff


@jit
def _jacobian_into(A, u, z, mu, states, out):
    """:func:`_jacobian` into ``out = (F, J, proj, eff)``."""
    F, J, proj, eff = out
    nc = mu.shape[0]
    J[:, :] = 0.0
    F[:] = 0.0
    proj[:, :] = 0.0
    scale = max(1.0, _absmax(u))
    for c in range(nc):
        at = (c, nc + 2 * c, nc + 2 * c + 1)
        slip = np.sqrt(u[at[1]] ** 2 + u[at[2]] ** 2)
        state = states[c]
        if state == SLIP and slip <= 1e-12 * scale and mu[c] > 0.0:
            state = STICK
        if state == STICK and mu[c] == 0.0:
            state = SLIP  # (no friction: its tangential impulse is zero)
        eff[c] = state
        if state == SEPARATE:
            for a in at:
                J[a, a] = 1.0
                F[a] = z[a]
            continue
        J[c, :] = A[c, :]
        F[c] = u[c]
        if state == STICK:
            for a in at[1:]:
                J[a, :] = A[a, :]
                F[a] = u[a]
            continue
        s = (u[at[1]] / slip, u[at[2]] / slip) if slip > 0.0 else (0.0, 0.0)
        f = mu[c] * z[c] / slip if mu[c] > 0.0 else 0.0
        proj[c, 0], proj[c, 1], proj[c, 2] = s[0], s[1], f
        for k in range(2):
            a = at[1 + k]
            F[a] = z[a] + mu[c] * z[c] * s[k]
            J[a, a] += 1.0
            J[a, c] += mu[c] * s[k]
            for j in range(2):
                J[a, :] += f * ((1.0 if j == k else 0.0) - s[k] * s[j]) * A[at[1 + j], :]


@jit
def _tangents(G, W, vv, coefs, zc, tangents, dpost):
    """``dpost (D, nt)``: the converged step's tangents on its active set
    (module docstring, :func:`_jacobian`), ``vv = (v, vref, post)``,
    ``coefs = (mu, e, states)``."""
    v, vref, post = vv
    mu, e, states = coefs
    dv, dvref, dmu, de, dW, dG = tangents
    nc = mu.shape[0]
    n, nt = 3 * nc, dv.shape[1]
    z = _rowed(zc, nc)
    A = wgw(W, G)
    pw = times(W.T, z)
    R = W @ dv  # du without A dz: dW v+ + W (dv + dG W^T z + G dW^T z)
    for d in range(nt):
        if dW.shape[0]:
            wm = times(W, moved(G, dW, dG, z, pw, d))
            for a in range(n):
                R[a, d] += wm[a] + _dot(dW[a, :, d], post)
    _, J, proj, eff = _jacobian(A, times(W, post), z, mu, states, nc)
    for c in range(nc):
        at = (c, nc + 2 * c, nc + 2 * c + 1)
        if eff[c] == SEPARATE:
            for a in at:
                R[a, :] = 0.0
            continue
        wref = _dot(W[c], vref)
        for d in range(nt):
            if wref < 0.0:
                R[c, d] += e[c] * (_dot(dvref[:, d], W[c])
                                   + (_dot(dW[c, :, d], vref) if dW.shape[0] else 0.0))
            R[c, d] += de[c, d] * min(wref, 0.0)
        s1, s2, f = proj[c]
        if eff[c] == STICK:
            continue
        rt = (R[at[1], :].copy(), R[at[2], :].copy())
        for k in range(2):
            sk = s1 if k == 0 else s2
            R[at[1 + k], :] = dmu[c, :] * z[c] * sk
            for j in range(2):
                sj = s1 if j == 0 else s2
                R[at[1 + k], :] += f * ((1.0 if j == k else 0.0) - sk * sj) * rt[j]
    dz = min_norm(J, -R, RCOND)
    dpost[:, :] = dv + G @ (W.T @ dz)
    if dW.shape[0]:
        for d in range(nt):
            dpost[:, d] += moved(G, dW, dG, z, pw, d)


@jit
def _aligned_rows(W, nc, theta, nd):
    """The rows of a pyramid of ``nd`` edges turned by ``theta (nc,)`` from
    the disk's rows ``W (3 nc, D)``: the normal rows, then contact ``c``'s
    edges ``cos(2 pi k / nd + theta_c) t1 + sin(...) t2`` (a row is linear
    in its direction)."""
    D = W.shape[1]
    out = np.zeros((nc * (1 + nd), D))
    out[:nc] = W[:nc]
    for c in range(nc):
        for k in range(nd):
            phi = 2.0 * np.pi * k / nd + theta[c]
            a, b = np.cos(phi), np.sin(phi)
            for j in range(D):
                out[nc + c * nd + k, j] = a * W[nc + 2 * c, j] + b * W[nc + 2 * c + 1, j]
    return out


@jit
def _disk_impulses(zs, nc, theta, nd, z):
    """The aligned pyramid's impulses ``zs`` as each contact's ``(p_n,
    p_t1, p_t2)`` into ``z (nc, 3)``."""
    for c in range(nc):
        z[c, 0], z[c, 1], z[c, 2] = zs[c], 0.0, 0.0
        for k in range(nd):
            phi = 2.0 * np.pi * k / nd + theta[c]
            z[c, 1] += zs[nc + c * nd + k] * np.cos(phi)
            z[c, 2] += zs[nc + c * nd + k] * np.sin(phi)


@jit
def _align(Wc, post, z, theta, states, tol, step):
    """Turn each contact's pyramid toward the disk's answer, by ``step`` of
    the way (1: all of it): a slipping contact's first edge opposite its
    slip, a sticking one's along its friction impulse (where the pyramid's
    facets, not the disk, bound it); each contact's state into
    ``states``."""
    for c in range(z.shape[0]):
        u = _rows3(Wc[c], post)
        target = theta[c]
        if z[c, 0] <= 0.0:
            states[c] = SEPARATE
        elif u[1] * u[1] + u[2] * u[2] > tol * tol:
            states[c] = SLIP
            target = np.arctan2(-u[2], -u[1])
        else:
            states[c] = STICK
            if z[c, 1] != 0.0 or z[c, 2] != 0.0:
                target = np.arctan2(z[c, 2], z[c, 1])
        turn = (target - theta[c] + np.pi) % (2.0 * np.pi) - np.pi
        theta[c] += step * turn


@jit
def _polish(G, W, A, v, bias, mu, states, z):
    """Newton's iterations on the active set ``states`` (:func:`_jacobian`;
    ``A = W G W^T``) from the impulses ``z (nc, 3)``, replaced: the disk's
    answer where the pyramid's states are the disk's.  Returns the velocity
    after them."""
    nc = mu.shape[0]
    n = 3 * nc
    wv = times(W, v)
    zr = _rowed(z, nc)
    u = np.empty(n)
    F = np.empty(n)
    J = np.empty((n, n))
    out = (F, J, np.empty((nc, 3)), np.empty(nc, np.int64))
    for _ in range(POLISH):
        for a in range(n):
            u[a] = wv[a] + _dot(A[a], zr)
        for c in range(nc):
            u[c] += bias[c]
        _jacobian_into(A, u, zr, mu, states, out)
        if _absmax(F) <= 1e-14 * max(1.0, _absmax(u), _absmax(zr)):
            break
        F *= -1.0
        zr += min_norm(J, F.reshape((n, 1)), RCOND)[:, 0]
    for c in range(nc):
        if states[c] == SEPARATE:  # (zero, not the solve's rounding)
            zr[c], zr[nc + 2 * c], zr[nc + 2 * c + 1] = 0.0, 0.0, 0.0
        z[c, 0], z[c, 1], z[c, 2] = zr[c], zr[nc + 2 * c], zr[nc + 2 * c + 1]
    return v + times(G, times(W.T, zr))


@jit
def _inside(z, mu):
    """Whether the impulses ``z (nc, 3)`` push and lie in their disks (to
    rounding: 1e-12 of the largest impulse)."""
    tiny = 1e-12 * max(_absmax(z), 1e-300)
    for c in range(z.shape[0]):
        if z[c, 0] < -tiny:
            return False
        if np.sqrt(z[c, 1] ** 2 + z[c, 2] ** 2) > mu[c] * max(z[c, 0], 0.0) * (1.0 + 1e-9) + tiny:
            return False
    return True


@jit
def _warm(G, W, A, v, bias, mu, Wc, states, z, post):
    """The last step's answer ``z (nc, 3)`` (its contacts the same, in the
    same order) as this step's start: its active set (a contact that did
    not push separates, one inside its disk sticks, one on its edge slips)
    finished by :func:`_polish`; taken, into ``z``, ``states`` and ``post``,
    when the disk's conditions hold to the sweeps' tolerance (a body that
    goes on sliding, or resting, on the same face keeps its active set from
    step to step).  Returns whether it was."""
    nc = mu.shape[0]
    if _absmax(z) == 0.0:
        return False
    for c in range(nc):
        pt = np.sqrt(z[c, 1] ** 2 + z[c, 2] ** 2)
        states[c] = (SEPARATE if z[c, 0] <= 0.0 else
                     STICK if pt < mu[c] * z[c, 0] * (1.0 - 1e-9) else SLIP)
    trial = z.copy()
    polished = _polish(G, W, A, v, bias, mu, states, trial)
    tol = SWEEP_TOL * max(1.0, _absmax(polished))
    if not (_inside(trial, mu) and _violation(Wc, bias, polished, trial, mu) <= tol):
        return False
    z[:, :] = trial
    post[:] = polished
    return True


@jit
def step_elliptic(G, W, v, vref, mu, e, out, z, warm, tangents):
    """One body's step problem (module docstring) solved whole: a sequence
    of Stewart-Trinkle problems over pyramids of :data:`ALIGNED_EDGES`
    edges turned per contact (at first along each contact's impulse in
    ``z (nc, 3)``: the previous step's), each solved exactly by Lemke's pivots
    (:func:`simcore.laws.impact_maps.step_newton`, ``warm`` its start),
    each contact's pyramid turned after a round so that an edge lies
    opposite its slip, or along its sticking impulse (half as far as
    before after a round that did not lessen the disk's violation: the
    turns can cycle).  A slip along an
    edge is resisted exactly as by the disk (the edge's vertex lies on the
    circle) and a stick inside the pyramid is inside the disk, so the
    rounds end when the disk's conditions hold at the round's velocity
    (to :data:`PIVOTS` times :data:`~simcore.laws.impact_maps.SWEEP_TOL`:
    slips slower than that stick), at most
    :data:`ROUNDS`, after which (or after a round whose pivots met a ray)
    the sweeps of :func:`step_elliptic_sweeps` go on from the last round's
    impulses.  After each round, Newton's
    iterations on the round's active set (:func:`_polish`) finish the
    disk's answer.  Unlike the sweeps, the rounds settle the internal
    impulse of two sticking points whose restitution pulls them apart.
    Before any round, the last step's active set is tried (:func:`_warm`).
    Should the sweeps not converge either (they can cycle on a face's four
    coplanar contacts, whose impulses are not unique, landing with a turn
    at a high ``mu`` and ``e``), the last round's answer stands: an exact
    solution of Newton's restitution with Coulomb's friction on the
    pyramid turned along each contact's slip, whose edges' vertices lie on
    the disk (its tangents those of the disk on the round's active set).
    Arguments and the answer in ``z`` as :func:`step_elliptic_sweeps`'s."""
    nc = mu.shape[0]
    if nc == 1:  # (one contact: its local problem is the whole one)
        return step_elliptic_sweeps(G, W, v, vref, mu, e, out, z, tangents)
    nd = ALIGNED_EDGES
    post, dpost = out
    Wc = _contact_rows(W, nc)
    A = wgw(W, G)
    bias = np.empty(nc)
    for c in range(nc):
        bias[c] = e[c] * min(_dot(Wc[c, 0], vref), 0.0)
    states = np.empty(nc, np.int64)
    if _warm(G, W, A, v, bias, mu, Wc, states, z, post):
        if dpost.shape[1]:
            _tangents(G, W, (v, vref, post), (mu, e, states), z, tangents, dpost)
        return STATUS_OK
    theta = np.zeros(nc)
    for c in range(nc):
        if z[c, 1] != 0.0 or z[c, 2] != 0.0:
            theta[c] = np.arctan2(z[c, 2], z[c, 1])
    start = np.zeros((nc, 3))
    kept = np.empty_like(post)  # (the last round's velocity, should the sweeps cycle)
    solved = False
    step, last = 1.0, np.inf
    none = (np.zeros((v.shape[0], 0)), np.zeros((v.shape[0], 0)), np.zeros((nc, 0)),
            np.zeros((nc, 0)), np.zeros((0, v.shape[0], 0)), np.zeros((v.shape[0], v.shape[0], 0)))
    for _ in range(ROUNDS):
        st, zs = step_newton(G, _aligned_rows(W, nc, theta, nd), v, vref, mu, e, nd,
                             (post, dpost[:, :0]), warm, none)
        if st != STATUS_OK:
            break  # (the pivots met a ray: the sweeps go on)
        _disk_impulses(zs, nc, theta, nd, z)
        start[:, :] = z
        kept[:] = post
        solved = True
        tol = SWEEP_TOL * max(1.0, _absmax(post))
        off = _violation(Wc, bias, post, z, mu)
        if off >= last:  # (a turn that did not help: the next ones shorter)
            step = max(0.5 * step, 1.0 / 64.0)
        last = off
        _align(Wc, post, z, theta, states, PIVOTS * tol, step)
        if _inside(z, mu) and off <= PIVOTS * tol:
            if dpost.shape[1]:
                _tangents(G, W, (v, vref, post), (mu, e, states), z, tangents, dpost)
            return STATUS_OK
        polished = _polish(G, W, A, v, bias, mu, states, z)
        if _inside(z, mu) and _violation(Wc, bias, polished, z, mu) <= tol:
            post[:] = polished
            if dpost.shape[1]:
                _tangents(G, W, (v, vref, post), (mu, e, states), z, tangents, dpost)
            return STATUS_OK
    z[:, :] = start
    st = step_elliptic_sweeps(G, W, v, vref, mu, e, out, z, tangents)
    if st != STATUS_SWEEPS or not solved:
        return st
    z[:, :] = start
    post[:] = kept
    if dpost.shape[1]:
        _tangents(G, W, (v, vref, post), (mu, e, states), z, tangents, dpost)
    return STATUS_OK

"""Small linear complementarity problems: Lemke's pivoting, and the
derivative of a solution on its basis.

The problem: given ``M (n, n)`` and ``q (n,)``, find ``z`` with::

    w = M z + q >= 0,   z >= 0,   w . z = 0.

:func:`lemke` is Lemke's complementary pivoting method (Cottle, Pang and
Stone, *The Linear Complementarity Problem*, 1992, section 4.4) on a dense
tableau ``[I, -M, -1 | q]`` over the variables ``(w, z, z0)`` with the
covering vector of ones, and the lexicographic ratio test (ties broken by the
rows of the basis inverse, which the ``w`` columns of the tableau carry), so
it cannot cycle on degenerate problems.  It ends when the artificial ``z0``
leaves the basis (a solution), or on a ray (no solution it can reach; for
the copositive-plus matrices of the impact problems of
:mod:`simcore.laws.impact_maps` a ray means the problem is infeasible), or
after ``MAX_PIVOTS_PER_ROW n`` pivots.  The basic ``z`` are then solved
again from the original ``M`` by Gaussian elimination (the tableau's value
carries the pivots' rounding).  Cost: ``O(n^2)`` per pivot on a tableau of
``n (2n + 2)`` numbers; the kernels here are for problems of up to
:data:`LCP_MAX` unknowns (a few contact points, each with its normal, its
pyramid's edges and a slip speed).

:func:`basis_tangent` differentiates a solution on its basis ``B`` (the
``z`` the pivots left basic; their ``w`` are zero): ``M_BB z_B + q_B = 0``,
so along a direction ``dz_B = -M_BB^-1 ((dM z)_B + dq_B)`` and ``dz_N = 0``.
The basis matrix of a complementary basis is nonsingular, so ``M_BB`` is.
Where the solution sits on the boundary of two bases (a ``z`` basic at zero,
or a ``w`` nonbasic at zero: a contact exactly at stick-slip, or exactly
touching) the map has a kink, and this is the derivative on the side of
the basis the pivots ended in.
"""

import numpy as np

from .config import jit

#: The largest problem the kernels are sized for (unknowns): a stack of
#: boxes on the Moreau-Jean stepper, 40 contact points with 4 edges each.
LCP_MAX = 240
#: Pivots allowed, per unknown, before giving up.
MAX_PIVOTS_PER_ROW = 50
#: Relative size under which a tableau entry is not a pivot.
PIVOT_EPS = 1e-13

#: Ridges tried after a ray, relative to the matrix's largest entry.
RIDGES = (0.0, 1e-14, 1e-12, 1e-10, 1e-8, 1e-6)
#: Relative infeasibility up to which a polished solution is kept.
FEASIBLE = 1e-9
#: Relative residual up to which a warm start's basis solves its problem.
EXACT = 1e-10

LCP_OK = 0
LCP_RAY = 1
LCP_PIVOTS = 2
LCP_TOO_LARGE = 3


@jit
def solve(A, B):
    """``A^-1 B`` by Gaussian elimination with partial pivoting (``A (n, n)``,
    ``B (n, k)``; both copied).  A singular ``A`` gives non-finite values."""
    n = A.shape[0]
    k = B.shape[1]
    a = A.copy()
    x = B.copy()
    for c in range(n):
        p = c
        best = abs(a[c, c])
        for r in range(c + 1, n):
            if abs(a[r, c]) > best:
                best = abs(a[r, c])
                p = r
        if p != c:
            for j in range(n):
                a[c, j], a[p, j] = a[p, j], a[c, j]
            for j in range(k):
                x[c, j], x[p, j] = x[p, j], x[c, j]
        piv = a[c, c]
        for r in range(c + 1, n):
            f = a[r, c] / piv
            if f != 0.0:
                for j in range(c, n):
                    a[r, j] -= f * a[c, j]
                for j in range(k):
                    x[r, j] -= f * x[c, j]
    for c in range(n - 1, -1, -1):
        for j in range(k):
            s = x[c, j]
            for i in range(c + 1, n):
                s -= a[c, i] * x[i, j]
            x[c, j] = s / a[c, c]
    return x


@jit
def _pivot(T, r, c):
    """Make column ``c`` the unit vector of row ``r``."""
    piv = T[r, c]
    for j in range(T.shape[1]):
        T[r, j] /= piv
    for i in range(T.shape[0]):
        if i != r:
            f = T[i, c]
            if f != 0.0:
                for j in range(T.shape[1]):
                    T[i, j] -= f * T[r, j]


@jit
def _leaving(T, c, n, bas):
    """The row that leaves when column ``c`` enters: the lexicographic
    minimum of ``(rhs, B^-1 row) / T[:, c]`` over rows with an entry above
    the pivot tolerance, the artificial ``z0``'s row first among rows of the
    least ratio; -1 when there is none (a ray)."""
    big = 0.0
    for i in range(n):
        big = max(big, abs(T[i, c]))
    tol = PIVOT_EPS * max(big, 1.0)
    best = -1
    for i in range(n):
        if T[i, c] <= tol:
            continue
        if best < 0:
            best = i
            continue
        a, b = T[i, c], T[best, c]
        r1, r2 = T[i, 2 * n + 1] / a, T[best, 2 * n + 1] / b
        if r1 < r2:
            best = i
        elif r1 == r2:
            for j in range(n):
                x1, x2 = T[i, j] / a, T[best, j] / b
                if x1 < x2:
                    best = i
                    break
                if x1 > x2:
                    break
    if best < 0:
        return best
    least = T[best, 2 * n + 1] / T[best, c]
    for i in range(n):
        if bas[i] == 2 * n and T[i, c] > tol and T[i, 2 * n + 1] / T[i, c] <= least:
            return i
    return best


@jit
def lemke(M, q, z, basic):
    """Solve the LCP ``(M, q)`` into ``z (n,)``; ``basic (n,)`` receives which
    ``z`` ended in the basis.  Returns :data:`LCP_OK`, :data:`LCP_RAY`,
    :data:`LCP_PIVOTS` or :data:`LCP_TOO_LARGE`.

    A ray on the problem as given is retried with ``M + eps I``, ``eps`` of
    :data:`RIDGES` times ``M``'s largest entry (a strictly copositive matrix,
    on which Lemke's method always ends in a solution); the basis found
    there is then solved with ``M`` itself and kept when that solution is
    feasible to :data:`FEASIBLE` (else the ridged solution stands, off by
    about ``eps``).  The larger ridges serve the degenerate problems of
    redundant contacts (a box resting on a face: four coplanar points, their
    pyramids' edges all at zero slip), where the pivots' rounding breaks the
    lexicographic rule's ties."""
    return _ridged(M, q, z, basic)[0]


@jit
def lemke_warm(M, q, z, basic, ridge):
    """:func:`lemke` started from a previous solve of a problem like it (the
    Moreau-Jean stepper's next step on the same contacts): its basis in
    ``basic``, the index in :data:`RIDGES` of the ridge it ended on in
    ``ridge[0]`` (-1: no previous solve).  A basis that solved its problem
    without a ridge is solved first and kept when it solves this one
    exactly (:func:`_exact`); else the pivots run.  A ridged basis is not
    tried: it solves a neighbour of a degenerate problem, and among that
    problem's many solutions it can pick one whose internal impulses tilt a
    box sliding on a face (seen as a hop of the box).  ``ridge[0]``
    receives this solve's ridge (-1: it failed)."""
    if ridge[0] == 0 and _on_basis(M, q, z, basic):
        return LCP_OK
    st, k = _ridged(M, q, z, basic)
    ridge[0] = k if st == LCP_OK else -1
    return st


@jit
def _on_basis(M, q, z, basic):
    """Whether the basis ``basic`` solves ``(M, q)`` exactly (its ``z``
    into ``z``)."""
    n = q.shape[0]
    if n > LCP_MAX:
        return False
    nb = 0
    for i in range(n):
        z[i] = 0.0
        if basic[i]:
            nb += 1
    if nb > 0:
        _resolve(M, q, z, basic, nb)
    return _exact(M, q, z, basic)


@jit
def _exact(M, q, z, basic):
    """Whether ``z``, solved on the basis ``basic``, solves ``(M, q)`` to
    rounding: every basic ``w`` zero and every other ``w`` non-negative to
    :data:`EXACT` of ``q``'s largest entry (a basis that does not hold has
    a basic ``z`` the solve clamped at zero, whose ``w`` is then not zero).
    Stricter than :func:`_feasible`, which judges the pivots' answers: a
    guessed basis must be the problem's own."""
    n = q.shape[0]
    scale = 0.0
    for i in range(n):
        scale = max(scale, abs(q[i]))
    tol = EXACT * scale
    w = _residual(M, q, z)
    for i in range(n):
        if not np.isfinite(z[i]):
            return False
        if basic[i] and abs(w[i]) > tol:
            return False
        if not basic[i] and w[i] < -tol:
            return False
    return True


@jit
def _ridge(M, eps):
    """``M + eps max|M| I``."""
    n = M.shape[0]
    big = 0.0
    for i in range(n):
        for j in range(n):
            big = max(big, abs(M[i, j]))
    Mr = M.copy()
    for i in range(n):
        Mr[i, i] += eps * big
    return Mr


@jit
def _ridged(M, q, z, basic):
    """:func:`lemke`'s pivots, on ``M`` then on each ridge after a ray:
    ``(status, index of the ridge it ended on)``."""
    n = q.shape[0]
    if n > LCP_MAX:
        for i in range(n):
            z[i] = 0.0
            basic[i] = False
        return LCP_TOO_LARGE, -1
    st = LCP_RAY
    for k in range(len(RIDGES)):
        if RIDGES[k] == 0.0:
            st = _lemke(M, q, z, basic)
        else:
            st = _lemke(_ridge(M, RIDGES[k]), q, z, basic)
            if st == LCP_OK:
                _polish(M, q, z, basic)
        if st == LCP_OK:
            return st, k
    return st, -1


@jit
def _polish(M, q, z, basic):
    """The basis of a ridged solution solved with ``M``; kept if feasible."""
    n = q.shape[0]
    keep = z.copy()
    nb = 0
    for i in range(n):
        if basic[i]:
            nb += 1
    _resolve(M, q, z, basic, nb)
    w = _residual(M, q, z)
    scale = 1.0
    for i in range(n):
        scale = max(scale, abs(q[i]))
    for i in range(n):
        if not (np.isfinite(z[i]) and w[i] >= -FEASIBLE * scale):
            z[:] = keep
            return


@jit
def _lemke(M, q, z, basic):
    """Lemke's pivots on ``(M, q)`` (see :func:`lemke`)."""
    n = q.shape[0]
    for i in range(n):
        z[i] = 0.0
        basic[i] = False
    r = 0
    for i in range(n):
        if q[i] < q[r]:
            r = i
    if n == 0 or q[r] >= 0.0:
        return LCP_OK  # z = 0 solves it
    T = np.zeros((n, 2 * n + 2))
    bas = np.empty(n, np.int64)
    for i in range(n):
        T[i, i] = 1.0
        for j in range(n):
            T[i, n + j] = -M[i, j]
        T[i, 2 * n] = -1.0
        T[i, 2 * n + 1] = q[i]
        bas[i] = i
    # z0 enters at the most negative q: every right-hand side becomes >= 0
    _pivot(T, r, 2 * n)
    leaving = bas[r]
    bas[r] = 2 * n
    status = LCP_PIVOTS
    for _ in range(MAX_PIVOTS_PER_ROW * n):
        c = leaving + n if leaving < n else leaving - n  # the complement enters
        r = _leaving(T, c, n, bas)
        if r < 0:
            status = LCP_RAY
            break
        _pivot(T, r, c)
        leaving = bas[r]
        bas[r] = c
        if leaving == 2 * n:
            status = LCP_OK
            break
    if status != LCP_OK:
        return status
    nb = 0
    for i in range(n):
        if n <= bas[i] < 2 * n:
            basic[bas[i] - n] = True
            nb += 1
    _resolve(M, q, z, basic, nb)
    return LCP_OK if _feasible(M, q, z) else LCP_RAY


@jit
def _feasible(M, q, z):
    """Whether ``z`` solves ``(M, q)`` to :data:`FEASIBLE` of ``q``'s scale
    (the pivots' rounding can leave a wrong basis on a nearly singular
    problem: the next ridge is tried then)."""
    n = q.shape[0]
    scale = 1.0
    for i in range(n):
        scale = max(scale, abs(q[i]))
    w = _residual(M, q, z)
    for i in range(n):
        if not (np.isfinite(z[i]) and z[i] >= 0.0 and w[i] >= -FEASIBLE * scale
                and abs(z[i] * w[i]) <= FEASIBLE * scale * max(1.0, abs(z[i]))):
            return False
    return True


@jit
def _residual(M, q, z):
    """``w = M z + q`` (loops: a BLAS call costs more on these sizes)."""
    n = q.shape[0]
    w = q.copy()
    for j in range(n):
        if z[j] != 0.0:
            for i in range(n):
                w[i] += M[i, j] * z[j]
    return w


@jit
def _resolve(M, q, z, basic, nb):
    """The basic ``z`` solved from ``M_BB z_B = -q_B`` (exact to rounding)."""
    idx = np.empty(nb, np.int64)
    k = 0
    for i in range(basic.shape[0]):
        if basic[i]:
            idx[k] = i
            k += 1
    A = np.empty((nb, nb))
    b = np.empty((nb, 1))
    for a in range(nb):
        b[a, 0] = -q[idx[a]]
        for c in range(nb):
            A[a, c] = M[idx[a], idx[c]]
    x = solve(A, b)
    for a in range(nb):
        z[idx[a]] = max(x[a, 0], 0.0)


@jit
def basis_tangent(M, basic, r):
    """``dz (n, nt)`` of a solution on its basis: ``r (n, nt)`` holds ``dM z +
    dq`` along each direction; ``dz_B = -M_BB^-1 r_B``, ``dz_N = 0``."""
    n, nt = r.shape
    dz = np.zeros((n, nt))
    nb = 0
    for i in range(n):
        if basic[i]:
            nb += 1
    if nb == 0:
        return dz
    idx = np.empty(nb, np.int64)
    k = 0
    for i in range(n):
        if basic[i]:
            idx[k] = i
            k += 1
    A = np.empty((nb, nb))
    b = np.empty((nb, nt))
    for a in range(nb):
        for c in range(nb):
            A[a, c] = M[idx[a], idx[c]]
        for d in range(nt):
            b[a, d] = -r[idx[a], d]
    x = solve(A, b)
    if not np.all(np.isfinite(x)):  # a singular basis (redundant contacts): ridged
        big = 0.0
        for a in range(nb):
            big = max(big, abs(A[a, a]))
        for a in range(nb):
            A[a, a] += RIDGES[1] * big
        x = solve(A, b)
    for a in range(nb):
        for d in range(nt):
            dz[idx[a], d] = x[a, d]
    return dz

"""Small dense least squares for the kernels: the minimum-norm solution
of a possibly rank-deficient system by a complete orthogonal
decomposition (Golub and Van Loan, *Matrix Computations*, 4th ed.,
sections 5.4.1-5.4.2), what ``numpy.linalg.lstsq`` returns by an SVD, at
a fifth to a seventh of its cost on the contact problems' 6-24 unknowns.

``A P = Q [R11 R12; 0 R22]``: Householder QR with column pivoting (the
column of largest remaining norm first), ``R11`` of rank ``r`` (the
diagonal entries above ``rcond`` times the first, the rank decision of
the SVD's ``rcond`` with the pivoted diagonal as the singular values'
estimate); then ``[R11 R12] = [U^T 0] Z^T`` by a second Householder QR of
its transpose.  The solution ``x = P Z [U^-T c_1; 0]``, ``c = Q^T b``, is
the least-squares solution of least norm.  A matrix of rank zero gives
``x = 0``.
"""

import numpy as np

from .config import jit


@jit
def _reflect(v, k):
    """The Householder reflector that zeroes ``v[k+1:]`` below ``v[k]``,
    built in place: ``v[k+1:]`` becomes its vector (``v[k] = 1``
    implied), ``v[k]`` the new diagonal ``beta``; returns ``tau``, ``H = I -
    tau u u^T``."""
    alpha = v[k]
    sigma = 0.0
    for i in range(k + 1, v.shape[0]):
        sigma += v[i] * v[i]
    if sigma == 0.0:
        return 0.0
    norm = np.sqrt(alpha * alpha + sigma)
    beta = -norm if alpha >= 0.0 else norm
    scale = 1.0 / (alpha - beta)
    for i in range(k + 1, v.shape[0]):
        v[i] *= scale
    v[k] = beta
    return (beta - alpha) / beta


@jit
def _apply(u, k, tau, x):
    """``x[k:] = H x[k:]``, ``H`` the reflector stored in ``u[k+1:]``."""
    s = x[k]
    for i in range(k + 1, x.shape[0]):
        s += u[i] * x[i]
    s *= tau
    x[k] -= s
    for i in range(k + 1, x.shape[0]):
        x[i] -= s * u[i]


@jit
def min_norm(A, B, rcond):
    """The minimum-norm least-squares solution ``X (n, k)`` of ``A X = B``
    (``A (m, n)``, ``B (m, k)``; neither changed), singular values below
    ``rcond`` times the largest taken as zero (module docstring)."""
    m, n = A.shape
    k = B.shape[1]
    a = A.T.copy()  # (n, m): A's columns as rows
    c = B.T.copy()  # (k, m)
    perm = np.arange(n)
    norms = np.zeros(n)
    for j in range(n):
        for i in range(m):
            norms[j] += a[j, i] * a[j, i]
    rank = 0
    first = 0.0
    for s in range(min(m, n)):
        best = s
        for j in range(s + 1, n):
            if norms[j] > norms[best]:
                best = j
        if best != s:
            for i in range(m):
                a[s, i], a[best, i] = a[best, i], a[s, i]
            norms[s], norms[best] = norms[best], norms[s]
            perm[s], perm[best] = perm[best], perm[s]
        tau = _reflect(a[s], s)
        beta = a[s, s]
        if s == 0:
            first = abs(beta)
        if first == 0.0 or abs(beta) <= rcond * first:
            break
        rank += 1
        for j in range(s + 1, n):
            _apply(a[s], s, tau, a[j])
            norms[j] -= a[j, s] * a[j, s]  # the norm below row s
        for j in range(k):
            _apply(a[s], s, tau, c[j])
    x = np.zeros((n, k))
    r = rank
    if r == 0:
        return x
    if r == n:  # full column rank: R11 y = c1 by back substitution
        for j in range(k):
            for i in range(n - 1, -1, -1):
                t = c[j, i]
                for q in range(i + 1, n):
                    t -= a[q, i] * x[perm[q], j]
                x[perm[i], j] = t / a[i, i]
        return x
    # t = [R11 R12] (r, n), whose rows are T's columns; T = Z [U; 0]
    t = np.zeros((r, n))
    for i in range(r):
        for j in range(i, n):
            t[i, j] = a[j, i]
    ztau = np.zeros(r)
    for s in range(r):
        ztau[s] = _reflect(t[s], s)
        for j in range(s + 1, r):
            _apply(t[s], s, ztau[s], t[j])
    # w1 = U^-T c1 (U[q, i] = t[i, q] for q <= i), then y = Z w
    w = np.zeros((k, n))
    for j in range(k):
        for i in range(r):
            v = c[j, i]
            for q in range(i):
                v -= t[i, q] * w[j, q]
            w[j, i] = v / t[i, i]
        for s in range(r - 1, -1, -1):  # y = H_0 ... H_{r-1} w
            _apply(t[s], s, ztau[s], w[j])
        for i in range(n):
            x[perm[i], j] = w[j, i]
    return x

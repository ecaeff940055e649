"""Continuous collision detection: exact times of impact.

Between events every body moves on a parabola ``p(s) = p + v s + a s^2 / 2``
(the accelerations are piecewise constant, see ``integrate.py``).  A contact
starts at the first ``s`` in ``[0, h]`` where the gap function reaches zero
while decreasing:

* sphere-plane (plane ``n . p = d``, ``n`` into the free side)::

      g(s) = n . p(s) - d - r = g0 + (n . v) s + (n . a) s^2 / 2      (quadratic)

* sphere-sphere (``d = p_j - p_i``, ``w = v_j - v_i``, ``b = a_j - a_i``,
  ``R = r_i + r_j``)::

      f(s) = |d + w s + b s^2 / 2|^2 - R^2
           = |b|^2/4 s^4 + (w . b) s^3 + (|w|^2 + d . b) s^2 + 2 (d . w) s + (|d|^2 - R^2)

  a quartic; ``f`` has the sign of the gap, and the contact normal and the
  relative velocity are then taken at that time-of-impact configuration (the
  patent's "rewind to the contact", done exactly instead of linearly).

Roots are isolated by splitting ``[0, h]`` at the real roots of the derivative
(found the same way, one degree lower), so the polynomial is monotone on each
piece; the first piece whose ends bracket a decreasing crossing holds the
root, which a safeguarded Newton-bisection iteration takes to machine
precision.  A gap that is already ``<= 0`` at ``s = 0`` counts as a contact
at 0 only while it decreases (surfaces that touch and separate are left alone).

Shape pairs are one table, :data:`PAIRS`: each row gives a pair's time of
impact, gap, normal and contact points.  The kernels reach it through
:func:`body_pair` and :func:`plane_pair` and the dispatchers
(``toi_body_body``, ``gap_body_body``, ``contact_normal_body_body``,
``contact_points_body_body`` and their ``_plane`` twins); a pair without a
row is reported by every one of them and the scenario stops with
``STATUS_UNSUPPORTED_PAIR``, never a silent no-contact or a sphere's answer.
"""

from typing import NamedTuple

import numpy as np

from ..kernel.config import ROOT_MAXITER, jit

SHAPE_SPHERE = 0
SHAPE_BOX = 1
#: Body shapes by code.  Boxes have no time of impact here: the time-stepper
#: (:mod:`simcore.rigid.rigid_engine`) runs them, with the contact points of
#: :mod:`simcore.geometry.faces`.
SHAPE_NAMES = ("sphere", "box")

NO_ROOT = np.inf
#: Returned by the dispatchers for a pair of shapes with no contact function.
UNSUPPORTED = -1.0


@jit
def _peval(c, n, s):
    """Horner evaluation of ``c[0] + c[1] s + ... + c[n] s^n``."""
    r = c[n]
    for k in range(n - 1, -1, -1):
        r = r * s + c[k]
    return r


@jit
def _dpeval(c, n, s):
    """Derivative of the polynomial ``c`` of degree ``n`` at ``s``."""
    r = n * c[n]
    for k in range(n - 1, 0, -1):
        r = r * s + k * c[k]
    return r


@jit
def _bracketed_root(c, n, lo, hi, flo):
    """Root of a polynomial monotone on ``[lo, hi]`` with a sign change there.

    Safeguarded Newton: a Newton step is taken when it stays inside the
    current bracket, otherwise the bracket is bisected; iterates until the
    bracket or the Newton step is a few ulps wide or the value is exactly zero.
    """
    x = 0.5 * (lo + hi)
    for _ in range(ROOT_MAXITER):
        fx = _peval(c, n, x)
        if fx == 0.0:
            return x
        if (fx > 0.0) == (flo > 0.0):
            lo = x
            flo = fx
        else:
            hi = x
        if hi - lo <= 4.0 * np.finfo(np.float64).eps * max(abs(lo), abs(hi)):
            break
        d = _dpeval(c, n, x)
        xn = x - fx / d if d != 0.0 else lo - 1.0
        if xn <= lo or xn >= hi or not np.isfinite(xn):
            xn = 0.5 * (lo + hi)
        elif abs(xn - x) <= 4.0 * np.finfo(np.float64).eps * abs(x):
            # Newton has converged: its step is a few ulps (the bracket's far
            # end may never move when f keeps its sign on neighbouring floats).
            return xn
        if xn == x:
            break
        x = xn
    return x


@jit
def _quadratic_roots(c0, c1, c2, a, b):
    """Real roots of ``c0 + c1 s + c2 s^2`` strictly inside ``(a, b)``, sorted:
    ``(m, r0, r1)`` with the first ``m`` meaningful.

    Uses the cancellation-free form ``q = -(c1 + sign(c1) sqrt(D)) / 2``,
    roots ``q / c2`` and ``c0 / q``.
    """
    if c2 == 0.0:
        if c1 != 0.0:
            r = -c0 / c1
            if a < r < b:
                return 1, r, 0.0
        return 0, 0.0, 0.0
    disc = c1 * c1 - 4.0 * c2 * c0
    if disc < 0.0:
        return 0, 0.0, 0.0
    sq = np.sqrt(disc)
    q = -0.5 * (c1 + sq) if c1 >= 0.0 else -0.5 * (c1 - sq)
    r1 = q / c2
    r2 = c0 / q if q != 0.0 else r1
    if r1 > r2:
        r1, r2 = r2, r1
    m = 0
    out0 = 0.0
    out1 = 0.0
    if a < r1 < b:
        out0 = r1
        m = 1
    if r2 != r1 and a < r2 < b:
        if m == 0:
            out0 = r2
        else:
            out1 = r2
        m += 1
    return m, out0, out1


@jit
def _monotone_roots(c, n, a, b, breaks, nbreak):
    """All sign changes of polynomial ``c`` on ``[a, b]`` split at ``breaks``
    (a tuple, the first ``nbreak`` meaningful): ``(m, (r0, r1, r2))``."""
    m = 0
    o0 = 0.0
    o1 = 0.0
    o2 = 0.0
    lo = a
    flo = _peval(c, n, lo)
    for k in range(nbreak + 1):
        hi = breaks[k] if k < nbreak else b
        fhi = _peval(c, n, hi)
        found = True
        if flo != 0.0 and fhi != 0.0 and (flo > 0.0) != (fhi > 0.0):
            r = _bracketed_root(c, n, lo, hi, flo)
        elif fhi == 0.0 and k < nbreak:
            r = hi
        else:
            found = False
            r = 0.0
        if found:
            if m == 0:
                o0 = r
            elif m == 1:
                o1 = r
            else:
                o2 = r
            m += 1
        lo = hi
        flo = fhi
    return m, (o0, o1, o2)


@jit
def _critical_points(c, n, a, b):
    """Sorted real roots in ``(a, b)`` of the derivative of ``c`` (degree <= 4):
    ``(m, (x0, x1, x2))``."""
    while n > 0 and c[n] == 0.0:
        n -= 1
    if n <= 1:
        return 0, (0.0, 0.0, 0.0)
    if n == 2:
        m, r0, r1 = _quadratic_roots(c[1], 2.0 * c[2], 0.0, a, b)
        return m, (r0, r1, 0.0)
    if n == 3:
        m, r0, r1 = _quadratic_roots(c[1], 2.0 * c[2], 3.0 * c[3], a, b)
        return m, (r0, r1, 0.0)
    # n == 4: the derivative is a cubic; split it at its own critical points.
    dc = (1 * c[1], 2 * c[2], 3 * c[3], 4 * c[4])
    nbr, b0, b1 = _quadratic_roots(dc[1], 2.0 * dc[2], 3.0 * dc[3], a, b)
    return _monotone_roots(dc, 3, a, b, (b0, b1), nbr)


@jit
def first_entry(c, n, h):
    """First ``s`` in ``[0, h]`` where the polynomial ``c`` reaches 0 decreasing.

    ``c`` (a tuple) holds ``n + 1`` coefficients, lowest first.  Returns
    ``NO_ROOT`` (``inf``) when there is none.  ``s = 0`` is returned when the
    value is already ``<= 0`` and decreasing there.  Nothing is allocated:
    the event search calls it every step (see ``config.jit(borrow=True)``).
    """
    while n > 0 and c[n] == 0.0:
        n -= 1
    nbreak, breaks = _critical_points(c, n, 0.0, h)
    lo = 0.0
    flo = _peval(c, n, 0.0)
    for k in range(nbreak + 1):
        hi = breaks[k] if k < nbreak else h
        fhi = _peval(c, n, hi)
        if flo > 0.0:
            if fhi <= 0.0:
                if fhi == 0.0:
                    return hi
                return _bracketed_root(c, n, lo, hi, flo)
        elif fhi < flo:
            # Already touching (or overlapped by rounding) and closing in.
            return lo
        lo = hi
        flo = fhi
    return NO_ROOT


@jit
def first_entry_quadratic(c0, c1, c2, h):
    """:func:`first_entry` for ``c0 + c1 s + c2 s^2`` (the same arithmetic,
    so the same root), with the one critical point in closed form."""
    if c2 == 0.0 and c1 == 0.0:
        return NO_ROOT  # constant: never enters
    nbreak = 0
    sc = 0.0
    if c2 != 0.0:
        sc = -c1 / (2.0 * c2)
        if 0.0 < sc < h:
            nbreak = 1
    lo = 0.0
    flo = c0
    for k in range(nbreak + 1):
        hi = sc if k < nbreak else h
        fhi = (c2 * hi + c1) * hi + c0
        if flo > 0.0:
            if fhi <= 0.0:
                if fhi == 0.0:
                    return hi
                return _bracketed_root((c0, c1, c2), 2, lo, hi, flo)
        elif fhi < flo:
            return lo
        lo = hi
        flo = fhi
    return NO_ROOT


@jit
def toi_sphere_plane(p, v, a, r, pn, pd, h):
    """Time of impact of a sphere with the plane ``pn . x = pd`` within ``h``."""
    c0 = pn[0] * p[0] + pn[1] * p[1] + pn[2] * p[2] - pd - r
    c1 = pn[0] * v[0] + pn[1] * v[1] + pn[2] * v[2]
    c2 = 0.5 * (pn[0] * a[0] + pn[1] * a[1] + pn[2] * a[2])
    # Broad phase: the gap cannot close within h.
    if c0 - abs(c1) * h - abs(c2) * h * h > 0.0:
        return NO_ROOT
    return first_entry_quadratic(c0, c1, c2, h)


@jit
def toi_sphere_sphere(pi, vi, ai, ri, pj, vj, aj, rj, h):
    """Time of impact of two spheres within ``h`` (quartic, see module doc)."""
    d0 = pj[0] - pi[0]
    d1 = pj[1] - pi[1]
    d2 = pj[2] - pi[2]
    w0 = vj[0] - vi[0]
    w1 = vj[1] - vi[1]
    w2 = vj[2] - vi[2]
    b0 = aj[0] - ai[0]
    b1 = aj[1] - ai[1]
    b2 = aj[2] - ai[2]
    big_r = ri + rj
    dist = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    ww = w0 * w0 + w1 * w1 + w2 * w2
    bb = b0 * b0 + b1 * b1 + b2 * b2
    wn = np.sqrt(ww)
    bn = np.sqrt(bb)
    gap = dist - big_r
    # Broad phase: the centres cannot close the gap within h.
    if gap - wn * h - 0.5 * bn * h * h > 0.0:
        return NO_ROOT
    c = (gap * (dist + big_r), 2.0 * (d0 * w0 + d1 * w1 + d2 * w2),
         ww + (d0 * b0 + d1 * b1 + d2 * b2), w0 * b0 + w1 * b1 + w2 * b2, 0.25 * bb)
    return first_entry(c, 4, h)


# -- the shape-pair table ------------------------------------------------------------

@jit
def gap_sphere_sphere(pi, ri, pj, rj):
    """Signed surface distance of two spheres (negative when overlapping)."""
    d0 = pj[0] - pi[0]
    d1 = pj[1] - pi[1]
    d2 = pj[2] - pi[2]
    return np.sqrt(d0 * d0 + d1 * d1 + d2 * d2) - ri - rj


@jit
def gap_sphere_plane(p, r, pn, pd):
    """Signed distance from a sphere's surface to the plane ``pn . x = pd``."""
    return pn[0] * p[0] + pn[1] * p[1] + pn[2] * p[2] - pd - r


@jit
def normal_sphere_sphere(pi, pj, out):
    """Unit normal from sphere i's centre to sphere j's."""
    d0 = pj[0] - pi[0]
    d1 = pj[1] - pi[1]
    d2 = pj[2] - pi[2]
    inv = 1.0 / np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    out[0] = d0 * inv
    out[1] = d1 * inv
    out[2] = d2 * inv


@jit
def points_sphere_sphere(pi, ri, pj, rj, n, out_i, out_j):
    """The contact points of spheres i and j along the normal ``n`` (i to j):
    ``p_i + r_i n`` and ``p_j - r_j n`` (one point when they touch)."""
    for d in range(3):
        out_i[d] = pi[d] + ri * n[d]
        out_j[d] = pj[d] - rj * n[d]


@jit
def points_sphere_plane(p, r, pn, out):
    """The contact point of a sphere on a plane of normal ``pn``: ``p - r pn``."""
    for d in range(3):
        out[d] = p[d] - r * pn[d]


class Pair(NamedTuple):
    """One row of the shape-pair table: the two shapes (a body shape and
    another, or ``"plane"``), the pair's code in the kernels, and its contact
    functions: time of impact, gap, normal (None against a plane: the plane's
    own) and contact points."""

    shapes: tuple
    code: int
    toi: object
    gap: object
    normal: object
    points: object


PAIR_SPHERE_SPHERE = 0
PAIR_SPHERE_PLANE = 1
#: The code of a pair of shapes with no row in :data:`PAIRS`.
NO_PAIR = -1
#: Every shape pair with contact functions.  The kernels reach a row through
#: the dispatchers below: the normal and the contact points through
#: :func:`body_pair` (shape codes to the pair's code, and whether bodies i and
#: j swap to put the pair in table order: the one place a normal is
#: flipped); the time of impact and the gap, symmetric in i and j and called
#: for every pair at every step of the search, branch on the shape codes
#: directly (a tuple-returning lookup there slowed the symplectic loop by
#: a third).  A pair without a row returns ``UNSUPPORTED`` (time of impact),
#: NaN (gap) or False (normal, contact points), and the scenario stops with
#: ``STATUS_UNSUPPORTED_PAIR``; :func:`check_shapes` refuses such a batch
#: before it runs.
PAIRS = (
    Pair(("sphere", "sphere"), PAIR_SPHERE_SPHERE, toi_sphere_sphere, gap_sphere_sphere,
         normal_sphere_sphere, points_sphere_sphere),
    Pair(("sphere", "plane"), PAIR_SPHERE_PLANE, toi_sphere_plane, gap_sphere_plane, None,
         points_sphere_plane),
)


def pair(a, b):
    """The :class:`Pair` of shapes named ``a`` and ``b`` (either order;
    ``"plane"`` for the ground or a wall), or a ``ValueError`` saying which
    pairs have contact functions."""
    for row in PAIRS:
        if row.shapes in ((a, b), (b, a)):
            return row
    have = ", ".join("-".join(row.shapes) for row in PAIRS)
    raise ValueError(f"no contact functions for shapes {a!r} and {b!r} "
                     f"(simcore/collision.py PAIRS has {have})")


def check_shapes(names):
    """Raise ``ValueError`` unless every pair of the body shapes ``names``,
    and each shape against a plane, has a row in :data:`PAIRS`."""
    names = sorted(set(names))
    for k, a in enumerate(names):
        pair(a, "plane")
        for b in names[k:]:
            pair(a, b)


@jit
def body_pair(shape_i, shape_j):
    """``(pair code, swapped)`` of bodies of shape codes ``shape_i``,
    ``shape_j``: the pair in table order (lower shape code first), and whether
    that swaps i and j.  :data:`NO_PAIR` when the table has no row."""
    swapped = shape_i > shape_j
    lo = shape_j if swapped else shape_i
    hi = shape_i if swapped else shape_j
    if lo == SHAPE_SPHERE and hi == SHAPE_SPHERE:
        return PAIR_SPHERE_SPHERE, swapped
    return NO_PAIR, swapped


@jit
def plane_pair(shape):
    """The pair code of a body of shape code ``shape`` against a plane."""
    if shape == SHAPE_SPHERE:
        return PAIR_SPHERE_PLANE
    return NO_PAIR


@jit
def toi_body_body(shape_i, shape_j, pi, vi, ai, ri, pj, vj, aj, rj, h):
    """Time of impact of two bodies within ``h`` (``UNSUPPORTED``: no row)."""
    if shape_i == SHAPE_SPHERE and shape_j == SHAPE_SPHERE:
        return toi_sphere_sphere(pi, vi, ai, ri, pj, vj, aj, rj, h)
    return UNSUPPORTED


@jit
def toi_body_plane(shape, p, v, a, r, pn, pd, h):
    """Time of impact of a body with a plane (the ground or a wall) within ``h``."""
    if shape == SHAPE_SPHERE:
        return toi_sphere_plane(p, v, a, r, pn, pd, h)
    return UNSUPPORTED


@jit
def contact_normal_body_body(shape_i, shape_j, pi, pj, out):
    """Unit contact normal from body i to body j at the current configuration
    into ``out``; False when the pair has no row.  A swapped pair is computed
    from j to i and flipped, here and only here."""
    code, swapped = body_pair(shape_i, shape_j)
    if code == PAIR_SPHERE_SPHERE:
        if swapped:
            normal_sphere_sphere(pj, pi, out)
            for d in range(3):
                out[d] = -out[d]
        else:
            normal_sphere_sphere(pi, pj, out)
        return True
    return False


@jit
def gap_body_body(shape_i, shape_j, pi, ri, pj, rj):
    """Signed surface distance between two bodies (negative when
    overlapping); NaN when the pair has no row (it never counts as touching)."""
    if shape_i == SHAPE_SPHERE and shape_j == SHAPE_SPHERE:
        return gap_sphere_sphere(pi, ri, pj, rj)
    return np.nan


@jit
def gap_body_plane(shape, p, r, pn, pd):
    """Signed distance from a body's surface to a plane; NaN without a row."""
    if shape == SHAPE_SPHERE:
        return gap_sphere_plane(p, r, pn, pd)
    return np.nan


@jit
def contact_points_body_body(shape_i, shape_j, pi, ri, pj, rj, n, out_i, out_j):
    """The contact points of bodies i and j with normal ``n`` (i to j) into
    ``out_i``, ``out_j``; False when the pair has no row."""
    code, swapped = body_pair(shape_i, shape_j)
    if code == PAIR_SPHERE_SPHERE:
        points_sphere_sphere(pi, ri, pj, rj, n, out_i, out_j)
        return True
    return False


@jit
def contact_point_body_plane(shape, p, r, pn, out):
    """The contact point of a body on a plane of normal ``pn`` into ``out``;
    False when the pair has no row."""
    if plane_pair(shape) == PAIR_SPHERE_PLANE:
        points_sphere_plane(p, r, pn, out)
        return True
    return False

"""Contact points of rigid bodies: boxes and spheres against planes and each other.

Each function appends the contact points of one pair to a :class:`Points`
record: body ``i`` (the one the normal points into), the other body ``j``
(-1 for a plane), the plane (``0`` the ground, ``1 + k`` wall ``k``; -1 for a
body pair), the contact kind (``laws.BODY_GROUND``, ``BODY_BODY``,
``BODY_WALL``), the point (the middle of the overlap), the unit normal
``n`` (the force on ``i`` is ``+F n``, on ``j`` ``-F n``), the penetration
``depth > 0``, a key that names the feature (body, other, corner) so that a
contact keeps its memory from step to step, and the corner it comes from
(0-7 of a box against a plane, 0-3 of the first face in a face contact; -1
for a sphere).

Geometry (conventions of :mod:`simcore.geometry.rigid`):

* box-plane: the 8 corners, each in contact while below the plane;
* sphere-plane, sphere-sphere: along the line of centres;
* box-sphere: the sphere's centre against the box's closest point (inside
  the box: the nearest face);
* box-box: the rectangle face contact of ``003_*``.  Faces (the document
  takes them as given): the reference face is the face normal of least
  overlap among the six face axes of the two boxes (the separating-axis
  test restricted to face normals: along axis ``a`` of box A the boxes
  overlap by ``h_A,a + sum_k h_B,k |a . b_k| - |a . d|``, ``d`` the line of
  centres; ties: box j's axes first, then x, y, z), the face of that box
  towards the other; the other box's face is the one most opposed to it
  (smallest dot product of the outward normals).  Of the two
  faces, the smaller one (by area; ties: the reference box's face second)
  is face 1, whose 4 corners are tested against face 2, the larger one (a
  face covering the other has no corner over it).  A corner whose
  projection falls inside face 2 is a contact point; one outside is moved
  along its two edges to where the edge enters face 2's rectangle (clipped
  against the rectangle's slabs, Liang-Barsky), giving up to 2 points on face
  2's edges.  A point is in contact where its height above face 2's plane is
  <= 0.  A corner's normal is face 2's; a moved point is where face 1's
  edge crosses face 2's edge, and its normal is that of the two edges
  (``e_1 x e_2``, towards body 1; face 2's where they are parallel) with
  depth ``-height (n . n_2)``, where the document keeps face 2's normal:
  for a box tipping over a platform's edge the edge presses along the box's
  face normal, and only with that normal does the contact's material
  approach rate equal the rate of its depth (the damping reads it).  An edge exactly parallel to one of face 2's edges meets that slab
  either nowhere or everywhere, and the clipping takes both cases as they
  are, so coplanar or parallel faces need no nudge (the document nudges by
  1e-4 degrees).  The document's cut-off at ``p_max`` is not applied: its
  law's damping is constant beyond ``p_max``, so contact continues.
"""

from typing import NamedTuple

import numpy as np

from ..kernel.config import jit
from .collision import SHAPE_BOX, SHAPE_SPHERE
from .rigid import axis, corner, quat_rotate, quat_unrotate

KIND_GROUND, KIND_BODY, KIND_WALL = 0, 1, 2

#: The time-stepper's pair table (:func:`pair_of`): the contact-point kernel
#: of each pair of shapes, lower shape code first; ``PAIR_NONE``: no kernel.
PAIR_NONE, PAIR_SPHERE_SPHERE, PAIR_SPHERE_BOX, PAIR_BOX_BOX = 0, 1, 2, 3


@jit(borrow=True)
def pair_of(shape_i, shape_j):
    """``(pair code, swapped)`` of bodies of shapes ``shape_i``, ``shape_j``:
    the pair in table order and whether that swaps i and j."""
    swapped = shape_i > shape_j
    lo = shape_j if swapped else shape_i
    hi = shape_i if swapped else shape_j
    if lo == SHAPE_SPHERE and hi == SHAPE_SPHERE:
        return PAIR_SPHERE_SPHERE, swapped
    if lo == SHAPE_SPHERE and hi == SHAPE_BOX:
        return PAIR_SPHERE_BOX, swapped
    if lo == SHAPE_BOX and hi == SHAPE_BOX:
        return PAIR_BOX_BOX, swapped
    return PAIR_NONE, swapped


@jit(borrow=True)
def known(shape):
    """Whether the time-stepper has kernels for ``shape`` (against a plane
    and in :func:`pair_of`)."""
    return shape == SHAPE_SPHERE or shape == SHAPE_BOX


@jit(borrow=True)
def bounding_radius(shape, ext):
    """The radius of the smallest sphere about a body's centre holding it
    (:mod:`simcore.geometry.shapes`); NaN for a shape without a row."""
    if shape == SHAPE_SPHERE:
        return ext[0]
    if shape == SHAPE_BOX:
        return np.sqrt(ext[0] ** 2 + ext[1] ** 2 + ext[2] ** 2)
    return np.nan


@jit(borrow=True)
def turns_contacts(shape):
    """Whether a body's rotation moves its contact points on it (a box's
    corners do; a sphere's contact stays under its centre)."""
    return shape == SHAPE_BOX


@jit(borrow=True)
def body_body(pts, pair, i, j, ci, qi, ei, cj, qj, ej):
    """The contact points of bodies ``i`` and ``j`` (centres ``c``,
    orientations ``q``, extents ``e``) by their ``pair = pair_of(...)``;
    False when the record overflowed or the pair has no kernel."""
    code, swapped = pair
    if code == PAIR_SPHERE_SPHERE:
        return sphere_sphere(pts, i, j, ci, ei[0], cj, ej[0])
    if code == PAIR_SPHERE_BOX:
        if swapped:
            return sphere_box(pts, j, i, cj, ej[0], ci, qi, ei)
        return sphere_box(pts, i, j, ci, ei[0], cj, qj, ej)
    if code == PAIR_BOX_BOX:
        return box_box(pts, i, j, ci, qi, ei, cj, qj, ej)
    return False


class Points(NamedTuple):
    """Contact points of one scenario (capacity ``C``): ``count (1,)``;
    ``i``, ``j``, ``plane``, ``kind``, ``corner (C,)`` int64; ``key (C,)``
    int64; ``point``, ``normal (C, 3)``; ``depth (C,)``."""

    count: np.ndarray
    i: np.ndarray
    j: np.ndarray
    plane: np.ndarray
    kind: np.ndarray
    corner: np.ndarray
    key: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    depth: np.ndarray


@jit
def points(capacity):
    """An empty :class:`Points` of ``capacity`` contacts."""
    c = max(1, capacity)
    return Points(np.zeros(1, np.int64), np.zeros(c, np.int64), np.zeros(c, np.int64),
                  np.zeros(c, np.int64), np.zeros(c, np.int64), np.zeros(c, np.int64),
                  np.zeros(c, np.int64), np.zeros((c, 3)), np.zeros((c, 3)), np.zeros(c))


@jit(borrow=True)
def _key(i, other, feature):
    """The memory key of a contact: body ``i``, the other (a body < 64, or
    ``64 + plane``), the feature."""
    return (i * 4096 + other) * 65536 + feature


@jit(borrow=True)
def _add(pts, i, j, plane, kind, corner_id, key, p, n, depth):
    """Append a contact point ``p`` with normal ``n`` (3-tuples) and its
    ``depth``; False when the record is full."""
    c = pts.count[0]
    if c >= pts.i.shape[0]:
        return False
    pts.i[c], pts.j[c], pts.plane[c], pts.kind[c] = i, j, plane, kind
    pts.corner[c], pts.key[c] = corner_id, key
    pts.point[c, 0], pts.point[c, 1], pts.point[c, 2] = p[0], p[1], p[2]
    pts.normal[c, 0], pts.normal[c, 1], pts.normal[c, 2] = n[0], n[1], n[2]
    pts.depth[c] = depth
    pts.count[0] = c + 1
    return True


@jit(borrow=True)
def body_plane(pts, i, shape, pos, q, ext, n, d, plane, kind):
    """Body ``i`` against the plane ``n . x = d`` (``n`` into the free side).
    False when the record overflowed or the shape has no kernel
    (:func:`known`)."""
    if shape != SHAPE_SPHERE and shape != SHAPE_BOX:
        return False
    if shape == SHAPE_SPHERE:
        depth = ext[0] - (n[0] * pos[0] + n[1] * pos[1] + n[2] * pos[2] - d)
        if depth > 0.0:
            a = ext[0] - 0.5 * depth
            return _add(pts, i, -1, plane, kind, -1, _key(i, 64 + plane, 0),
                        (pos[0] - a * n[0], pos[1] - a * n[1], pos[2] - a * n[2]),
                        (n[0], n[1], n[2]), depth)
        return True
    for k in range(8):
        c = corner(pos, q, ext, k)
        depth = d - (n[0] * c[0] + n[1] * c[1] + n[2] * c[2])
        if depth > 0.0:
            a = 0.5 * depth
            if not _add(pts, i, -1, plane, kind, k, _key(i, 64 + plane, k),
                        (c[0] + a * n[0], c[1] + a * n[1], c[2] + a * n[2]),
                        (n[0], n[1], n[2]), depth):
                return False
    return True


@jit(borrow=True)
def sphere_sphere(pts, i, j, pi, ri, pj, rj):
    """Spheres ``i`` and ``j``."""
    d0, d1, d2 = pi[0] - pj[0], pi[1] - pj[1], pi[2] - pj[2]
    dist = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
    depth = ri + rj - dist
    if depth <= 0.0 or dist == 0.0:
        return True
    n0, n1, n2 = d0 / dist, d1 / dist, d2 / dist
    a = rj - 0.5 * depth
    return _add(pts, i, j, -1, KIND_BODY, -1, _key(i, j, 0),
                (pj[0] + a * n0, pj[1] + a * n1, pj[2] + a * n2), (n0, n1, n2), depth)


@jit(borrow=True)
def sphere_box(pts, i, j, ps, r, pb, qb, eb):
    """Sphere ``i`` against box ``j``: its centre against the box's closest
    point; a centre inside the box is pushed out through the nearest face."""
    db = quat_unrotate(qb, ps[0] - pb[0], ps[1] - pb[1], ps[2] - pb[2])
    c0 = min(max(db[0], -eb[0]), eb[0])
    c1 = min(max(db[1], -eb[1]), eb[1])
    c2 = min(max(db[2], -eb[2]), eb[2])
    e0, e1, e2 = db[0] - c0, db[1] - c1, db[2] - c2
    dist = np.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    if dist > 0.0:
        depth = r - dist
        nb0, nb1, nb2 = e0 / dist, e1 / dist, e2 / dist
    else:
        # inside: the face of least penetration
        best, a = np.inf, 0
        for k in range(3):
            room = eb[k] - abs(db[k])
            if room < best:
                best, a = room, k
        depth = r + best
        nb0 = (1.0 if db[0] >= 0.0 else -1.0) if a == 0 else 0.0
        nb1 = (1.0 if db[1] >= 0.0 else -1.0) if a == 1 else 0.0
        nb2 = (1.0 if db[2] >= 0.0 else -1.0) if a == 2 else 0.0
    if depth <= 0.0:
        return True
    n = quat_rotate(qb, nb0, nb1, nb2)
    a = r - 0.5 * depth
    return _add(pts, i, j, -1, KIND_BODY, -1, _key(i, j, 0),
                (ps[0] - a * n[0], ps[1] - a * n[1], ps[2] - a * n[2]), (n[0], n[1], n[2]), depth)


@jit(borrow=True)
def _face(pos, q, ext, f):
    """Face ``f`` (0-5: axis ``f // 2``, outward along ``+`` for odd f) of a
    box: centre, outward normal, in-plane axes ``u``, ``v`` and their half
    lengths (tuples)."""
    a = f // 2
    s = 1.0 if f % 2 else -1.0
    n = axis(q, a)
    u = axis(q, (a + 1) % 3)
    v = axis(q, (a + 2) % 3)
    h = s * ext[a]
    o = (pos[0] + h * n[0], pos[1] + h * n[1], pos[2] + h * n[2])
    return o, (s * n[0], s * n[1], s * n[2]), u, ext[(a + 1) % 3], v, ext[(a + 2) % 3]


@jit(borrow=True)
def _least_overlap(pa, qa, ea, pb, qb, eb):
    """The face axis of box b along which boxes a and b overlap least: its
    face towards a, and the overlap [m] (see the module)."""
    d0, d1, d2 = pa[0] - pb[0], pa[1] - pb[1], pa[2] - pb[2]
    best, f = np.inf, 0
    for k in range(3):
        ax = axis(qb, k)
        proj = ax[0] * d0 + ax[1] * d1 + ax[2] * d2
        reach = eb[k]
        for m in range(3):
            am = axis(qa, m)
            reach += ea[m] * abs(ax[0] * am[0] + ax[1] * am[1] + ax[2] * am[2])
        overlap = reach - abs(proj)
        if overlap < best:
            best, f = overlap, 2 * k + (1 if proj >= 0.0 else 0)
    return f, best


@jit(borrow=True)
def _opposed_face(q, n):
    """The face of a box whose outward normal is most opposed to ``n``."""
    best, f = -1.0, 0
    for k in range(3):
        ax = axis(q, k)
        dot = ax[0] * n[0] + ax[1] * n[1] + ax[2] * n[2]
        if abs(dot) > best:
            best, f = abs(dot), 2 * k + (0 if dot >= 0.0 else 1)
    return f


@jit(borrow=True)
def _dot(a, b0, b1, b2):
    return a[0] * b0 + a[1] * b1 + a[2] * b2


@jit(borrow=True)
def _entry(a0, b0, a1, b1, half_u, half_v):
    """Liang-Barsky: the smallest ``s`` in [0, 1] at which the segment from
    ``(a0, b0)`` to ``(a1, b1)`` is inside ``|a| <= half_u, |b| <= half_v``
    (-1 when it never is), and the rectangle edge it enters by (0: an edge
    ``|a| = half_u``, along v; 1: ``|b| = half_v``, along u)."""
    lo, hi = 0.0, 1.0
    by = 0
    for slab in range(2):
        p = a1 - a0 if slab == 0 else b1 - b0
        q0 = a0 if slab == 0 else b0
        half = half_u if slab == 0 else half_v
        # half-plane q0 + s p <= half, and -(q0 + s p) <= half
        for sign in (1.0, -1.0):
            dp = sign * p
            room = half - sign * q0
            if dp == 0.0:
                if room < 0.0:
                    return -1.0, by
            elif dp > 0.0:
                hi = min(hi, room / dp)
            elif room / dp > lo:
                lo, by = room / dp, slab
    return (lo if lo <= hi else -1.0), by


@jit(borrow=True)
def box_box(pts, i, j, pi, qi, ei, pj, qj, ei_j):
    """Boxes ``i`` and ``j``: the rectangle face contact of ``003_*`` (see the
    module for the choice of faces)."""
    fj, sj = _least_overlap(pi, qi, ei, pj, qj, ei_j)
    fi, si = _least_overlap(pj, qj, ei_j, pi, qi, ei)
    if sj <= si:  # j's face is the reference; i's the most opposed to it
        nj = _face(pj, qj, ei_j, fj)[1]
        fi = _opposed_face(qi, nj)
    else:
        ni = _face(pi, qi, ei, fi)[1]
        fj = _opposed_face(qj, ni)
    oi, ni, ui, li, vi, wi = _face(pi, qi, ei, fi)
    oj, nj, uj, lj, vj, wj = _face(pj, qj, ei_j, fj)
    # face 1: the smaller face (its corners are tested against face 2)
    if li * wi <= lj * wj:
        return _face_points(pts, (i, j), (oi, ui, li, vi, wi), (oj, nj, uj, lj, vj, wj),
                            (fi * 6 + fj) * 16)
    return _face_points(pts, (j, i), (oj, uj, lj, vj, wj), (oi, ni, ui, li, vi, wi),
                        (36 + fj * 6 + fi) * 16)


@jit(borrow=True)
def _edge_normal(e0, e1, e2, f, n2):
    """The unit normal of edges ``e`` and ``f`` (``e x f``) on the side of
    ``n2``; ``n2`` itself where the edges are parallel."""
    c0, c1, c2 = e1 * f[2] - e2 * f[1], e2 * f[0] - e0 * f[2], e0 * f[1] - e1 * f[0]
    norm = np.sqrt(c0 * c0 + c1 * c1 + c2 * c2)
    if norm <= 1e-9 * np.sqrt(e0 * e0 + e1 * e1 + e2 * e2):
        return n2[0], n2[1], n2[2]
    if c0 * n2[0] + c1 * n2[1] + c2 * n2[2] < 0.0:
        norm = -norm
    return c0 / norm, c1 / norm, c2 / norm


@jit(borrow=True)
def _face_corner(o, u, l, v, w, k):
    """Corner ``k`` of a face, in order around it: (+,+), (-,+), (-,-), (+,-)."""
    su = 1.0 if k == 0 or k == 3 else -1.0
    sv = 1.0 if k < 2 else -1.0
    return (o[0] + su * l * u[0] + sv * w * v[0], o[1] + su * l * u[1] + sv * w * v[1],
            o[2] + su * l * u[2] + sv * w * v[2])


@jit(borrow=True)
def _face_points(pts, bodies, face1, face2, feat):
    """The contact points of face 1 (of body ``one``) on face 2 (of ``two``),
    ``bodies = (one, two)``: ``face1 = (o, u, l, v, w)`` (centre, in-plane
    axes and half lengths), ``face2 = (o, n, u, l, v, w)`` (with its normal);
    ``feat`` the pair's feature base of the contacts' keys."""
    one, two = bodies
    o1, u1, l1, v1, w1 = face1
    o2, n2, u2, l2, v2, w2 = face2
    for k in range(4):
        c = _face_corner(o1, u1, l1, v1, w1, k)
        a0 = _dot(u2, c[0] - o2[0], c[1] - o2[1], c[2] - o2[2])
        b0 = _dot(v2, c[0] - o2[0], c[1] - o2[1], c[2] - o2[2])
        inside = abs(a0) <= l2 and abs(b0) <= w2
        for variant in range(3):
            nx, ny, nz = n2
            if variant == 0:
                if not inside:
                    continue
                p0, p1, p2 = c
            else:
                if inside:
                    break
                m = _face_corner(o1, u1, l1, v1, w1, (k + 1) % 4 if variant == 1 else (k + 3) % 4)
                a1 = _dot(u2, m[0] - o2[0], m[1] - o2[1], m[2] - o2[2])
                b1 = _dot(v2, m[0] - o2[0], m[1] - o2[1], m[2] - o2[2])
                s, by = _entry(a0, b0, a1, b1, l2, w2)
                if s < 0.0:
                    continue
                p0 = c[0] + s * (m[0] - c[0])
                p1 = c[1] + s * (m[1] - c[1])
                p2 = c[2] + s * (m[2] - c[2])
                nx, ny, nz = _edge_normal(m[0] - c[0], m[1] - c[1], m[2] - c[2],
                                          v2 if by == 0 else u2, n2)
            height = _dot(n2, p0 - o2[0], p1 - o2[1], p2 - o2[2])
            if height > 0.0:
                continue
            depth = -height * (nx * n2[0] + ny * n2[1] + nz * n2[2])
            a = 0.5 * depth
            if not _add(pts, one, two, -1, KIND_BODY, k, _key(one, two, feat + 3 * k + variant),
                        (p0 + a * nx, p1 + a * ny, p2 + a * nz), (nx, ny, nz), depth):
                return False
    return True

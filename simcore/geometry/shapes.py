"""The shape table: what the host code asks of a body's shape, one row each.

Every body has a shape code (:data:`simcore.geometry.collision.SHAPE_NAMES`)
and half extents ``ext (3,)`` [m] (a sphere: its radius in each entry).  A
row answers, for a body of its shape:

``support(p, q, ext, n)``
    the smallest ``n . x`` over the body's points at centre ``p`` and
    orientation ``q`` (scalar-first unit quaternion): how far it reaches
    against the direction ``n``;
``lowest(p, q, ext)``
    the height of its lowest point, ``support`` along ``+z``;
``inertia(mass, ext)``
    its principal moments (3,) [kg m^2] as a uniform solid;
``bounding_radius(ext)``
    the radius of the smallest sphere about its centre holding it;
``size(ext)``
    the length that turns an orientation error into a distance (the
    orientation loss's ``h``): a sphere's radius, a box's mean half extent;
``lever(arm)``
    the lever of a contact force about the centre of mass (``arm``: the
    farthest point's offset, ``ext + |com|``): 0 for a sphere, whose
    contact forces pass through its centre.

The last three take ``(..., 3)`` arrays (a value per leading index);
:func:`by_shape` applies them to bodies of mixed shapes.

and, as attributes, whether a body of the shape is oriented (its
trajectories need an orientation), whether it takes a centre of mass off
its centre, and whether its ``radius`` column is read.  The kernels
dispatch on the same codes: time of impact in
:mod:`simcore.geometry.collision` (``PAIRS``), contact points of the
time-stepper in :mod:`simcore.geometry.faces` (``pair_of``,
``bounding_radius``).  :func:`of` refuses a code without a row.
"""

import numpy as np

from .collision import SHAPE_BOX, SHAPE_NAMES, SHAPE_SPHERE
from .rigid import quat_matrix

#: The eight corners of the unit cube, ``(+-1, +-1, +-1)``.
_CORNERS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)],
                    float)


class Sphere:
    """A uniform ball of radius ``ext[0]``."""

    code = SHAPE_SPHERE
    oriented = False
    takes_com = False
    reads_radius = True

    @staticmethod
    def support(p, q, ext, n):
        return float(np.asarray(n) @ np.asarray(p)) - float(ext[0])

    @staticmethod
    def lowest(p, q, ext):
        return float(p[2] - ext[0])

    @staticmethod
    def inertia(mass, ext):
        radius = float(ext[0])
        return np.full(3, 0.4 * mass * radius * radius)

    @staticmethod
    def bounding_radius(ext):
        return np.asarray(ext)[..., 0]

    @staticmethod
    def size(ext):
        return np.asarray(ext)[..., 0]

    @staticmethod
    def lever(arm):
        return np.zeros(np.shape(arm)[:-1])


class Box:
    """A uniform box of half extents ``ext`` along its body axes."""

    code = SHAPE_BOX
    oriented = True
    takes_com = True
    reads_radius = False

    @staticmethod
    def support(p, q, ext, n):
        corners = np.asarray(p) + (_CORNERS * np.asarray(ext)) @ quat_matrix(q).T
        return float(np.min(corners @ np.asarray(n)))

    @staticmethod
    def lowest(p, q, ext):
        return float(p[2] + np.min((_CORNERS * np.asarray(ext)) @ quat_matrix(q)[2]))

    @staticmethod
    def inertia(mass, ext):
        hx, hy, hz = (float(x) for x in ext)
        return mass / 3.0 * np.array([hy * hy + hz * hz, hx * hx + hz * hz, hx * hx + hy * hy])

    @staticmethod
    def bounding_radius(ext):
        return np.linalg.norm(ext, axis=-1)

    @staticmethod
    def size(ext):
        return np.asarray(ext).mean(axis=-1)

    @staticmethod
    def lever(arm):
        return np.linalg.norm(arm, axis=-1)


#: The rows by shape code.
SHAPES = {row.code: row for row in (Sphere, Box)}


def of(code):
    """The row of shape ``code``; ValueError naming the known shapes."""
    try:
        return SHAPES[int(code)]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"shape code {code} has no row in the shape table; known: "
                         f"{[SHAPE_NAMES[c] for c in SHAPES]}") from None


def lowest(code, p, q, ext):
    """The height of the lowest point of a body of shape ``code``."""
    return of(code).lowest(p, q, ext)


def by_shape(codes, name, values):
    """The vectorised answer ``name`` (``bounding_radius``, ``size`` or
    ``lever``) of each body: ``codes`` its shape codes, ``values (...,
    3)`` its extents or arms; ValueError for a code without a row."""
    codes = np.asarray(codes)
    values = np.asarray(values, np.float64)
    out = np.zeros(codes.shape)
    known = np.zeros(codes.shape, bool)
    for code, row in SHAPES.items():
        mine = codes == code
        out = np.where(mine, getattr(row, name)(values), out)
        known |= mine
    if not known.all():
        of(codes[~known].flat[0])
    return out


def flags(codes, attribute):
    """The boolean ``attribute`` (``oriented``, ``takes_com``,
    ``reads_radius``) of each body's row, as an array shaped as ``codes``."""
    codes = np.asarray(codes)
    out = np.zeros(codes.shape, bool)
    for k, c in np.ndenumerate(codes):
        out[k] = getattr(of(c), attribute)
    return out

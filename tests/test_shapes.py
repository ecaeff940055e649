"""The shape table (``simcore.geometry.shapes``) against closed forms and
brute force: support, lowest point, inertia, bounding radius, size, lever."""

import numpy as np
import pytest

from simcore.geometry import shapes
from simcore.geometry.collision import SHAPE_BOX, SHAPE_SPHERE
from simcore.geometry.rigid import quat_matrix

RNG = np.random.default_rng(4)


def _unit(v):
    return v / np.linalg.norm(v)


def _box_points(p, q, ext, n=25):
    """Points of the box's surface (a grid on each face) in the world."""
    g = np.linspace(-1, 1, n)
    a, b = np.meshgrid(g, g)
    faces = []
    for axis in range(3):
        for side in (-1.0, 1.0):
            f = np.zeros((a.size, 3))
            f[:, axis] = side
            f[:, (axis + 1) % 3] = a.ravel()
            f[:, (axis + 2) % 3] = b.ravel()
            faces.append(f)
    local = np.concatenate(faces) * ext
    return p + local @ quat_matrix(q).T


@pytest.mark.parametrize("trial", range(5))
def test_a_box_reaches_its_support_at_a_corner(trial):
    p, q = RNG.normal(size=3), _unit(RNG.normal(size=4))
    ext, n = RNG.uniform(0.02, 0.2, 3), _unit(RNG.normal(size=3))
    brute = (_box_points(p, q, ext) @ n).min()
    got = shapes.of(SHAPE_BOX).support(p, q, ext, n)
    assert got == pytest.approx(brute, abs=1e-12)
    assert shapes.lowest(SHAPE_BOX, p, q, ext) == pytest.approx(
        shapes.of(SHAPE_BOX).support(p, q, ext, [0, 0, 1.0]), abs=1e-15)


def test_a_sphere_reaches_its_radius_along_any_direction():
    p, n = np.array([0.3, -0.2, 0.5]), _unit(np.array([1.0, 2.0, -2.0]))
    ext = np.full(3, 0.05)
    assert shapes.of(SHAPE_SPHERE).support(p, None, ext, n) == pytest.approx(p @ n - 0.05)
    assert shapes.lowest(SHAPE_SPHERE, p, None, ext) == pytest.approx(0.45)


def test_inertia_of_uniform_solids():
    m, ext = 0.37, np.array([0.05, 0.1, 0.2])
    # box: m (b^2 + c^2) / 12 with full edges b = 2 hy, c = 2 hz
    full = 2 * ext
    expect = m / 12 * np.array([full[1] ** 2 + full[2] ** 2, full[0] ** 2 + full[2] ** 2,
                                full[0] ** 2 + full[1] ** 2])
    np.testing.assert_allclose(shapes.of(SHAPE_BOX).inertia(m, ext), expect, rtol=1e-14)
    np.testing.assert_allclose(shapes.of(SHAPE_SPHERE).inertia(m, np.full(3, 0.1)),
                               np.full(3, 0.4 * m * 0.01), rtol=1e-14)


def test_bounding_radius_size_and_lever_by_shape():
    codes = np.array([[SHAPE_SPHERE, SHAPE_BOX], [SHAPE_BOX, SHAPE_SPHERE]])
    ext = np.array([[[0.1, 0.1, 0.1], [0.1, 0.2, 0.2]], [[0.3, 0.0, 0.4], [0.02, 0.02, 0.02]]])
    np.testing.assert_allclose(shapes.by_shape(codes, "bounding_radius", ext),
                               [[0.1, 0.3], [0.5, 0.02]], rtol=1e-14)
    np.testing.assert_allclose(shapes.by_shape(codes, "size", ext),
                               [[0.1, 0.5 / 3], [0.7 / 3, 0.02]], rtol=1e-14)
    # a box's corner at bounding radius stays inside it: brute force over its points
    p, q = np.zeros(3), _unit(RNG.normal(size=4))
    pts = _box_points(p, q, ext[0, 1])
    assert np.linalg.norm(pts, axis=1).max() == pytest.approx(0.3, rel=1e-12)
    np.testing.assert_allclose(shapes.by_shape(codes, "lever", ext), [[0.0, 0.3], [0.5, 0.0]],
                               rtol=1e-14)
    assert shapes.flags(codes, "oriented").tolist() == [[False, True], [True, False]]

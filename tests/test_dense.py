"""The kernels' least squares (:mod:`simcore.kernel.dense`) against
NumPy's SVD-based ``lstsq``: the same minimum-norm solution on square,
tall, wide and rank-deficient systems."""

import numpy as np
import pytest

from simcore.kernel.dense import min_norm


@pytest.mark.parametrize("m, n, rank", [(1, 1, 1), (6, 6, 6), (12, 12, 6), (24, 24, 13),
                                        (9, 4, 4), (9, 4, 2), (4, 9, 4), (4, 9, 3), (5, 5, 0),
                                        (30, 30, 29)])
def test_min_norm_is_numpys_least_norm_solution(m, n, rank):
    rng = np.random.default_rng(m * 100 + n * 10 + rank)
    A = (rng.normal(size=(m, rank)) @ rng.normal(size=(rank, n)) if rank
         else np.zeros((m, n)))
    B = rng.normal(size=(m, 3))
    x = min_norm(A, B, 1e-12)
    ref = np.linalg.lstsq(A, B, rcond=1e-12)[0]
    np.testing.assert_allclose(x, ref, rtol=0, atol=1e-10 * max(1.0, np.abs(ref).max()))


def test_min_norm_on_a_resting_faces_problem_spreads_the_load_evenly():
    # four coplanar contacts of one body: twelve impulses, six velocities,
    # many solutions; the least-norm one carries the weight equally
    half = 0.05
    rows = []
    for sx, sy in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
        r = np.array([sx * half, sy * half, -half])
        for d in np.eye(3):
            rows.append(np.r_[d, np.cross(r, d)])
    W = np.array(rows)
    A = W @ W.T  # unit mass and inertia
    u = A @ np.tile([0.0, 0.0, 0.25], 4)[:, None]  # the velocities of an even load
    x = min_norm(A, u, 1e-12)
    np.testing.assert_allclose(x[:, 0], np.tile([0.0, 0.0, 0.25], 4), atol=1e-12)
    assert np.linalg.matrix_rank(A) == 6

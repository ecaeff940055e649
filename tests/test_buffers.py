"""simcore.kernel.buffers: large arrays mapped at once behave as NumPy's own."""

import numpy as np
import pytest

from simcore.kernel import buffers


@pytest.mark.parametrize("min_bytes", [0, 1 << 40])  # mapped, and NumPy's
def test_buffers_match_numpy(monkeypatch, min_bytes):
    monkeypatch.setattr(buffers, "MIN_BYTES", min_bytes)
    z = buffers.zeros((5, 3, 3))
    assert z.shape == (5, 3, 3) and z.dtype == np.float64 and z.flags.writeable
    assert z.flags.c_contiguous and not z.any()
    f = buffers.full((4, 2), np.nan)
    assert np.isnan(f).all() and f.shape == (4, 2)
    e = buffers.empty(7, np.int64)
    assert e.shape == (7,) and e.dtype == np.int64
    e[:] = np.arange(7)
    assert e.sum() == 21
    assert buffers.zeros((0, 3)).shape == (0, 3)


def test_mapped_arrays_are_independent(monkeypatch):
    monkeypatch.setattr(buffers, "MIN_BYTES", 0)
    a, b = buffers.zeros(1000), buffers.zeros(1000)
    a += 1.0
    assert not np.shares_memory(a, b) and b.sum() == 0.0 and a.sum() == 1000.0

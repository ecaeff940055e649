"""The free fall a recording shows: the parabola through each toss's
flight samples (:func:`flight_gravity`), as an import measures it and a
generated recording declares it."""

import numpy as np

#: What :func:`flight_gravity` counts as flight: the samples before the
#: lowest corner first comes within this height of the table [m], at least
#: this many of them.
FLIGHT_CLEARANCE = 0.004
FLIGHT_SAMPLES = 6
#: How far [m/s^2] the free fall of imported tosses may stray from their
#: model's gravity before the import says so: five times the 0.01 m/s^2 by
#: which the median of a hundred tosses varies (spread 0.11).
FLIGHT_MISMATCH = 0.05
#: The free fall [m/s^2] an import writes when no toss flies long enough to
#: measure its own.
STANDARD_GRAVITY = 9.81


def flight_gravity(toss, t, z, quat, half, table_z=0.0,
                   clearance=FLIGHT_CLEARANCE, min_samples=FLIGHT_SAMPLES):
    """The free-fall acceleration [m/s^2] the recorded poses show, in the
    recording's own units: per toss, the samples before its lowest corner
    first comes within ``clearance`` [m] of the table (the corner ``z -
    (h_x |R_zx| + h_y |R_zy| + h_z |R_zz|)`` of a box of half extents
    ``half``, a number for a cube or three)
    fitted by least squares with ``z = a + b t - g t^2 / 2``; the median
    over the tosses with at least ``min_samples`` such samples.  Returns
    ``(g, tosses)``.  ``toss`` (ids of any kind), ``t``, ``z`` (n,) and
    ``quat`` (n, 4, scalar first) hold one row per sample, each toss's rows
    together and in time order."""
    toss = np.asarray(toss)
    t, z, quat = (np.asarray(a, dtype=np.float64) for a in (t, z, quat))
    w, x, y, k = quat.T
    hx, hy, hz = np.broadcast_to(np.asarray(half, dtype=np.float64), (3,))
    reach = (hx * np.abs(2 * (x * k - w * y)) + hy * np.abs(2 * (y * k + w * x))
             + hz * np.abs(1 - 2 * (x * x + y * y)))
    near = z - reach - table_z < clearance
    starts = np.flatnonzero(np.r_[True, toss[1:] != toss[:-1]])
    fits = []
    for a, b in zip(starts, np.r_[starts[1:], toss.size]):
        touch = np.flatnonzero(near[a:b])
        n = touch[0] if touch.size else b - a
        if n < min_samples:
            continue
        tt = t[a:a + n] - t[a]
        coef = np.linalg.lstsq(np.stack([np.ones(n), tt, tt * tt], axis=1), z[a:a + n],
                               rcond=None)[0]
        fits.append(-2.0 * coef[2])
    if not fits:
        raise ValueError(f"no toss has {min_samples} samples of free flight")
    return float(np.median(fits)), len(fits)

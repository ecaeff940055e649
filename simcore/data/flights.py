"""The free fall a recording shows: the parabola through each toss's
flight samples (:func:`flight_gravity`), as an import measures it and a
generated recording declares it."""

from dataclasses import dataclass

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


#: A flight phase whose rms residual exceeds this many times the median
#: phase's is not a free flight (a contact between samples, a slide the
#: clearance missed) and is left out of :func:`flight_fit`.
PHASE_OUTLIER = 3.0
#: :func:`flight_fit` counts a sample as flight only where its lowest corner
#: clears the table by this many times the corner height's own noise (from
#: its second differences, :func:`_noise`) as well as by ``clearance``: a
#: flat box's corner at 1 mm and 0.5 degrees of noise is noisy by 1.3 mm, so
#: a fixed 4 mm is three of its deviations, and samples in contact that the
#: noise lifts over it would bend the flights' parabolas.
CLEARANCE_SIGMAS = 6.0


@dataclass(frozen=True)
class FlightFit:
    """What the recorded flights of box tosses show (:func:`flight_fit`):
    ``gravity`` [m/s^2]; ``com (3,)`` [m], the centre of mass from the box's
    centre in the body frame; ``stderr (4,)`` their standard errors
    (gravity, then com; ``inf``: a component no flight shows); the table's
    plane under the tosses' last samples: ``height`` [m] at the origin,
    ``tilt_x``, ``tilt_y`` [rad] (the turns of
    :func:`simcore.geometry.rigid.ground_normal`); ``phases``, ``rejected``:
    the flight phases used and those left out; ``tilt_stderr (2,)`` [rad]:
    the tilts' standard errors, the plane's slopes' over ``sqrt(1 + a^2 +
    b^2)`` (to first order in the slopes; ``inf``: too few corners)."""

    gravity: float
    com: np.ndarray
    stderr: np.ndarray
    height: float
    tilt_x: float
    tilt_y: float
    phases: int
    rejected: int
    tilt_stderr: np.ndarray


def _matrices(quat):
    """Rotation matrices ``(n, 3, 3)`` of unit quaternions ``(n, 4)`` (scalar first)."""
    w, x, y, z = np.asarray(quat, np.float64).T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], 1)


def _table(ends, corner):
    """The plane ``z = h + a x + b y`` through the lowest corners of the
    tosses' last samples (a toss ends resting or sliding on the table),
    least squares with those beyond three scaled MADs left out: ``(h, a, b)``
    and the standard errors of ``a`` and ``b`` (``inf`` with fewer than four
    corners kept)."""
    last = corner[ends - 1]
    A = np.c_[np.ones(last.shape[0]), last[:, 0], last[:, 1]]
    keep = np.ones(last.shape[0], bool)
    for _ in range(3):
        coef = np.linalg.lstsq(A[keep], last[keep, 2], rcond=None)[0]
        r = np.abs(last[:, 2] - A @ coef)
        keep = r <= max(3.0 * 1.4826 * np.median(r[keep]), 1e-4)
    se = np.full(2, np.inf)
    if keep.sum() > 3:
        res = last[keep, 2] - A[keep] @ coef
        cov = np.linalg.pinv(A[keep].T @ A[keep]) * (res @ res) / (keep.sum() - 3)
        se = np.sqrt(np.diag(cov)[1:])
    return coef, se


def _noise(height, starts, ends):
    """The noise [m] of a sampled height: the scaled MAD of its second
    differences within each toss (about their median: a free fall's own
    ``-g dt^2`` is constant), over ``sqrt(6)`` (white noise of deviation
    ``s`` gives second differences of deviation ``sqrt(6) s``; the motion's
    own, a few tenths of a millimetre at 150 Hz, and the impacts' jumps
    hardly move a median)."""
    d2 = np.concatenate([np.diff(height[a:b], 2) for a, b in zip(starts, ends)])
    if d2.size == 0:
        return 0.0
    return 1.4826 * float(np.median(np.abs(d2 - np.median(d2)))) / np.sqrt(6.0)


def _phase_rows(t, pos, R, idx):
    """One flight phase's rows of the centre's motion, its own start and
    velocity projected out: ``(A (3n, 4), y (3n,))`` over (gravity, com)."""
    tt = t[idx] - t[idx].mean()
    B = np.stack([np.ones_like(tt), tt], 1)
    proj = np.eye(tt.size) - B @ np.linalg.pinv(B)
    A, y = [], []
    for ax in range(3):
        cols = [-0.5 * tt * tt if ax == 2 else np.zeros_like(tt)]
        cols += [-R[idx, ax, k] for k in range(3)]
        A.append(proj @ np.stack(cols, 1))
        y.append(proj @ pos[idx, ax])
    return np.vstack(A), np.concatenate(y)


def flight_fit(toss, t, pos, quat, half, clearance=FLIGHT_CLEARANCE,
               min_samples=FLIGHT_SAMPLES):
    """The free fall, the centre of mass and the table's plane that box
    tosses' recorded poses show, by linear least squares.

    The table: the plane through the lowest corners of each toss's last
    sample (:func:`_table`).  The flights: the runs of at least
    ``min_samples`` samples whose lowest corner lies over ``clearance`` [m]
    and over :data:`CLEARANCE_SIGMAS` times the corner height's noise above
    that plane (a sample in contact whose noise lifts its corner must not
    count as flight), less the sample at each end (a contact may begin or
    end between samples).  In flight the centre of mass falls freely, so the
    recorded centre is ``c(t) = a + b t - g t^2 / 2 e_z - R(t) com``: linear
    in ``g`` and ``com`` (shared by every toss of the one body) once each
    phase's own ``a``, ``b`` are projected out; a phase whose residual is
    over :data:`PHASE_OUTLIER` times the median phase's is left out and the
    fit repeated.  The recorded orientations are taken as exact: their
    noise pulls the centre of mass toward the box's centre (errors in the
    regressors; on the real cube tosses the flights' estimate lies 0.6 mm
    nearer the centre than the contacts').  ``toss`` (ids), ``t``, ``pos (n, 3)``, ``quat (n, 4)``:
    one row per sample, each toss's rows together and in time order;
    ``half``: the box's half extents.  Returns a :class:`FlightFit`; raises
    ``ValueError`` when fewer than two phases fly long enough."""
    toss = np.asarray(toss)
    t = np.asarray(t, np.float64)
    pos = np.asarray(pos, np.float64)
    R = _matrices(quat)
    half = np.broadcast_to(np.asarray(half, np.float64), (3,))
    side = -np.sign(R[:, 2, :])
    side[side == 0] = 1.0
    corner = pos + np.einsum("nij,nj->ni", R, side * half)  # the lowest corner
    starts = np.flatnonzero(np.r_[True, toss[1:] != toss[:-1]])
    ends = np.r_[starts[1:], toss.size]
    (h, a, b), (se_a, se_b) = _table(ends, corner)
    fly = corner[:, 2] - (h + a * corner[:, 0] + b * corner[:, 1]) > \
        max(clearance, CLEARANCE_SIGMAS * _noise(corner[:, 2], starts, ends))
    blocks = []
    for s0, s1 in zip(starts, ends):
        edge = np.flatnonzero(np.diff(np.r_[0, fly[s0:s1].astype(int), 0]))
        for u, v in zip(edge[::2], edge[1::2]):
            u, v = u + (u > 0), v - (v < s1 - s0)
            if v - u >= min_samples:
                blocks.append(_phase_rows(t, pos, R, np.arange(s0 + u, s0 + v)))
    if len(blocks) < 2:
        raise ValueError(f"fewer than two flights of {min_samples} samples")
    keep = np.ones(len(blocks), bool)
    while True:
        A = np.vstack([blocks[k][0] for k in np.flatnonzero(keep)])
        y = np.concatenate([blocks[k][1] for k in np.flatnonzero(keep)])
        sol = np.linalg.lstsq(A, y, rcond=None)[0]
        rms = np.array([np.sqrt(np.mean((yk - Ak @ sol) ** 2)) for Ak, yk in blocks])
        again = rms <= PHASE_OUTLIER * np.median(rms[keep])
        if (again == keep).all() or again.sum() < 2:
            break
        keep = again
    r = y - A @ sol
    dof = max(y.size - 4 - 6 * int(keep.sum()), 1)
    cov = np.linalg.pinv(A.T @ A) * (r @ r) / dof
    se = np.sqrt(np.diag(cov))
    # A body axis that never turns out of the plane of motion (planar
    # tosses) leaves its component of the centre of mass unseen.
    unseen = np.linalg.norm(A, axis=0) <= 1e-9 * max(np.linalg.norm(A), 1e-300)
    sol[unseen], se[unseen] = 0.0, np.inf
    norm = np.sqrt(1.0 + a * a + b * b)
    return FlightFit(float(sol[0]), sol[1:].copy(), se, float(h),
                     float(np.arcsin(b / norm)), float(np.arctan(-a)), int(keep.sum()),
                     int((~keep).sum()), np.array([se_b, se_a]) / norm)


def of_dataset(ds, scenarios=None):
    """The :class:`FlightFit` of a dataset's box tosses (those of
    ``scenarios``, ids; default all), or None where it does not apply: not
    every scenario one box of the same size and material, no orientations
    measured, or too few flights.  Its centre of mass is the total one, from
    the box's centre (the ``bodies`` table's ``com_*`` columns included)."""
    bodies = ds.tables["bodies"]
    cols = bodies.column_names
    tr = ds.tables.get("trajectories")
    if tr is None or not {"qw", "qx", "qy", "qz"} <= set(tr.column_names) or \
            "shape" not in cols:
        return None
    shape = np.asarray(bodies.column("shape").to_pylist(), dtype=object)
    code = ds.codes["bodies"]
    half = np.stack([bodies.column(c).to_numpy() for c in ("hx", "hy", "hz")], axis=1) \
        if {"hx", "hy", "hz"} <= set(cols) else None
    material = (np.asarray(bodies.column("material").to_pylist(), dtype=object)
                if "material" in cols else np.zeros(code.size, object))
    if half is None or code.size == 0 or np.unique(code).size != code.size or \
            not (shape == "box").all() or not (half == half[0]).all() or \
            np.unique(material.astype(str)).size != 1:
        return None
    rows = ds.codes["trajectories"]
    if scenarios is not None:
        wanted = np.isin(ds.names, np.asarray(list(scenarios), dtype=str))
        take = np.flatnonzero(wanted[rows])
    else:
        take = np.arange(rows.size)
    order = take[np.lexsort((tr.column("t").to_numpy()[take], rows[take]))]
    col = {c: tr.column(c).to_numpy()[order] for c in ("t", "x", "y", "z", "qw", "qx", "qy",
                                                       "qz")}
    try:
        fit = flight_fit(rows[order], col["t"], np.stack([col[c] for c in "xyz"], axis=1),
                         np.stack([col[c] for c in ("qw", "qx", "qy", "qz")], axis=1), half[0])
    except (ValueError, np.linalg.LinAlgError):
        return None
    return fit


def describe(fit):
    """One line of what the flights show."""
    com = ", ".join(f"{1e3 * c:.2f} +- {1e3 * e:.2g}" if np.isfinite(e) else "unseen"
                    for c, e in zip(fit.com, fit.stderr[1:]))
    return (f"the flights ({fit.phases} phases) show a free fall of {fit.gravity:.4g} "
            f"+- {fit.stderr[0]:.2g} m/s^2, the centre of mass at ({com}) mm from the box's "
            f"centre, the table tilted {np.degrees(fit.tilt_x):.3f} +- "
            f"{np.degrees(fit.tilt_stderr[0]):.2g} deg about x and {np.degrees(fit.tilt_y):.3f} "
            f"+- {np.degrees(fit.tilt_stderr[1]):.2g} deg about y")

"""A read dataset turned into what the engines and losses take: scenarios
and the model built from them, each body's measured series, final states,
time offsets, initial states fitted to the first samples."""


from dataclasses import replace

import numpy as np

from ... import choice
from ...kernel.config import jit
from ...laws import registry as contact_laws
from ...model import Scenario, build
from .. import targets
from .contract import BOX_COLS, COM_COLS, DEFAULT_DT, DatasetError
from .tables import _col, _keys, _sorted_series


def groups(ds, table):
    """``{scenario_id: row indices}`` of a table, from its codes (no per-row
    loop; computed once per table).  Rows keep their file order inside a group."""
    if table in ds.groups:
        return ds.groups[table]
    codes = ds.codes[table]
    # Files are usually written grouped by scenario: check in O(N) before sorting.
    grouped = bool(np.all(codes[1:] >= codes[:-1]))
    order = np.arange(codes.size) if grouped else np.argsort(codes, kind="stable")
    sorted_codes = codes if grouped else codes[order]
    start = np.r_[0, np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1]
    bounds = np.append(start, len(codes))
    ds.groups[table] = {str(ds.names[sorted_codes[b]]): order[b:e]
                        for b, e in zip(bounds[:-1], bounds[1:])}
    return ds.groups[table]


def scenarios(ds, integrator=None, coefficients=(), strict=False):
    """Engine scenarios of a dataset: ``(Model, State, sample_times, ids)``.

    Initial states come from the bodies' x0..vz0 when given, otherwise from a
    robust quadratic fit over each body's first samples
    (:func:`simcore.data.targets.end_states`); a fitted height within 3 mm of
    resting on the ground is snapped onto it.  A scenario runs from its first sample to its last
    (or for ``scenarios.duration``).  Sample times are the union of its
    bodies' trajectory times.  The model's coefficients are the dataset's
    ``params`` on :meth:`Dataset.layout` (``coefficients``: per-material
    entries to have besides those ``params`` and ``truth`` name).  Rigid
    bodies without a ``scenarios.dt`` take the time-stepper's stable step;
    with one over it they sub-step, or with ``strict`` are refused
    (:func:`simcore.model.build`).  ``integrator``: a registered name, else
    ``dataset.yaml``'s ``model: {integrator: NAME}``, else the one the
    events' density chooses (:func:`simcore.choice.by_events`); the model's
    first note says which and why.
    """
    bodies = ds.tables["bodies"]
    b_np = {c: bodies[c].to_numpy(zero_copy_only=False) for c in bodies.column_names}
    bgroups = groups(ds, "bodies")
    wgroups = groups(ds, "walls") if "walls" in ds.tables else {}
    cgroups = groups(ds, "controls") if "controls" in ds.tables else {}
    sgroups = groups(ds, "scenarios") if "scenarios" in ds.tables else {}
    w_np = {c: ds.tables["walls"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["walls"].column_names} if wgroups else {}
    c_np = {c: ds.tables["controls"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["controls"].column_names} if cgroups else {}
    s_np = {c: ds.tables["scenarios"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["scenarios"].column_names} if sgroups else {}
    ser = series_index(ds)
    tracked = {str(ds.names[c]) for c in np.flatnonzero(ser["range"][:, 1] > ser["range"][:, 0])}
    missing = sorted(tracked - set(bgroups))
    if missing:
        raise DatasetError(f"trajectories: scenario {missing[0]!r} has trajectories but no bodies")
    has_p0 = all(c in b_np for c in ("x0", "y0", "z0"))
    has_v0 = all(c in b_np for c in ("vx0", "vy0", "vz0"))
    has_w0 = all(c in b_np for c in ("wx0", "wy0", "wz0"))
    rigid = contact_laws.family(ds.laws) == "penalty"
    fitted = {} if (has_p0 and has_v0) else fitted_initial_states(ds)
    t_sorted = ser["t"]
    out, times, ids = [], [], []
    for sid, rows in bgroups.items():
        rows = rows[np.argsort(b_np["body_id"][rows], kind="stable")]
        body_ids = b_np["body_id"][rows]
        if np.unique(body_ids).size != body_ids.size:
            raise DatasetError(f"bodies: scenario {sid!r}: duplicate body_id")
        if sid not in tracked:
            raise DatasetError(f"bodies: scenario {sid!r} has no trajectories")
        # This scenario's body series (sorted by body id, each sorted by t).
        lo, hi = ser["range"][ds.codes["bodies"][rows[0]]]
        s_body, s_start, s_count = ser["body"][lo:hi], ser["start"][lo:hi], ser["count"][lo:hi]
        if s_body.size != body_ids.size or np.any(s_body != body_ids):
            extra = sorted(set(s_body.tolist()) - set(body_ids.tolist()))
            if extra:
                raise DatasetError(f"trajectories: scenario {sid!r}: body {extra[0]} is not in bodies")
            lack = sorted(set(body_ids.tolist()) - set(s_body.tolist()))
            raise DatasetError(f"bodies: scenario {sid!r} body {lack[0]} has no trajectory")
        index = {int(b): k for k, b in enumerate(body_ids)}
        nb = len(rows)
        pos = np.zeros((nb, 3))
        vel = np.zeros((nb, 3))
        t0 = float(t_sorted[s_start].min())
        for k in range(nb):
            if has_p0:
                pos[k] = [b_np[c][rows[k]] for c in ("x0", "y0", "z0")]
            else:
                pos[k] = fitted[rows[k]][0]
            if has_v0:
                vel[k] = [b_np[c][rows[k]] for c in ("vx0", "vy0", "vz0")]
            else:
                vel[k] = fitted[rows[k]][1]
        ts = _sample_times(t_sorted, s_start, s_count)
        t_end = ts[-1]
        dt = None if rigid else DEFAULT_DT  # the time-stepper takes its stable step
        if sid in sgroups:
            r = sgroups[sid][0]
            t_end = t0 + s_np["duration"][r]
            if "dt" in s_np:
                dt = s_np["dt"][r]
        omega = (np.stack([b_np[c][rows] for c in ("wx0", "wy0", "wz0")], axis=1) if has_w0
                 else None)
        walls, wall_mat, wall_height = _walls(w_np, wgroups, sid)
        controls = _controls(c_np, cgroups.get(sid), index, sid)
        shapes = tuple(str(x) for x in b_np["shape"][rows])
        out.append(Scenario(radius=b_np["radius"][rows], mass=b_np["mass"][rows], pos=pos, vel=vel,
                            t_end=float(t_end), dt=None if dt is None else float(dt),
                            t0=float(t0), walls=walls,
                            controls=controls, shape=shapes, name=sid, wall_material=wall_mat,
                            material=list(b_np["material"][rows]) if "material" in b_np else None,
                            omega=omega, wall_height=wall_height, **_rigid_columns(b_np, rows)))
        times.append(ts[(ts >= t0) & (ts <= t_end)])
        ids.append((sid, body_ids))
    layout = ds.layout(coefficients)
    named = integrator if integrator is not None else ds.model.integrator

    def on(name):
        return build(out, params=layout.vector(ds.fixed_params), gravity=ds.gravity,
                     ground_z=ds.ground_z, materials=layout.materials, integrator=name,
                     coefficients=layout.extra, laws=layout.laws, spin=ds.spin,
                     cone=ds.model.cone, strict=strict)

    model, state = on(named)
    if named is None:
        model, state, line = choice.by_events(model, state, on)
    else:
        line = (f"integrator {named}: named by "
                f"{'--integrator' if integrator is not None else 'dataset.yaml model.integrator'}")
    model = replace(model, notes=(line,) + tuple(model.notes))
    return model, state, times, ids


def _sample_times(t_sorted, s_start, s_count):
    """The union of a scenario's body series' sample times (``t_sorted``
    from ``s_start``, ``s_count`` samples each); usually they share one clock."""
    first = t_sorted[s_start[0]:s_start[0] + s_count[0]]
    if np.all(s_count == s_count[0]) and all(
            np.array_equal(first, t_sorted[a:a + s_count[0]]) for a in s_start[1:]):
        return first
    return np.unique(np.concatenate([t_sorted[a:a + n] for a, n in zip(s_start, s_count)]))


def _walls(w_np, wgroups, sid):
    """``(planes (n, 4), materials or None, heights or None)`` of scenario
    ``sid``: the walls of every scenario (``*``) and its own, by wall_id."""
    wrows = np.concatenate([wgroups.get("*", np.zeros(0, int)), wgroups.get(sid, np.zeros(0, int))])
    if not wrows.size:
        return np.zeros((0, 4)), None, None
    wrows = wrows[np.argsort(w_np["wall_id"][wrows], kind="stable")]
    walls = np.stack([w_np[c][wrows] for c in ("nx", "ny", "nz", "d")], axis=1)
    wall_mat = list(w_np["material"][wrows]) if "material" in w_np else None
    wall_height = w_np["height"][wrows] if "height" in w_np else None
    return walls, wall_mat, wall_height


def _controls(c_np, crow, index, sid):
    """Scenario ``sid``'s control windows (rows ``crow`` of the controls
    table, or None) as ``(n, 6 or 9)``: body index, t0, t1, force, torque."""
    if crow is None:
        return np.zeros((0, 6))
    cb = np.array([index.get(int(b), -1) for b in c_np["body_id"][crow]], float)
    if (cb < 0).any():
        raise DatasetError(f"controls: scenario {sid!r}: body {int(c_np['body_id'][crow][cb < 0][0])} "
                           "is not in bodies")
    cols = ("t0", "t1", "fx", "fy", "fz") + (
        ("tx", "ty", "tz") if all(c in c_np for c in ("tx", "ty", "tz")) else ())
    return np.stack([cb] + [c_np[c][crow] for c in cols], axis=1)


def _rigid_columns(b_np, rows):
    """A scenario's rigid-body fields (:class:`simcore.model.Scenario`) from
    the ``bodies`` columns that are there: half extents, inertia (empty:
    uniform), the centre of mass (empty: the centre), ``fixed``, the initial
    quaternion (empty: identity)."""
    out = {}
    if all(c in b_np for c in BOX_COLS):
        out["extent"] = np.stack([b_np[c][rows] for c in BOX_COLS], axis=1)
    if all(c in b_np for c in ("ixx", "iyy", "izz")):
        out["inertia"] = np.stack([b_np[c][rows] for c in ("ixx", "iyy", "izz")], axis=1)
    if all(c in b_np for c in COM_COLS):
        out["com"] = np.nan_to_num(np.stack([b_np[c][rows] for c in COM_COLS], axis=1))
    if "fixed" in b_np:
        out["fixed"] = b_np["fixed"][rows].astype(bool)
    if all(c in b_np for c in ("qw0", "qx0", "qy0", "qz0")):
        quat = np.stack([b_np[c][rows] for c in ("qw0", "qx0", "qy0", "qz0")], axis=1)
        quat[np.isnan(quat).any(axis=1)] = [1.0, 0.0, 0.0, 0.0]
        out["quat"] = quat
    return out


def body_series(ds):
    """Trajectory samples sorted by scenario, body and time, for :mod:`targets`.

    Returns ``(order, keys, counts, t, p)``: the row order (index it as
    ``order[rows]``: :data:`IDENTITY` for a sorted file), the (scenario,
    body) key of each series (ascending), the samples per series, times and
    positions (:class:`SeriesPositions`).
    """
    if ds.series is not None:
        return ds.series
    tr = ds.tables["trajectories"]
    code = ds.codes["trajectories"]
    body = tr["body_id"].to_numpy()
    t = tr["t"].to_numpy()
    low = int(body.min()) if body.size else 0
    span = int(body.max()) - low + 1 if body.size else 1
    # Files are usually written sorted: check in one O(N) pass before sorting.
    counts = np.empty(ds.scan.count.shape[0] if ds.scan is not None else code.shape[0], np.int64)
    n = _sorted_series(code, body, t, low, span, counts) if code.size else 0
    if n >= 0:
        order, counts = IDENTITY, counts[:n].copy()
        start = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
        keys = code[start].astype(np.int64) * span + body[start] - low
    else:
        key0 = _keys(code, body)[0]
        by_t = np.argsort(t, kind="stable")
        order = by_t[np.argsort(key0[by_t], kind="stable")]
        key = key0[order]
        cut = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1, len(key)]
        keys, counts = key[cut[:-1]], np.diff(cut)
    p = SeriesPositions(*(tr[c].to_numpy() if n >= 0 else tr[c].to_numpy()[order]
                          for c in "xyz"))
    ds.series = (order, keys, counts, t if n >= 0 else t[order], p)
    return ds.series


def position_noise(ds):
    """The noise scale [m] of the dataset's positions (``targets.position_noise``
    over every body's series), or None with too few equally spaced samples."""
    _, _, counts, t, p = body_series(ds)
    return targets.position_noise(t, p, counts)


class _Identity:
    """The identity permutation of an already sorted file: ``order[idx]`` is
    ``idx``, with no N-long index array behind it."""

    def __getitem__(self, idx):
        return idx


IDENTITY = _Identity()


class SeriesPositions:
    """Positions ``(N, 3)`` in series order, kept as their three columns
    (views of the file's own columns when it is already sorted): rows are
    stacked into ``(..., 3)`` only where they are read (``p[rows]``,
    ``p[a:b]``); ``np.asarray(p)`` stacks them all."""

    def __init__(self, x, y, z):
        self.cols = (x, y, z)
        self.shape = (x.shape[0], 3)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, idx):
        return np.stack([c[idx] for c in self.cols], axis=-1)

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype, copy=False)


def series_index(ds):
    """The body series of :func:`body_series` indexed: per series its
    ``start``, ``count``, scenario ``code`` and ``body`` id; ``range[code]``
    the ``(lo, hi)`` series of each scenario code; ``t`` the sorted times."""
    order, key, counts, t, _ = body_series(ds)
    start = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
    first = order[start]
    code = ds.codes["trajectories"][first]
    body = ds.tables["trajectories"]["body_id"].to_numpy()[first]
    ncode = len(ds.names)
    lo = np.searchsorted(code, np.arange(ncode), "left")
    hi = np.searchsorted(code, np.arange(ncode), "right")
    return {"start": start, "count": np.asarray(counts, np.int64), "code": code, "body": body,
            "range": np.stack([lo, hi], axis=1), "t": t}


@jit
def scatter_series(ser_start, ser_count, ser_row0, ser_row1, ser_slot, t, x, y, z, samp_t,
                    out):
    """Write each body series' positions (``x``, ``y``, ``z`` in series order)
    into the rows of its scenario's sample times: series ``q`` (times
    ``t[start:start + count]``, ascending) goes to ``out[j, slot]`` for the
    row ``j`` in ``[row0, row1)`` where ``samp_t[j]`` equals its time (a
    merge walk: both are ascending)."""
    for q in range(ser_start.shape[0]):
        j = ser_row0[q]
        j_end = ser_row1[q]
        slot = ser_slot[q]
        for r in range(ser_start[q], ser_start[q] + ser_count[q]):
            while j < j_end and samp_t[j] < t[r]:
                j += 1
            if j < j_end and samp_t[j] == t[r]:
                out[j, slot, 0] = x[r]
                out[j, slot, 1] = y[r]
                out[j, slot, 2] = z[r]


def final_states(ds):
    """Measured final position and velocity of every body: the targets of the
    output and velocity losses.

    Returns ``{(scenario_id, body_id): (t, pos (3,), vel (3,))}``.  Positions
    and velocities come from the robust quadratic fit over each body's last
    samples (:func:`simcore.data.targets.end_states`), evaluated at its last
    sample time; measured velocities (vx, vy, vz), when the trajectories have
    them, replace the fitted ones.
    """
    order, key, counts, t, p = body_series(ds)
    pos, vel, _ = targets.end_states(t, p, counts, at_end=True)
    last = np.cumsum(counts) - 1
    tr = ds.tables["trajectories"]
    if all(c in tr.column_names for c in ("vx", "vy", "vz")):
        vel = np.stack([tr[c].to_numpy()[order[last]] for c in ("vx", "vy", "vz")], axis=1)
    code = ds.codes["trajectories"][order[last]]
    body = tr["body_id"].to_numpy()[order[last]]
    return {(str(ds.names[c]), int(b)): (float(t[k]), pos[i], vel[i])
            for i, (c, b, k) in enumerate(zip(code, body, last))}


def time_offsets(ds):
    """Estimated constant time offset of each body id's samples relative to
    body id 0 (:func:`simcore.data.targets.estimate_time_offsets`)."""
    _, key, counts, t, p = body_series(ds)
    det_b, det_t, det_dv = targets.detect_events(t, p, counts)
    tr = ds.tables["trajectories"]
    code = ds.codes["trajectories"]
    body_ids = tr["body_id"].to_numpy()
    order = np.lexsort((tr["t"].to_numpy(), body_ids, code))
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    scen = code[order][starts][det_b]
    body = body_ids[order][starts][det_b]
    return targets.estimate_time_offsets(scen, body, det_t, det_dv)


#: A fitted initial height within this of resting on the ground is snapped onto it.
GROUND_SNAP = 3e-3


def fitted_initial_states(ds):
    """``{bodies row: (pos, vel)}`` from a robust quadratic fit over each
    body's first samples (:meth:`_Scan.initial_states`: a height within
    ``GROUND_SNAP`` of resting on the ground is snapped onto it, vz to 0).
    Computed once per dataset (by :func:`validate` when it is read)."""
    if ds.initial is None:
        ds.initial = ds.scan.initial_states(_col(ds, "bodies", "radius"), ds.ground_z)
    return ds.initial

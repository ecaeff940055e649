"""The contract's rules across rows and tables: :func:`validate` (tables
in memory), :func:`validate_stream` (trajectories in batches, bounded
memory), :func:`read` (validate, raise on the first unusable dataset); the
plausibility checks and the summary a user reads first."""

from pathlib import Path

import numpy as np

from ... import params as P
from ...geometry.collision import SHAPE_NAMES
from ...geometry.rigid import quat_matrix
from ...kernel.config import jit
from ...model import MAX_BODIES, TOUCH_TOL
from .. import targets
from .contract import BOX_COLS, COM_COLS, TABLES, DatasetError, Report
from .load import _read
from .scan import BATCH_ROWS, FAR, HEAD, _series_batches, _Unstreamable
from .scenarios import body_series, fitted_initial_states, groups
from .tables import _col, _keys, _table_file, _units


def read(path):
    """Read and validate a dataset directory; raises :class:`DatasetError` with
    the grouped report of every problem found (``exc.report``)."""
    ds, report, _ = validate(path, summary=False)
    if report:
        raise DatasetError(f"{path}: invalid dataset\n{report.text()}", report)
    return ds


def validate(path, summary=True):
    """Check a dataset against the whole contract, keeping its tables in memory.

    Returns ``(dataset or None, report, summary)``; ``report`` holds every
    violation (table, column, row and scenario of each), ``summary`` the
    counts a user checks first (collision detection included: ``summary=False``
    skips it, as :func:`read` does).  Never raises for a bad dataset.
    :func:`validate_stream` gives the same report and summary in bounded memory.
    """
    root = Path(path)
    report = Report()
    ds = _read(root, report)
    if ds is None:
        return None, report, {}
    scan = ds.scan
    _check_rules(ds, scan, report)
    if report:
        return ds, report, {}

    def detected():
        _, _, counts, t, p = body_series(ds)
        return targets.detect_events(t, p, counts)[0].size

    return ds, report, (_summary(ds, scan, detected) if summary else {})


def validate_stream(path, batch_rows=BATCH_ROWS):
    """:func:`validate`'s report and summary, with the trajectories read in
    batches of ``batch_rows`` rows: memory stays bounded whatever their
    length (the other tables, one row per body, wall or window, are read
    whole).  Returns ``(report, summary)``.

    Three passes over the trajectories: the checks, then the collision
    detector's two (:func:`simcore.data.targets.detect_events_in`), which take
    the series in chunks of whole scenarios of about ``batch_rows``
    samples; a file whose scenarios are
    interleaved (not grouped) has its series gathered in memory for them.
    A file that cannot be read in batches (a truncated file, a CSV whose
    later rows change a column's type) is validated whole, for the same
    report.
    """
    root = Path(path)
    report = Report()
    try:
        ds = _read(root, report, keep=False, batch_rows=batch_rows)
    except _Unstreamable:
        _, report, out = validate(root)
        return report, out
    if ds is None:
        return report, {}
    scan = ds.scan
    _check_rules(ds, scan, report)
    if report:
        return report, {}
    file = _table_file(root, "trajectories")

    def source():
        return scan.series(_series_batches(file, batch_rows, _units(ds.meta)), batch_rows)

    def detected():
        return targets.detect_events_in(source, scan.count)[0].size

    return report, _summary(ds, scan, detected)


def _check_rules(ds, scan, report):
    """The contract's rules across rows and tables, the trajectories' from
    ``scan``; the geometry at the first sample when all else holds."""
    f = {n: _table_file(ds.path, n) for n in TABLES}
    b_sid, b_body = ds.ids_of("bodies"), _col(ds, "bodies", "body_id")

    # bodies: positive sizes, known shapes, no duplicates.
    shapes = _col(ds, "bodies", "shape").astype(str)
    _check_sizes(ds, f, report, shapes, b_sid)
    bad = np.flatnonzero(~np.isin(shapes, SHAPE_NAMES))
    if bad.size:
        report.add_rows("unknown shape", f["bodies"], "bodies", "shape", bad,
                        f"expected one of {list(SHAPE_NAMES)}", b_sid)
    _check_materials(ds, f, report)
    dup = np.flatnonzero(scan.first_of_row != np.arange(scan.key.size))
    if dup.size:
        report.add_rows("duplicate body", f["bodies"], "bodies", "body_id", dup,
                        "the same (scenario_id, body_id) twice", b_sid)

    # trajectories: t strictly increasing per body in file order, every row
    # a body's, every body with rows.
    scan.report(f, report, b_sid)
    if "controls" in ds.tables:
        c_sid = ds.ids_of("controls")
        ckey, bkey2 = _keys(ds.codes["controls"], _col(ds, "controls", "body_id"),
                            ds.codes["bodies"], b_body)
        bad = np.flatnonzero(~np.isin(ckey, bkey2))
        if bad.size:
            report.add_rows("control without body", f["controls"], "controls", "body_id", bad,
                            "body not in the bodies table", c_sid)
        bad = np.flatnonzero(_col(ds, "controls", "t1") < _col(ds, "controls", "t0"))
        if bad.size:
            report.add_rows("control window reversed", f["controls"], "controls", "t1", bad,
                            "t1 < t0", c_sid)
    if "walls" in ds.tables:
        w = np.stack([_col(ds, "walls", c) for c in ("nx", "ny", "nz")], axis=1)
        bad = np.flatnonzero(np.linalg.norm(w, axis=1) == 0)
        if bad.size:
            report.add_rows("zero wall normal", f["walls"], "walls", "nx", bad,
                            "(nx, ny, nz) is zero", ds.ids_of("walls"))
    if "scenarios" in ds.tables:
        s_sid = ds.ids_of("scenarios")
        for c in ("duration", "dt"):
            if c in ds.tables["scenarios"].column_names:
                bad = np.flatnonzero(_col(ds, "scenarios", c) <= 0)
                if bad.size:
                    report.add_rows("non-positive duration or dt", f["scenarios"], "scenarios",
                                    c, bad, f"{c} must be > 0", s_sid)
        if "split" in ds.tables["scenarios"].column_names:
            bad = np.flatnonzero(~np.isin(_col(ds, "scenarios", "split").astype(str),
                                          ["train", "test"]))
            if bad.size:
                report.add_rows("unknown split", f["scenarios"], "scenarios", "split", bad,
                                "expected 'train' or 'test'", s_sid)

    if "scenarios" in ds.tables and "duration" in ds.tables["scenarios"].column_names:
        _check_past_end(ds, f, scan, report)
    _check_references(ds, f, report)
    _check_parameters(ds, report)
    if not report and not ds.meta.get("allow_implausible", False):
        _check_plausible(ds, f, scan, report)

    # Geometry at the first sample: above the ground, no overlaps; and the
    # given start against the first samples (a plausibility rule, after the
    # geometry so that a body moved into the ground or a wall is named so).
    if not report:
        _check_first_sample(ds, f, scan, report, b_sid)
        if not ds.meta.get("allow_implausible", False):
            _check_start(ds, f, scan, report, b_sid)


def _check_sizes(ds, f, report, shapes, b_sid):
    """Masses > 0; a sphere's radius, a box's half extents > 0 (given);
    moments of inertia, where given, > 0; a centre of mass off the centre
    only in a box, and inside it; initial quaternions of norm 1."""
    cols = ds.tables["bodies"].column_names
    sphere, box = shapes == "sphere", shapes == "box"
    bad = np.flatnonzero(_col(ds, "bodies", "mass") <= 0)
    if bad.size:
        report.add_rows("non-positive mass or radius", f["bodies"], "bodies", "mass", bad,
                        "mass must be > 0", b_sid)
    bad = np.flatnonzero(sphere & ~(_col(ds, "bodies", "radius") > 0))
    if bad.size:
        report.add_rows("non-positive mass or radius", f["bodies"], "bodies", "radius", bad,
                        "a sphere's radius must be given and > 0", b_sid)
    for c in BOX_COLS:
        if box.any() and c not in cols:
            report.add("missing column", f"{f['bodies']}: table bodies",
                       f"column {c} is required for boxes (half extents hx, hy, hz)")
        elif box.any():
            bad = np.flatnonzero(box & ~(_col(ds, "bodies", c) > 0))
            if bad.size:
                report.add_rows("non-positive mass or radius", f["bodies"], "bodies", c, bad,
                                f"a box's half extent {c} must be given and > 0", b_sid)
    for c in ("ixx", "iyy", "izz"):
        if c in cols:
            v = _col(ds, "bodies", c)
            bad = np.flatnonzero(~np.isnan(v) & ~(v > 0))
            if bad.size:
                report.add_rows("non-positive mass or radius", f["bodies"], "bodies", c, bad,
                                f"{c} must be > 0 (or empty: a uniform body)", b_sid)
    com = [c for c in COM_COLS if c in cols]
    if com and len(com) < 3:
        report.add("missing column", f"{f['bodies']}: table bodies",
                   "columns com_x, com_y, com_z go together (a centre of mass)")
    elif com:
        for c, h in zip(COM_COLS, BOX_COLS):
            v = np.nan_to_num(_col(ds, "bodies", c))
            bad = np.flatnonzero(~box & (v != 0.0))
            if bad.size:
                report.add_rows("centre of mass outside the body", f["bodies"], "bodies", c,
                                bad, "only a box takes a centre of mass off its centre", b_sid)
            if box.any() and h in cols:
                bad = np.flatnonzero(box & ~(np.abs(v) < _col(ds, "bodies", h)))
                if bad.size:
                    report.add_rows("centre of mass outside the body", f["bodies"], "bodies", c,
                                    bad, f"|{c}| must be below the half extent {h}", b_sid)
    quat = [c for c in ("qw0", "qx0", "qy0", "qz0") if c in cols]
    if quat and len(quat) < 4:
        report.add("missing column", f"{f['bodies']}: table bodies",
                   "columns qw0, qx0, qy0, qz0 go together (an initial quaternion)")
    elif quat:
        q = np.stack([_col(ds, "bodies", c) for c in quat], axis=1)
        given = ~np.isnan(q).all(axis=1)
        bad = np.flatnonzero(given & ~(np.abs(np.linalg.norm(q, axis=1) - 1.0) <= 1e-6))
        if bad.size:
            report.add_rows("non-unit quaternion", f["bodies"], "bodies", "qw0", bad,
                            "(qw0, qx0, qy0, qz0) must have norm 1 (within 1e-6)", b_sid)


def _check_references(ds, f, report):
    """Rows of ``walls``, ``controls``, ``events`` and ``scenarios`` name a
    scenario of ``bodies`` (walls may say ``*``: every scenario), events name
    bodies and walls that exist; no duplicate walls, scenarios, controls or
    events; at most ``MAX_BODIES`` bodies per scenario."""
    b_codes = np.unique(ds.codes["bodies"])
    star = np.flatnonzero(ds.names == "*")
    counts = np.bincount(ds.codes["bodies"], minlength=ds.names.shape[0])
    big = np.flatnonzero(counts > MAX_BODIES)
    if big.size:
        rows = np.flatnonzero(np.isin(ds.codes["bodies"], big))
        report.add_rows("too many bodies", f["bodies"], "bodies", "body_id", rows[:1],
                        f"{int(counts[big[0]])} bodies in one scenario, expected at most "
                        f"{MAX_BODIES}", ds.ids_of("bodies"), total=big.size)
    keys = {"walls": ("scenario_id", "wall_id"), "scenarios": ("scenario_id",),
            "controls": tuple(TABLES["controls"]), "events": tuple(TABLES["events"])}
    for table, key in keys.items():
        if table not in ds.tables:
            continue
        key = tuple(c for c in key if c in ds.tables[table].column_names)
        codes = ds.codes[table]
        sid = ds.ids_of(table)
        known = np.isin(codes, b_codes) | (np.isin(codes, star) if table == "walls" else False)
        bad = np.flatnonzero(~known)
        if bad.size:
            report.add_rows("unknown scenario", f[table], table, "scenario_id", bad,
                            "no body of bodies has this scenario_id", sid)
        cols = [codes] + [_col(ds, table, c) for c in key[1:]]
        cols = [c.astype(str) if c.dtype == object else c for c in map(np.asarray, cols)]
        order = np.lexsort(cols[::-1])
        same = np.ones(max(order.size - 1, 0), bool)
        for c in cols:
            a = c[order]
            same &= a[1:] == a[:-1]
        dup = np.sort(order[1:][same])
        if dup.size:
            report.add_rows("duplicate row", f[table], table, key[-1], dup,
                            f"the same ({', '.join(key)}) as an earlier row", sid)
    if "events" in ds.tables:
        _check_event_references(ds, f, report)


def _check_event_references(ds, f, report):
    """Events name a body of their scenario, and ``other`` is ``ground``,
    ``body:K`` of a body of the scenario or ``wall:K`` of one of its walls."""
    sid = ds.ids_of("events")
    codes = ds.codes["events"]
    body = _col(ds, "events", "body_id")
    bkey = set(zip(ds.codes["bodies"].tolist(), _col(ds, "bodies", "body_id").tolist()))
    walls = set()
    if "walls" in ds.tables:
        star = set(np.flatnonzero(ds.names == "*").tolist())
        wall_ids = _col(ds, "walls", "wall_id").tolist()
        for c, w in zip(ds.codes["walls"].tolist(), wall_ids):
            walls.add((-1 if c in star else c, w))
    bad_body, bad_other = [], []
    for r, (c, b, other) in enumerate(zip(codes.tolist(), body.tolist(),
                                          _col(ds, "events", "other").astype(str))):
        if (c, b) not in bkey:
            bad_body.append(r)
        kind, _, k = other.partition(":")
        if other == "ground":
            continue
        if not k.lstrip("-").isdigit() or kind not in ("body", "wall") or (
                kind == "body" and (c, int(k)) not in bkey) or (
                kind == "wall" and (c, int(k)) not in walls and (-1, int(k)) not in walls):
            bad_other.append(r)
    if bad_body:
        report.add_rows("unknown body", f["events"], "events", "body_id", bad_body,
                        "no such body in this scenario", sid)
    if bad_other:
        report.add_rows("unknown body or wall", f["events"], "events", "other", bad_other,
                        "expected ground, body:K or wall:K of this scenario", sid)


def _check_parameters(ds, report):
    """``params`` and ``truth`` of ``dataset.yaml`` within their bounds."""
    for what, values in (("params", ds.fixed_params), ("truth", ds.truth)):
        try:
            ds.layout(values).vector(values)
        except ValueError as exc:
            report.add("parameter out of range", ds.path / "dataset.yaml", f"{what}: {exc}")


#: Physical ranges of measured values (SI, after the units are applied):
#: outside them ``validate`` reports an "implausible value" (a unit label
#: that does not match the numbers, a corrupt file), unless ``dataset.yaml``
#: sets ``allow_implausible: true`` for unusual data.
PLAUSIBLE = {"radius": (1e-4, 10.0, "m"), "mass": (1e-6, 1e5, "kg"),
             "speed": (0.0, 1e3, "m/s"), "force": (0.0, 1e6, "N"), "position": (0.0, FAR, "m"),
             "sample rate": (1.0, 1e5, "Hz"), "dt": (1e-6, None, "s")}


#: A given initial speed and the speed the first samples show disagree when
#: one exceeds this many times the other plus the larger of ``SPEED_AGREE``
#: (m/s) and ``SPEED_NOISE`` times the velocity noise of a fit over the first
#: samples (position noise over the sample interval); the dataset is
#: implausible when at least half its moving bodies disagree.
SPEED_RATIO = 10.0


SPEED_AGREE = 0.05


SPEED_NOISE = 5.0


_OVERRIDE = " (if the data are right, set allow_implausible: true in dataset.yaml)"


def _check_plausible(ds, f, scan, report):
    """Values in their physical ranges (:data:`PLAUSIBLE`), ``dt`` within
    the run, the duration against the samples' span, the sample rate, and
    given initial velocities against the motion of the first samples: what a
    wrong unit label or a corrupt column looks like."""
    b_sid = ds.ids_of("bodies")
    for c in ("radius", "mass"):
        lo, hi, unit = PLAUSIBLE[c]
        v = _col(ds, "bodies", c)
        bad = np.flatnonzero((v < lo) | (v > hi))
        if bad.size:
            report.add_rows("implausible value", f["bodies"], "bodies", c, bad,
                            f"{c} outside [{lo:g}, {hi:g}] {unit}{_OVERRIDE}", b_sid)
    rows, sids, n = scan.found["far"]
    if n:
        report.add_rows("implausible value", f["trajectories"], "trajectories", "x", rows,
                        f"position beyond {PLAUSIBLE['position'][1]:g} m of the origin"
                        f"{_OVERRIDE}", sids, total=n)
    cols = ds.tables["bodies"].column_names
    for c in ("x0", "y0", "z0"):
        if c in cols:
            bad = np.flatnonzero(np.abs(_col(ds, "bodies", c)) > PLAUSIBLE["position"][1])
            if bad.size:
                report.add_rows("implausible value", f["bodies"], "bodies", c, bad,
                                f"initial position beyond {PLAUSIBLE['position'][1]:g} m of the "
                                f"origin{_OVERRIDE}", b_sid)
    if all(c in cols for c in ("vx0", "vy0", "vz0")):
        v0 = np.stack([_col(ds, "bodies", c) for c in ("vx0", "vy0", "vz0")], axis=1)
        with np.errstate(over="ignore"):  # 1e300 is reported, not squared
            speed = np.linalg.norm(v0, axis=1)
        bad = np.flatnonzero(speed > PLAUSIBLE["speed"][1])
        if bad.size:
            report.add_rows("implausible value", f["bodies"], "bodies", "vx0", bad,
                            f"initial speed above {PLAUSIBLE['speed'][1]:g} m/s{_OVERRIDE}", b_sid)
        with np.errstate(over="ignore", invalid="ignore"):  # a corrupt 1e300 is reported
            fitted = np.array([v for _, v in scan.initial_states(
                _col(ds, "bodies", "radius"), ds.ground_z).values()]).reshape(-1, 3)
            seen = np.linalg.norm(fitted, axis=1)
        n = np.minimum(scan.count, HEAD)
        noise = _head_noise(scan)
        step = np.median(np.diff(scan.head_t[n >= 2, :2], axis=1)) if (n >= 2).any() else 0.0
        agree = max(SPEED_AGREE, SPEED_NOISE * noise / step if noise and step > 0 else 0.0)
        far = (np.maximum(speed, seen) > SPEED_RATIO * np.minimum(speed, seen) + agree) & (
            scan.count >= 3)
        moving = (np.maximum(speed, seen) > agree) & (scan.count >= 3)
        bad = np.flatnonzero(far)
        # A unit mistake moves every body; an impact within the first samples
        # only the bodies it involves: the dataset is implausible when most
        # of its moving bodies disagree.
        if bad.size and bad.size >= 0.5 * moving.sum():
            report.add_rows("implausible value", f["bodies"], "bodies", "vx0", bad,
                            f"the initial speed and the first samples' speed differ over "
                            f"{SPEED_RATIO:g} times (units of the time or velocity columns?)"
                            f"{_OVERRIDE}", b_sid)
    if "controls" in ds.tables:
        with np.errstate(over="ignore"):
            force = np.linalg.norm(np.stack([_col(ds, "controls", c)
                                             for c in ("fx", "fy", "fz")], axis=1), axis=1)
        bad = np.flatnonzero(force > PLAUSIBLE["force"][1])
        if bad.size:
            report.add_rows("implausible value", f["controls"], "controls", "fx", bad,
                            f"force above {PLAUSIBLE['force'][1]:g} N{_OVERRIDE}",
                            ds.ids_of("controls"))
    span = scan.last_t - scan.head_t[:, 0]
    rate = np.where(span > 0, (scan.count - 1) / np.where(span > 0, span, 1.0), np.nan)
    lo, hi, _ = PLAUSIBLE["sample rate"]
    bad = np.flatnonzero((scan.count >= 2) & ((rate < lo) | (rate > hi)))
    if bad.size:
        # The trajectories may be streamed (not kept): each row's scenario is its body's.
        sids = {int(scan.first_row[b]): b_sid[int(b)] for b in bad[:report.SHOW]}
        report.add_rows("implausible value", f["trajectories"], "trajectories", "t",
                        scan.first_row[bad], f"a body's sample rate is outside [{lo:g}, {hi:g}] "
                        f"Hz (times in ms labelled s?){_OVERRIDE}", sids)
    if "scenarios" in ds.tables and "dt" in ds.tables["scenarios"].column_names:
        _check_steps(ds, f, scan, report)


#: A given initial position and the body's first sample disagree when they
#: lie further apart than the larger of ``START_AGREE`` [m] and
#: ``START_NOISE`` times the positions' noise, once the motion of the given
#: initial velocity and gravity over the time between them is taken out.
START_AGREE = 0.02


START_NOISE = 10.0


def _check_start(ds, f, scan, report, b_sid):
    """Given initial positions against each body's first sample: the body
    starts at its scenario's first sample time from ``x0..z0`` (with
    ``vx0..vz0`` when given, else only where its first sample is at that
    time) and falls freely until its own first sample; a body found further
    from that sample than :data:`START_AGREE` or :data:`START_NOISE` times
    the noise was moved (a corrupt or misaligned row, another frame)."""
    cols = ds.tables["bodies"].column_names
    if not all(c in cols for c in ("x0", "y0", "z0")):
        return
    p0 = np.stack([_col(ds, "bodies", c) for c in ("x0", "y0", "z0")], axis=1)
    dt = scan.head_t[:, 0] - _scenario_start(ds, scan)[ds.codes["bodies"]]
    with np.errstate(invalid="ignore"):
        dt = np.where(scan.count > 0, dt, np.nan)
    if all(c in cols for c in ("vx0", "vy0", "vz0")):
        v0 = np.stack([_col(ds, "bodies", c) for c in ("vx0", "vy0", "vz0")], axis=1)
        p0 = p0 + v0 * dt[:, None]
        p0[:, 2] -= 0.5 * ds.gravity * dt ** 2
    else:
        dt = np.where(dt == 0.0, dt, np.nan)  # (without a velocity: at the start only)
    with np.errstate(over="ignore", invalid="ignore"):  # a corrupt 1e300 is reported
        gap = np.linalg.norm(scan.head_p[:, 0] - p0, axis=1)
    tol = max(START_AGREE, START_NOISE * (_head_noise(scan) or 0.0))
    bad = np.flatnonzero(np.isfinite(dt) & ~(gap <= tol))
    if bad.size:
        worst = int(bad[np.argmax(np.nan_to_num(gap[bad], nan=np.inf))])
        report.add_rows("implausible value", f["bodies"], "bodies", "x0", bad,
                        f"the initial position (x0, y0, z0) lies over {tol:.3g} m from the body's "
                        f"first trajectory sample, after the motion of the initial velocity and "
                        f"gravity between them (the worst {gap[worst]:.3g} m: trajectories row "
                        f"{int(scan.first_row[worst])}){_OVERRIDE}", b_sid)


def _head_noise(scan):
    """The positions' noise [m] the bodies' first samples show (a fit over
    them: :func:`simcore.data.targets.position_noise`)."""
    n = np.minimum(scan.count, HEAD)
    take = np.arange(HEAD) < n[:, None]
    with np.errstate(over="ignore", invalid="ignore"):  # a corrupt 1e300 is reported
        return targets.position_noise(scan.head_t[take], scan.head_p[take], n)


def _check_steps(ds, f, scan, report):
    """``dt`` within ``[1e-6 s, duration]``; a duration of at most ten times
    the span of its scenario's samples (plus a second)."""
    s_sid = ds.ids_of("scenarios")
    dt = _col(ds, "scenarios", "dt")
    names = ds.tables["scenarios"].column_names
    duration = _col(ds, "scenarios", "duration") if "duration" in names else None
    top = duration if duration is not None else np.inf
    bad = np.flatnonzero((dt < PLAUSIBLE["dt"][0]) | (dt > top))
    if bad.size:
        report.add_rows("implausible value", f["scenarios"], "scenarios", "dt", bad,
                        f"dt outside [{PLAUSIBLE['dt'][0]:g} s, the duration]{_OVERRIDE}", s_sid)
    if duration is None:
        return
    lo = _scenario_start(ds, scan)
    hi = np.full(lo.shape, -np.inf)
    np.maximum.at(hi, ds.codes["bodies"], scan.last_t)
    span = (hi - lo)[ds.codes["scenarios"]]
    bad = np.flatnonzero(np.isfinite(span) & (duration > 10.0 * span + 1.0))
    if bad.size:
        report.add_rows("implausible value", f["scenarios"], "scenarios", "duration", bad,
                        f"duration over 10 x its samples' span + 1 s{_OVERRIDE}", s_sid)


def _scenario_start(ds, scan):
    """Each scenario's first sample time, by the dataset's scenario code (the
    scan's own codes differ: bodies only); inf for a scenario without one."""
    start = np.full(ds.names.shape[0], np.inf)
    np.minimum.at(start, ds.codes["bodies"],
                  np.where(scan.count > 0, scan.head_t[:, 0], np.inf))
    return start


def _check_past_end(ds, f, scan, report):
    """No sample after its scenario's end: a scenario runs from its first
    sample for ``scenarios.duration`` (the same sum as
    :mod:`simcore.data.dataset.scenarios`), and a sample past that end could
    not be simulated.  Names each late body's last row."""
    start = _scenario_start(ds, scan)
    code = ds.codes["bodies"]
    duration = np.full(start.shape, np.inf)
    duration[ds.codes["scenarios"]] = _col(ds, "scenarios", "duration")
    end = start + duration
    late = np.flatnonzero((scan.count > 0) & (scan.last_t > end[code]))
    if late.size:
        b_sid = ds.ids_of("bodies")
        sids = {int(scan.last_row[b]): b_sid[int(b)] for b in late[:report.SHOW]}
        report.add_rows("sample after the duration", f["trajectories"], "trajectories", "t",
                        scan.last_row[late], "a body's last sample comes after its scenario's "
                        "first sample + scenarios.duration (lengthen the duration or drop the "
                        "sample)", sids, total=late.size)


def _check_materials(ds, f, report):
    """Material names usable in parameter names, and every material that
    ``dataset.yaml``'s ``params`` and ``truth`` address present."""
    for table in ("bodies", "walls"):
        if table in ds.tables and "material" in ds.tables[table].column_names:
            col = _col(ds, table, "material")
            bad = np.flatnonzero([bool(m) and not P.MATERIAL_NAME.match(str(m)) for m in col])
            if bad.size:
                report.add_rows("bad material name", f[table], table, "material", bad,
                                "expected letters, digits, '_' and '-' (it becomes part of "
                                "parameter names such as mu_bb@A+B)", ds.ids_of(table))
    have = set(ds.materials)
    for what, values in (("params", ds.fixed_params), ("truth", ds.truth)):
        for name in values:
            try:
                missing = [m for m in P.parse(name)[1] if m not in have]
            except ValueError:
                continue  # reported when dataset.yaml was read
            if missing:
                report.add("unknown material", ds.path / "dataset.yaml",
                           f"{what}: {name}: no body or wall has material {missing[0]!r} "
                           f"(materials: {', '.join(sorted(have)) or 'none'})")


def _check_first_sample(ds, f, scan, report, b_sid):
    """Spheres above the ground and apart in the initial configuration the
    engine will use: given x0..z0, else the robust fit over the first
    samples (noise would put resting spheres below the ground at the raw
    first sample; the fit is kept as ``ds.initial``), else (bodies with
    under 3 samples) the first sample."""
    bodies = ds.tables["bodies"].column_names
    radius = _col(ds, "bodies", "radius")
    b_index = scan.first_row  # each body's first trajectories row
    given = all(c in bodies for c in ("x0", "y0", "z0"))
    if scan.count.min() >= 3 and not all(c in bodies for c in ("x0", "y0", "z0", "vx0", "vy0",
                                                                 "vz0")):
        fitted_initial_states(ds)
    if given:
        p0 = np.stack([_col(ds, "bodies", c) for c in ("x0", "y0", "z0")], axis=1)
    elif ds.initial is not None:
        p0 = np.stack([ds.initial[r][0] for r in range(radius.size)])
    else:
        p0 = scan.head_p[:, 0]
    # Within TOUCH_TOL a body touches (the engine moves it out: model.TOUCH_TOL).
    tol = TOUCH_TOL
    # A sphere reaches down by its radius, a box by its half extents along
    # its axes' vertical components (its lowest corner); boxes are not
    # checked for overlaps (fixed boxes carry others).
    reach = np.where(_col(ds, "bodies", "shape").astype(str) == "box", _box_reach(ds), radius)
    fixed = (_col(ds, "bodies", "fixed").astype(bool) if "fixed" in bodies
             else np.zeros(radius.size, bool))
    below = np.flatnonzero((p0[:, 2] - reach < ds.ground_z - tol) & ~fixed)
    if below.size and given:
        report.add_rows("below the ground at the first sample", f["bodies"], "bodies", "z0",
                        below, f"z0 - radius (a box: its lowest corner) below ground_z by more "
                        f"than {tol:g} m", b_sid)
    elif below.size:
        report.add_rows("below the ground at the first sample", f["trajectories"],
                        "trajectories", "z", b_index[below],
                        f"z - radius (a box: its lowest corner) below ground_z by more than "
                        f"{tol:g} m (beyond the 3 mm snap of the initial fit)",
                        {int(b_index[r]): b_sid[r] for r in below[:Report.SHOW]})
    _check_walls(ds, f, p0, radius, fixed, given, b_index, b_sid, report)
    # Overlaps: every pair of a scenario's bodies, in one pass.
    of_scenario = groups(ds, "bodies")
    rows = np.concatenate(list(of_scenario.values())) if of_scenario else np.zeros(0, np.int64)
    start = np.r_[0, np.cumsum([g.size for g in of_scenario.values()])].astype(np.int64)
    pairs = np.zeros((len(of_scenario), 2, 2), np.int64)
    found = np.zeros(len(of_scenario), np.int64)
    _overlapping_pairs(rows, start, np.ascontiguousarray(p0, np.float64), radius, tol, pairs,
                       found)
    body_id = _col(ds, "bodies", "body_id")
    for g in np.flatnonzero(found):
        sid = str(ds.names[ds.codes["bodies"][rows[start[g]]]])
        for a, b in pairs[g, :found[g]]:
            gap = np.linalg.norm(p0[a] - p0[b]) - radius[a] - radius[b]
            report.add("spheres overlapping at the first sample",
                       f"{f['trajectories']}: table trajectories, row {int(b_index[b])}",
                       f"bodies {int(body_id[a])} and {int(body_id[b])} overlap by "
                       f"{-gap:.3g} m (more than the {tol:g} m taken as touching)", sid)


def _check_walls(ds, f, p0, radius, fixed, given, b_index, b_sid, report):
    """Spheres on the free side of their scenario's walls at the start (the
    engine refuses one deeper than ``TOUCH_TOL`` into a wall: a moved body,
    a wall's sign or offset, a unit)."""
    if "walls" not in ds.tables or not ds.tables["walls"].num_rows:
        return
    sphere = _col(ds, "bodies", "shape").astype(str) == "sphere"
    body_sid = np.asarray(ds.names, dtype=object)[ds.codes["bodies"]]
    w_sid = np.asarray(ds.tables["walls"]["scenario_id"].to_pylist(), dtype=object)
    normal = np.stack([_col(ds, "walls", c) for c in ("nx", "ny", "nz")], axis=1)
    size = np.linalg.norm(normal, axis=1)
    d = _col(ds, "walls", "d")
    wall_id = _col(ds, "walls", "wall_id")
    inside, depth = np.zeros(radius.size, bool), np.zeros(radius.size)
    for k in np.flatnonzero(size > 0):
        here = (w_sid[k] == "*") | (body_sid == w_sid[k])
        gap = (p0 @ normal[k] - d[k]) / size[k] - radius
        hit = here & sphere & ~fixed & (gap < -TOUCH_TOL) & ~inside
        depth[hit] = -gap[hit]
        inside |= hit
        if hit.any():
            wall = int(wall_id[k])
            rows = np.flatnonzero(hit)
            where = (f["bodies"], "bodies", "x0", rows, b_sid) if given else (
                f["trajectories"], "trajectories", "x", b_index[rows],
                {int(b_index[r]): b_sid[r] for r in rows[:Report.SHOW]})
            report.add_rows("inside a wall at the first sample", *where[:4],
                            f"the sphere is up to {depth[rows].max():.3g} m into wall {wall} "
                            f"(more than the {TOUCH_TOL:g} m taken as touching; n . p = d with "
                            "n into the free side)", where[4])


def _box_reach(ds):
    """How far below its centre each body of ``bodies`` reaches if it is a box
    (its initial orientation, identity when not given); NaN for the others."""
    cols = ds.tables["bodies"].column_names
    n = ds.tables["bodies"].num_rows
    if not all(c in cols for c in BOX_COLS):
        return np.full(n, np.nan)
    ext = np.stack([_col(ds, "bodies", c) for c in BOX_COLS], axis=1)
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    if "qw0" in cols:
        given = np.stack([_col(ds, "bodies", c) for c in ("qw0", "qx0", "qy0", "qz0")], axis=1)
        ok = ~np.isnan(given).any(axis=1)
        quat[ok] = given[ok]
    rows = np.array([np.abs(quat_matrix(q)[2]) for q in quat])
    return np.sum(rows * ext, axis=1)


@jit
def _overlapping_pairs(rows, start, p0, radius, tol, pairs, found):
    """The first two overlapping pairs ``(a, b)`` of bodies rows of each group
    ``rows[start[g]:start[g + 1]]`` (a before b in the group, pairs in row-major
    order) into ``pairs[g]``, their number into ``found[g]``."""
    for g in range(start.shape[0] - 1):
        for i in range(start[g], start[g + 1]):
            a = rows[i]
            for j in range(i + 1, start[g + 1]):
                b = rows[j]
                d = np.sqrt((p0[a, 0] - p0[b, 0]) ** 2 + (p0[a, 1] - p0[b, 1]) ** 2
                            + (p0[a, 2] - p0[b, 2]) ** 2)
                if d - radius[a] - radius[b] < -tol and found[g] < pairs.shape[1]:
                    pairs[g, found[g], 0] = a
                    pairs[g, found[g], 1] = b
                    found[g] += 1


def _summary(ds, scan, detected):
    """The figures a user checks first, from the bodies table and ``scan``;
    ``detected()`` counts the collisions the detector finds."""
    bodies = ds.tables["bodies"]
    ncode = int(scan.bcode.max()) + 1
    lo = np.full(ncode, np.inf)
    hi = np.full(ncode, -np.inf)
    np.minimum.at(lo, scan.bcode, scan.head_t[:, 0])
    np.maximum.at(hi, scan.bcode, scan.last_t)
    spans = hi - lo
    # Per body: (samples - 1) / time span, its mean sample rate.
    n, span_b = scan.count, scan.last_t - scan.head_t[:, 0]
    rates = (n - 1)[span_b > 0] / span_b[span_b > 0]
    out = {
        "scenarios": ncode,
        "bodies": bodies.num_rows,
        "samples": int(scan.count.sum()),
        "duration_s": {"min": float(spans.min()), "max": float(spans.max()),
                       "total": float(spans.sum())},
        "sample_rate_hz": float(np.median(rates)) if rates.size else None,
        "walls": ds.tables["walls"].num_rows if "walls" in ds.tables else 0,
        "controls": ds.tables["controls"].num_rows if "controls" in ds.tables else 0,
        "events": ds.tables["events"].num_rows if "events" in ds.tables else 0,
    }
    if "events" in ds.tables:
        other = _col(ds, "events", "other").astype(str)
        out["collisions"] = {"body-body": int(np.char.startswith(other, "body:").sum()) // 2,
                             "body-wall": int(np.char.startswith(other, "wall:").sum()),
                             "body-ground": int((other == "ground").sum())}
    if scan.count.min() >= 11:
        out["collisions_detected"] = int(detected())
    out["initial_velocity"] = ("given (bodies vx0, vy0, vz0)" if "vx0" in bodies.column_names
                               else "estimated: robust quadratic fit over the first 8 samples")
    return out

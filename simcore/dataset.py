"""Reading and writing datasets in the contactfit contract (``datasets/README.md``).

A dataset is a directory: ``dataset.yaml`` plus tables ``NAME.parquet`` or
``NAME.csv`` (same columns): ``bodies``, ``trajectories`` and the optional
``walls``, ``controls``, ``events``, ``scenarios``.  Lengths and times are
converted to SI on read (``units.length`` m, cm or mm; ``units.time`` s or
ms); every table is read with pyarrow, projecting only the contract's
columns, and turned into engine arrays without per-row Python loops.

This is the minimal reader the engine's CLI needs; validation with grouped
reports, derived targets and sharding build on it.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml

from . import params as P
from .model import Scenario, build

LENGTH = {"m": 1.0, "cm": 1e-2, "mm": 1e-3}
TIME = {"s": 1.0, "ms": 1e-3}

# Contract columns: name -> (kind, required); kinds "str", "int", "float".
TABLES = {
    "bodies": {"scenario_id": ("str", True), "body_id": ("int", True), "shape": ("str", True),
               "radius": ("float", True), "mass": ("float", True), "material": ("str", False),
               "x0": ("float", False), "y0": ("float", False), "z0": ("float", False),
               "vx0": ("float", False), "vy0": ("float", False), "vz0": ("float", False)},
    "trajectories": {"scenario_id": ("str", True), "body_id": ("int", True), "t": ("float", True),
                     "x": ("float", True), "y": ("float", True), "z": ("float", True),
                     "vx": ("float", False), "vy": ("float", False), "vz": ("float", False)},
    "walls": {"scenario_id": ("str", True), "wall_id": ("int", True), "nx": ("float", True),
              "ny": ("float", True), "nz": ("float", True), "d": ("float", True),
              "material": ("str", False)},
    "controls": {"scenario_id": ("str", True), "body_id": ("int", True), "t0": ("float", True),
                 "t1": ("float", True), "fx": ("float", True), "fy": ("float", True),
                 "fz": ("float", True)},
    "events": {"scenario_id": ("str", True), "t": ("float", True), "body_id": ("int", True),
               "other": ("str", True), "dvx": ("float", True), "dvy": ("float", True),
               "dvz": ("float", True)},
    "scenarios": {"scenario_id": ("str", True), "duration": ("float", True),
                  "dt": ("float", False), "split": ("str", False)},
}
REQUIRED_TABLES = ("bodies", "trajectories")
# Which columns are lengths, times, speeds or forces (for unit conversion).
_LENGTH_COLS = {"radius", "x0", "y0", "z0", "x", "y", "z", "d"}
_SPEED_COLS = {"vx0", "vy0", "vz0", "vx", "vy", "vz", "dvx", "dvy", "dvz"}
_TIME_COLS = {"t", "t0", "t1", "duration", "dt"}
DEFAULT_DT = 1e-3


class DatasetError(ValueError):
    """A dataset that breaks the contract; the message says where and what."""


@dataclass
class Dataset:
    """A dataset in SI units: its metadata and its tables as pyarrow Tables."""

    path: Path
    meta: dict
    tables: dict
    gravity: float = 9.81
    ground_z: float = 0.0
    fixed_params: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)

    @property
    def name(self):
        return self.meta.get("name", self.path.name)

    def scenario_ids(self):
        return sorted(set(self.tables["bodies"]["scenario_id"].to_pylist()))


def _table_file(root, name):
    for ext in ("parquet", "csv"):
        path = root / f"{name}.{ext}"
        if path.exists():
            return path
    return None


def _read_table(path, name):
    spec = TABLES[name]
    try:
        if path.suffix == ".parquet":
            present = set(pq.read_schema(path).names)
            table = pq.read_table(path, columns=[c for c in spec if c in present])
        else:
            table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c, (k, _) in spec.items() if k == "str"}))
            table = table.select([c for c in spec if c in table.column_names])
    except (pa.ArrowInvalid, OSError) as exc:
        raise DatasetError(f"{path}: unreadable or truncated {name} table ({exc})") from None
    missing = [c for c, (_, req) in spec.items() if req and c not in table.column_names]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {missing} in table {name}")
    if table.num_rows == 0:
        raise DatasetError(f"{path}: table {name} is empty")
    cols = {}
    for c in table.column_names:
        kind = spec[c][0]
        col = table[c]
        try:
            if kind == "str":
                col = col.cast(pa.string())
            elif kind == "int":
                if pa.types.is_floating(col.type):
                    vals = col.to_numpy(zero_copy_only=False)
                    bad = np.flatnonzero(~np.isfinite(vals) | (vals != np.round(vals)))
                    if bad.size:
                        raise DatasetError(
                            f"{path}: column {c} row {int(bad[0])}: {vals[bad[0]]} is not an integer")
                col = col.cast(pa.int64())
            else:
                col = col.cast(pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise DatasetError(f"{path}: column {c}: expected {kind} values ({exc})") from None
        if col.null_count:
            row = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise DatasetError(f"{path}: column {c} row {row}: missing value")
        if kind == "float":
            vals = col.to_numpy()
            bad = np.flatnonzero(~np.isfinite(vals))
            if bad.size:
                raise DatasetError(f"{path}: column {c} row {int(bad[0])}: {vals[bad[0]]} is not finite")
        cols[c] = col
    return pa.table(cols)


def _convert_units(table, length, time):
    cols = {}
    for c in table.column_names:
        col = table[c]
        if c in _LENGTH_COLS:
            col = pc.multiply(col, length)
        elif c in _SPEED_COLS:
            col = pc.multiply(col, length / time)
        elif c in _TIME_COLS:
            col = pc.multiply(col, time)
        elif c in ("fx", "fy", "fz"):
            col = pc.multiply(col, length / time**2)  # force unit: kg * length / time^2
        cols[c] = col
    return pa.table(cols)


def read(path):
    """Read a dataset directory; raises :class:`DatasetError` naming the problem."""
    root = Path(path)
    meta_path = root / "dataset.yaml"
    if not meta_path.exists():
        raise DatasetError(f"{root}: no dataset.yaml (is this a dataset directory?)")
    try:
        meta = yaml.safe_load(meta_path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise DatasetError(f"{meta_path}: not valid YAML ({exc})") from None
    units = meta.get("units", {}) or {}
    lu, tu = units.get("length", "m"), units.get("time", "s")
    if lu not in LENGTH:
        raise DatasetError(f"{meta_path}: units.length = {lu!r}: expected one of {list(LENGTH)}")
    if tu not in TIME:
        raise DatasetError(f"{meta_path}: units.time = {tu!r}: expected one of {list(TIME)}")
    tables = {}
    for name in TABLES:
        file = _table_file(root, name)
        if file is None:
            if name in REQUIRED_TABLES:
                raise DatasetError(f"{root}: missing table {name} ({name}.parquet or {name}.csv)")
            continue
        tables[name] = _convert_units(_read_table(file, name), LENGTH[lu], TIME[tu])
    gravity = float(meta.get("gravity", 9.81))
    ground_z = float(meta.get("ground_z", 0.0)) * LENGTH[lu]
    fixed = dict(meta.get("params") or {})
    truth = dict(meta.get("truth") or {})
    for what, values in (("params", fixed), ("truth", truth)):
        unknown = sorted(set(values) - set(P.NAMES))
        if unknown:
            raise DatasetError(f"{meta_path}: {what}: unknown parameter(s) {unknown}")
    return Dataset(root, meta, tables, gravity, ground_z, fixed, truth)


def _groups(table, key="scenario_id"):
    """``{scenario_id: row indices}`` of a table, without a per-row loop."""
    ids = table[key].to_numpy(zero_copy_only=False).astype(str)
    order = np.argsort(ids, kind="stable")
    uniq, start = np.unique(ids[order], return_index=True)
    bounds = np.append(start, len(ids))
    return {u: order[bounds[k]:bounds[k + 1]] for k, u in enumerate(uniq)}


def scenarios(ds, integrator="exact"):
    """Engine scenarios of a dataset: ``(Model, State, sample_times, ids)``.

    Initial states come from the bodies' x0..vz0 when given, otherwise from
    the first trajectory sample of each body (velocity: the difference of its
    first two samples).  A scenario runs from its first sample to its last
    (or for ``scenarios.duration``).  Sample times are the union of its
    bodies' trajectory times.
    """
    bodies, traj = ds.tables["bodies"], ds.tables["trajectories"]
    b_np = {c: bodies[c].to_numpy(zero_copy_only=False) for c in bodies.column_names}
    t_np = {c: traj[c].to_numpy(zero_copy_only=False) for c in traj.column_names}
    bgroups, tgroups = _groups(bodies), _groups(traj)
    wgroups = _groups(ds.tables["walls"]) if "walls" in ds.tables else {}
    cgroups = _groups(ds.tables["controls"]) if "controls" in ds.tables else {}
    sgroups = _groups(ds.tables["scenarios"]) if "scenarios" in ds.tables else {}
    w_np = {c: ds.tables["walls"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["walls"].column_names} if wgroups else {}
    c_np = {c: ds.tables["controls"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["controls"].column_names} if cgroups else {}
    s_np = {c: ds.tables["scenarios"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["scenarios"].column_names} if sgroups else {}
    missing = sorted(set(tgroups) - set(bgroups))
    if missing:
        raise DatasetError(f"trajectories: scenario {missing[0]!r} has trajectories but no bodies")
    out, times, ids = [], [], []
    for sid, rows in bgroups.items():
        rows = rows[np.argsort(b_np["body_id"][rows], kind="stable")]
        body_ids = b_np["body_id"][rows]
        if np.unique(body_ids).size != body_ids.size:
            raise DatasetError(f"bodies: scenario {sid!r}: duplicate body_id")
        if sid not in tgroups:
            raise DatasetError(f"bodies: scenario {sid!r} has no trajectories")
        trows = tgroups[sid]
        trows = trows[np.lexsort((t_np["t"][trows], t_np["body_id"][trows]))]
        tb, tt = t_np["body_id"][trows], t_np["t"][trows]
        index = {int(b): k for k, b in enumerate(body_ids)}
        extra = set(np.unique(tb).tolist()) - set(index)
        if extra:
            raise DatasetError(f"trajectories: scenario {sid!r}: body {sorted(extra)[0]} is not in bodies")
        nb = len(rows)
        pos = np.zeros((nb, 3))
        vel = np.zeros((nb, 3))
        t0 = np.inf
        for k, b in enumerate(body_ids):
            sel = trows[tb == b]
            if sel.size == 0:
                raise DatasetError(f"bodies: scenario {sid!r} body {int(b)} has no trajectory")
            t0 = min(t0, t_np["t"][sel[0]])
            p = np.stack([t_np[c][sel] for c in "xyz"], axis=1)
            if all(c in b_np for c in ("x0", "y0", "z0")):
                pos[k] = [b_np[c][rows[k]] for c in ("x0", "y0", "z0")]
            else:
                pos[k] = p[0]
            if all(c in b_np for c in ("vx0", "vy0", "vz0")):
                vel[k] = [b_np[c][rows[k]] for c in ("vx0", "vy0", "vz0")]
            elif sel.size > 1:
                vel[k] = (p[1] - p[0]) / (t_np["t"][sel[1]] - t_np["t"][sel[0]])
        ts = np.unique(tt)
        t_end = ts[-1]
        dt = DEFAULT_DT
        if sid in sgroups:
            r = sgroups[sid][0]
            t_end = t0 + s_np["duration"][r]
            if "dt" in s_np:
                dt = s_np["dt"][r]
        walls = np.zeros((0, 4))
        wrows = np.concatenate([wgroups.get("*", np.zeros(0, int)), wgroups.get(sid, np.zeros(0, int))])
        if wrows.size:
            wrows = wrows[np.argsort(w_np["wall_id"][wrows], kind="stable")]
            walls = np.stack([w_np[c][wrows] for c in ("nx", "ny", "nz", "d")], axis=1)
        controls = np.zeros((0, 6))
        if sid in cgroups:
            crow = cgroups[sid]
            cb = np.array([index.get(int(b), -1) for b in c_np["body_id"][crow]], float)
            if (cb < 0).any():
                raise DatasetError(f"controls: scenario {sid!r}: body {int(c_np['body_id'][crow][cb < 0][0])} "
                                   "is not in bodies")
            controls = np.stack([cb] + [c_np[c][crow] for c in ("t0", "t1", "fx", "fy", "fz")], axis=1)
        shapes = tuple(str(x) for x in b_np["shape"][rows])
        out.append(Scenario(radius=b_np["radius"][rows], mass=b_np["mass"][rows], pos=pos, vel=vel,
                            t_end=float(t_end), dt=float(dt), t0=float(t0), walls=walls,
                            controls=controls, shape=shapes, name=sid))
        times.append(ts[(ts >= t0) & (ts <= t_end)])
        ids.append((sid, body_ids))
    model, state = build(out, params=P.vector(ds.fixed_params), gravity=ds.gravity,
                         ground_z=ds.ground_z, integrator=integrator)
    return model, state, times, ids


def write_table(table_dict, path):
    """Write ``{column: array}`` as Parquet (``.parquet``) or CSV (``.csv``)."""
    path = Path(path)
    table = pa.table({k: pa.array(v) for k, v in table_dict.items()})
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        pacsv.write_csv(table, path)

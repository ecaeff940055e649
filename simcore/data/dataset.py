"""Reading and writing datasets in the contactfit contract (``datasets/README.md``).

A dataset is a directory: ``dataset.yaml`` plus tables ``NAME.parquet`` or
``NAME.csv`` (same columns): ``bodies``, ``trajectories`` and the optional
``walls``, ``controls``, ``events``, ``scenarios``.  Lengths and times are
converted to SI on read (``units.length`` m, cm or mm; ``units.time`` s or
ms); every table is read with pyarrow, projecting only the contract's
columns, and turned into engine arrays without per-row Python loops.

:func:`read` raises on the first unusable dataset with the grouped report of
every problem; :func:`validate` checks the whole contract and never raises;
:func:`validate_stream` makes the same checks with the trajectories read in
batches, in memory bounded whatever their length (``contactfit validate``);
:func:`shards` and :func:`split` partition scenarios deterministically.
"""

import difflib
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml

from .. import params as P
from ..geometry.collision import SHAPE_NAMES
from ..geometry.rigid import quat_matrix
from ..kernel import buffers
from ..kernel.config import jit
from ..laws import registry as contact_laws
from ..laws.penalty import CONES
from ..model import MAX_BODIES, TOUCH_TOL, Scenario, build
from . import targets

LENGTH = {"m": 1.0, "cm": 1e-2, "mm": 1e-3}
TIME = {"s": 1.0, "ms": 1e-3}

# Contract columns: name -> (kind, required); kinds "str", "int", "float",
# "bool" (Parquet booleans, or 0/1).  ``radius`` is required for spheres,
# ``hx, hy, hz`` for boxes (checked per row).
TABLES = {
    "bodies": {"scenario_id": ("str", True), "body_id": ("int", True), "shape": ("str", True),
               "radius": ("float", False), "mass": ("float", True), "material": ("str", False),
               "x0": ("float", False), "y0": ("float", False), "z0": ("float", False),
               "vx0": ("float", False), "vy0": ("float", False), "vz0": ("float", False),
               "wx0": ("float", False), "wy0": ("float", False), "wz0": ("float", False),
               "hx": ("float", False), "hy": ("float", False), "hz": ("float", False),
               "ixx": ("float", False), "iyy": ("float", False), "izz": ("float", False),
               "fixed": ("bool", False), "qw0": ("float", False), "qx0": ("float", False),
               "qy0": ("float", False), "qz0": ("float", False), "com_x": ("float", False),
               "com_y": ("float", False), "com_z": ("float", False)},
    "trajectories": {"scenario_id": ("str", True), "body_id": ("int", True), "t": ("float", True),
                     "x": ("float", True), "y": ("float", True), "z": ("float", True),
                     "vx": ("float", False), "vy": ("float", False), "vz": ("float", False),
                     "wx": ("float", False), "wy": ("float", False), "wz": ("float", False),
                     "qw": ("float", False), "qx": ("float", False), "qy": ("float", False),
                     "qz": ("float", False)},
    "walls": {"scenario_id": ("str", True), "wall_id": ("int", True), "nx": ("float", True),
              "ny": ("float", True), "nz": ("float", True), "d": ("float", True),
              "material": ("str", False), "height": ("float", False)},
    "controls": {"scenario_id": ("str", True), "body_id": ("int", True), "t0": ("float", True),
                 "t1": ("float", True), "fx": ("float", True), "fy": ("float", True),
                 "fz": ("float", True), "tx": ("float", False), "ty": ("float", False),
                 "tz": ("float", False)},
    "events": {"scenario_id": ("str", True), "t": ("float", True), "body_id": ("int", True),
               "other": ("str", True), "dvx": ("float", True), "dvy": ("float", True),
               "dvz": ("float", True)},
    "scenarios": {"scenario_id": ("str", True), "duration": ("float", True),
                  "dt": ("float", False), "split": ("str", False)},
}
REQUIRED_TABLES = ("bodies", "trajectories")
#: Columns whose cells may be empty, per table: what one shape has and
#: another has not (a box's radius, a sphere's half extents), and the
#: optional per-body values (empty: the default).  Empty numbers read as
#: NaN, an empty ``fixed`` as false.
NULLABLE = {"bodies": {"radius", "hx", "hy", "hz", "ixx", "iyy", "izz", "fixed", "qw0", "qx0",
                       "qy0", "qz0", "com_x", "com_y", "com_z"}}
#: The shape-specific columns of ``bodies`` (a box's half extents).
BOX_COLS = ("hx", "hy", "hz")
#: A box's centre of mass in its body frame, from its centre (empty: the
#: centre); ``x0..vz0`` and the trajectories stay the centre's.
COM_COLS = ("com_x", "com_y", "com_z")
# Which columns are lengths, times, speeds or forces (for unit conversion).
_LENGTH_COLS = {"radius", "x0", "y0", "z0", "x", "y", "z", "d", "height", "hx", "hy", "hz",
                "com_x", "com_y", "com_z"}
#: Moments of inertia [kg length^2].
_INERTIA_COLS = {"ixx", "iyy", "izz"}
_SPEED_COLS = {"vx0", "vy0", "vz0", "vx", "vy", "vz", "dvx", "dvy", "dvz"}
#: Angular velocities [rad per time unit].
_RATE_COLS = {"wx0", "wy0", "wz0", "wx", "wy", "wz"}
_TIME_COLS = {"t", "t0", "t1", "duration", "dt"}
DEFAULT_DT = 1e-3


@dataclass(frozen=True)
class Violation:
    """One breach of the contract: where (file, table, column, row, scenario) and what."""

    kind: str
    where: str
    message: str
    scenario: str = ""
    #: Sort key of a violation at a table row: (table, column, row) in
    #: contract order; () for the others.
    at: tuple = ()


#: The kinds of violation in the order a report lists them (the order the
#: rules run in); any other kind follows.
KINDS = ("missing file", "unreadable or truncated file", "unknown units", "unknown parameter",
         "missing column", "empty table", "missing value", "wrong type", "NaN or inf",
         "non-positive mass or radius", "unknown shape", "duplicate body",
         "duplicate or decreasing t", "body without trajectory", "trajectory without body",
         "control without body", "control window reversed", "zero wall normal",
         "non-positive duration or dt", "unknown split", "centre of mass outside the body",
         "non-unit quaternion", "below the ground at the first sample",
         "spheres overlapping at the first sample")


class Report:
    """Violations of a dataset, grouped by kind for one readable report: per
    kind the number of cases and the first few of them.

    The report is the same whichever order its rows were checked in (a
    whole table or batches of it): kinds are listed in :data:`KINDS`
    order, and the cases shown of a kind are its first by table, column
    and row.
    """

    SHOW = 3  # examples shown per kind

    def __init__(self):
        self.items = []
        self.counts = {}

    def add(self, kind, where, message, scenario="", once=False):
        """One violation not at a row (a file, table or column); with
        ``once``, not again at a place already reported for that kind (a
        column found wrong in every batch of a file)."""
        if once and any(v.kind == kind and v.where == str(where) for v in self.items):
            return
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.items.append(Violation(kind, str(where), message, str(scenario)))

    def add_rows(self, kind, path, table, column, rows, message, scenario_ids=None, total=None):
        """Violations at table rows ``rows`` (indices; ``total`` of them when
        only the first few are given); the first few are kept."""
        rows = np.asarray(rows).reshape(-1)
        self.counts[kind] = self.counts.get(kind, 0) + (rows.size if total is None else total)
        spec = list(TABLES.get(table, {}))
        at = (list(TABLES).index(table) if table in TABLES else len(TABLES),
              spec.index(column) if column in spec else len(spec))
        for r in rows[: self.SHOW]:
            sid = "" if scenario_ids is None else scenario_ids[int(r)]
            where = f"{path}: table {table}, column {column}, row {int(r)}"
            self.items.append(Violation(kind, where, message, str(sid), at + (int(r),)))

    def __bool__(self):
        return bool(self.counts)

    def __len__(self):
        return sum(self.counts.values())

    def text(self):
        """The grouped report."""
        kinds = sorted(self.counts, key=lambda k: KINDS.index(k) if k in KINDS else len(KINDS))
        lines = [f"{len(self)} problem(s) of {len(self.counts)} kind(s):"]
        for kind in kinds:
            count = self.counts[kind]
            shown = sorted((v for v in self.items if v.kind == kind), key=lambda v: v.at)
            shown = shown[: self.SHOW]
            lines.append(f"- {kind}: {count}")
            for v in shown:
                scen = f" [scenario {v.scenario}]" if v.scenario else ""
                lines.append(f"    {v.where}{scen}: {v.message}")
            if count > len(shown):
                lines.append(f"    ... and {count - len(shown)} more")
        return "\n".join(lines)


class DatasetError(ValueError):
    """A dataset that breaks the contract; the message says where and what."""

    def __init__(self, message, report=None):
        super().__init__(message)
        self.report = report


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
    #: The contact law of each kind, ``{kind: name}`` (``dataset.yaml``
    #: ``laws``, :func:`simcore.laws.registry.resolve`).
    laws: dict = field(default_factory=contact_laws.resolve)
    #: Whether the spheres spin (``dataset.yaml`` ``model: {spin: true}``,
    #: :mod:`simcore.spin.spin`).
    spin: bool = False
    #: Sorted scenario ids of all tables (``"*"`` included when walls use it),
    #: and per table the code of each row's scenario_id into that list: ids
    #: never become per-row Python strings.
    names: np.ndarray = None
    codes: dict = field(default_factory=dict)
    #: Caches of :func:`body_series`, :func:`fitted_initial_states` and
    #: ``_groups`` (per table).
    series: tuple = None
    initial: dict = None
    groups: dict = field(default_factory=dict)
    #: The trajectories' row checks (:class:`_Scan`), made as they are read
    #: (by :func:`validate_stream` without keeping the table).
    scan: object = None

    @property
    def name(self):
        return self.meta.get("name", self.path.name)

    def scenario_ids(self):
        return sorted(str(self.names[c]) for c in np.unique(self.codes["bodies"]))

    @property
    def materials(self):
        """The material names of the bodies and walls, sorted (no material: none)."""
        found = set()
        for table in ("bodies", "walls"):
            if table in self.tables and "material" in self.tables[table].column_names:
                col = pc.unique(self.tables[table]["material"].cast(pa.string()))
                found.update(m for m in col.to_pylist() if m)
        return tuple(sorted(found))

    def layout(self, coefficients=()):
        """The coefficient layout of this dataset's materials with the
        per-material entries its ``params`` and ``truth`` name, and
        ``coefficients``."""
        return P.Layout.build(self.materials, [*self.fixed_params, *self.truth, *coefficients],
                              self.laws, self.spin)

    def ids_of(self, table):
        """Row -> scenario id lookup for ``table`` (for messages and outputs)."""
        return _Names(self.codes[table], self.names)


class _Names:
    """``ids[row]`` is the scenario id of a row, looked up only when asked."""

    def __init__(self, codes, names):
        self.codes, self.names = codes, names

    def __getitem__(self, row):
        return str(self.names[self.codes[int(row)]])


class _RowIds:
    """Row -> scenario id straight from an Arrow column (before encoding),
    for a column that holds the table's rows from ``row0`` on."""

    def __init__(self, col, row0=0):
        self.col, self.row0 = col, row0

    def __getitem__(self, row):
        return str(self.col[int(row) - self.row0].as_py())


def _encode_ids(tables, more=()):
    """Dictionary-encode every table's scenario_id over one sorted name list
    (which also holds the ids ``more``)."""
    enc = {}
    uniq = set(more)
    for name, tab in tables.items():
        if "scenario_id" not in tab.column_names:
            continue
        ca = pc.dictionary_encode(tab["scenario_id"]).unify_dictionaries()
        values = ca.chunk(0).dictionary.to_pylist() if ca.num_chunks else []
        idx = (np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in ca.chunks])
               if ca.num_chunks else np.zeros(0, np.int64))
        enc[name] = (idx, values)
        uniq.update(values)
    names = np.array(sorted(uniq), dtype=object)
    where = {n: k for k, n in enumerate(names)}
    # One int64 lookup per row, straight from the int32 dictionary indices.
    codes = {name: (np.array([where[v] for v in values], np.int64)[idx] if values
                    else idx.astype(np.int64))
             for name, (idx, values) in enc.items()}
    return names, codes


@jit
def _remap(code, lut):
    """``code[i] = lut[code[i]]``, in place."""
    for i in range(code.shape[0]):
        code[i] = lut[code[i]]


def _table_file(root, name):
    for ext in ("parquet", "csv"):
        path = root / f"{name}.{ext}"
        if path.exists():
            return path
    return None


def _check_one_format(root, report):
    """Each table in one file: ``T.parquet`` and ``T.csv`` side by side is
    ambiguous (which one holds the data?)."""
    for name in TABLES:
        if (root / f"{name}.parquet").exists() and (root / f"{name}.csv").exists():
            report.add("ambiguous table", root, f"{name}.parquet and {name}.csv both exist; "
                                                "keep one")


def _read_table(path, name, report):
    """Read one table with the contract's columns; problems go to ``report``.

    Returns the table (columns cast to the contract's types) or None when it
    cannot be used at all.
    """
    spec = TABLES[name]
    try:
        if path.suffix == ".parquet":
            present = set(pq.read_schema(path).names)
            # scenario_id stays dictionary-encoded (as Parquet stores it): one
            # string per scenario, never one per row.
            table = pq.read_table(path, columns=[c for c in spec if c in present],
                                  read_dictionary=["scenario_id"] if "scenario_id" in present
                                  else None)
        else:
            table = pacsv.read_csv(path, convert_options=_csv_options(name))
            table = table.select([c for c in spec if c in table.column_names])
    except (pa.ArrowInvalid, OSError) as exc:
        report.add("unreadable or truncated file", path, f"table {name}: {exc}")
        return None
    missing = _missing_columns(table.column_names, path, name, report)
    if table.num_rows == 0:
        report.add("empty table", f"{path}: table {name}", "no rows")
        return None
    table = _check_columns(table, name, path, report)
    return None if missing else table


def _csv_options(name):
    """CSV conversion: the contract's string columns stay strings."""
    return pacsv.ConvertOptions(
        column_types={c: pa.string() for c, (k, _) in TABLES[name].items() if k == "str"},
        true_values=["true", "True", "TRUE"], false_values=["false", "False", "FALSE"])


def _missing_columns(present, path, name, report):
    """Report the contract's required columns absent from ``present``; True if any."""
    missing = [c for c, (_, req) in TABLES[name].items() if req and c not in present]
    for c in missing:
        report.add("missing column", f"{path}: table {name}", f"column {c} is required")
    return bool(missing)


def _check_columns(table, name, path, report, row0=0):
    """Cast a table's columns to the contract's types, reporting empty
    cells, wrong types and non-finite numbers (rows counted from ``row0``:
    the table may be one batch of a file).  Returns the cast table, or None
    when a column is unusable."""
    spec = TABLES[name]
    sids = _RowIds(table["scenario_id"], row0) if "scenario_id" in table.column_names else None
    cols = {}
    names = table.column_names
    for c in names:
        kind = spec[c][0]
        # Taken out of the table: once converted, its read chunks are freed
        # (the table does not hold every column twice at once).
        col = table[c]
        table = table.drop_columns([c])
        if col.null_count and c in NULLABLE.get(name, ()):
            col = pc.fill_null(col.cast(pa.bool_() if kind == "bool" else pa.float64())
                               if pa.types.is_null(col.type) else col,
                               False if kind == "bool" else np.nan)
        if col.null_count:
            rows = np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))
            report.add_rows("missing value", path, name, c, rows + row0, "empty cell", sids)
            continue
        try:
            if kind == "bool":
                if not pa.types.is_boolean(col.type):
                    vals = col.to_numpy(zero_copy_only=False)
                    bad = np.flatnonzero(~np.isin(vals, (0, 1)))
                    if bad.size:
                        report.add_rows("wrong type", path, name, c, bad + row0,
                                        "expected true or false (or 1 or 0)", sids)
                        continue
                col = col.cast(pa.bool_())
            elif kind == "str":
                if pa.types.is_dictionary(col.type):
                    col = col.cast(pa.dictionary(pa.int32(), pa.string()))
                else:
                    col = col.cast(pa.string())
            elif kind == "int":
                if pa.types.is_floating(col.type):
                    vals = col.to_numpy(zero_copy_only=False)
                    bad = np.flatnonzero(~np.isfinite(vals) | (vals != np.round(vals)))
                    if bad.size:
                        report.add_rows("wrong type", path, name, c, bad + row0,
                                        "expected an integer", sids)
                        continue
                col = col.cast(pa.int64())
            else:
                col = col.cast(pa.float64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            report.add("wrong type", f"{path}: table {name}, column {c}",
                       f"expected {kind} values, got {col.type} ({exc})", once=True)
            continue
        if kind != "str" and col.num_chunks > 1:
            # One contiguous buffer, so every later ``to_numpy`` is zero-copy
            # (a chunked column is copied again at each conversion).
            col = pa.chunked_array([col.combine_chunks()])
        if kind == "float":
            vals = col.chunk(0).to_numpy()
            if c in NULLABLE.get(name, ()):  # empty (NaN) is allowed, checked per shape
                if np.isinf(vals).any():
                    report.add_rows("NaN or inf", path, name, c, np.flatnonzero(np.isinf(vals))
                                    + row0, "not a finite number", sids)
            elif _count_nonfinite(vals):
                report.add_rows("NaN or inf", path, name, c,
                                np.flatnonzero(~np.isfinite(vals)) + row0, "not a finite number",
                                sids)
        cols[c] = col
    if len(cols) < len(names):
        return None
    return pa.table(cols)


@jit
def _count_nonfinite(x):
    """How many values of ``x`` are NaN or infinite (one pass, no temporaries;
    serial: a batch is memory-bound, and a parallel kernel here would start
    numba's thread pool inside the read)."""
    n = 0
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            n += 1
    return n


@jit
def _sorted_series(code, body, t, low, span, counts):
    """If the rows are sorted by (scenario code, body) and then by strictly
    increasing ``t`` (a file written body by body), the samples of each
    series into ``counts`` and their number; else (or if there are more
    series than ``counts`` holds) -1.  One pass, no key array
    (the key of a row is ``code * span + body - low``)."""
    n = 0
    prev = -1
    for i in range(code.shape[0]):
        k = code[i] * span + body[i] - low
        if k == prev and t[i] > t[i - 1]:
            counts[n - 1] += 1
        elif k > prev and n < counts.shape[0]:
            counts[n] = 1
            n += 1
            prev = k
        else:
            return -1
    return n


def _convert_units(table, length, time):
    cols = {}
    for c in table.column_names:
        col = table[c]
        factor = 1.0
        if c in _LENGTH_COLS:
            factor = length
        elif c in _SPEED_COLS:
            factor = length / time
        elif c in _TIME_COLS:
            factor = time
        elif c in _RATE_COLS:
            factor = 1.0 / time
        elif c in _INERTIA_COLS:
            factor = length * length
        elif c in ("fx", "fy", "fz"):
            factor = length / time**2  # force unit: kg * length / time^2
        elif c in ("tx", "ty", "tz"):
            factor = length * length / time**2  # torque unit: kg * length^2 / time^2
        cols[c] = col if factor == 1.0 else pc.multiply(col, factor)
    return pa.table(cols)


def read(path):
    """Read and validate a dataset directory; raises :class:`DatasetError` with
    the grouped report of every problem found (``exc.report``)."""
    ds, report, _ = validate(path, summary=False)
    if report:
        raise DatasetError(f"{path}: invalid dataset\n{report.text()}", report)
    return ds


def _units(meta):
    """``(metres per length unit, seconds per time unit)`` of a dataset's
    ``units``, or None when either is unknown."""
    units = meta.get("units")
    if not isinstance(units, dict):
        return None
    lu, tu = units.get("length"), units.get("time")
    return (LENGTH[lu], TIME[tu]) if lu in LENGTH and tu in TIME else None


#: The largest YAML file read (``dataset.yaml``, configs) [bytes]: they hold
#: metadata and settings, not data.
META_MAX_BYTES = 1 << 20


def safe_yaml(path):
    """A YAML file (``dataset.yaml``, a config) as Python data: at most
    :data:`META_MAX_BYTES`, no YAML aliases (an alias bomb expands a kilobyte
    into gigabytes), safe types only.  Raises ``ValueError`` saying what is
    wrong (``OSError`` when it cannot be read)."""
    size = path.stat().st_size
    if size > META_MAX_BYTES:
        raise ValueError(f"{size} bytes; expected at most {META_MAX_BYTES} bytes of "
                         "metadata")
    text = path.read_text()
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise ValueError(f"YAML alias *{event.anchor} at line "
                                 f"{event.start_mark.line + 1}: aliases are not allowed "
                                 "(write the value out)")
        return yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        # One line: the problem and where (PyYAML's own text spans several).
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"not valid YAML: {what}{where}") from None


#: The keys of ``dataset.yaml`` (datasets/README.md); any other is an error
#: with the nearest known key as a suggestion.
META_KEYS = ("name", "description", "source", "license", "citation", "units", "gravity",
             "ground_z", "truth", "params", "laws", "model", "noise", "generator",
             "allow_implausible")
#: The keys of ``dataset.yaml`` ``model``: ``spin`` (true or false) and
#: ``cone`` (the time-stepper's friction cone, :data:`simcore.laws.penalty.CONES`).
MODEL_KEYS = ("spin", "cone")


def _check_meta(meta, meta_path, report):
    """Check ``dataset.yaml``'s keys, types and units into ``report``; False
    when it is not a mapping (nothing else can be read from it)."""
    if not isinstance(meta, dict):
        report.add("wrong type", meta_path, f"expected a mapping of keys to values, got a "
                                            f"{type(meta).__name__}")
        return False
    for key in meta:
        if key not in META_KEYS:
            near = difflib.get_close_matches(str(key), META_KEYS, n=1)
            hint = f"; did you mean {near[0]}?" if near else f"; expected some of {list(META_KEYS)}"
            report.add("unknown key", meta_path, f"{key}{hint}")
    units = meta.get("units")
    if not isinstance(units, dict):
        report.add("missing units" if units is None else "wrong type", meta_path,
                   f"units = {units!r}: expected a mapping such as {{length: m, time: s}} (the "
                   "unit of every length and time column)")
    else:
        for key in units:
            if key not in ("length", "time"):
                near = difflib.get_close_matches(str(key), ("length", "time"), n=1)
                report.add("unknown key", meta_path, f"units.{key}" + (
                    f"; did you mean units.{near[0]}?" if near else "; expected length, time"))
        for key, known in (("length", LENGTH), ("time", TIME)):
            if units.get(key) not in known:
                report.add("unknown units", meta_path,
                           f"units.{key} = {units.get(key)!r}: expected one of {list(known)}")
    for key, lo, hi in (("gravity", 0.0, 100.0), ("ground_z", -np.inf, np.inf)):
        v = meta.get(key, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
            report.add("wrong type", meta_path, f"{key} = {v!r}: expected a finite number")
        elif not lo <= v <= hi:
            report.add("implausible value", meta_path, f"{key} = {v!r}: expected {lo} to {hi}")
    for key in ("params", "truth"):
        values = meta.get(key) or {}
        if not isinstance(values, dict):
            report.add("wrong type", meta_path, f"{key}: expected a mapping of coefficient "
                                                f"names to numbers, got {values!r}")
            meta[key] = {}
            continue
        for name, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                report.add("wrong type", meta_path, f"{key}: {name} = {v!r}: expected a number")
    model = meta.get("model", {})
    if not isinstance(model, dict):
        report.add("wrong type", meta_path, f"model = {model!r}: expected a mapping such as "
                                            "{spin: true}")
        meta["model"] = {}
    else:
        for key, v in model.items():
            if key not in MODEL_KEYS:
                near = difflib.get_close_matches(str(key), MODEL_KEYS, n=1)
                report.add("unknown key", meta_path, f"model.{key}" + (
                    f"; did you mean model.{near[0]}?" if near else
                    f"; expected {', '.join(MODEL_KEYS)}"))
            elif key == "cone":
                if v not in CONES:
                    report.add("wrong type", meta_path,
                               f"model.cone = {v!r}: expected one of {list(CONES)}")
            elif not isinstance(v, bool):
                report.add("wrong type", meta_path, f"model.{key} = {v!r}: expected true or false")
    if not isinstance(meta.get("allow_implausible", False), bool):
        report.add("wrong type", meta_path, f"allow_implausible = "
                                            f"{meta['allow_implausible']!r}: expected true or false")
    return True


def _read(root, report, keep=True, batch_rows=None):
    """The dataset at ``root``, or None (problems in ``report``).  The
    trajectories are read in batches of ``batch_rows`` rows, checked into
    ``ds.scan`` (:func:`_stream_trajectories`), and kept as a table when
    ``keep``; the other tables are read whole."""
    meta_path = root / "dataset.yaml"
    if not meta_path.exists():
        report.add("missing file", root, "no dataset.yaml (is this a dataset directory?)")
        return None
    try:
        meta = safe_yaml(meta_path)
    except ValueError as exc:
        report.add("unreadable or truncated file", meta_path, str(exc))
        return None
    if not _check_meta(meta, meta_path, report):
        return None
    _check_one_format(root, report)
    fixed = dict(meta.get("params") or {})
    truth = dict(meta.get("truth") or {})
    spin = (meta.get("model") or {}).get("spin") is True
    tables = {}
    scale = _units(meta)
    scan = kept = None
    for name in TABLES:
        file = _table_file(root, name)
        if file is None:
            if name in REQUIRED_TABLES:
                report.add("missing file", root, f"table {name} ({name}.parquet or {name}.csv)")
            continue
        if name == "trajectories":
            saved = dict(report.counts), list(report.items)
            try:
                scan, kept = _stream_trajectories(file, report, tables.get("bodies"), scale,
                                                  batch_rows or (KEEP_BATCH_ROWS if keep
                                                                 else BATCH_ROWS), keep)
                continue
            except _Unstreamable:
                if not keep:
                    raise
                # Not readable in batches (a truncated file, a CSV whose later
                # rows change a column's type): read whole, for its report.
                report.counts, report.items = saved
        table = _read_table(file, name, report)
        if table is not None and scale is not None:
            tables[name] = _convert_units(table, *scale)
    if "bodies" in tables and "radius" not in tables["bodies"].column_names:
        tables["bodies"] = tables["bodies"].append_column(  # boxes only
            "radius", pa.array(np.full(tables["bodies"].num_rows, np.nan)))
    boxes = "bodies" in tables and "box" in pc.unique(
        tables["bodies"]["shape"].cast(pa.string())).to_pylist()
    try:
        laws = contact_laws.resolve(meta.get("laws"), spin, boxes)
    except ValueError as exc:
        report.add("unknown contact law", meta_path, str(exc))
        laws = contact_laws.resolve()
    for what, values in (("params", fixed), ("truth", truth)):
        for name in values:
            try:
                P.check(name, laws, spin)
            except ValueError as exc:
                report.add("unknown parameter", meta_path, f"{what}: {exc}")
    if report:
        return None
    gravity = float(meta.get("gravity", 9.81))
    ground_z = float(meta.get("ground_z", 0.0)) * scale[0]
    names, codes = _encode_ids(tables, kept.names() if kept else ())
    if kept:
        # The kept codes become codes into the sorted names of all tables.
        cols = kept.columns()
        where = {n: k for k, n in enumerate(names)}
        _remap(cols["scenario_id"], np.array([where[n] for n in kept.names()], np.int64))
        codes["trajectories"] = cols["scenario_id"]
        cols["scenario_id"] = pa.DictionaryArray.from_arrays(
            pa.array(cols["scenario_id"]), pa.array(names.tolist(), pa.string()))
        tables["trajectories"] = pa.table(cols)
    elif keep:  # read whole
        scan = _Scan(tables["bodies"])
        scan.feed(codes["trajectories"], names, *(_np(tables["trajectories"][c])
                                                 for c in ("body_id", "t", "x", "y", "z")))
    # The read's buffers are free now: hand them back to the OS rather than
    # keep them in Arrow's pool.
    pa.default_memory_pool().release_unused()
    return Dataset(root, meta, tables, gravity, ground_z, fixed, truth, laws, spin, names, codes,
                   scan=scan)


def _groups(ds, table):
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
    (:func:`simcore.model.build`).
    """
    bodies = ds.tables["bodies"]
    b_np = {c: bodies[c].to_numpy(zero_copy_only=False) for c in bodies.column_names}
    bgroups = _groups(ds, "bodies")
    wgroups = _groups(ds, "walls") if "walls" in ds.tables else {}
    cgroups = _groups(ds, "controls") if "controls" in ds.tables else {}
    sgroups = _groups(ds, "scenarios") if "scenarios" in ds.tables else {}
    w_np = {c: ds.tables["walls"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["walls"].column_names} if wgroups else {}
    c_np = {c: ds.tables["controls"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["controls"].column_names} if cgroups else {}
    s_np = {c: ds.tables["scenarios"][c].to_numpy(zero_copy_only=False)
            for c in ds.tables["scenarios"].column_names} if sgroups else {}
    ser = _series_index(ds)
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
        # The union of the bodies' sample times; usually they share one clock.
        first = t_sorted[s_start[0]:s_start[0] + s_count[0]]
        if np.all(s_count == s_count[0]) and all(
                np.array_equal(first, t_sorted[a:a + s_count[0]]) for a in s_start[1:]):
            ts = first
        else:
            ts = np.unique(np.concatenate([t_sorted[a:a + n] for a, n in zip(s_start, s_count)]))
        t_end = ts[-1]
        dt = None if rigid else DEFAULT_DT  # the time-stepper takes its stable step
        if sid in sgroups:
            r = sgroups[sid][0]
            t_end = t0 + s_np["duration"][r]
            if "dt" in s_np:
                dt = s_np["dt"][r]
        walls = np.zeros((0, 4))
        wall_mat = wall_height = None
        omega = (np.stack([b_np[c][rows] for c in ("wx0", "wy0", "wz0")], axis=1) if has_w0
                 else None)
        wrows = np.concatenate([wgroups.get("*", np.zeros(0, int)), wgroups.get(sid, np.zeros(0, int))])
        if wrows.size:
            wrows = wrows[np.argsort(w_np["wall_id"][wrows], kind="stable")]
            walls = np.stack([w_np[c][wrows] for c in ("nx", "ny", "nz", "d")], axis=1)
            if "material" in w_np:
                wall_mat = list(w_np["material"][wrows])
            if "height" in w_np:
                wall_height = w_np["height"][wrows]
        controls = np.zeros((0, 6))
        if sid in cgroups:
            crow = cgroups[sid]
            cb = np.array([index.get(int(b), -1) for b in c_np["body_id"][crow]], float)
            if (cb < 0).any():
                raise DatasetError(f"controls: scenario {sid!r}: body {int(c_np['body_id'][crow][cb < 0][0])} "
                                   "is not in bodies")
            cols = ("t0", "t1", "fx", "fy", "fz") + (
                ("tx", "ty", "tz") if all(c in c_np for c in ("tx", "ty", "tz")) else ())
            controls = np.stack([cb] + [c_np[c][crow] for c in cols], axis=1)
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
    model, state = build(out, params=layout.vector(ds.fixed_params), gravity=ds.gravity,
                         ground_z=ds.ground_z, integrator=integrator, materials=layout.materials,
                         coefficients=layout.per_material, laws=layout.laws, spin=ds.spin,
                         cone=(ds.meta.get("model") or {}).get("cone", "elliptic"),
                         strict=strict)
    return model, state, times, ids


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


def _series_index(ds):
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
def _scatter_series(ser_start, ser_count, ser_row0, ser_row1, ser_slot, t, x, y, z, samp_t,
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


def write_table(table_dict, path):
    """Write ``{column: array}`` as Parquet (``.parquet``) or CSV (``.csv``)."""
    path = Path(path)
    table = pa.table({k: pa.array(v) for k, v in table_dict.items()})
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        pacsv.write_csv(table, path)


def _keys(code_a, body_a, code_b=None, body_b=None):
    """Integer keys of (scenario, body_id) pairs, consistent across two tables
    (one int64 array per table, each written in one pass: no temporaries)."""
    bodies = [x for x in (body_a, body_b) if x is not None and x.size]
    low = min(int(x.min()) for x in bodies) if bodies else 0
    span = max(int(x.max()) for x in bodies) - low + 1 if bodies else 1

    def key(code, body):
        k = np.empty(code.shape[0], np.int64)
        _key_pass(np.asarray(code, np.int64), np.asarray(body, np.int64), span, low, k)
        return k

    return key(code_a, body_a), (key(code_b, body_b) if code_b is not None
                                 else np.zeros(0, np.int64))


@jit
def _key_pass(code, body, span, low, out):
    for i in range(code.shape[0]):
        out[i] = code[i] * span + body[i] - low


def _col(ds, table, c):
    return ds.tables[table][c].to_numpy(zero_copy_only=False)


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


#: Rows per batch of :func:`validate_stream`.
BATCH_ROWS = 1 << 18
#: Rows per batch when the whole table is kept (:func:`validate`, :func:`read`):
#: a Parquet row group's worth, so that a 60M-row file is 60 batches, not
#: 230, each of which takes the GIL back from whatever runs beside the read
#: (up to the 5 ms switch interval per take).
KEEP_BATCH_ROWS = 1 << 20


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


class _Unstreamable(Exception):
    """The trajectories cannot be read in batches."""


#: The streamed reads hand Arrow's free pages back to the OS every this
#: many batches (:func:`_batches`).
RELEASE_EVERY = 16


def _batches(path, batch_rows, columns=tuple(TABLES["trajectories"]), release=True):
    """The trajectories file in batches of about ``batch_rows`` rows, as
    read: ``(table, first row)`` with the columns ``columns`` that are
    present.  Raises :class:`_Unstreamable` when the file cannot be read so.

    With ``release``, Arrow's free pages go back to the OS every
    :data:`RELEASE_EVERY` batches, so that a streamed read's peak stays a
    few batches whatever the file's length.  Not after every batch: the
    next batch would fault every page in again (iterating the 60M-row
    benchmark file in 2^18-row batches took 1.8 s so, 0.8 s with none and
    0.8 s every 16 batches, at 184, 228 and 216 MB peak)."""
    try:
        if path.suffix == ".parquet":
            # No pre-buffering: it would keep every row group read so far.
            f = pq.ParquetFile(path, read_dictionary=["scenario_id"], pre_buffer=False)
            present = set(f.schema_arrow.names)
            reader = f.iter_batches(batch_size=batch_rows,
                                    columns=[c for c in columns if c in present])
            schema = f.schema_arrow
        else:
            reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(
                block_size=max(64 * batch_rows, 1024)), convert_options=_csv_options("trajectories"))
            schema = reader.schema
        keep = [c for c in columns if c in schema.names]
        row0 = 0
        for k, batch in enumerate(reader, 1):
            table = pa.Table.from_batches([batch]).select(keep)
            yield table, row0
            row0 += table.num_rows
            del table, batch
            if release and k % RELEASE_EVERY == 0:
                pa.default_memory_pool().release_unused()
        if row0 == 0:  # an empty file still has its columns checked
            yield schema.empty_table().select(keep), 0
    except (pa.ArrowInvalid, OSError) as exc:
        raise _Unstreamable(str(exc)) from exc


def _stream_trajectories(path, report, bodies, scale, batch_rows, keep=False):
    """The column checks of the trajectories batch by batch, each checked
    batch (in SI) fed to a :class:`_Scan` of ``bodies`` (None when the
    bodies or the units are unusable: then only the columns are checked).

    With ``keep``, the batches are also kept, written straight into one
    array per column (allocated once for Parquet, whose row count is known:
    each value is written once, no chunks to combine): returns ``(scan,
    kept)``, ``kept`` a :class:`_Kept` (None when a batch was unusable)."""
    scan = _Scan(bodies) if bodies is not None and scale is not None else None
    kept = _Kept(path) if keep else None
    rows = 0
    # A kept read holds every row anyway: its batches' pages are reused, not
    # handed back.
    for table, row0 in _batches(path, batch_rows, release=not keep):
        if row0 == 0 and _missing_columns(table.column_names, path, "trajectories", report):
            scan = kept = None
        rows += table.num_rows
        table = _check_columns(table, "trajectories", path, report, row0)
        if table is None:
            kept = None
        if scan is not None and table is not None:
            table = _convert_units(table, *scale)
            arrays = _arrays(table, row0)
            scan.feed(*arrays)
            if kept is not None:
                kept.add(table, *arrays[:2])
    if rows == 0:
        report.add("empty table", f"{path}: table trajectories", "no rows")
    return scan, (kept if scan is not None else None)


class _Kept:
    """The trajectories' columns gathered batch by batch (:func:`_stream_trajectories`):
    numeric columns in SI, scenario ids as codes into ``names`` (in the
    order first seen)."""

    def __init__(self, path):
        try:
            self.total = (pq.ParquetFile(path).metadata.num_rows if path.suffix == ".parquet"
                          else None)
        except (pa.ArrowInvalid, OSError) as exc:
            raise _Unstreamable(str(exc)) from exc
        self.cols, self.parts, self.where = {}, {}, {}
        self.rows = 0

    def add(self, table, code, names):
        """Keep a checked batch in SI (``table``), its scenario ids coded
        by ``code`` into ``names`` (:func:`_arrays`)."""
        local = np.array([self.where.setdefault(str(v), len(self.where)) for v in names],
                         np.int64)
        cols = {"scenario_id": local[code]}
        cols.update((c, _np(table[c])) for c in table.column_names if c != "scenario_id")
        n = code.size
        for c, v in cols.items():
            if self.total is None:
                self.parts.setdefault(c, []).append(np.array(v))
            else:
                if c not in self.cols:
                    self.cols[c] = buffers.empty(self.total, v.dtype)
                self.cols[c][self.rows:self.rows + n] = v
        self.rows += n

    def columns(self):
        """``{column: array}`` of every row kept, in the contract's order."""
        cols = ({c: np.concatenate(v) for c, v in self.parts.items()} if self.total is None
                else self.cols)
        return {c: cols[c] for c in TABLES["trajectories"] if c in cols}

    def names(self):
        """The scenario ids in code order."""
        return list(self.where)


def _series_batches(path, batch_rows, scale):
    """The trajectories' scenario, body and samples, batch by batch in SI
    (:func:`_arrays`), for a file that has passed the checks."""
    cols = ("scenario_id", "body_id", "t", "x", "y", "z")
    for table, row0 in _batches(path, batch_rows, cols):
        table = _check_columns(table, "trajectories", path, Report(), row0)
        yield _arrays(_convert_units(table, *scale), row0)


def _arrays(table, row0):
    """A trajectories batch as ``(code, names, body, t, x, y, z, row0)``:
    ``code`` indexes each row's scenario id in ``names``."""
    col = table["scenario_id"]
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    col = col.unify_dictionaries().combine_chunks() if col.num_chunks else None
    code = (col.indices.to_numpy(zero_copy_only=False).astype(np.int64) if col is not None
            else np.zeros(0, np.int64))
    names = col.dictionary.to_pylist() if col is not None else []
    return (code, names, *(_np(table[c]) for c in ("body_id", "t", "x", "y", "z")), row0)


def _np(col):
    return col.to_numpy(zero_copy_only=False) if col.num_chunks != 1 else col.chunk(0).to_numpy(
        zero_copy_only=False)


#: The first samples kept per body for the initial-state fit
#: (:func:`simcore.data.targets.end_states`' window).
HEAD = 8


class _Scan:
    """The trajectories' row checks, fed batch by batch in file order.

    Its state is a few numbers per bodies row (bounded whatever the
    table's length): samples seen, first row, last t, the first
    :data:`HEAD` samples; the rows where t does not increase and the rows
    of no body (the first few, with their scenario, and counts); whether
    the rows come grouped by scenario.  Bodies are keyed by (scenario,
    body_id) through a lookup table over the key range when it is small,
    else a sorted key list.
    """

    def __init__(self, bodies):
        names, codes = _encode_ids({"bodies": bodies})
        self.names = {str(n): k for k, n in enumerate(names)}
        self.bcode = codes["bodies"]
        body = bodies["body_id"].to_numpy()
        nb = body.size
        self.low = int(body.min())
        self.span = int(body.max()) - self.low + 1
        self.key = self.bcode * self.span + (body - self.low)
        uniq, first = np.unique(self.key, return_index=True)
        # The first bodies row of each key, for every bodies row.
        self.first_of_row = first[np.searchsorted(uniq, self.key)]
        if len(names) * self.span <= 4 * nb + 1024:
            self.lut = np.full(len(names) * self.span, -1, np.int64)
            self.lut[uniq] = first
            self.skeys = self.srows = np.zeros(0, np.int64)
        else:
            self.lut = np.zeros(0, np.int64)
            self.skeys, self.srows = uniq, first
        self.count = np.zeros(nb, np.int64)
        self.first_row = np.full(nb, -1, np.int64)
        self.last_t = np.zeros(nb)
        self.head_t = np.zeros((nb, HEAD))
        self.head_p = np.zeros((nb, HEAD, 3))
        self.closed = np.zeros(len(names), np.bool_)
        self.state = np.array([-1, 1], np.int64)  # last scenario code; rows grouped
        self.found = {"t": [[], {}, 0], "orphan": [[], {}, 0]}

    @property
    def grouped(self):
        """Every scenario's rows come in one run (so far)."""
        return bool(self.state[1])

    def _codes(self, names):
        return np.array([self.names.get(str(n), -1) for n in names], np.int64)

    def feed(self, code, names, body, t, x, y, z, row0=0):
        """Take the next rows (``row0`` the first's row in the file):
        ``code`` indexes their scenario ids in ``names``."""
        m = self._codes(names)
        found = np.zeros((2, Report.SHOW), np.int64)
        nfound = np.zeros(2, np.int64)
        _scan_rows(_Rows(code, np.ascontiguousarray(body, np.int64), t, x, y, z), m,
                   _BodyIndex(self.low, self.span, self.lut, self.skeys, self.srows, self.bcode),
                   row0, _ScanTables(self.count, self.first_row, self.last_t, self.head_t,
                                     self.head_p, self.closed, self.state), found, nfound)
        for k, what in enumerate(("t", "orphan")):
            rows, sids, n = self.found[what]
            for i in found[k, :min(nfound[k], Report.SHOW)]:
                rows.append(row0 + i)
                sids[row0 + i] = str(names[code[i]])
            self.found[what][2] = n + int(nfound[k])

    def report(self, f, report, b_sid):
        """The trajectories' row violations (in :data:`KINDS` order); ``f``
        the files of the tables."""
        path = f["trajectories"]
        rows, sids, n = self.found["t"]
        if n:
            report.add_rows("duplicate or decreasing t", path, "trajectories", "t", rows,
                            "t does not increase for this body", sids, total=n)
        lonely = np.flatnonzero(self.count[self.first_of_row] == 0)
        if lonely.size:
            report.add_rows("body without trajectory", f["bodies"], "bodies", "body_id", lonely,
                            "no trajectory rows for this body", b_sid)
        rows, sids, n = self.found["orphan"]
        if n:
            report.add_rows("trajectory without body", path, "trajectories", "body_id", rows,
                            "body not in the bodies table", sids, total=n)

    def initial_states(self, radius, ground_z):
        """``{bodies row: (pos, vel)}``: the robust quadratic fit over each
        body's first samples (:func:`simcore.data.targets.end_states`), a height
        within :data:`GROUND_SNAP` of resting on the ground snapped onto it
        (vz 0)."""
        n = np.minimum(self.count, HEAD)
        take = np.arange(HEAD) < n[:, None]
        pos, vel, _ = targets.end_states(self.head_t[take], self.head_p[take], n)
        snap = np.abs(pos[:, 2] - (ground_z + radius)) < GROUND_SNAP
        pos[snap, 2] = ground_z + radius[snap]
        vel[snap, 2] = 0.0
        return {r: (pos[r], vel[r]) for r in range(n.size)}

    def series(self, batches, size=BATCH_ROWS):
        """The body series for the detector: ``(t, p (n, 3), counts)`` chunks
        of whole scenarios of about ``size`` samples, each
        sorted by (scenario, body_id), from the file's ``batches`` (as
        :func:`_arrays` gives them).  Interleaved scenarios come as one chunk."""
        pend, npend = [], 0
        for code, names, body, t, x, y, z, _ in batches:
            brow = np.empty(code.size, np.int64)
            _body_rows(code, self._codes(names), np.ascontiguousarray(body, np.int64), self.low,
                       self.span, self.lut, self.skeys, self.srows, brow)
            pend.append((brow, t, x, y, z))
            npend += code.size
            if npend < size or not self.grouped:
                continue
            brow, t, x, y, z = (np.concatenate(c) for c in zip(*pend))
            sc = self.bcode[brow]
            cut = np.flatnonzero(sc[1:] != sc[:-1])
            if cut.size == 0:
                pend = [(brow, t, x, y, z)]
                continue
            cut = int(cut[-1]) + 1  # the rows before it are whole scenarios
            yield self._chunk(brow[:cut], t[:cut], x[:cut], y[:cut], z[:cut])
            pend, npend = [(brow[cut:], t[cut:], x[cut:], y[cut:], z[cut:])], brow.size - cut
        if npend:
            yield self._chunk(*(np.concatenate(c) for c in zip(*pend)))

    def _chunk(self, brow, t, x, y, z):
        key = self.key[brow]
        order = np.argsort(key, kind="stable")  # t already increases per body
        key = key[order]
        cut = np.r_[0, np.flatnonzero(key[1:] != key[:-1]) + 1, key.size]
        return t[order], np.stack([x[order], y[order], z[order]], axis=1), np.diff(cut)


@jit
def _body_row(c, body, m, low, span, lut, skeys, srows):
    """Bodies row of one trajectory row (scenario code ``c`` into ``m``'s
    bodies codes, its ``body`` id); -1 when no body has that key."""
    bc = m[c]
    off = body - low
    if bc < 0 or off < 0 or off >= span:
        return -1
    key = bc * span + off
    if lut.shape[0]:
        return lut[key]
    j = np.searchsorted(skeys, key)
    if j < skeys.shape[0] and skeys[j] == key:
        return srows[j]
    return -1


@jit
def _body_rows(code, m, body, low, span, lut, skeys, srows, out):
    for i in range(code.shape[0]):
        out[i] = _body_row(code[i], body[i], m, low, span, lut, skeys, srows)


class _Rows(NamedTuple):
    """A batch of trajectory rows: scenario codes, body ids, t, x, y, z."""

    code: np.ndarray
    body: np.ndarray
    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray


class _BodyIndex(NamedTuple):
    """The bodies lookup of :func:`_body_row`, and each bodies row's scenario code."""

    low: np.ndarray
    span: np.ndarray
    lut: np.ndarray
    skeys: np.ndarray
    srows: np.ndarray
    bcode: np.ndarray


class _ScanTables(NamedTuple):
    """What :class:`_Scan` keeps per bodies row (and per scenario: ``closed``)."""

    count: np.ndarray
    first_row: np.ndarray
    last_t: np.ndarray
    head_t: np.ndarray
    head_p: np.ndarray
    closed: np.ndarray
    state: np.ndarray


@jit
def _scan_rows(rows, m, index, row0, tab, found, nfound):
    """One pass over a batch of trajectory rows in file order (see :class:`_Scan`):
    ``rows`` (:class:`_Rows`), their scenarios' bodies codes ``m``, the bodies
    lookup ``index`` (:class:`_BodyIndex`), the per-body tables ``tab``
    (:class:`_ScanTables`, updated).

    ``found[0]`` gets the first rows (in the batch) where t does not
    increase for the body, ``found[1]`` the first rows of no body;
    ``nfound`` counts both.  ``tab.state``: the last row's scenario (bodies
    code) and whether every scenario's rows so far came in one run."""
    code, body, t, x, y, z = rows.code, rows.body, rows.t, rows.x, rows.y, rows.z
    count, first_row, last_t, head_t, head_p = (tab.count, tab.first_row, tab.last_t,
                                                 tab.head_t, tab.head_p)
    closed, state, bcode = tab.closed, tab.state, index.bcode
    nh = head_t.shape[1]
    b = -1
    for i in range(code.shape[0]):
        # Rows come in runs of one body: look the body up where a run starts.
        if i == 0 or code[i] != code[i - 1] or body[i] != body[i - 1]:
            b = _body_row(code[i], body[i], m, index.low, index.span, index.lut, index.skeys,
                          index.srows)
            if b >= 0 and bcode[b] != state[0]:
                c = bcode[b]
                if closed[c]:
                    state[1] = 0
                if state[0] >= 0:
                    closed[state[0]] = True
                state[0] = c
        if b < 0:
            if nfound[1] < found.shape[1]:
                found[1, nfound[1]] = i
            nfound[1] += 1
            continue
        n = count[b]
        if n == 0:
            first_row[b] = row0 + i
        elif t[i] <= last_t[b]:
            if nfound[0] < found.shape[1]:
                found[0, nfound[0]] = i
            nfound[0] += 1
        last_t[b] = t[i]
        if n < nh:
            head_t[b, n] = t[i]
            head_p[b, n, 0] = x[i]
            head_p[b, n, 1] = y[i]
            head_p[b, n, 2] = z[i]
        count[b] = n + 1


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

    _check_references(ds, f, report)
    _check_parameters(ds, report)
    if not report and not ds.meta.get("allow_implausible", False):
        _check_plausible(ds, f, scan, report)

    # Geometry at the first sample: above the ground, no overlaps.
    if not report:
        _check_first_sample(ds, f, scan, report, b_sid)


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
             "speed": (0.0, 1e3, "m/s"), "force": (0.0, 1e6, "N"),
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
    cols = ds.tables["bodies"].column_names
    if all(c in cols for c in ("vx0", "vy0", "vz0")):
        v0 = np.stack([_col(ds, "bodies", c) for c in ("vx0", "vy0", "vz0")], axis=1)
        with np.errstate(over="ignore"):  # 1e300 is reported, not squared
            speed = np.linalg.norm(v0, axis=1)
        bad = np.flatnonzero(speed > PLAUSIBLE["speed"][1])
        if bad.size:
            report.add_rows("implausible value", f["bodies"], "bodies", "vx0", bad,
                            f"initial speed above {PLAUSIBLE['speed'][1]:g} m/s{_OVERRIDE}", b_sid)
        fitted = np.array([v for _, v in scan.initial_states(
            _col(ds, "bodies", "radius"), ds.ground_z).values()]).reshape(-1, 3)
        seen = np.linalg.norm(fitted, axis=1)
        n = np.minimum(scan.count, HEAD)
        take = np.arange(HEAD) < n[:, None]
        noise = targets.position_noise(scan.head_t[take], scan.head_p[take], n)
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
    ncode = ds.names.shape[0]
    lo = np.full(ncode, np.inf)
    hi = np.full(ncode, -np.inf)
    np.minimum.at(lo, scan.bcode, scan.head_t[:, 0])
    np.maximum.at(hi, scan.bcode, scan.last_t)
    span = (hi - lo)[ds.codes["scenarios"]]
    bad = np.flatnonzero(np.isfinite(span) & (duration > 10.0 * span + 1.0))
    if bad.size:
        report.add_rows("implausible value", f["scenarios"], "scenarios", "duration", bad,
                        f"duration over 10 x its samples' span + 1 s{_OVERRIDE}", s_sid)


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
    # Overlaps: every pair of a scenario's bodies, in one pass.
    groups = _groups(ds, "bodies")
    rows = np.concatenate(list(groups.values())) if groups else np.zeros(0, np.int64)
    start = np.r_[0, np.cumsum([g.size for g in groups.values()])].astype(np.int64)
    pairs = np.zeros((len(groups), 2, 2), np.int64)
    found = np.zeros(len(groups), np.int64)
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


def stable_hash(text, seed=0):
    """A 64-bit hash of a string, the same in every process and run (unlike ``hash``)."""
    digest = hashlib.blake2b(f"{seed}:{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def shards(ds, n):
    """Deterministic shards of the scenario ids, balanced by sample count.

    Scenarios are taken largest first (ties broken by their stable hash) and
    each goes to the shard with the fewest samples so far (ties: the lowest
    shard).  The result depends only on the ids and their sample counts:
    the same in every run and process.  Returns a list of ``n`` sorted lists.
    """
    if n < 1:
        raise ValueError(f"shards: n = {n}: expected n >= 1")
    ser = _series_index(ds)
    per_code = np.bincount(ser["code"], weights=ser["count"], minlength=len(ds.names))
    counts = {str(ds.names[c]): int(per_code[c]) for c in np.flatnonzero(per_code)}
    order = sorted(counts, key=lambda sid: (-counts[sid], stable_hash(sid)))
    load = [0] * n
    out = [[] for _ in range(n)]
    for sid in order:
        k = min(range(n), key=lambda j: (load[j], j))
        out[k].append(sid)
        load[k] += counts[sid]
    return [sorted(x) for x in out]


def split(ds, test_fraction=0.2, seed=0):
    """``{scenario_id: "train" | "test"}``: the ``scenarios`` table's split when
    it has one, else a seeded fraction by stable hash (the same in every run)."""
    ids = ds.scenario_ids()
    if "scenarios" in ds.tables and "split" in ds.tables["scenarios"].column_names:
        sids = ds.ids_of("scenarios")
        splits = _col(ds, "scenarios", "split").astype(str)
        given = {sids[r]: splits[r] for r in range(len(splits))}
        return {sid: given.get(sid, "train") for sid in ids}
    if not 0.0 <= test_fraction <= 1.0:
        raise ValueError(f"split: test_fraction = {test_fraction}: expected 0 <= f <= 1")
    return {sid: "test" if stable_hash(sid, seed) / 2.0**64 < test_fraction else "train"
            for sid in ids}

"""The dataset contract (``datasets/README.md``) as data: the tables and
their columns with units and nullability, the keys of ``dataset.yaml``, the
report a check fills (:class:`Report`, :class:`Violation`), the error
:func:`~simcore.data.dataset.read` raises and the :class:`Dataset` it returns."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from ... import params as P
from ...laws import impact_maps
from ...laws import registry as contact_laws
from ...laws.penalty import CONES
from ...sliding.integrate import INTEGRATORS

LENGTH = {"m": 1.0, "cm": 1e-2, "mm": 1e-3}

#: The integrators a dataset may name (:mod:`simcore.sliding.integrate`).
INTEGRATOR_NAMES = tuple(INTEGRATORS)

#: The friction pyramid edge counts the impact maps take.
EDGES = (4, 6, 8, 12, 16)


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
         "non-positive duration or dt", "sample after the duration", "unknown split",
         "centre of mass outside the body",
         "non-unit quaternion", "below the ground at the first sample",
         "inside a wall at the first sample", "spheres overlapping at the first sample")


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


class ModelSection(BaseModel):
    """``dataset.yaml``'s ``model``: ``spin`` (the spinning model of balls on
    cloth, :mod:`simcore.spin.spin`), ``cone`` (the time-stepper's
    friction cone, :data:`simcore.laws.penalty.CONES`), ``edges`` (the
    impact maps' friction pyramid, :data:`EDGES`) and ``integrator`` (one of
    :data:`INTEGRATOR_NAMES`, or the first that runs the dataset).  Validated once on
    read (:func:`simcore.data.dataset.tables.model_section`); strict types,
    no other key."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    spin: bool = False
    cone: Literal[CONES] = "elliptic"
    #: Edges of the friction pyramid of the impact maps (datasets of
    #: measured impacts, :mod:`simcore.laws.impact_maps`).
    edges: Literal[EDGES] = impact_maps.EDGES
    #: The integrator (a registered name, :data:`INTEGRATOR_NAMES`), None:
    #: the first that runs the dataset (``--integrator`` overrides it).
    integrator: Literal[INTEGRATOR_NAMES] | None = None


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
    #: ``dataset.yaml``'s ``model`` section, validated.
    model: ModelSection = field(default_factory=ModelSection)
    #: Sorted scenario ids of all tables (``"*"`` included when walls use it),
    #: and per table the code of each row's scenario_id into that list: ids
    #: never become per-row Python strings.
    names: np.ndarray = None
    codes: dict = field(default_factory=dict)
    #: Caches of :func:`body_series`, :func:`fitted_initial_states` and
    #: ``groups`` (per table).
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
                              self.laws, self.spin, {"gravity": self.gravity})

    def ids_of(self, table):
        """Row -> scenario id lookup for ``table`` (for messages and outputs)."""
        return _Names(self.codes[table], self.names)


class _Names:
    """``ids[row]`` is the scenario id of a row, looked up only when asked."""

    def __init__(self, codes, names):
        self.codes, self.names = codes, names

    def __getitem__(self, row):
        return str(self.names[self.codes[int(row)]])


#: The largest YAML file read (``dataset.yaml``, configs) [bytes]: they hold
#: metadata and settings, not data.
META_MAX_BYTES = 1 << 20


#: The keys of ``dataset.yaml`` (datasets/README.md); any other is an error
#: with the nearest known key as a suggestion.
META_KEYS = ("name", "description", "source", "license", "citation", "units", "gravity",
             "ground_z", "truth", "params", "laws", "model", "noise", "generator",
             "allow_implausible", "kind")

#: What a dataset holds (``dataset.yaml`` ``kind``; absent: trajectories):
#: measured trajectories (this contract's tables) or measured impacts
#: (:mod:`simcore.data.impacts`).
DATASET_KINDS = ("trajectories", "impacts")


#: The keys of ``dataset.yaml`` ``model``.
MODEL_KEYS = tuple(ModelSection.model_fields)

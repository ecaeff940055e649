"""Datasets of measured impacts (``dataset.yaml`` ``kind: impacts``): per
event a body, its velocity just before and just after an impact, and the
contact points; read, validated, simulated through the impact maps
(:mod:`simcore.impacts.impact_engine`) and written.

Tables (Parquet or CSV, ``datasets/README.md``), in the dataset's
``units`` (lengths, times; velocities in length per time, angular
velocities in rad per time, inertia in kg length^2):

``impacts``, one row per event (its ``scenario_id``, unique): ``body_id``
(optional, 0), ``mass`` [kg], ``ixx, iyy, izz`` the principal inertia about
the centre of mass (body frame), ``qw, qx, qy, qz`` the orientation at the
impact (body to world, scalar first; empty: identity), ``h`` the interval
between the two samples [s] (gravity acts over it), ``pre_vx, pre_vy,
pre_vz, pre_wx, pre_wy, pre_wz`` the centre of mass's velocity and the
angular velocity just before (world frame), ``post_vx .. post_wz`` just
after (needed to calibrate; optional to simulate), ``flagged`` (optional
bool: an event a calibration leaves out unless told otherwise), ``split``
(optional: ``train`` or ``test``, the events a calibration fits and those
it scores held out).  Other columns are kept, unread.

``contacts``, one row per contact point: ``scenario_id`` of its event,
``px, py, pz`` the arm from the centre of mass to the contact point (world
frame), ``nx, ny, nz`` the surface's normal, pointing into the body (made
unit), ``surface`` (optional): ``ground`` (default; the body-ground laws
and coefficients ``mu_k``, ``e_bg``) or ``wall`` (``mu_w``, ``e_bw``).

``dataset.yaml`` as for trajectories (``units``, ``gravity``, ``laws``,
``params``, ``truth``, ``model: {edges: 4}``), with ``kind: impacts``; the
laws are impact maps (:mod:`simcore.laws.impact_maps`; absent kinds:
``poisson_lcp``).
"""

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml

from .. import params as P
from ..geometry.rigid import quat_matrix
from ..impacts import impact_engine
from ..kernel.parameter import G_E_BG, G_MU_K, W_E_BW, W_MU_W
from ..kernel.status import STATUS_MESSAGES
from ..laws import registry as contact_laws
from .dataset.contract import DatasetError, Report
from .dataset.load import missing
from .dataset.split import held_out
from .dataset.tables import _check_meta, _units, safe_yaml, write_table

VEL = ("vx", "vy", "vz", "wx", "wy", "wz")
PRE = tuple(f"pre_{c}" for c in VEL)
POST = tuple(f"post_{c}" for c in VEL)
QUAT = ("qw", "qx", "qy", "qz")
#: name -> (kind, required) per table; ``post_*`` are required to calibrate.
TABLES = {
    "impacts": {"scenario_id": ("str", True), "body_id": ("int", False),
                "mass": ("float", True), "ixx": ("float", True), "iyy": ("float", True),
                "izz": ("float", True), **{q: ("float", False) for q in QUAT},
                "h": ("float", True), **{c: ("float", True) for c in PRE},
                **{c: ("float", False) for c in POST}, "flagged": ("bool", False),
                "split": ("str", False)},
    "contacts": {"scenario_id": ("str", True), "px": ("float", True), "py": ("float", True),
                 "pz": ("float", True), "nx": ("float", True), "ny": ("float", True),
                 "nz": ("float", True), "surface": ("str", False)},
}
SURFACES = ("ground", "wall")
SPLITS = ("train", "test")
#: The unknowns of one measured impact's LCP, at most (a body's few contact
#: points; the kernel's own limit, :data:`simcore.kernel.lcp.LCP_MAX`, is
#: sized for stacks of bodies).
EVENT_LCP_MAX = 96


def max_contacts(edges):
    """Contact points an event may have with a pyramid of ``edges`` edges
    (its LCP has ``nc (2 + edges)`` unknowns, at most :data:`EVENT_LCP_MAX`)."""
    return EVENT_LCP_MAX // (2 + edges)
#: How far from 1 a quaternion's norm may be.
QUAT_TOL = 1e-6


@dataclass
class ImpactData:
    """A dataset of measured impacts in SI units (see the module docstring):
    per event ``ids``, ``body_id``, ``mass (E,)``, ``inertia (E, 3)``,
    ``quat (E, 4)``, ``h (E,)``, ``pre``, ``post (E, 6)`` (NaN: not
    measured), ``flagged (E,)``, ``split (E,)`` (``train`` or ``test``;
    ``train`` without the column); contacts ``cptr (E + 1,)``, ``arm``,
    ``normal (C, 3)``, ``surface (C,)`` (index into :data:`SURFACES`);
    ``laws`` resolved; ``extra``: the impacts table's other columns."""

    path: Path
    meta: dict
    ids: list
    body_id: np.ndarray
    mass: np.ndarray
    inertia: np.ndarray
    quat: np.ndarray
    h: np.ndarray
    pre: np.ndarray
    post: np.ndarray
    flagged: np.ndarray
    split: np.ndarray
    cptr: np.ndarray
    arm: np.ndarray
    normal: np.ndarray
    surface: np.ndarray
    laws: dict
    gravity: float = 9.81
    edges: int = 4
    fixed_params: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    @property
    def name(self):
        return self.meta.get("name", self.path.name)

    @property
    def count(self):
        return len(self.ids)

    def layout(self, coefficients=()):
        """The coefficient layout (impact maps; no materials)."""
        return P.Layout.build((), [*self.fixed_params, *self.truth, *coefficients], self.laws)

    def read_coefficients(self):
        """The coefficients the events' contacts read, in layout order."""
        kinds = set(np.unique(self.surface).tolist())
        return (["mu_k", "e_bg"] if 0 in kinds else []) + (["mu_w", "e_bw"] if 1 in kinds else [])

    def events(self, layout, rows=None):
        """The :class:`~simcore.impacts.impact_engine.Events` of the events
        ``rows`` (None: all): inverse mass matrices (world inertia from the
        orientation), free velocities (``pre + h g``, gravity along -z),
        contacts and their coefficients' rows in ``layout``."""
        rows = np.arange(self.count) if rows is None else np.asarray(rows, np.int64)
        n = rows.size
        G = np.zeros((n, 6, 6))
        for k, r in enumerate(rows):
            R = quat_matrix(self.quat[r])
            G[k, :3, :3] = np.eye(3) / self.mass[r]
            G[k, 3:, 3:] = R @ np.diag(1.0 / self.inertia[r]) @ R.T
        vel = self.pre[rows].copy()
        vel[:, 2] -= self.h[rows] * self.gravity
        counts = np.diff(self.cptr)[rows]
        cptr = np.r_[0, np.cumsum(counts)].astype(np.int64)
        crow = np.concatenate([np.arange(self.cptr[r], self.cptr[r + 1]) for r in rows]
                              ) if n else np.zeros(0, np.int64)
        surf = self.surface[crow]
        mu = np.where(surf == 0, layout.bg[0, G_MU_K], layout.bw[0, 0, W_MU_W])
        e = np.where(surf == 0, layout.bg[0, G_E_BG], layout.bw[0, 0, W_E_BW])
        kind = np.where(surf == 0, contact_laws.BODY_GROUND, contact_laws.BODY_WALL)
        law = layout.law_codes[kind[cptr[:-1]]] if n else np.zeros(0, np.int64)
        return impact_engine.Events(law.astype(np.int64), G, vel, cptr, self.arm[crow].copy(),
                                    self.normal[crow].copy(), mu.astype(np.int64),
                                    e.astype(np.int64), self.edges)


def is_impacts(path):
    """Whether the dataset at ``path`` says ``kind: impacts``."""
    meta = Path(path) / "dataset.yaml"
    try:
        doc = safe_yaml(meta) if meta.is_file() else None
    except (OSError, ValueError):
        return False  # (the trajectory reader reports it)
    return isinstance(doc, dict) and doc.get("kind") == "impacts"


def _file(root, name):
    for ext in (".parquet", ".csv"):
        if (root / f"{name}{ext}").is_file():
            return root / f"{name}{ext}"
    return None


def _read_file(path):
    if path.suffix == ".parquet":
        return pq.read_table(path)
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        column_types={"scenario_id": pa.string(), "surface": pa.string(), "split": pa.string()}))


def _column(table, name, kind, path, report):
    """A column as numpy (floats as float64 with NaN for empty cells, strings
    as str, ints as int64, bools as bool), or None with the problem in
    ``report``."""
    col = table[name]
    typ = col.type
    ok = {"str": pa.types.is_string(typ) or pa.types.is_large_string(typ),
          "int": pa.types.is_integer(typ),
          "float": pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_null(typ),
          "bool": pa.types.is_boolean(typ) or pa.types.is_integer(typ)}[kind]
    if not ok:
        report.add("wrong type", f"{path}: table {path.stem}, column {name}",
                   f"type {typ}; expected {kind}")
        return None
    if kind == "str":
        return np.array([str(v) if v is not None else "" for v in col.to_pylist()], dtype=object)
    if kind == "float":
        return col.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
    if kind == "bool":
        arr = col.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero((arr != 0) & (arr != 1))
        if bad.size:
            report.add_rows("wrong type", path, path.stem, name, bad, "expected true/false or 0/1")
        return arr != 0
    return col.fill_null(0).cast(pa.int64()).to_numpy(zero_copy_only=False)


def _read_table(root, name, report):
    """``{column: array}`` of a table (contract columns), or None."""
    path = _file(root, name)
    if path is None:
        report.add("missing file", root, f"table {name} ({name}.parquet or {name}.csv)")
        return None, None
    try:
        table = _read_file(path)
    except (OSError, pa.ArrowException) as exc:
        report.add("unreadable or truncated file", path, str(exc).splitlines()[0])
        return None, None
    cols, extra = {}, {}
    for col, (kind, required) in TABLES[name].items():
        if col not in table.column_names:
            if required:
                report.add("missing column", f"{path}: table {name}", f"column {col}")
            continue
        arr = _column(table, col, kind, path, report)
        if arr is not None:
            cols[col] = arr
            if kind == "float" and required:
                bad = np.flatnonzero(~np.isfinite(arr))
                if bad.size:
                    report.add_rows("NaN or inf", path, name, col, bad[:3],
                                    "expected a finite number", cols.get("scenario_id"),
                                    total=bad.size)
    for col in table.column_names:
        if col not in TABLES[name]:
            extra[col] = table[col].to_numpy(zero_copy_only=False)
    if table.num_rows == 0:
        report.add("empty table", path, f"table {name} has no rows")
    return (cols, extra), path


def read(path):
    """The impact dataset at ``path`` (:class:`ImpactData`), or raise
    :class:`~simcore.data.dataset.DatasetError` with the report of every
    problem (file, table, column, row)."""
    data, report = validate(path)
    if report:
        raise DatasetError(f"{path}: invalid dataset\n{report.text()}", report)
    return data


def validate(path):
    """``(ImpactData or None, Report)``."""
    root = Path(path)
    report = Report()
    meta_path = root / "dataset.yaml"
    if not meta_path.is_file():
        report.add("missing file", root, missing(root))
        return None, report
    try:
        meta = safe_yaml(meta_path)
    except ValueError as exc:
        report.add("unreadable or truncated file", meta_path, str(exc))
        return None, report
    section = _check_meta(meta, meta_path, report)
    if section is None:
        return None, report
    try:
        laws = contact_laws.resolve(meta.get("laws"), impacts=True)
    except ValueError as exc:
        report.add("unknown contact law", meta_path, str(exc))
        laws = contact_laws.resolve(impacts=True)
    ev, ev_path = _read_table(root, "impacts", report)
    ct, ct_path = _read_table(root, "contacts", report)
    scale = _units(meta)
    if ev is None or ct is None or scale is None or report:
        return None, report
    (ev, extra), (ct, _) = ev, ct
    length, time = scale
    n = ev["scenario_id"].size
    ids = [str(s) for s in ev["scenario_id"]]
    first = {}
    dup = [r for r, s in enumerate(ids) if first.setdefault(s, r) != r]
    if dup:
        report.add_rows("duplicate body", ev_path, "impacts", "scenario_id", dup,
                        "an event (scenario_id) listed twice", ids)
    for col in ("mass", "ixx", "iyy", "izz", "h"):
        bad = np.flatnonzero(~(ev[col] > 0))
        if bad.size:
            report.add_rows("non-positive mass or radius", ev_path, "impacts", col, bad,
                            "expected a number > 0", ids)
    quat = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    if all(q in ev for q in QUAT):
        given = np.stack([ev[q] for q in QUAT], axis=1)
        some = np.isfinite(given).any(axis=1)
        norm = np.linalg.norm(given, axis=1)
        bad = np.flatnonzero(some & ~(np.abs(norm - 1.0) <= QUAT_TOL))
        if bad.size:
            report.add_rows("non-unit quaternion", ev_path, "impacts", "qw", bad,
                            "expected qw, qx, qy, qz of norm 1 (or all empty)", ids)
        quat[some] = given[some]
    post = np.full((n, 6), np.nan)
    if any(c in ev for c in POST):
        for j, c in enumerate(POST):
            if c not in ev:
                report.add("missing column", f"{ev_path}: table impacts",
                           f"column {c} (the post-impact state is given whole or not at all)")
            else:
                post[:, j] = ev[c]
    # contacts, grouped by their event
    cid = [str(s) for s in ct["scenario_id"]]
    where = {s: r for r, s in enumerate(ids)}
    owner = np.array([where.get(s, -1) for s in cid], np.int64)
    orphan = np.flatnonzero(owner < 0)
    if orphan.size:
        report.add_rows("trajectory without body", ct_path, "contacts", "scenario_id", orphan,
                        "a contact of no event in the impacts table", cid)
    counts = np.bincount(owner[owner >= 0], minlength=n)
    lone = np.flatnonzero(counts == 0)
    if lone.size:
        report.add_rows("body without trajectory", ev_path, "impacts", "scenario_id", lone,
                        "an event without a contact point in the contacts table", ids)
    limit = max_contacts(section.edges)
    many = np.flatnonzero(counts > limit)
    if many.size:
        report.add_rows("implausible value", ev_path, "impacts", "scenario_id", many,
                        f"more than {limit} contact points (a pyramid of {section.edges} "
                        "edges)", ids)
    normal = np.stack([ct["nx"], ct["ny"], ct["nz"]], axis=1)
    nn = np.linalg.norm(normal, axis=1)
    zero = np.flatnonzero(~(nn > 1e-9))
    if zero.size:
        report.add_rows("zero wall normal", ct_path, "contacts", "nx", zero,
                        "the normal (nx, ny, nz) has no direction", cid)
    split = ev.get("split", np.full(n, "train", dtype=object))
    split = np.where(split == "", "train", split)
    wrong = np.flatnonzero(~np.isin(split, SPLITS))
    if wrong.size:
        report.add_rows("unknown split", ev_path, "impacts", "split", wrong,
                        f"expected one of {list(SPLITS)}", ids)
    surf_names = ct.get("surface", np.array(["ground"] * owner.size, dtype=object))
    surf_names = np.where(surf_names == "", "ground", surf_names)
    unknown = np.flatnonzero(~np.isin(surf_names, SURFACES))
    if unknown.size:
        report.add_rows("unknown shape", ct_path, "contacts", "surface", unknown,
                        f"expected one of {list(SURFACES)}", cid)
    if report:
        return None, report
    surface = np.array([SURFACES.index(s) for s in surf_names], np.int64)
    order = np.argsort(owner, kind="stable")
    if laws["body_ground"] != laws["body_wall"]:  # one law per event
        lo = np.full(n, 2)
        hi = np.full(n, -1)
        np.minimum.at(lo, owner, surface)
        np.maximum.at(hi, owner, surface)
        mixed = np.flatnonzero(lo < hi)
        if mixed.size:
            report.add_rows("unknown contact law", ev_path, "impacts", "scenario_id", mixed,
                            "contacts on the ground and a wall under different laws", ids)
            return None, report
    pre = np.stack([ev[c] for c in PRE], axis=1)
    rate = np.array([length / time] * 3 + [1.0 / time] * 3)
    return ImpactData(
        root, meta, ids, ev.get("body_id", np.zeros(n, np.int64)), ev["mass"],
        np.stack([ev["ixx"], ev["iyy"], ev["izz"]], axis=1) * length ** 2, quat,
        ev["h"] * time, pre * rate, post * rate, ev.get("flagged", np.zeros(n, bool)),
        split.astype(str), np.r_[0, np.cumsum(counts)].astype(np.int64),
        np.stack([ct["px"], ct["py"], ct["pz"]], axis=1)[order] * length,
        (normal / nn[:, None])[order], surface[order], laws,
        float(meta.get("gravity", 9.81)), section.edges, dict(meta.get("params") or {}),
        dict(meta.get("truth") or {}), extra), report


def simulate(data, params=None, rows=None):
    """The predicted post-impact velocities ``(E, 6)`` of the events ``rows``
    (None: all) at coefficients ``params`` (a mapping; the dataset's
    ``params``, then defaults, fill the rest).  Raises ``RuntimeError``
    naming the first event the law refused and why."""
    values = dict(data.fixed_params)
    values.update(params or {})
    layout = data.layout(values)
    rows = np.arange(data.count) if rows is None else np.asarray(rows)
    post, _, status = impact_engine.run(data.events(layout, rows), layout.vector(values),
                                        strict=False)
    bad = np.flatnonzero(status != 0)
    if bad.size:
        k = int(bad[0])
        raise RuntimeError(f"event {data.ids[rows[k]]!r}: {STATUS_MESSAGES[status[k]]}; "
                           f"{bad.size} event(s) failed")
    return post


def predictions(data, post, rows=None):
    """``impacts.parquet``'s columns: ``scenario_id``, ``body_id`` and the
    predicted post-impact ``vx, vy, vz, wx, wy, wz`` (world frame, SI)."""
    rows = np.arange(data.count) if rows is None else np.asarray(rows)
    out = {"scenario_id": [data.ids[r] for r in rows],
           "body_id": np.asarray(data.body_id)[rows].astype(np.int64)}
    out.update({c: post[:, j] for j, c in enumerate(VEL)})
    return out


def write_predictions(data, post, out_dir):
    """Write ``OUT/impacts.parquet`` (:func:`predictions`); its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "impacts.parquet"
    write_table(predictions(data, post), path)
    return path


# --- import: the Fazeli et al. planar impacts ---------------------------------------------

#: The ``ellipse_impacts.parquet`` format's columns (see :func:`fazeli_ellipse`).
FAZELI_COLUMNS = ("event_id", "pre_x", "pre_z", "pre_th", "pre_vx", "pre_vz", "pre_vth",
                  "post_x", "post_z", "post_th", "post_vx", "post_vz", "post_vth",
                  "n_x", "n_z", "n_th", "d_x", "d_z", "d_th")
#: The ellipse of Fazeli et al.: semi-axes [m] along the body's x and z, mass [kg].
ELLIPSE_A, ELLIPSE_B, ELLIPSE_MASS = 0.035, 0.025, 0.0364
#: The samples' rate [Hz]: pre and post are one sample apart.
FAZELI_RATE = 250.0


def fazeli_ellipse(src, out, gravity=9.81, test_share=0.25, seed=0):
    """Write the planar impacts of a file of the ``ellipse_impacts.parquet``
    format (Fazeli et al.; ``../shared/data/fazeli-planar/README.md``) as an
    impact dataset at ``out``: one event ``event<event_id>`` per row, every
    row kept, its ``flag_*`` and ``any_flag`` columns kept and ``flagged =
    any_flag``; ``test_share`` of the events in the ``test`` split
    (:func:`~simcore.data.dataset.held_out` of their ids with ``seed``); the source's LICENSE
    copied beside it when there is one.

    The planar frame (x right, z up) is the world's x-z plane.  The file's
    ``th`` and ``vth`` turn about the world's +y axis (clockwise as drawn
    with x right and z up), settled from the geometry: the lowest point of
    the ellipse ``R_y(th) (a cos s, 0, b sin s)`` lies at an x offset of
    ``-n_th`` (and the stored ``n_th`` is the rate of the contact's height
    per ``vth``: ``v_z - w_y r_x`` with ``w_y = vth``); the tangential row is
    then ``(1, 0, r_z)`` with ``r_z < 0``, the stored ``d_th`` negated (the
    sign the data fit, as their README found).  So ``w_y = vth`` (the
    counter-clockwise planar convention would have ``w_y = -vth``), the
    orientation is ``q = (cos th/2, 0, sin th/2, 0)``, the contact's arm
    ``(-n_th, 0, -d_th)`` from the centre, its normal ``(n_x, 0, n_z)``.
    The body: mass 0.0364 kg, a plate in the body's x-z plane with inertia
    ``m (a^2 + b^2) / 4`` about y (the only one planar motion reads), ``m
    b^2 / 4`` and ``m a^2 / 4`` about x and z.  ``h`` = 1/250 s.
    Bad files raise ``ValueError`` naming the file, column and row."""
    src, out = Path(src), Path(out)
    try:
        table = pq.read_table(src)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{src}: not a readable Parquet file ({str(exc).splitlines()[0]})"
                         ) from None
    cols = {}
    for c in FAZELI_COLUMNS:
        if c not in table.column_names:
            raise ValueError(f"{src}: column {c} missing (expected the ellipse_impacts format: "
                             f"{', '.join(FAZELI_COLUMNS)})")
        typ = table[c].type
        if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)):
            raise ValueError(f"{src}: column {c}: type {typ}, expected numbers")
        arr = table[c].cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ValueError(f"{src}: column {c}, row {bad[0]}: {arr[bad[0]]} (expected a finite "
                             f"number; {bad.size} such row(s))")
        cols[c] = arr
    n = table.num_rows
    if n == 0:
        raise ValueError(f"{src}: no rows")
    ids = cols["event_id"]
    if np.any(ids != np.round(ids)):
        r = int(np.flatnonzero(ids != np.round(ids))[0])
        raise ValueError(f"{src}: column event_id, row {r}: {ids[r]} (expected an integer)")
    _, first = np.unique(ids, return_index=True)
    if first.size != n:
        r = int(np.setdiff1d(np.arange(n), first)[0])
        raise ValueError(f"{src}: column event_id, row {r}: {int(ids[r])} listed twice")
    flags = [c for c in table.column_names if c.startswith("flag_") or c == "any_flag"]
    a2, b2, m = ELLIPSE_A ** 2, ELLIPSE_B ** 2, ELLIPSE_MASS
    sid = [f"event{int(i)}" for i in ids]
    zero = np.zeros(n)
    th = cols["pre_th"]
    ev = {"scenario_id": sid, "body_id": np.zeros(n, np.int64), "mass": np.full(n, m),
          "ixx": np.full(n, m * b2 / 4), "iyy": np.full(n, m * (a2 + b2) / 4),
          "izz": np.full(n, m * a2 / 4), "qw": np.cos(th / 2), "qx": zero,
          "qy": np.sin(th / 2), "qz": zero, "h": np.full(n, 1.0 / FAZELI_RATE)}
    for when in ("pre", "post"):
        ev.update({f"{when}_vx": cols[f"{when}_vx"], f"{when}_vy": zero,
                   f"{when}_vz": cols[f"{when}_vz"], f"{when}_wx": zero,
                   f"{when}_wy": cols[f"{when}_vth"], f"{when}_wz": zero})
    ev["split"] = np.where(held_out(sid, test_share, seed), "test", "train")
    any_flag = np.zeros(n, bool)
    for c in flags:
        v = table[c].cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        ev[c] = v
        any_flag |= v != 0
    ev["flagged"] = any_flag
    for c in ("event_id", "pre_x", "pre_z", "pre_th", "post_x", "post_z", "post_th"):
        ev[f"source_{c}"] = cols[c]
    norm = np.hypot(cols["n_x"], cols["n_z"])
    if np.any(norm == 0):
        r = int(np.flatnonzero(norm == 0)[0])
        raise ValueError(f"{src}: columns n_x, n_z, row {r}: a zero normal")
    contacts = {"scenario_id": sid, "px": -cols["n_th"], "py": zero, "pz": -cols["d_th"],
                "nx": cols["n_x"], "ny": zero, "nz": cols["n_z"],
                "surface": ["ground"] * n}
    out.mkdir(parents=True, exist_ok=True)
    write_table(ev, out / "impacts.parquet")
    write_table(contacts, out / "contacts.parquet")
    meta = {"name": out.name, "kind": "impacts",
            "description": "Measured planar impacts of an ellipse on a flat surface "
                           f"(Fazeli et al.), imported from {src.name}: {n} events, "
                           f"{int(any_flag.sum())} flagged upstream.",
            "source": str(src.name),
            "citation": "N. Fazeli et al., Empirical evaluation of common contact models for "
                        "planar impact, ICRA 2017; data republished by the DAIR Lab "
                        "(github DAIRLab/ImpactModeling), BSD 3-Clause",
            "license": "BSD-3-Clause (see LICENSE)", "units": {"length": "m", "time": "s"},
            "gravity": float(gravity)}
    (out / "dataset.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    lic = src.parent / "LICENSE"
    if lic.is_file():
        shutil.copyfile(lic, out / "LICENSE")
    return out


# --- synthetic impacts with known coefficients ---------------------------------------------

def generate(out, events=200, truth=None, law="poisson_lcp", noise=0.02, seed=0, name=None):
    """Write a synthetic dataset of measured impacts at ``out``: ``events``
    planar boxes (turning about y, one lowest corner striking the ground at
    z = 0) of random size, mass and state, their post-impact velocities from
    ``law`` at the ``truth`` coefficients (``mu_k``, ``e_bg``; defaults 0.3,
    0.6) plus Gaussian noise isotropic in the kinetic-energy metric of
    :class:`simcore.identify.impact_problem.ImpactProblem`: ``noise`` [m/s] on
    each velocity component, ``noise / rho`` [rad/s] on the turn rate (``rho``
    the box's radius of gyration about y).  Returns ``out``."""
    rng = np.random.default_rng(seed)
    truth = dict({"mu_k": 0.3, "e_bg": 0.6}, **(truth or {}))
    out = Path(out)
    n = int(events)
    half = rng.uniform(0.02, 0.08, (n, 3))
    mass = rng.uniform(0.05, 1.0, n)
    inertia = mass[:, None] / 3.0 * (half[:, [1, 0, 0]] ** 2 + half[:, [2, 2, 1]] ** 2)
    th = rng.uniform(-np.pi, np.pi, n)
    quat = np.stack([np.cos(th / 2), 0 * th, np.sin(th / 2), 0 * th], axis=1)
    arm = np.zeros((n, 3))
    for k in range(n):  # the lowest corner of the box turned about y
        R = quat_matrix(quat[k])
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
                           ) * half[k]
        world = corners @ R.T
        low = world[np.argmin(world[:, 2] + 1e-9 * world[:, 0])]
        arm[k] = [low[0], 0.0, low[2]]
    pre = np.zeros((n, 6))
    for k in range(n):  # approaching at the corner
        while True:
            v = np.array([rng.uniform(-1, 1), 0.0, -rng.uniform(0.5, 3.0), 0.0,
                          rng.uniform(-15, 15), 0.0])
            if v[2] - v[4] * arm[k, 0] < -0.2:  # the corner's vertical velocity
                pre[k] = v
                break
    sid = [f"impact{k}" for k in range(n)]
    zero = np.zeros(n)
    ev = {"scenario_id": sid, "mass": mass, "ixx": inertia[:, 0], "iyy": inertia[:, 1],
          "izz": inertia[:, 2], "qw": quat[:, 0], "qx": zero, "qy": quat[:, 2], "qz": zero,
          "h": np.full(n, 1.0 / 250.0), **{c: pre[:, j] for j, c in enumerate(PRE)}}
    contacts = {"scenario_id": sid, "px": arm[:, 0], "py": zero, "pz": arm[:, 2], "nx": zero,
                "ny": zero, "nz": np.ones(n)}
    out.mkdir(parents=True, exist_ok=True)
    write_table(ev, out / "impacts.parquet")
    write_table(contacts, out / "contacts.parquet")
    meta = {"name": name or out.name, "kind": "impacts",
            "description": f"Synthetic planar box impacts under {law}",
            "units": {"length": "m", "time": "s"}, "gravity": 9.81,
            "laws": {"body_ground": law}, "truth": {k: float(v) for k, v in truth.items()},
            "generator": {"events": n, "noise": float(noise), "seed": int(seed)}}
    (out / "dataset.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    data = read(out)
    post = simulate(data, truth)
    rho = np.sqrt(inertia[:, 1] / mass)
    post[:, [0, 2]] += rng.normal(0.0, noise, (n, 2))
    post[:, 4] += rng.normal(0.0, noise, n) / rho
    ev.update({c: post[:, j] for j, c in enumerate(POST)})
    write_table(ev, out / "impacts.parquet")
    return out

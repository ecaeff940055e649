"""A dataset directory read into a :class:`~.contract.Dataset`: every
table, the trajectories streamed through the scan, scenario and body ids
encoded once, the contact laws resolved, the fixed and true coefficients
checked against them."""


from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import params as P
from ...laws import registry as contact_laws
from .contract import REQUIRED_TABLES, TABLES, Dataset
from .scan import (
    BATCH_ROWS,
    KEEP_BATCH_ROWS,
    _Scan,
    _stream_trajectories,
    _Unstreamable,
)
from .tables import (
    _check_meta,
    _check_one_format,
    _convert_units,
    _encode_ids,
    _np,
    _read_table,
    _remap,
    _table_file,
    _units,
    safe_yaml,
)


def missing(root):
    """Why ``root`` is no dataset: it does not exist (and which sibling it
    may have meant), or it holds no ``dataset.yaml``."""
    root = Path(root)
    if not root.exists():
        parent = root.parent if str(root.parent) else Path(".")
        near = [p.name for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
        return f"no such directory{P.did_you_mean(root.name, near)}"
    return "no dataset.yaml (is this a dataset directory?)"


def _read(root, report, keep=True, batch_rows=None):
    """The dataset at ``root``, or None (problems in ``report``).  The
    trajectories are read in batches of ``batch_rows`` rows, checked into
    ``ds.scan`` (:func:`_stream_trajectories`), and kept as a table when
    ``keep``; the other tables are read whole."""
    meta_path = root / "dataset.yaml"
    if not meta_path.exists():
        report.add("missing file", root, missing(root))
        return None
    try:
        meta = safe_yaml(meta_path)
    except ValueError as exc:
        report.add("unreadable or truncated file", meta_path, str(exc))
        return None
    section = _check_meta(meta, meta_path, report)
    if section is None:
        return None
    if meta.get("kind") == "impacts":
        report.add("wrong kind", meta_path, "kind: impacts: a dataset of measured impacts "
                   "(impacts and contacts tables), not trajectories; contactfit validate, "
                   "simulate and calibrate read it as such")
        return None
    _check_one_format(root, report)
    fixed = dict(meta.get("params") or {})
    truth = dict(meta.get("truth") or {})
    spin = section.spin
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
        laws = contact_laws.resolve(meta.get("laws"), spin, boxes, impacts=False)
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
    return Dataset(root, meta, tables, gravity, ground_z, fixed, truth, laws, spin, model=section,
                   names=names, codes=codes, scan=scan)

"""One table at a time: find a table's file (Parquet or CSV), read it
with pyarrow projecting the contract's columns, check its columns, convert
its lengths and times to SI; read ``dataset.yaml`` safely and check its
keys; write a table; integer keys of (scenario, body) pairs."""

import difflib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml
from pydantic import ValidationError

from ...kernel.config import jit
from ...laws.penalty import CONES
from .contract import (
    _INERTIA_COLS,
    _LENGTH_COLS,
    _RATE_COLS,
    _SPEED_COLS,
    _TIME_COLS,
    DATASET_KINDS,
    EDGES,
    INTEGRATOR_NAMES,
    LENGTH,
    META_KEYS,
    META_MAX_BYTES,
    MODEL_KEYS,
    NULLABLE,
    TABLES,
    TIME,
    ModelSection,
)


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
        if kind in ("float", "int") and pa.types.is_boolean(col.type):
            report.add("wrong type", f"{path}: table {name}, column {c}",
                       f"expected {kind} values, got booleans", once=True)
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


def _units(meta):
    """``(metres per length unit, seconds per time unit)`` of a dataset's
    ``units``, or None when either is unknown."""
    units = meta.get("units")
    if not isinstance(units, dict):
        return None
    lu, tu = units.get("length"), units.get("time")
    return (LENGTH[lu], TIME[tu]) if lu in LENGTH and tu in TIME else None


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


def model_section(meta, meta_path, report):
    """``dataset.yaml``'s ``model`` as a :class:`ModelSection`, validated
    once: each problem one line in ``report`` naming the key (an unknown key
    with the nearest known one), and the defaults in its place."""
    model = meta.get("model", {})
    if not isinstance(model, dict):
        report.add("wrong type", meta_path, f"model = {model!r}: expected a mapping such as "
                                            "{spin: true}")
        meta["model"] = {}
        return ModelSection()
    try:
        return ModelSection.model_validate(model)
    except ValidationError as exc:
        for err in exc.errors():
            key = str(err["loc"][0])
            v = model.get(key)
            if err["type"] == "extra_forbidden":
                near = difflib.get_close_matches(key, MODEL_KEYS, n=1)
                report.add("unknown key", meta_path, f"model.{key}" + (
                    f"; did you mean model.{near[0]}?" if near else
                    f"; expected {', '.join(MODEL_KEYS)}"))
            elif key == "cone":
                report.add("wrong type", meta_path,
                           f"model.cone = {v!r}: expected one of {list(CONES)}")
            elif key == "edges":
                report.add("wrong type", meta_path,
                           f"model.edges = {v!r}: expected one of {list(EDGES)}")
            elif key == "integrator":
                report.add("wrong type", meta_path,
                           f"model.integrator = {v!r}: expected one of {list(INTEGRATOR_NAMES)}")
            else:
                report.add("wrong type", meta_path, f"model.{key} = {v!r}: expected true or false")
        meta["model"] = {}
        return ModelSection()


def _check_meta(meta, meta_path, report):
    """Check ``dataset.yaml``'s keys, types and units into ``report``; its
    validated ``model`` section (:func:`model_section`), or None when it is
    not a mapping (nothing else can be read from it)."""
    if not isinstance(meta, dict):
        report.add("wrong type", meta_path, f"expected a mapping of keys to values, got a "
                                            f"{type(meta).__name__}")
        return None
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
    kind = meta.get("kind", DATASET_KINDS[0])
    if kind not in DATASET_KINDS:
        report.add("wrong type", meta_path, f"kind = {kind!r}: expected one of "
                                            f"{list(DATASET_KINDS)}")
    section = model_section(meta, meta_path, report)
    if not isinstance(meta.get("allow_implausible", False), bool):
        report.add("wrong type", meta_path, f"allow_implausible = "
                                            f"{meta['allow_implausible']!r}: expected true or false")
    return section


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


def _np(col):
    return col.to_numpy(zero_copy_only=False) if col.num_chunks != 1 else col.chunk(0).to_numpy(
        zero_copy_only=False)

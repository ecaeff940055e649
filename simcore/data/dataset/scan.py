"""The trajectories read in batches (:func:`_stream_trajectories`) and
their row checks fed batch by batch in file order (:class:`_Scan`): memory
bounded by the bodies, whatever the trajectories' length."""

from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ...kernel import buffers
from ...kernel.config import jit
from .. import targets
from .contract import TABLES, Report
from .scenarios import GROUND_SNAP
from .tables import (
    _check_columns,
    _convert_units,
    _csv_options,
    _encode_ids,
    _missing_columns,
    _np,
)

#: Rows per batch of :func:`validate_stream`.
BATCH_ROWS = 1 << 18


#: Rows per batch when the whole table is kept (:func:`validate`, :func:`read`):
#: a Parquet row group's worth, so that a 60M-row file is 60 batches, not
#: 230, each of which takes the GIL back from whatever runs beside the read
#: (up to the 5 ms switch interval per take).
KEEP_BATCH_ROWS = 1 << 20


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


#: The first samples kept per body for the initial-state fit
#: (:func:`simcore.data.targets.end_states`' window).
HEAD = 8


#: A trajectory position farther than this from the origin [m] is noted
#: (``validate`` reports it as implausible: a corrupt value or a wrong unit).
FAR = 1e4


class _Scan:
    """The trajectories' row checks, fed batch by batch in file order.

    Its state is a few numbers per bodies row (bounded whatever the
    table's length): samples seen, first row, last t and its row, the first
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
        self.last_row = np.full(nb, -1, np.int64)
        self.head_t = np.zeros((nb, HEAD))
        self.head_p = np.zeros((nb, HEAD, 3))
        self.closed = np.zeros(len(names), np.bool_)
        self.state = np.array([-1, 1], np.int64)  # last scenario code; rows grouped
        self.found = {"t": [[], {}, 0], "orphan": [[], {}, 0], "far": [[], {}, 0]}

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
                   row0, _ScanTables(self.count, self.first_row, self.last_t, self.last_row,
                                     self.head_t, self.head_p, self.closed, self.state),
                   found, nfound)
        for k, what in enumerate(("t", "orphan")):
            rows, sids, n = self.found[what]
            for i in found[k, :min(nfound[k], Report.SHOW)]:
                rows.append(row0 + i)
                sids[row0 + i] = str(names[code[i]])
            self.found[what][2] = n + int(nfound[k])
        # positions beyond FAR of the origin (a corrupt value; judged plausible or not later)
        far = np.flatnonzero((np.abs(x) > FAR) | (np.abs(y) > FAR) | (np.abs(z) > FAR))
        rows, sids, n = self.found["far"]
        for i in far[:max(Report.SHOW - len(rows), 0)]:
            rows.append(row0 + int(i))
            sids[row0 + int(i)] = str(names[code[i]])
        self.found["far"][2] = n + int(far.size)

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
    last_row: np.ndarray
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
    closed, state, bcode, last_row = tab.closed, tab.state, index.bcode, tab.last_row
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
        last_row[b] = row0 + i
        if n < nh:
            head_t[b, n] = t[i]
            head_p[b, n, 0] = x[i]
            head_p[b, n, 1] = y[i]
            head_p[b, n, 2] = z[i]
        count[b] = n + 1

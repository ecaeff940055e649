"""Replay a dataset with given coefficients: simulated tables and residuals.

:func:`simulate_dataset` runs every scenario of a dataset and returns the
simulated ``trajectories`` (at each body's own measured sample times),
``events`` and ``final`` states as column dictionaries (numpy arrays; the
``scenario_id`` column a list of strings), ready for
:func:`simcore.data.dataset.write_table` or ``pandas.DataFrame``.
:func:`residuals` compares the simulated positions with the measured ones,
per scenario.

On a :class:`~simcore.identify.problem.Problem` (the arrays a fit already holds),
:func:`residual_table` gives the same per-scenario figures chunk by chunk
(memory bounded by the chunk, not the dataset), and :func:`paths` the
measured and simulated paths of a few scenarios, for plots.
"""

from dataclasses import replace

import numpy as np
from numba import njit, prange

from ..engine import simulate
from ..kernel.config import JIT_PARALLEL
from ..kernel.events import BODY_PARTNER_KINDS, EVENT_KINDS
from ..laws.registry import resolve
from . import dataset as D

TRAJECTORY_COLUMNS = ("scenario_id", "body_id", "t", "x", "y", "z", "vx", "vy", "vz")
#: The angular velocities [rad/s] the spinning model's and rigid bodies'
#: tables add.
SPIN_COLUMNS = ("wx", "wy", "wz")
#: The orientations (unit quaternions, scalar first) rigid bodies' tables add.
QUAT_COLUMNS = ("qw", "qx", "qy", "qz")


def simulate_dataset(ds, params=None, integrator=None, laws=None, spin=None, notes=None,
                     strict=False):
    """Simulate ``ds`` (a :class:`~simcore.data.dataset.Dataset` or a path) with the
    coefficients ``params`` (a mapping; missing names take the dataset's
    fixed values, then the defaults) under the contact ``laws`` (``{kind:
    name}``; None: the dataset's own) and motion model (``spin``; None: the
    dataset's own).  Returns ``{"trajectories", "events",
    "final"}`` tables; a spinning model's trajectories and final states carry
    the angular velocities ``wx, wy, wz`` too, rigid bodies' (the
    time-stepper's) also their orientations ``qw, qx, qy, qz``.  ``notes``:
    a list the model's notes are appended to (:attr:`simcore.model.Model.notes`:
    sub-stepping; with ``strict`` a dt over the stable step is an error)."""
    if not isinstance(ds, D.Dataset):
        ds = D.read(ds)
    if spin is not None:
        ds = replace(ds, spin=bool(spin))
    if laws is not None:
        ds = replace(ds, laws=resolve(laws, ds.spin, impacts=False))
    values = dict(ds.fixed_params, **(params or {}))
    # built with the values (the time-stepper's stable step depends on them)
    ds = replace(ds, fixed_params=values)
    model, state, times, ids = D.scenarios(ds, integrator=integrator, coefficients=list(values),
                                           strict=strict)
    if notes is not None:
        notes.extend(model.notes)
    res = simulate(model.with_params(values), state, times)
    return {"trajectories": _trajectories(ds, res, ids), "events": _events(res, ids),
            "final": _final(res, ids)}


def _trajectories(ds, res, ids):
    traj = ds.tables["trajectories"]
    t_bid = traj["body_id"].to_numpy()
    t_t = traj["t"].to_numpy()
    rows_of = D.groups(ds, "trajectories")
    spun = res.samp_omega is not None
    turned = res.samp_quat is not None
    cols = {k: [] for k in TRAJECTORY_COLUMNS + (SPIN_COLUMNS if spun else ())
            + (QUAT_COLUMNS if turned else ())}
    counts = []
    for s, (sid, body_ids) in enumerate(ids):
        ts, pos, vel = res.samples(s)
        omega = res.samp_omega[res.samp_ptr[s]:res.samp_ptr[s + 1]] if spun else None
        quat = res.samp_quat[res.samp_ptr[s]:res.samp_ptr[s + 1]] if turned else None
        rows = np.sort(rows_of[sid])
        k = np.searchsorted(ts, t_t[rows])
        slot = np.searchsorted(body_ids, t_bid[rows])
        counts.append(rows.size)
        cols["body_id"].append(t_bid[rows])
        cols["t"].append(t_t[rows])
        for d, c in enumerate("xyz"):
            cols[c].append(pos[k, slot, d])
            cols["v" + c].append(vel[k, slot, d])
            if spun:
                cols["w" + c].append(omega[k, slot, d])
        for d, c in enumerate(QUAT_COLUMNS if turned else ()):
            cols[c].append(quat[k, slot, d])
    out = _stack({k: v for k, v in cols.items() if k != "scenario_id"})
    # One string object per scenario, repeated in C (never a per-row Python loop).
    sids = np.empty(len(ids), dtype=object)
    sids[:] = [sid for sid, _ in ids]
    return {"scenario_id": np.repeat(sids, counts), **out}


def _events(res, ids):
    ev = {k: [] for k in ("scenario_id", "t", "kind", "body_a", "body_b", "nx", "ny", "nz",
                          "jn", "jt", "dvax", "dvay", "dvaz", "dvbx", "dvby", "dvbz", "slip")}
    for s, (sid, body_ids) in enumerate(ids):
        e = res.events(s)
        n = len(e["t"])
        ev["scenario_id"] += [sid] * n
        ev["t"].append(e["t"])
        ev["kind"] += [EVENT_KINDS[k] for k in e["kind"]]
        ev["body_a"].append(body_ids[e["a"]])
        body_kind = np.isin(e["kind"], np.array(BODY_PARTNER_KINDS, np.int64))
        ev["body_b"].append(np.where(body_kind, body_ids[np.where(body_kind, e["b"], 0)], e["b"]))
        for d, c in enumerate("xyz"):
            ev["n" + c].append(e["normal"][:, d])
            ev["dva" + c].append(e["dva"][:, d])
            ev["dvb" + c].append(e["dvb"][:, d])
        ev["jn"].append(e["jn"])
        ev["jt"].append(e["jt"])
        ev["slip"] += [{1: "slip", 0: "stick"}.get(int(x), "") for x in e["slip"]]
    return _stack(ev)


def _final(res, ids):
    spun = res.samp_omega is not None
    turned = res.samp_quat is not None
    fin = {k: [] for k in TRAJECTORY_COLUMNS + (SPIN_COLUMNS if spun else ())
           + (QUAT_COLUMNS if turned else ())}
    for s, (sid, body_ids) in enumerate(ids):
        nb = len(body_ids)
        fin["scenario_id"] += [sid] * nb
        fin["body_id"].append(body_ids)
        fin["t"].append(np.full(nb, res.final.time[s]))
        for d, c in enumerate("xyz"):
            fin[c].append(res.final.body_pos[s, :nb, d])
            fin["v" + c].append(res.final.body_vel[s, :nb, d])
            if spun:
                fin["w" + c].append(res.final.body_omega[s, :nb, d])
        for d, c in enumerate(QUAT_COLUMNS if turned else ()):
            fin[c].append(res.final.body_quat[s, :nb, d])
    return _stack(fin)


def _stack(cols):
    """Concatenate the array pieces of each column (string columns stay lists)."""
    out = {}
    for k, v in cols.items():
        if v and isinstance(v[0], np.ndarray):
            out[k] = np.concatenate(v)
        elif not v and k not in ("scenario_id", "kind", "slip"):
            out[k] = np.zeros(0)
        else:
            out[k] = v
    return out


def residuals(ds, simulated):
    """Per-scenario position residuals of simulated trajectories against the
    measured ones: ``{"scenario_id", "samples", "rms_m", "max_m",
    "final_m"}`` (``final_m``: the largest final-position error over the
    scenario's bodies).  ``simulated``: the ``trajectories`` table of
    :func:`simulate_dataset` on the same dataset.  Works on tables alone
    (e.g. a ``contactfit simulate`` output); :func:`residual_table` gives the
    same figures from a problem's arrays, and is tested against this."""
    traj = ds.tables["trajectories"]
    meas = np.stack([traj[c].to_numpy() for c in "xyz"], axis=1)
    sim_pos = np.stack([np.asarray(simulated[c]) for c in "xyz"], axis=1)
    rows_of = D.groups(ds, "trajectories")
    sim_sid = simulated["scenario_id"]
    out = {"scenario_id": [], "samples": [], "rms_m": [], "max_m": [], "final_m": []}
    body = traj["body_id"].to_numpy()
    t = traj["t"].to_numpy()
    # The simulated table holds each scenario's rows together, in sorted
    # measured order: walk it one scenario at a time.
    a = 0
    while a < len(sim_sid):
        sid = str(sim_sid[a])
        rows = np.sort(rows_of[sid])
        err = np.linalg.norm(sim_pos[a:a + rows.size] - meas[rows], axis=1)
        last = np.zeros(rows.size, bool)
        b, tt = body[rows], t[rows]
        for bid in np.unique(b):
            mine = np.flatnonzero(b == bid)
            last[mine[np.argmax(tt[mine])]] = True
        out["scenario_id"].append(sid)
        out["samples"].append(rows.size)
        out["rms_m"].append(float(np.sqrt(np.mean(err ** 2))) if rows.size else np.nan)
        out["max_m"].append(float(err.max()) if rows.size else np.nan)
        out["final_m"].append(float(err[last].max()) if rows.size else np.nan)
        a += rows.size
    return {k: (np.asarray(v) if k != "scenario_id" else v) for k, v in out.items()}


#: Scenarios simulated at a time by :func:`residual_table` (bounds its memory).
RESIDUAL_CHUNK = 256


def residual_table(problem, params, chunk=RESIDUAL_CHUNK):
    """Per-scenario position residuals of ``problem``'s scenarios simulated
    with ``params`` (a full coefficient vector): ``{"scenario_id", "samples",
    "rms_m", "max_m", "final_m"}`` as :func:`residuals` gives them (samples
    counted per body; ``final_m`` the largest error over the bodies at their
    last measured sample).  Runs ``chunk`` scenarios at a time."""
    out = {"scenario_id": list(problem.ids), "samples": [], "rms_m": [], "max_m": [],
           "final_m": []}
    for lo in range(0, problem.nscen, chunk):
        sub = problem.subset(np.arange(lo, min(lo + chunk, problem.nscen)))
        sim = simulate(sub.model.with_params(params), sub.state, sub.targets.sample_times)
        ns = sub.nscen
        n = np.zeros(ns, np.int64)
        sse, top, fin = np.zeros(ns), np.zeros(ns), np.zeros(ns)
        _residual_stats(sim.samp_ptr, sim.samp_pos, sub.targets.measured, n, sse, top, fin)
        with np.errstate(invalid="ignore", divide="ignore"):
            out["samples"].append(n)
            out["rms_m"].append(np.where(n > 0, np.sqrt(sse / np.maximum(n, 1)), np.nan))
            out["max_m"].append(np.where(n > 0, top, np.nan))
            out["final_m"].append(fin)
    for k in ("samples", "rms_m", "max_m", "final_m"):
        out[k] = np.concatenate(out[k]) if out[k] else np.zeros(0)
    return out


@njit(**JIT_PARALLEL)
def _residual_stats(ptr, sim, meas, n, sse, top, fin):
    """Per scenario ``s`` (rows ``ptr[s]:ptr[s + 1]`` of ``sim`` and ``meas``,
    ``(M, nbmax, 3)``; a NaN measured x marks a body slot not measured at
    that row): the measured samples ``n``, the sum of squared position
    errors ``sse``, the largest error ``top`` and ``fin``, the largest over
    the body slots of the error at their last measured row (NaN when the
    scenario has none)."""
    nslot = meas.shape[1]
    for s in prange(ptr.shape[0] - 1):
        fin[s] = np.nan
        for b in range(nslot):
            last = -1.0
            for r in range(ptr[s], ptr[s + 1]):
                if np.isnan(meas[r, b, 0]):
                    continue
                e = 0.0
                for d in range(3):
                    e += (sim[r, b, d] - meas[r, b, d]) ** 2
                n[s] += 1
                sse[s] += e
                e = np.sqrt(e)
                if e > top[s]:
                    top[s] = e
                last = e
            if last >= 0.0 and not last <= fin[s]:
                fin[s] = last


def tilt(quat):
    """The angle [rad] of rows of box orientations ``(..., 4)`` from lying
    flat: between world z and the body axis nearest it (0 on a face, 54.7
    degrees balanced on a corner)."""
    q = np.asarray(quat, np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    zrow = np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)
    return np.arccos(np.clip(np.abs(zrow).max(axis=-1), -1.0, 1.0))


def paths(problem, params, scen):
    """Measured and simulated paths of the scenarios ``scen`` (indices of
    ``problem``): two column dicts with ``scenario_id``, ``body_id``, ``t``,
    ``x``, ``y``, ``z`` and, where orientations are measured, ``tilt``
    [rad] (:func:`tilt`; NaN elsewhere), at the measured samples."""
    sub = problem.subset(scen)
    body_ids = sub.body_ids or [np.arange(n) for n in sub.model.body_count]
    sim = simulate(sub.model.with_params(params), sub.state, sub.targets.sample_times)
    meas = sub.targets.measured
    quat = (sub.targets.states or {}).get("quat")
    turns = (quat, sim.samp_quat) if quat is not None and sim.samp_quat is not None else None
    cols = [{k: [] for k in ("scenario_id", "body_id", "t", "x", "y", "z", "tilt")}
            for _ in range(2)]
    for s in range(sub.nscen):
        a, b = sim.samp_ptr[s], sim.samp_ptr[s + 1]
        for slot, bid in enumerate(body_ids[s]):
            seen = ~np.isnan(meas[a:b, slot, 0])
            n = int(seen.sum())
            for k, (tab, src) in enumerate(zip(cols, (meas, sim.samp_pos))):
                tab["scenario_id"] += [sub.ids[s]] * n
                tab["body_id"].append(np.full(n, bid))
                tab["t"].append(sim.samp_t[a:b][seen])
                for d, c in enumerate("xyz"):
                    tab[c].append(src[a:b, slot, d][seen])
                tab["tilt"].append(tilt(turns[k][a:b, slot][seen]) if turns is not None
                                   else np.full(n, np.nan))
    return tuple(_stack(c) for c in cols)

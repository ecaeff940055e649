"""Measured targets and residual tables on files whose bodies keep their own
clocks and whose rows are not grouped by scenario: the fast paths must agree
with the obvious per-scenario computation."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcore import params
from simcore.data import dataset, replay, synth
from simcore.identify.problem import Problem


@pytest.fixture(scope="module")
def ragged(tmp_path_factory):
    """A generated set rewritten so that every body 1 drops every third sample,
    body 2 is sampled 2 ms late, and the rows are time-major (all scenarios'
    bodies interleaved, t ascending per body as the contract asks)."""
    out = tmp_path_factory.mktemp("ragged") / "ds"
    synth.generate(out, synth.GeneratorSettings(scenarios=8, seed=4, duration=1.0))
    tr = pd.read_parquet(out / "trajectories.parquet")
    k = tr.groupby(["scenario_id", "body_id"]).cumcount()
    tr = tr[~((tr.body_id == 1) & (k % 3 == 1))].copy()
    late = tr.body_id == 2
    tr.loc[late, "t"] = np.minimum(tr.loc[late, "t"] + 0.002, 1.0)
    tr = tr.drop_duplicates(["scenario_id", "body_id", "t"])
    tr = tr.sort_values(["t", "body_id", "scenario_id"], ascending=[True, False, False])
    tr.to_parquet(out / "trajectories.parquet", index=False)
    return out


def _reference(ds, ids):
    """Sample times (the union over the bodies) and the measured positions,
    one scenario at a time, straight from the table."""
    tr = ds.tables["trajectories"].to_pandas()
    times, rows = [], []
    for sid, body_ids in ids:
        mine = tr[tr.scenario_id == sid]
        ts = np.unique(mine.t.to_numpy())
        m = np.full((ts.size, 4, 3), np.nan)
        for slot, b in enumerate(body_ids):
            sel = mine[mine.body_id == b]
            m[np.searchsorted(ts, sel.t.to_numpy()), slot] = sel[["x", "y", "z"]].to_numpy()
        times.append(ts)
        rows.append(m)
    return times, np.concatenate(rows)


def test_targets_of_ragged_interleaved_files(ragged):
    ds = dataset.read(ragged)
    _, _, times, ids = dataset.scenarios(ds)
    prob = Problem.from_dataset(ds)
    ref_times, ref_meas = _reference(ds, ids)
    assert [len(t) for t in prob.targets.sample_times] == [len(t) for t in ref_times]
    for got, want in zip(prob.targets.sample_times, ref_times):
        assert np.array_equal(got, want)
    nb = prob.targets.measured.shape[1]
    assert np.array_equal(prob.targets.measured, ref_meas[:, :nb], equal_nan=True)
    assert [list(b) for b in prob.body_ids] == [list(b) for _, b in ids]


def test_body_series_of_a_sorted_file_equal_the_sorted_series(ragged, tmp_path):
    """A file written body by body takes the one-pass path (no sort, the
    identity order); the time-major file is sorted: the same series."""
    import shutil

    shutil.copytree(ragged, tmp_path / "sorted")
    tr = pd.read_parquet(ragged / "trajectories.parquet")
    tr.sort_values(["scenario_id", "body_id", "t"]).to_parquet(
        tmp_path / "sorted" / "trajectories.parquet", index=False)
    a = dataset.body_series(dataset.read(ragged))
    b = dataset.body_series(dataset.read(tmp_path / "sorted"))
    assert a[0] is not dataset.IDENTITY and b[0] is dataset.IDENTITY
    assert len(b[1]) == tr.groupby(["scenario_id", "body_id"]).ngroups
    assert np.all(np.diff(b[1]) > 0)
    for x, y in zip(a[1:4], b[1:4]):
        assert np.array_equal(x, y)
    assert np.array_equal(np.asarray(a[4]), np.asarray(b[4]))


def test_residual_table_equals_the_table_replay(ragged):
    """``residual_table`` (chunked, from the problem's arrays) gives the figures
    of ``residuals`` on the full simulated tables, for every chunk size."""
    ds = dataset.read(ragged)
    prob = Problem.from_dataset(ds)
    coef = dict(ds.truth, mu_k=0.21)
    old = replay.residuals(ds, replay.simulate_dataset(ds, coef)["trajectories"])
    for chunk in (1, 3, 256):
        new = replay.residual_table(prob, params.vector(coef), chunk=chunk)
        assert new["scenario_id"] == old["scenario_id"]
        assert np.array_equal(new["samples"], old["samples"])
        for k in ("rms_m", "max_m", "final_m"):
            np.testing.assert_allclose(new[k], old[k], rtol=1e-12, atol=1e-15)
    assert np.all(old["rms_m"] > 1e-4)  # mu_k off by 10 %: real residuals, not noise


def test_paths_are_the_measured_and_simulated_samples(ragged):
    ds = dataset.read(ragged)
    prob = Problem.from_dataset(ds)
    coef = dict(ds.truth)
    measured, simulated = replay.paths(prob, params.vector(coef), [2, 5])
    full = replay.simulate_dataset(ds, coef)["trajectories"]
    tr = ds.tables["trajectories"].to_pandas()
    for sid in (prob.ids[2], prob.ids[5]):
        mine = tr[tr.scenario_id == sid].sort_values(["body_id", "t"])
        sel = np.asarray(measured["scenario_id"]) == sid
        assert np.array_equal(measured["t"][sel], mine.t.to_numpy())
        assert np.array_equal(measured["x"][sel], mine.x.to_numpy())
        rows = np.flatnonzero(np.asarray(full["scenario_id"]) == sid)
        rows = rows[np.lexsort((full["t"][rows], full["body_id"][rows]))]  # body-major
        np.testing.assert_allclose(simulated["x"][sel], full["x"][rows], rtol=0, atol=1e-15)
        np.testing.assert_allclose(simulated["y"][sel], full["y"][rows], rtol=0, atol=1e-15)


def test_ordered_builds_and_contiguous_views(ragged):
    """``from_dataset(order=...)`` builds just those scenarios, in that order, with
    the targets of the whole build; a contiguous subset is a view with the
    same losses."""
    ds = dataset.read(ragged)
    whole = Problem.from_dataset(ds)
    pick = [whole.ids[k] for k in (5, 1, 6)]
    part = Problem.from_dataset(ds, order=pick)
    assert part.ids == pick
    same = whole.subset([5, 1, 6])
    assert np.array_equal(part.targets.measured, same.targets.measured, equal_nan=True)
    for k in ("scen", "body", "other", "t", "dv"):
        assert np.array_equal(part.targets.events[k], same.targets.events[k])
    theta = params.vector(dict(ds.truth, e_bb=0.8))
    np.testing.assert_allclose(part.loss_only(theta, per_scenario=True),
                               same.loss_only(theta, per_scenario=True), rtol=1e-14)
    view = whole.subset(np.arange(2, 6))
    assert np.shares_memory(view.targets.measured, whole.targets.measured)
    copy = Problem.from_dataset(ds, order=whole.ids[2:6])
    np.testing.assert_allclose(view.loss_only(theta, per_scenario=True),
                               copy.loss_only(theta, per_scenario=True), rtol=1e-14)
    with pytest.raises(ValueError, match="'nope' is not in the dataset"):
        Problem.from_dataset(ds, order=["nope"])


# --- pinned outputs of the shipped datasets ---------------------------------


PINNED = Path(__file__).resolve().parent / "pinned"
#: Rows sampled per column, evenly over the table.
PINNED_ROWS = 49
#: Relative tolerance against the pinned values.  The same code on the same
#: machine reproduces them to the bit; across machines glibc's libm picks
#: other code for sin, cos and exp by CPU (with and without FMA), and the
#: tumbling cubes amplify those last bits: to about 1e-9 of the values on
#: the machines they were pinned beside, to 1e-6 on another (one toss's
#: spin, 0.446173480 against 0.446173043 rad/s; the code of the pins gives
#: the same there), hence the tumbling cubes' own tolerance.  Any change of
#: the physics moves them far more.
PINNED_RTOL = 1e-7
PINNED_RTOL_TUMBLING = 1e-5


def _fingerprint(tables):
    """Per numeric column of the simulated tables: its length, sum, sum of
    absolute values, and :data:`PINNED_ROWS` values evenly spaced over it;
    per text column, a sha256 of its values."""
    out = {}
    for name in ("trajectories", "events", "final"):
        for col, values in tables[name].items():
            key = f"{name}.{col}"
            if isinstance(values, list) or values.dtype == object:
                text = "\n".join(map(str, values)).encode()
                out[key] = {"sha256": __import__("hashlib").sha256(text).hexdigest()}
                continue
            x = np.asarray(values, np.float64)
            rows = np.unique(np.linspace(0, max(x.size - 1, 0), PINNED_ROWS).astype(int))
            out[key] = {"n": int(x.size), "sum": float(x.sum()), "abs": float(np.abs(x).sum()),
                        "rows": x[rows].tolist() if x.size else []}
    return out


def _pin(name):
    """Write ``tests/pinned/NAME.json`` from the current code (run by hand,
    after a change of the physics that is meant)."""
    root = Path(__file__).resolve().parents[1] / "datasets" / name
    PINNED.mkdir(exist_ok=True)
    (PINNED / f"{name}.json").write_text(
        json.dumps(_fingerprint(replay.simulate_dataset(root)), indent=0) + "\n")


@pytest.mark.parametrize("name", ["billiards", "cube-toss", "synthetic-table"])
def test_shipped_datasets_simulate_to_their_pinned_values(name):
    """``contactfit simulate`` of each shipped dataset on its own coefficients:
    the sliding engine (synthetic-table), the spinning one (billiards) and the
    rigid time-stepper (cube-toss), against values pinned before the rooms
    moved (:data:`PINNED_RTOL`)."""
    root = Path(__file__).resolve().parents[1] / "datasets" / name
    got = _fingerprint(replay.simulate_dataset(root))
    want = json.loads((PINNED / f"{name}.json").read_text())
    rtol = PINNED_RTOL_TUMBLING if name == "cube-toss" else PINNED_RTOL
    assert got.keys() == want.keys()
    for key, w in want.items():
        g = got[key]
        if "sha256" in w:
            assert g == w, key
            continue
        assert g["n"] == w["n"], key
        scale = max(w["abs"] / max(w["n"], 1), 1e-300)
        np.testing.assert_allclose(g["rows"], w["rows"], rtol=rtol, atol=rtol * scale,
                                   err_msg=key)
        np.testing.assert_allclose([g["sum"], g["abs"]], [w["sum"], w["abs"]],
                                   rtol=rtol, atol=rtol * w["abs"], err_msg=key)

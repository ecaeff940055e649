"""Measured targets and residual tables on files whose bodies keep their own
clocks and whose rows are not grouped by scenario: the fast paths must agree
with the obvious per-scenario computation."""

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


def _digest(tables):
    """sha256 over every column of the simulated tables, in table and column
    order (ids as text, numbers as their float64 / int64 bytes)."""
    h = __import__("hashlib").sha256()
    for name in ("trajectories", "events", "final"):
        for col, values in tables[name].items():
            h.update(f"{name}.{col}".encode())
            text = isinstance(values, list) or values.dtype == object
            h.update("\n".join(map(str, values)).encode() if text
                     else np.ascontiguousarray(values).tobytes())
    return h.hexdigest()


#: ``contactfit simulate`` of each shipped dataset on its own coefficients:
#: the sliding engine (synthetic-table), the spinning one (billiards) and the
#: rigid time-stepper (cube-toss), to the bit.
PINNED_DATASETS = {
    "billiards": "3edd45f6028f8f97a4bf140634176bec774d4b94dfc84ec41140e1872ac82d38",
    "cube-toss": "4749b890e766967b1291b4b59a5e5a2eab45f9d61010fe99d4f10d56b1d6e3fd",
    "synthetic-table": "bc071aba5adb8bd259064ac36f2cd1ce90dcf0f439c96f2e1adb6466f83f87a7",
}


@pytest.mark.parametrize("name", sorted(PINNED_DATASETS))
def test_shipped_datasets_simulate_to_their_pinned_bits(name):
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "datasets" / name
    digest = _digest(replay.simulate_dataset(root))
    assert digest == PINNED_DATASETS[name], digest

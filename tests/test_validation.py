"""Dataset validation: one malformed dataset per rule, each message says where."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from flows.cli import main
from simcore.data import dataset, synth
from simcore.data.dataset import scan as dataset_scan


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    out = tmp_path_factory.mktemp("good") / "ds"
    synth.generate(out, synth.GeneratorSettings(scenarios=5, seed=11, duration=0.5))
    return out


def _copy(good, tmp_path, fmt="parquet", name="bad"):
    out = tmp_path / name
    out.mkdir()
    (out / "dataset.yaml").write_text((good / "dataset.yaml").read_text())
    for f in good.glob("*.parquet"):
        df = pd.read_parquet(f)
        if fmt == "csv":
            df.to_csv(out / (f.stem + ".csv"), index=False)
        else:
            df.to_parquet(out / f.name)
    return out


def _edit(ds, table, fn, fmt="parquet"):
    path = ds / f"{table}.{fmt}"
    df = pd.read_parquet(path) if fmt == "parquet" else pd.read_csv(path)
    df = fn(df)
    if fmt == "parquet":
        df.to_parquet(path)
    else:
        df.to_csv(path, index=False)


def _set(col, row, value):
    def fn(df):
        df = df.copy()
        if value is not None and not isinstance(value, str) and df[col].dtype.kind in "iu":
            df[col] = df[col].astype(float)
        df.loc[row, col] = value
        return df
    return fn


RULES = [
    ("bodies", lambda df: df.drop(columns=["mass"]), ["missing column", "bodies", "mass"]),
    ("bodies", _set("mass", 2, -1.0), ["non-positive", "bodies", "mass", "row 2"]),
    ("bodies", _set("radius", 1, 0.0), ["non-positive", "radius", "row 1"]),
    ("bodies", _set("shape", 0, "cube"), ["unknown shape", "row 0"]),
    ("trajectories", _set("x", 7, np.nan), ["missing value", "trajectories", "x", "row 7"]),
    ("trajectories", _set("y", 9, np.inf), ["NaN or inf", "trajectories", "y", "row 9"]),
    ("trajectories", _set("t", 5, 0.0), ["duplicate or decreasing t", "row 5"]),
    ("trajectories", _set("body_id", 3, 1.5), ["wrong type", "body_id", "row 3"]),
    ("trajectories", lambda df: df.assign(t=pd.to_datetime(df.t, unit="s")),
     ["- wrong type: 1", "table trajectories, column t", "expected float"]),
    ("trajectories", lambda df: df[df.body_id != 1], ["body without trajectory", "bodies"]),
    ("trajectories", _set("body_id", 4, 9), ["trajectory without body", "row 4"]),
    ("bodies", lambda df: df.assign(z0=df.z0 - 0.02), ["below the ground", "bodies", "z0", "row 0"]),
    ("bodies", lambda df: df.assign(x0=0.0, y0=0.0), ["overlapping", "bodies 0 and 1"]),
    ("bodies", _set("x0", 0, 10.0), ["inside a wall at the first sample",
                                     "bodies, column x0, row 0", "into wall"]),
    ("bodies", lambda df: df.iloc[0:0], ["empty table", "bodies"]),
    ("bodies", lambda df: df.assign(mass=True),
     ["wrong type", "table bodies, column mass", "expected float values, got booleans"]),
    ("controls", _set("t1", 0, -1.0), ["control window reversed", "controls", "t1", "row 0"]),
    ("walls", lambda df: df.assign(nx=0.0, ny=0.0, nz=0.0), ["zero wall normal", "walls"]),
    ("scenarios", _set("split", 1, "validation"), ["unknown split", "row 1"]),
    ("scenarios", _set("duration", 2, 0.45),
     ["sample after the duration", "trajectories, column t", "scenarios.duration"]),
    ("bodies", lambda df: df.assign(material="resin").pipe(_set("material", 3, "felt+cloth")),
     ["bad material name", "bodies", "material", "row 3"]),
    ("walls", lambda df: df.assign(material="oak wood"),
     ["bad material name", "walls", "material", "row 0"]),
]


@pytest.mark.parametrize("truth, words", [
    ({"e_bb@resin+steel": 0.5}, ["unknown material", "dataset.yaml", "truth", "'steel'"]),
    ({"mu_bb@resin": 0.1}, ["unknown parameter", "pair coefficient", "mu_bb@A+B"]),
    ({"mu_s@resin+resin": 0.3}, ["unknown parameter", "ground has no material"]),
    ({"e_bb": 1.5}, ["parameter out of range", "truth: parameter e_bb = 1.5"]),
    ({"mu_s": 0.1, "mu_k": 0.2}, ["parameter out of range", "expected mu_s >= mu_k"]),
])
def test_dataset_yaml_coefficient_names_and_bounds_are_checked(good, tmp_path, truth, words):
    bad = _copy(good, tmp_path)
    _edit(bad, "bodies", lambda df: df.assign(material="resin"))
    meta = yaml.safe_load((bad / "dataset.yaml").read_text())
    meta["truth"] = dict(meta["truth"], **truth)
    (bad / "dataset.yaml").write_text(yaml.safe_dump(meta))
    _, report, _ = dataset.validate(bad)
    for w in words:
        assert w in report.text(), (w, report.text())


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("table, change, words", RULES)
def test_each_rule_names_table_column_row(good, tmp_path, table, change, words, fmt):
    bad = _copy(good, tmp_path, fmt)
    _edit(bad, table, change, fmt)
    _, report, _ = dataset.validate(bad)
    text = report.text()
    assert report, text
    for w in words:
        assert w in text, (w, text)
    with pytest.raises(dataset.DatasetError):
        dataset.read(bad)
    # Read in batches of 4 rows (bounded memory), the report is the same.
    streamed, summary = dataset.validate_stream(bad, batch_rows=4)
    assert streamed.text() == text and summary == {}


def test_overlaps_are_the_first_two_pairs_of_each_scenario(good, tmp_path):
    """Every body of every scenario at one point: each scenario reports its
    first two overlapping pairs; a scenario of 3 or more bodies reports
    (0, 1) and (0, 2), with the overlap."""
    bad = _copy(good, tmp_path)
    bodies = pd.read_parquet(bad / "bodies.parquet")
    crowded = bodies.groupby("scenario_id").size()
    want = sum(min(2, n * (n - 1) // 2) for n in crowded)
    _edit(bad, "bodies", lambda df: df.assign(x0=0.0, y0=0.0))
    _, report, _ = dataset.validate(bad)
    assert f"- spheres overlapping at the first sample: {want}" in report.text()
    # One crowded scenario alone: its two lines are among the three shown.
    sid = crowded[crowded >= 3].index[0]
    (tmp_path / "one").mkdir()
    bad = _copy(good, tmp_path / "one")
    at = bodies.scenario_id == sid
    _edit(bad, "bodies", lambda df: df.assign(x0=np.where(at, 0.0, df.x0),
                                              y0=np.where(at, 0.0, df.y0)))
    _, report, _ = dataset.validate(bad)
    lines = [ln for ln in report.text().splitlines() if "overlap by" in ln]
    r = float(bodies[at].radius.iloc[0])
    assert len(lines) == 2 and all(f"[scenario {sid}]" in ln for ln in lines), lines
    assert "bodies 0 and 1" in lines[0] and "bodies 0 and 2" in lines[1], lines
    assert f"overlap by {2 * r:.3g} m" in lines[0]


def test_many_errors_give_one_grouped_report(good, tmp_path):
    bad = _copy(good, tmp_path)
    _edit(bad, "trajectories", lambda df: df.assign(x=np.where(df.index % 10 == 0, np.nan, df.x)))
    _edit(bad, "bodies", _set("mass", 0, 0.0))
    _, report, _ = dataset.validate(bad)
    text = report.text()
    n_bad = len(pd.read_parquet(bad / "trajectories.parquet")) // 10 + 1
    assert "kind(s)" in text and f"- missing value: {n_bad}" in text
    assert f"... and {n_bad - 3} more" in text  # not one line per bad row
    assert len(text.splitlines()) < 10


def test_unknown_units_and_truncated_file(good, tmp_path):
    bad = _copy(good, tmp_path)
    meta = (bad / "dataset.yaml").read_text().replace("length: m", "length: furlong")
    (bad / "dataset.yaml").write_text(meta)
    raw = (bad / "walls.parquet").read_bytes()
    (bad / "walls.parquet").write_bytes(raw[: len(raw) // 2])
    _, report, _ = dataset.validate(bad)
    text = report.text()
    assert "unknown units" in text and "furlong" in text
    assert "unreadable or truncated" in text and "walls.parquet" in text


def test_validate_cli(good, tmp_path, capsys):
    assert main(["validate", str(good)]) == 0
    out = capsys.readouterr().out
    for w in ("valid", "scenarios   5", "samples", "sample rate 100 Hz", "collisions"):
        assert w in out, (w, out)
    bad = _copy(good, tmp_path)
    _edit(bad, "bodies", _set("mass", 0, -2.0))
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "INVALID" in out and "mass" in out and "Traceback" not in out


def test_a_sample_after_the_duration_is_refused_by_row_not_by_a_traceback(good, tmp_path,
                                                                          capsys):
    """A measured sample 1 ms after its scenario's end is named by its row;
    ``simulate`` refuses the dataset with that line instead of crashing."""
    bad = _copy(good, tmp_path)
    traj = pd.read_parquet(bad / "trajectories.parquet")
    sid = pd.read_parquet(bad / "scenarios.parquet").scenario_id[1]
    rows = traj.index[traj.scenario_id == sid]
    start = traj.t[rows].min()
    _edit(bad, "scenarios", _set("duration", 1, float(traj.t[rows].max() - start) - 1e-3))
    _, report, _ = dataset.validate(bad)
    text = report.text()
    late = [r for r in rows if traj.t[r] > start + float(traj.t[rows].max() - start) - 1e-3]
    assert "sample after the duration" in text
    assert any(f"table trajectories, column t, row {r}" in text for r in late), text
    assert main(["simulate", str(bad), "--out", str(tmp_path / "out")]) != 0
    captured = capsys.readouterr()
    assert "sample after the duration" in captured.out + captured.err
    assert "Traceback" not in captured.out + captured.err


def test_shards_are_balanced_and_stable_across_processes(good):
    ds = dataset.read(good)
    a = dataset.shards(ds, 2)
    assert sorted(sum(a, [])) == ds.scenario_ids()
    code = ("import sys, json; from simcore.data import dataset; "
            f"print(json.dumps(dataset.shards(dataset.read({str(good)!r}), 2)))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": "123", "PATH": ""})
    import json
    assert json.loads(other.stdout) == a
    counts = {s: r.size for s, r in dataset.groups(ds, "trajectories").items()}
    loads = [sum(counts[s] for s in shard) for shard in a]
    assert max(loads) - min(loads) <= max(counts.values())


def test_split_from_table_and_seeded(good):
    ds = dataset.read(good)
    assert dataset.split(ds)["s0004"] == "test"  # the generator marks every fifth
    del ds.tables["scenarios"]
    one = dataset.split(ds, 0.4, seed=3)
    assert one == dataset.split(ds, 0.4, seed=3)
    assert set(one.values()) <= {"train", "test"}


def test_folds_partition_the_ids_and_the_first_is_the_held_out_share():
    """Every id in exactly one of k folds, the same in any order; fold 0 is
    ``held_out(ids, 1/k)``, so k = 5 reproduces the importers' test split."""
    ids = [f"drop{i}" for i in range(400)]
    for k in (2, 5, 7):
        f = dataset.folds(ids, k, seed=3)
        assert f.min() == 0 and f.max() == k - 1
        assert np.array_equal(f == 0, dataset.held_out(ids, 1 / k, 3))
        counts = np.bincount(f, minlength=k)
        assert counts.sum() == len(ids) and counts.min() > 0.5 * len(ids) / k
        rev = dataset.folds(ids[::-1], k, seed=3)[::-1]
        assert np.array_equal(rev, f)
    assert not np.array_equal(dataset.folds(ids, 5, seed=3), dataset.folds(ids, 5, seed=4))
    with pytest.raises(ValueError, match="k = 1"):
        dataset.folds(ids, 1)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_round_trip_generate_write_read(tmp_path, fmt):
    """The engine arrays read back are the generator's own scenes, exactly."""
    cfg = synth.GeneratorSettings(scenarios=4, seed=5, duration=0.5, fmt=fmt)
    rng = np.random.default_rng(cfg.seed)
    scenes = [synth._scene(rng, s, cfg) for s in range(cfg.scenarios)]
    out = synth.generate(tmp_path / fmt, cfg)
    model, state, times, ids = dataset.scenarios(dataset.read(out))
    assert [sid for sid, _ in ids] == [sc.name for sc in scenes]
    for s, sc in enumerate(scenes):
        nb = len(sc.radius)
        assert np.array_equal(model.body_radius[s, :nb], sc.radius)
        assert np.array_equal(model.body_mass[s, :nb], sc.mass)
        assert np.array_equal(state.body_pos[s, :nb], sc.pos)
        assert np.array_equal(state.body_vel[s, :nb], sc.vel)
        nw = model.wall_count[s]
        assert np.array_equal(model.wall_normal[s, :nw], sc.walls[:, :3])
        assert np.array_equal(model.wall_offset[s, :nw], sc.walls[:, 3])
        a, b = model.ctrl_ptr[s], model.ctrl_ptr[s + 1]
        got = np.column_stack([model.ctrl_body[a:b], model.ctrl_t0[a:b], model.ctrl_t1[a:b],
                               model.ctrl_force[a:b]])
        assert np.array_equal(got, sc.controls.reshape(-1, 6))
        assert model.scen_t_end[s] == sc.t_end and model.scen_dt[s] == sc.dt
        assert np.allclose(times[s], np.linspace(0, cfg.duration, 51))


def test_t_faults_in_time_major_and_grouped_files(good, tmp_path):
    """Duplicate or decreasing t is found row by row in file order, whether
    the file is grouped by body or time-major, every one counted, whole or
    in batches."""
    bad = _copy(good, tmp_path)
    where = {}

    def time_major(df):
        df = df.sort_values(["scenario_id", "t", "body_id"], kind="stable").reset_index(drop=True)
        s, b = df.loc[40, "scenario_id"], df.loc[40, "body_id"]
        nxt = int(df.index[(df.index > 40) & (df.body_id == b) & (df.scenario_id == s)][0])
        df.loc[nxt, "t"] = df.loc[40, "t"]
        where["row"] = nxt
        return df

    _edit(bad, "trajectories", time_major)
    _, report, _ = dataset.validate(bad)
    text = report.text()
    assert "duplicate or decreasing t" in text and f"row {where['row']}" in text, text

    bad2 = tmp_path / "grouped"
    bad2.mkdir()
    (bad2 / "dataset.yaml").write_text((good / "dataset.yaml").read_text())
    for f in good.glob("*.parquet"):
        (bad2 / f.name).write_bytes(f.read_bytes())
    _edit(bad2, "trajectories", lambda df: df.assign(t=np.where(df.index % 7 == 3, -1.0, df.t)))
    df = pd.read_parquet(good / "trajectories.parquet")
    first = ~df.duplicated(["scenario_id", "body_id"]).to_numpy()
    n = int(np.sum((np.arange(len(df)) % 7 == 3) & ~first))  # a body's first t has no fault
    _, report, _ = dataset.validate(bad2)
    text = report.text()
    assert n > 64 and f"- duplicate or decreasing t: {n}" in text, text
    for d in (bad, bad2):
        assert dataset.validate_stream(d, batch_rows=50)[0].text() == dataset.validate(d)[1].text()


@pytest.fixture(scope="module")
def busy(tmp_path_factory):
    """A dataset with collisions in many scenarios, as Parquet and as CSV."""
    root = tmp_path_factory.mktemp("busy")
    for fmt in ("parquet", "csv"):
        synth.generate(root / fmt, synth.GeneratorSettings(scenarios=24, seed=4, duration=1.0,
                                                           fmt=fmt))
    return root


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
@pytest.mark.parametrize("layout", ["as written", "time-major", "interleaved"])
def test_streamed_summary_equals_whole(busy, tmp_path, monkeypatch, fmt, layout):
    """Validated in batches of 97 rows, the detector's series gathered in
    chunks of whole scenarios (of about as many samples), the summary is the
    one the whole tables give: every count, span, rate and detection.  A
    file whose scenarios are interleaved is gathered whole for the
    detector, with the same result."""
    src = busy / fmt
    ds = tmp_path / "ds"
    ds.mkdir()
    for f in src.iterdir():
        (ds / f.name).write_bytes(f.read_bytes())
    keys = {"time-major": ["scenario_id", "t", "body_id"], "interleaved": ["t", "scenario_id"]}
    if layout in keys:
        _edit(ds, "trajectories", lambda df: df.sort_values(keys[layout], kind="stable"), fmt)
    _, report, whole = dataset.validate(ds)
    assert not report, report.text()
    chunks = []
    series = dataset_scan._Scan.series

    def spy(self, batches, size):
        for chunk in series(self, batches, size):
            chunks.append(chunk[0].size)
            yield chunk

    monkeypatch.setattr(dataset_scan._Scan, "series", spy)
    report, streamed = dataset.validate_stream(ds, batch_rows=97)
    assert not report, report.text()
    assert streamed == whole
    assert whole["collisions_detected"] > 20 and whole["samples"] > 5000
    if layout == "interleaved":
        assert chunks == [whole["samples"]]  # one chunk, read once: both passes use it
    else:
        assert len(chunks) > 2 * 20 and max(chunks) < 800  # two passes over many chunks


def test_truncated_trajectories_streamed(good, tmp_path):
    """A file that cannot be read in batches gets the whole-table report."""
    bad = _copy(good, tmp_path)
    raw = (bad / "trajectories.parquet").read_bytes()
    (bad / "trajectories.parquet").write_bytes(raw[: len(raw) * 2 // 3])
    report, summary = dataset.validate_stream(bad, batch_rows=10)
    assert "unreadable or truncated" in report.text() and "trajectories.parquet" in report.text()
    assert report.text() == dataset.validate(bad)[1].text() and summary == {}


# --- dataset.yaml: keys, types, units ---------------------------------------------

META = [
    (lambda m: {("unit" if k == "units" else k): v for k, v in m.items()},
     ["unknown key", "unit; did you mean units?", "missing units"]),
    (lambda m: dict(m, units="mm"), ["wrong type", "units = 'mm'", "{length: m, time: s}"]),
    (lambda m: dict(m, units={"lenght": "m", "time": "s"}),
     ["units.lenght; did you mean units.length?", "units.length = None"]),
    (lambda m: dict(m, gravity="9.81"), ["wrong type", "gravity = '9.81'"]),
    (lambda m: dict(m, gravity=981.0), ["implausible value", "gravity = 981.0"]),
    (lambda m: dict(m, params=[0.1]), ["wrong type", "params: expected a mapping"]),
    (lambda m: dict(m, truth={"mu_k": "fast"}), ["wrong type", "truth: mu_k = 'fast'"]),
    (lambda m: dict(m, allow_implausible="yes please"), ["allow_implausible", "true or false"]),
    (lambda m: [m], ["wrong type", "expected a mapping of keys to values, got a list"]),
    (lambda m: dict(m, model={"spinn": True}),
     ["unknown key", "model.spinn; did you mean model.spin?"]),
    (lambda m: dict(m, model={"spin": 1}), ["wrong type", "model.spin = 1: expected true or false"]),
    (lambda m: dict(m, model={"cone": "round"}),
     ["wrong type", "model.cone = 'round': expected one of ['elliptic', 'pyramidal']"]),
    (lambda m: dict(m, model=3), ["wrong type", "model = 3: expected a mapping"]),
    (lambda m: dict(m, model=None), ["wrong type", "model = None: expected a mapping"]),
]


@pytest.mark.parametrize("edit, words", META)
def test_dataset_yaml_keys_types_and_units_are_checked(good, tmp_path, edit, words):
    bad = _copy(good, tmp_path)
    meta = yaml.safe_load((bad / "dataset.yaml").read_text())
    (bad / "dataset.yaml").write_text(yaml.safe_dump(edit(meta)))
    _, report, _ = dataset.validate(bad)
    text = report.text()
    for w in words:
        assert w in text, (w, text)
    assert "dataset.yaml" in text


# --- plausibility -------------------------------------------------------------------

def _scale(cols, k):
    return lambda df: df.assign(**{c: df[c] * k for c in cols})


PLAUSIBILITY = [
    # Lengths in mm labelled m: radii of 30-80 "m".
    ({"bodies": _scale(["radius", "x0", "y0", "z0", "vx0", "vy0", "vz0"], 1e3),
      "trajectories": _scale(["x", "y", "z"], 1e3),
      "walls": _scale(["d"], 1e3)},
     ["implausible value", "bodies, column radius, row 0", "allow_implausible: true"]),
    # Times in ms labelled s: 0.1 Hz samples, and velocities that disagree with them.
    ({"trajectories": _scale(["t"], 1e3), "scenarios": _scale(["duration", "dt"], 1e3)},
     ["implausible value", "table trajectories, column t", "sample rate", "times in ms",
      "bodies, column vx0", "the initial speed and the first samples' speed differ"]),
    ({"bodies": _set("mass", 1, 5e5)}, ["bodies, column mass, row 1", "[1e-06, 100000] kg"]),
    ({"bodies": _set("vx0", 2, 1e300)}, ["bodies, column vx0, row 2", "above 1000 m/s"]),
    ({"bodies": _set("x0", 1, 1e300)}, ["bodies, column x0, row 1",
                                        "beyond 10000 m of the origin"]),
    # A body moved 0.3 m from where its samples begin (a corrupt or misaligned row).
    ({"bodies": lambda df: df.assign(y0=df.y0.where(df.index != 3, df.y0 + 0.3))},
     ["bodies, column x0, row 3", "from the body's first trajectory sample", "the worst 0.3"]),
    ({"trajectories": _set("y", 6, -1e300)}, ["trajectories, column x, row 6",
                                              "position beyond 10000 m of the origin"]),
    ({"controls": _set("fx", 0, 2e7)}, ["controls, column fx, row 0", "above 1e+06 N"]),
    ({"scenarios": _set("dt", 1, 1e6)}, ["scenarios, column dt, row 1",
                                         "[1e-06 s, the duration]"]),
    ({"scenarios": _set("duration", 0, 1e4)}, ["scenarios, column duration, row 0",
                                               "10 x its samples' span"]),
]


@pytest.mark.parametrize("edits, words", PLAUSIBILITY)
def test_implausible_values_are_reported_unless_allowed(good, tmp_path, edits, words):
    bad = _copy(good, tmp_path)
    for table, fn in edits.items():
        _edit(bad, table, fn)
    _, report, _ = dataset.validate(bad)
    text = report.text() + "\n".join(f"{v.where}: {v.message}" for v in report.items)
    for w in words:
        assert w in text, (w, text)
    meta = yaml.safe_load((bad / "dataset.yaml").read_text())
    (bad / "dataset.yaml").write_text(yaml.safe_dump(dict(meta, allow_implausible=True)))
    _, report, _ = dataset.validate(bad)
    assert "implausible value" not in report.text()  # (other rules still hold)


# --- what calibrate would refuse, found by validate ----------------------------------

def _more_bodies(df, n):
    first = df[df.scenario_id == df.scenario_id.iloc[0]].iloc[:1]
    extra = pd.concat([first] * n, ignore_index=True)
    extra["body_id"] = np.arange(100, 100 + n)
    extra["x0"] = np.linspace(-0.5, 0.5, n)
    return pd.concat([df, extra], ignore_index=True)


STRICT = [
    ("walls", lambda df: df.assign(scenario_id="nowhere"),
     ["unknown scenario", "walls, column scenario_id, row 0"]),
    ("scenarios", lambda df: pd.concat([df, df.iloc[:1]], ignore_index=True),
     ["duplicate row", "scenarios, column scenario_id, row 5"]),
    ("walls", lambda df: pd.concat([df, df.iloc[2:3]], ignore_index=True),
     ["duplicate row", "walls, column wall_id, row 4"]),
    ("events", _set("body_id", 0, 17), ["unknown body", "events, column body_id, row 0"]),
    ("events", _set("other", 1, "wall:9"), ["unknown body or wall", "events, column other, row 1"]),
    ("events", _set("other", 2, "cushion"), ["unknown body or wall", "row 2"]),
    ("events", _set("scenario_id", 3, "s9999"), ["unknown scenario", "events", "row 3"]),
    ("bodies", lambda df: _more_bodies(df, 40), ["too many bodies", "expected at most 32"]),
]


@pytest.mark.parametrize("table, change, words", STRICT)
def test_validate_finds_what_calibrate_would_refuse(good, tmp_path, table, change, words):
    bad = _copy(good, tmp_path)
    _edit(bad, table, change)
    _, report, _ = dataset.validate(bad)
    text = report.text()
    for w in words:
        assert w in text, (w, text)


def test_a_table_in_both_formats_is_ambiguous(good, tmp_path):
    bad = _copy(good, tmp_path)
    pd.read_parquet(bad / "walls.parquet").to_csv(bad / "walls.csv", index=False)
    _, report, _ = dataset.validate(bad)
    assert "ambiguous table" in report.text() and "walls.parquet and walls.csv" in report.text()


@pytest.mark.parametrize("text, words", [
    ("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n", ["YAML alias *a at line 2",
                                                      "aliases are not allowed"]),
    ("name: x\ndescription: '" + "x" * (2 << 20) + "'\n", ["bytes; expected at most 1048576"]),
])
def test_yaml_size_and_aliases_are_bounded(good, tmp_path, text, words):
    bad = _copy(good, tmp_path)
    (bad / "dataset.yaml").write_text(text)
    _, report, _ = dataset.validate(bad)
    for w in words:
        assert w in report.text(), (w, report.text())


# --- the corpus through the CLI ----------------------------------------------------

def _corpus():
    """Every malformed dataset above: ``(id, format, table edits, dataset.yaml
    edit, a word its report must hold)``."""
    cases = [(f"{fmt}-{t}-{w[0]}", fmt, {t: fn}, None, w[0])
             for fmt in ("parquet", "csv") for t, fn, w in RULES]
    cases += [(f"strict-{t}-{w[0]}", "parquet", {t: fn}, None, w[0]) for t, fn, w in STRICT]
    cases += [(f"plausible-{k}", "parquet", edits, None, w[0])
              for k, (edits, w) in enumerate(PLAUSIBILITY)]
    cases += [(f"yaml-{k}", "parquet", {}, edit, w[0]) for k, (edit, w) in enumerate(META)]
    return cases


@pytest.mark.parametrize("fmt, edits, meta_edit, word",
                         [c[1:] for c in _corpus()], ids=[c[0] for c in _corpus()])
def test_every_malformed_dataset_fails_cleanly_through_the_cli(good, tmp_path, monkeypatch,
                                                               capsys, fmt, edits, meta_edit,
                                                               word):
    """``validate`` and ``calibrate`` on each malformed dataset: exit 1, the
    problem named, no traceback, and no MLflow run."""
    import mlflow

    bad = _copy(good, tmp_path, fmt)
    for table, fn in edits.items():
        _edit(bad, table, fn, fmt)
    if meta_edit is not None:
        meta = yaml.safe_load((bad / "dataset.yaml").read_text())
        (bad / "dataset.yaml").write_text(yaml.safe_dump(meta_edit(meta)))
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    assert main(["validate", str(bad)]) == 1
    out = capsys.readouterr()
    assert word in out.out + out.err and "Traceback" not in out.out + out.err
    assert main(["calibrate", str(bad), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and "Traceback" not in err
    c = mlflow.MlflowClient(tracking_uri=uri)
    assert c.search_runs([e.experiment_id for e in c.search_experiments()]) == []



def test_the_model_section_is_read_once_into_the_dataset(good, tmp_path):
    bad = _copy(good, tmp_path)
    meta = yaml.safe_load((bad / "dataset.yaml").read_text())
    (bad / "dataset.yaml").write_text(yaml.safe_dump(dict(meta, model={"cone": "pyramidal"})))
    ds = dataset.read(bad)
    assert ds.model.cone == "pyramidal" and ds.model.spin is False and ds.spin is False
    assert dataset.read(good).model.cone == "elliptic"


# --- corrupt files: flipped bytes ------------------------------------------------------

def _flipped(good, tmp_path, fmt, table, seed):
    """A copy of ``good`` in ``fmt`` with ``table``'s file corrupted: one to
    three random bytes XORed (and, in every other CSV, two digits changed:
    numbers that still parse)."""
    d = _copy(good, tmp_path, fmt, f"{fmt}-{table}-{seed}")
    path = d / f"{table}.{fmt}"
    b = bytearray(path.read_bytes())
    rng = np.random.default_rng(seed)
    if fmt == "csv" and seed % 2:
        digits = [i for i, c in enumerate(b) if 48 <= c <= 57]
        for k in rng.choice(digits, 2):
            b[k] = 48 + (b[k] - 48 + int(rng.integers(1, 10))) % 10
    else:
        for k in rng.integers(0, len(b), 1 + seed % 3):
            b[k] ^= int(rng.integers(1, 256))
    path.write_bytes(bytes(b))
    return d


def test_every_dataset_with_flipped_bytes_that_validates_runs_without_a_traceback(
        good, tmp_path, monkeypatch, capsys):
    """Corrupt files (bytes flipped in each table, CSV and Parquet, seeded):
    ``validate`` accepts or refuses each in lines, never a traceback; each
    it accepts simulates, and two of them calibrate, with no traceback
    either (exit 0, or 1 with one line)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    (tmp_path / "quick.yaml").write_text("fit: [mu_k]\nmax_iter: 2\n")
    accepted, refused, calibrated = 0, 0, 0
    for fmt in ("csv", "parquet"):
        for table in ("bodies", "trajectories", "walls", "controls", "scenarios"):
            for seed in range(4):
                d = _flipped(good, tmp_path, fmt, table, seed)
                rc = main(["validate", str(d)])
                said = "".join(capsys.readouterr())
                assert rc in (0, 1) and "Traceback" not in said, (d, said)
                if rc == 1:
                    refused += 1
                    continue
                accepted += 1
                rc = main(["simulate", str(d), "--out", str(d / "sim")])
                said = "".join(capsys.readouterr())
                assert rc in (0, 1) and "Traceback" not in said, (d, said)
                if calibrated < 2 and (fmt == "csv") == (calibrated == 0):
                    calibrated += 1
                    rc = main(["calibrate", str(d), "--config", str(tmp_path / "quick.yaml"),
                               "--out", str(d / "fit")])
                    said = "".join(capsys.readouterr())
                    assert rc in (0, 1) and "Traceback" not in said, (d, said)
    assert accepted >= 5 and refused >= 10 and calibrated == 2

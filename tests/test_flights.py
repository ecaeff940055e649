"""What box tosses' flights show (simcore/data/flights.py): the free fall,
the centre of mass and the table's plane by linear least squares, against
closed-form flights, over noisy replicates, on the real cube tosses, and as
a calibration's starts (flows/pipeline.py)."""

import numpy as np
import pytest

from simcore.data import dataset, synth
from simcore.data import flights as FL
from simcore.geometry.rigid import ground_normal

HALF = np.array([0.05, 0.04, 0.03])


def _rot(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.c_[np.cos(angle / 2), np.sin(angle / 2)[:, None] * axis]


def _tosses(g, com, plane, n=8, noise=0.0, seed=0, rate=200.0):
    """``n`` tosses, each a flight (the centre of mass on a parabola under
    ``g``, the box turning at a constant rate about a fixed axis: the
    isotropic body's torque-free motion) then 30 samples resting flat on the
    plane ``z = h + a x + b y`` (``plane = (h, a, b)``, the box level: the
    table's slope is under a few mm over the box)."""
    rng = np.random.default_rng(seed)
    toss, t, pos, quat = [], [], [], []
    h, a, b = plane
    for k in range(n):
        tt = np.arange(int(0.3 * rate)) / rate
        axis, rate_w = rng.normal(size=3), rng.uniform(4.0, 12.0)
        q = _rot(axis, rate_w * tt)
        w, x, y, z = q.T
        R = np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                      np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                      np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], 1)
        c0 = np.array([rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), 0.4])
        v0 = rng.uniform(-1.0, 1.0, 3)
        cm = c0 + v0 * tt[:, None] - 0.5 * g * tt[:, None] ** 2 * np.array([0, 0, 1.0])
        centre = cm - np.einsum("nij,j->ni", R, com)
        # then at rest, level, somewhere on the plane: its corner at +x, +y,
        # -z (the one a level box's ties pick) on it
        xr, yr = rng.uniform(-0.8, 0.8, 2)
        rest = np.tile([xr, yr, h + a * (xr + HALF[0]) + b * (yr + HALF[1]) + HALF[2]],
                       (30, 1))
        toss += [k] * (tt.size + 30)
        t.append(np.r_[tt, tt[-1] + 0.2 + np.arange(30) / rate])
        pos.append(np.r_[centre, rest])
        quat.append(np.r_[q, np.tile([1.0, 0, 0, 0], (30, 1))])
    pos = np.concatenate(pos)
    pos = pos + rng.normal(scale=noise, size=pos.shape)
    return np.array(toss), np.concatenate(t), pos, np.concatenate(quat)


def test_closed_form_flights_give_gravity_the_centre_of_mass_and_the_table_exactly():
    com = np.array([0.004, -0.002, 0.006])
    plane = (-0.002, 0.01, -0.005)
    fit = FL.flight_fit(*_tosses(9.61, com, plane), HALF)
    assert fit.gravity == pytest.approx(9.61, abs=1e-9)
    assert fit.com == pytest.approx(com, abs=1e-10)
    assert fit.height == pytest.approx(plane[0], abs=1e-10)
    # The tilt is the one whose normal (ground_normal) is the plane's.
    n = np.array(ground_normal(fit.tilt_x, fit.tilt_y))
    assert n == pytest.approx(np.array([-plane[1], -plane[2], 1.0]) / np.sqrt(
        1 + plane[1] ** 2 + plane[2] ** 2), abs=1e-12)
    assert fit.phases == 8 and fit.rejected == 0


def test_noisy_flights_are_within_their_errors_over_replicates():
    """1 mm noise on the positions, a table tilted by half a degree: over 20
    replicates the gravity, the centre of mass and the table's two tilts lie
    within 2.5 standard errors of the truth in at least 17, and their errors
    are small enough to start a fit from (gravity 1 %, centre of mass 3 mm,
    tilt 0.15 deg)."""
    com = np.array([0.0, 0.0, 0.005])
    a, b = -np.tan(np.radians(0.2)), np.tan(np.radians(0.5))
    tilt = np.array([np.arcsin(b / np.sqrt(1 + a * a + b * b)), np.arctan(-a)])
    inside = []
    for seed in range(20):
        fit = FL.flight_fit(*_tosses(9.61, com, (0.0, a, b), n=12, noise=1e-3, seed=seed),
                            HALF)
        turn = np.array([fit.tilt_x, fit.tilt_y])
        z = np.abs(np.r_[fit.gravity - 9.61, fit.com - com, turn - tilt]) / np.r_[
            fit.stderr, fit.tilt_stderr]
        inside.append(z.max() <= 2.5)
        assert abs(fit.gravity - 9.61) < 0.1 and np.abs(fit.com - com).max() < 3e-3
        assert np.abs(turn - tilt).max() < np.radians(0.15)
    assert sum(inside) >= 17


@pytest.mark.parametrize("seed", [0, 7])
def test_noisy_tosses_of_a_flat_box_count_no_contact_as_flight(seed, tmp_path):
    """Generated tosses of a flat box (15 x 10 x 4 cm, tossed high and slow),
    1 mm and 0.5 degree noise: its corners' heights are noisy by 1.3 mm, so
    a fixed 4 mm clearance lets samples in contact into the flights (on these
    seeds the estimates then lie 17 and 56 standard errors off). With the
    clearance scaled to the noise every estimate lies within 3 standard
    errors of the truth."""
    out = synth.generate(
        tmp_path / "flat", synth.GeneratorSettings(
            shape="box", scenarios=12, seed=seed, duration=1.2, rate=148.0,
            half=[0.075, 0.05, 0.02], height=[0.3, 0.5], speed=[0.3, 0.8], spin=1.0),
        dict(synth.TRUTH_BOX, mu_k=0.2, e_bg=0.3), name="flat")
    fit = FL.of_dataset(dataset.read(out))
    z = np.abs(np.r_[fit.gravity - 9.81, fit.com]) / fit.stderr
    assert z.max() < 3.0, (z, fit)


def test_a_phase_that_is_not_a_flight_is_left_out():
    """A toss whose 'flight' is in fact pushed along (a constant extra
    acceleration): its phase stands out and is rejected; the others give g."""
    toss, t, pos, quat = _tosses(9.81, np.zeros(3), (0.0, 0.0, 0.0), n=8)
    bad = (toss == 3) & (pos[:, 2] > 0.1)
    pos[bad, 0] += 40.0 * (t[bad] - t[bad][0]) ** 2
    fit = FL.flight_fit(toss, t, pos, quat, HALF)
    assert fit.rejected == 1 and fit.gravity == pytest.approx(9.81, abs=1e-9)


def test_too_few_flights_are_refused():
    toss, t, pos, quat = _tosses(9.81, np.zeros(3), (0.0, 0.0, 0.0), n=1)
    with pytest.raises(ValueError, match="fewer than two flights"):
        FL.flight_fit(toss, t, pos, quat, HALF)


def test_the_real_cube_tosses_flights_agree_with_the_calibration():
    """The shipped cube tosses: the flights' free fall is the import's
    (9.61), and the centre of mass they show lies within 1 mm of the
    calibration's (com_z 5.87 mm, fitted from the contacts), level table."""
    from pathlib import Path

    ds = dataset.read(Path(__file__).resolve().parents[1] / "datasets" / "cube-toss")
    fit = FL.of_dataset(ds)
    assert fit.gravity == pytest.approx(9.61, abs=0.01)
    assert fit.com[2] == pytest.approx(5.87e-3, abs=1e-3)
    assert np.abs(fit.com[:2]).max() < 5e-4
    assert abs(fit.tilt_x) < 1e-3 and abs(fit.tilt_y) < 1e-3
    assert "free fall of 9.608 +- 0.0014 m/s^2" in FL.describe(fit)


def test_a_calibration_of_box_tosses_records_what_the_flights_show(tmp_path):
    """Generated tosses of a box whose centre of mass is 5 mm off and whose
    recording falls at 9.61: the calibration's loaded data hold the flights'
    free fall and centre of mass of the training tosses (near the truth),
    for its log line and ``fit.json``'s ``flights``, and a searched fit's
    start and first draws; sphere tables have none."""
    from flows import pipeline, settings

    out = tmp_path / "box"
    synth.generate(out, synth.GeneratorSettings(shape="box", scenarios=10, seed=2,
                                                duration=1.2, rate=148.0),
                   dict(synth.TRUTH_BOX, com_z=0.005, gravity=9.61), name="box")
    loaded = pipeline._load(out, settings.calibration(), False)
    fit = loaded.flights
    assert abs(fit.gravity - 9.61) < 0.15 and abs(fit.com[2] - 0.005) < 3e-3
    train = FL.of_dataset(loaded.ds, loaded.train.ids)
    assert train.gravity == fit.gravity and train.phases < FL.of_dataset(loaded.ds).phases
    doc = pipeline.flights_doc(fit)
    assert doc["gravity"] == fit.gravity and doc["com"][2] == fit.com[2]
    assert doc["phases"] == fit.phases and doc["tilt_stderr"] == list(fit.tilt_stderr)
    # a searched fit starts the centre of mass and the tilt there (gravity
    # keeps the dataset's, a given value its own) and draws its first starts
    # within two of the flights' standard errors
    free = ["mu_k", "com_z", "tilt_x", "gravity"]
    cfg = settings.calibration(fit=free).chosen(loaded.train)
    assert cfg.strategy == "search"
    start, spread = pipeline.flights_start(loaded, cfg, free, {"mu_k": 0.2})
    assert start == {"mu_k": 0.2, "com_z": fit.com[2], "tilt_x": fit.tilt_x}
    assert spread == {"com_z": 2 * fit.stderr[3], "tilt_x": 2 * fit.tilt_stderr[0],
                      "gravity": 2 * fit.stderr[0]}
    assert pipeline.flights_start(loaded, cfg, free, {"com_z": 1e-3})[0]["com_z"] == 1e-3
    other = settings.calibration(fit=free, strategy="segments")
    assert pipeline.flights_start(loaded, other, free, {}) == ({}, None)
    table = tmp_path / "table"
    synth.generate(table, synth.GeneratorSettings(scenarios=4, seed=1, duration=0.5))
    assert pipeline._load(table, settings.calibration(), False).flights is None

"""Measured positions slightly inside a surface start in contact; deeper is refused."""

import numpy as np
import pandas as pd
import pytest

from simcore.data import dataset, synth
from simcore.engine import simulate
from simcore.model import TOUCH_TOL, Scenario, build

R = 0.03


def _one(pos, vel=None, walls=np.zeros((0, 4)), t_end=0.5):
    nb = len(pos)
    return Scenario(radius=np.full(nb, R), mass=np.full(nb, 0.2), pos=np.array(pos, float),
                    vel=np.zeros((nb, 3)) if vel is None else np.array(vel, float),
                    walls=walls, t_end=t_end)


def test_a_sphere_pressed_into_a_wall_by_0_2_um_starts_touching_it():
    """As a soft-contact simulator leaves it: 0.2 um inside the wall x <= 0.5,
    sliding along it.  It is moved out to touching and slides on, no impact."""
    wall = np.array([[-1.0, 0, 0, -0.5]])
    sc = _one([[0.5 - R + 2e-7, 0, R]], vel=[[0.0, 0.4, 0]], walls=wall)
    model, state = build([sc])
    assert state.body_pos[0, 0, 0] == pytest.approx(0.5 - R, abs=1e-15)
    assert sc.pos[0, 0] == 0.5 - R + 2e-7  # the user's scenario is not modified
    res = simulate(model, state)
    assert not np.isin(res.event_kind, [1]).any()  # no body-wall impact
    assert res.final.body_pos[0, 0, 0] == pytest.approx(0.5 - R, abs=1e-12)


@pytest.mark.parametrize("pos, words", [
    ([[0.5 - R + 5e-3, 0, R]], ["body 0", "penetrates wall 0 by 0.005 m", "taken as touching"]),
    ([[0.0, 0, R - 2e-3]], ["body 0", "below the ground", "0.002 m"]),
])
def test_deeper_than_the_tolerance_is_refused_naming_body_and_surface(pos, words):
    with pytest.raises(ValueError) as err:
        build([_one(pos, walls=np.array([[-1.0, 0, 0, -0.5]]))])
    for w in words:
        assert w in str(err.value), str(err.value)


def test_overlapping_spheres_within_the_tolerance_are_moved_apart_symmetrically():
    depth = 0.5 * TOUCH_TOL
    model, state = build([_one([[0.0, 0, R - 1e-4], [2 * R - depth, 0, R]])])
    p = state.body_pos[0]
    assert p[0, 2] == R  # snapped onto the ground too
    assert np.linalg.norm(p[1] - p[0]) == pytest.approx(2 * R, abs=1e-15)
    assert p[0, 0] == pytest.approx(-depth / 2) and p[1, 0] == pytest.approx(2 * R - depth / 2)
    res = simulate(model, state)  # at rest, touching: no event, nothing moves
    assert res.event_count[0] == 0
    np.testing.assert_allclose(res.final.body_pos[0], p, atol=1e-15)


def test_validate_accepts_touching_and_reports_deeper(tmp_path):
    out = tmp_path / "ds"
    synth.generate(out, synth.GeneratorSettings(scenarios=3, seed=5, duration=0.5))
    bodies = pd.read_parquet(out / "bodies.parquet")
    bodies.loc[0, "z0"] -= 0.5 * TOUCH_TOL
    bodies.to_parquet(out / "bodies.parquet")
    _, report, _ = dataset.validate(out)
    assert not report, report.text()
    bodies.loc[0, "z0"] -= TOUCH_TOL
    bodies.to_parquet(out / "bodies.parquet")
    _, report, _ = dataset.validate(out)
    assert "below the ground at the first sample" in report.text()
    assert "by more than 0.001 m" in report.text()

"""Law and shape tables refuse what they do not know: a contact law or a
shape registered without a kernel in an engine is refused by name before
that engine runs, and each dispatcher, handed a code it has no kernel
for, answers NaN or "no pair", never another law's or shape's physics."""

from dataclasses import replace

import numpy as np
import pytest

from simcore import engine as E
from simcore import model as M
from simcore.geometry import collision
from simcore.laws import penalty, registry
from simcore.spin import spin_impact

DUMMY = 99


def _sliding():
    sc = M.Scenario(radius=[0.03, 0.03], mass=[0.17, 0.17], pos=[[0, 0, 0.03], [0.2, 0, 0.03]],
                    vel=[[1.0, 0, 0], [0, 0, 0]], t_end=0.5)
    return M.build([sc])


def _spin():
    sc = M.Scenario(radius=[0.028575], mass=[0.17], pos=[[0, 0, 0.028575]], vel=[[1.0, 0, 0]],
                    omega=[[0, 0, 0]], t_end=0.5)
    return M.build([sc], spin=True)


def _rigid():
    sc = M.Scenario(radius=[np.nan], mass=[0.37], pos=[[0, 0, 0.2]], vel=[[0, 0, 0]],
                    omega=[[0, 0, 0]], quat=[[1, 0, 0, 0]], t_end=0.2, dt=2.5e-4,
                    shape=("box",), extent=[[0.05, 0.05, 0.05]])
    return M.build([sc])


ENGINES = {"sliding engine": _sliding, "spin engine": _spin, "rigid engine": _rigid}


@pytest.fixture
def dummy_law(monkeypatch):
    """A law registered for every kind, of either family, with no kernel anywhere."""
    law = registry.Law("dummy", DUMMY, registry.KINDS, False, "a law without kernels", "test")
    monkeypatch.setattr(registry, "REGISTRY", registry.REGISTRY + (law,))
    monkeypatch.setattr(registry, "BY_NAME", dict(registry.BY_NAME, dummy=law))
    return law


@pytest.mark.parametrize("which", sorted(ENGINES))
@pytest.mark.parametrize("kind", range(3))
def test_every_engine_refuses_a_registered_law_without_its_kernel(which, kind, dummy_law):
    model, state = ENGINES[which]()
    codes = model.layout.law_codes.copy()
    codes[kind] = DUMMY
    model = replace(model, layout=replace(model.layout, law_codes=codes))
    with pytest.raises(ValueError, match=rf"contact law 'dummy' \({registry.KINDS[kind]}\) "
                                         rf"has no kernel in the {which}"):
        E.simulate(model, state)


@pytest.mark.parametrize("which", sorted(ENGINES))
def test_every_engine_refuses_a_shape_without_its_kernel(which, monkeypatch):
    monkeypatch.setattr(collision, "SHAPE_NAMES", collision.SHAPE_NAMES + ("capsule",))
    model, state = ENGINES[which]()
    shape = model.body_shape.copy()
    shape[0, 0] = len(collision.SHAPE_NAMES) - 1
    with pytest.raises(ValueError, match=rf"shape 'capsule' has no kernel in the {which}"):
        E.simulate(replace(model, body_shape=shape), state)


def test_building_a_model_refuses_a_shape_no_integrator_runs(monkeypatch):
    monkeypatch.setattr(collision, "SHAPE_NAMES", collision.SHAPE_NAMES + ("capsule",))
    sc = M.Scenario(radius=[np.nan], mass=[1.0], pos=[[0, 0, 1.0]], vel=[[0, 0, 0]],
                    omega=[[0, 0, 0]], quat=[[1, 0, 0, 0]], t_end=0.1, shape=("capsule",),
                    extent=[[0.1, 0.1, 0.1]])
    with pytest.raises(ValueError, match="capsule"):
        M.build([sc])


def test_the_dispatchers_answer_nothing_for_an_unknown_code():
    """Each dispatcher handed a code without a kernel: NaN or no pair."""
    row = np.zeros(penalty.NCOEF)
    row[penalty.C_K_IMP], row[penalty.C_N1_IMP], row[penalty.C_P_MAX] = 1e5, 1.0, 1e-3
    assert penalty.normal_force(penalty.LAW_IMPACT, row, 1e-4, 0.0, 1.0) > 0.0
    assert np.isnan(penalty.normal_force(DUMMY, row, 1e-4, 0.0, 1.0))
    with pytest.raises(ValueError, match="penalty law code 99 has no kernel"):
        penalty.stiffness(DUMMY, row, 1e-4, 1.0)
    law = registry.PairLaw(DUMMY, 0.9, 0.1, 0.0, 0.0)
    assert np.isnan(registry.slip_bound(law, -1.0, 1.0, 0.5, 2.0))
    assert registry.slip_bound(law._replace(code=registry.LAW_IMPULSE), -1.0, 1.0, 0.5,
                               2.0) == pytest.approx(0.1)
    dv, dw = np.zeros(3), np.zeros(3)
    jn, jt, _ = spin_impact.ball_cushion(DUMMY, 0.9, 0.2, 1.0, np.array([-1.0, 0.3, 0.0]),
                                         np.zeros(3), 0.17, 0.03, np.array([1.0, 0, 0]), dv, dw)
    assert np.isnan(jn) and np.isnan(jt) and np.isnan(dv).all()
    assert collision.body_pair(7, collision.SHAPE_SPHERE)[0] == collision.NO_PAIR
    assert collision.plane_pair(7) == collision.NO_PAIR
    assert collision.toi_body_plane(7, np.zeros(3), np.zeros(3), np.zeros(3), 0.1,
                                    np.array([0, 0, 1.0]), 0.0, 1.0) == collision.UNSUPPORTED


@pytest.mark.parametrize("which", sorted(ENGINES))
def test_past_the_host_check_every_engine_stops_an_unknown_shape(which, monkeypatch):
    """With ``simulate``'s refusal bypassed, each engine's own kernels stop
    a scenario holding a shape code they have no kernel for with
    STATUS_UNSUPPORTED_PAIR (the time-stepper: before any contact point,
    never a box's corners)."""
    model, state = ENGINES[which]()
    shape = model.body_shape.copy()
    shape[0, 0] = DUMMY
    monkeypatch.setattr(E, "_refuse_unknown", lambda model, engine: None)
    with pytest.raises(RuntimeError, match="a pair of shapes has no contact function"):
        E.simulate(replace(model, body_shape=shape), state)


def test_the_time_steppers_pair_table_refuses_an_unknown_shape():
    """The table's source run as Python (its kernels have no Python entry
    point; the engine test above runs them compiled)."""
    from simcore.geometry import faces

    pair_of, known = faces.pair_of.py_func, faces.known.py_func
    box, ball = collision.SHAPE_BOX, collision.SHAPE_SPHERE
    assert pair_of(ball, ball) == (faces.PAIR_SPHERE_SPHERE, False)
    assert pair_of(box, ball) == (faces.PAIR_SPHERE_BOX, True)
    assert pair_of(box, box) == (faces.PAIR_BOX_BOX, False)
    assert pair_of(DUMMY, box)[0] == faces.PAIR_NONE
    assert not known(DUMMY) and known(box) and known(ball)
    ext = np.array([0.1, 0.2, 0.2])
    assert faces.bounding_radius.py_func(box, ext) == pytest.approx(0.3)
    assert faces.bounding_radius.py_func(ball, ext) == 0.1
    assert np.isnan(faces.bounding_radius.py_func(DUMMY, ext))


def test_the_shape_table_refuses_an_unknown_code():
    from simcore.geometry import shapes

    with pytest.raises(ValueError, match="shape code 99 has no row.*'sphere', 'box'"):
        shapes.of(DUMMY)
    with pytest.raises(ValueError, match="shape code 99"):
        shapes.by_shape(np.array([0, DUMMY]), "size", np.ones((2, 3)))
    with pytest.raises(ValueError, match="shape code 99"):
        shapes.flags(np.array([DUMMY]), "oriented")

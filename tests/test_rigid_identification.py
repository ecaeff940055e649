"""Identification on rigid bodies: synthetic box tosses, the ``state``
nuisance, segments of a long toss and where a body comes to rest."""

from dataclasses import replace

import numpy as np
import pytest

from simcore import dataset as D
from simcore import engine as E
from simcore import model as M
from simcore import synth
from simcore import tangent as T
from simcore.problem import Problem
from simcore.rigid import lowest, quat_rate

from .test_rigid import cube


@pytest.fixture(scope="module")
def tosses(tmp_path_factory):
    """Three generated cube tosses, without noise and with the default 1 mm."""
    root = tmp_path_factory.mktemp("tosses")
    out = {}
    for noise in (0.0, 1.0):
        cfg = synth.GeneratorSettings(shape="box", scenarios=3, duration=1.2, rate=148.0,
                                      noise_mm=noise, noise_deg=0.5 * noise)
        out[noise] = synth.generate(root / f"n{noise}", cfg)
    return out


def test_quat_rate_is_the_rotation_over_the_span():
    axis = np.array([0.0, 0.6, 0.8])
    q0 = np.array([np.cos(0.2), *(np.sin(0.2) * np.array([1.0, 0, 0]))])
    turn = np.r_[np.cos(0.15), np.sin(0.15) * axis]  # 0.3 rad about axis, world frame
    w, v = turn[0], turn[1:]
    q1 = np.r_[w * q0[0] - v @ q0[1:], w * q0[1:] + q0[0] * v + np.cross(v, q0[1:])]
    assert np.allclose(quat_rate(q0, q1, 0.5), 0.3 / 0.5 * axis, atol=1e-12)
    assert np.allclose(quat_rate(q0, -q1, 0.5), 0.3 / 0.5 * axis, atol=1e-12)  # same rotation
    assert np.allclose(quat_rate(q0, q0, 0.5), 0.0)


def test_generated_tosses_replay_at_the_truth_to_their_noise(tosses):
    ds = D.read(tosses[1.0])
    assert ds.meta["truth"] == synth.TRUTH_BOX
    prob = Problem.from_dataset(ds)
    assert prob.model.body_shape[0, 0] == 1 and prob.targets.states["quat"].shape[-1] == 4
    model = prob.model.with_params(prob.model.layout.vector(synth.TRUTH_BOX))
    res = E.simulate(model, prob.state, prob.targets.sample_times)
    rms = np.sqrt(np.mean((res.samp_pos - prob.targets.measured) ** 2))
    assert rms == pytest.approx(1e-3, rel=0.1)  # the data's own model: the noise alone
    # the orientations too: within a few times the noise
    q = prob.targets.states["quat"][:, 0]
    dots = np.abs(np.sum(q * res.samp_quat[:, 0], axis=1))
    assert np.degrees(2 * np.arccos(np.clip(dots, -1, 1))).mean() < 2.0


def test_segments_cut_the_tosses_and_start_from_the_measured_states(tosses):
    prob = Problem.from_dataset(tosses[0.0])
    seg = prob.segmented(0.1)
    rest = prob.rest_time()
    assert np.all((rest > 0.3) & (rest < 1.2))  # thrown, tumbled, stopped
    names = list(seg.model.names)
    assert names[0] == "toss0000#0" and seg.ids[1] == "toss0000#1"
    t0, t1 = seg.state.time, seg.model.scen_t_end
    for sid in prob.ids:
        mine = [k for k, n in enumerate(names) if n.startswith(sid + "#")]
        assert np.allclose(t0[mine[1:]], t1[mine[:-1]])  # contiguous
        assert t0[mine[0]] == 0.0 and t1[mine[-1]] == pytest.approx(rest[prob.ids.index(sid)])
        assert np.all(np.diff(t0[mine]) >= 0.1 - 1e-9)
    # each segment's samples lie in (start, end]; its start is the measured state
    ptr = np.r_[0, np.cumsum([len(t) for t in prob.targets.sample_times])]
    truth = E.simulate(prob.model.with_params(prob.model.layout.vector(synth.TRUTH_BOX)),
                       prob.state, prob.targets.sample_times)
    for k in range(1, seg.nscen):
        ts = seg.targets.sample_times[k]
        if names[k].endswith("#0"):
            continue
        assert ts[0] > t0[k] and ts[-1] <= t1[k] + 1e-12
        s = prob.ids.index(names[k].split("#")[0])
        j = ptr[s] + int(np.argmin(np.abs(prob.targets.sample_times[s] - t0[k])))
        ext = prob.model.body_ext[s, 0]
        assert lowest(seg.state.body_pos[k, 0], seg.state.body_quat[k, 0], ext, False) >= -1e-12
        assert np.allclose(seg.state.body_quat[k, 0], prob.targets.states["quat"][j, 0])
        # noiseless data, a start in smooth motion: its velocity is the truth's
        # (to the half step by which the stepper's velocity leads: g h / 2)
        assert np.linalg.norm(seg.state.body_vel[k, 0] - truth.samp_vel[j, 0]) < 3e-3
    # at the truth, the segments replay the noiseless data closely
    th = seg.model.layout.vector(synth.TRUTH_BOX)
    assert seg.loss_only(th) < 1e-6


def test_state_nuisance_gradient_matches_differences_of_the_loss(tosses):
    prob = Problem.from_dataset(tosses[1.0]).subset([0])
    seg = prob.segmented(0.15)
    lay = seg.model.layout
    th = lay.vector(synth.TRUTH_BOX)
    free = [lay.index("mu_k"), lay.index("e_bg")]
    nuis = seg.nuisance_start("state", th)
    assert nuis.shape == (seg.nscen, 6)
    assert list(seg.nuisance_columns("state")[1]) == ["vx", "vy", "vz", "wx", "wy", "wz"]
    ev = seg.evaluate(th, free, "state", nuis)
    assert np.all(ev.nondiff == 0)
    k = 1  # a segment after the first, from a measured start
    for c in range(6):
        h = 1e-6
        up, dn = nuis.copy(), nuis.copy()
        up[k, c] += h
        dn[k, c] -= h
        fd = (seg.loss_only(th, "state", up) - seg.loss_only(th, "state", dn)) / (2 * h)
        assert ev.loss.grad[k, 2 + c] == pytest.approx(fd, rel=1e-4, abs=1e-12)
    with pytest.raises(ValueError, match="nuisance 'state'.*time-stepper"):
        sliding = M.build([M.Scenario(radius=[0.03], mass=[0.2], pos=[(0, 0, 0.03)],
                                      vel=[(1, 0, 0)], t_end=1.0)])
        Problem(*sliding, prob.targets).nuisance_size("state")


def test_segments_of_boxes_need_orientations(tosses):
    prob = Problem.from_dataset(tosses[0.0])
    bare = replace(prob, targets=replace(prob.targets, states=None))
    with pytest.raises(ValueError, match="toss0000.*orientations"):
        bare.segmented(0.1)


def test_blown_up_tangents_are_marked_for_finite_differences(monkeypatch):
    model, state = M.build([cube((0, 0, 0.05), vel=(0.3, 0, 0), t_end=0.1, dt=2e-4)],
                           params={"mu_k": 0.3})
    dirs = E.Directions.build(params=[model.layout.index("mu_k")])
    assert E.simulate(model, state, None, directions=dirs).sens.nondiff[0] == 0
    monkeypatch.setattr(E, "TANGENT_BLOWUP", 1e-9)
    assert E.simulate(model, state, None, directions=dirs).sens.nondiff[0] & T.ND_STIFF

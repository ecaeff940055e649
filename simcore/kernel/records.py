"""The records every engine's batch driver hands its per-scenario kernel:
the event engines' batch of spheres, the outputs of a batch run (one record
for every engine), the tangent buffers.  NamedTuples of arrays, built by
keyword in one place each (:mod:`simcore.engine`)."""

from typing import NamedTuple

import numpy as np

from .events import EVF_WIDTH, EVI_WIDTH


class TangentIO(NamedTuple):
    """Sensitivity inputs and outputs (see :mod:`simcore.sliding.tangent`): the
    directions ``t_param``, ``t_vel``, ``t_ctrl (NT,)``; the measured
    positions ``meas (ns, nbmax, 3)`` at the sample times (NaN: missing; no
    rows: no trajectory loss) and the residual sums ``tr_sse``, ``tr_grad
    (NT,)``, ``tr_gn (NT, NT)`` (or ``(0, 0)``); the final-state tangents
    ``fin_tpos``, ``fin_tvel (nbmax, 3, NT)``; the event tangents ``ev_tt
    (cap, NT)``, ``ev_tdva``, ``ev_tdvb (cap, 3, NT)``; ``signal (NT,)`` and
    ``nondiff``; ``t_omega (NT,)`` the initial-spin directions (read by the
    spinning model and the time-stepper), ``t_pos``, ``t_rot (NT,)`` the
    initial position and orientation directions (the time-stepper only; a
    small world-frame turn of the start's orientation).  Per batch, every
    array but the directions and ``meas`` has a leading scenario axis."""

    t_param: np.ndarray
    t_vel: np.ndarray
    t_ctrl: np.ndarray
    meas: np.ndarray
    tr_sse: np.ndarray
    tr_grad: np.ndarray
    tr_gn: np.ndarray
    fin_tpos: np.ndarray
    fin_tvel: np.ndarray
    ev_tt: np.ndarray
    ev_tdva: np.ndarray
    ev_tdvb: np.ndarray
    signal: np.ndarray
    nondiff: np.ndarray
    t_omega: np.ndarray
    t_pos: np.ndarray
    t_rot: np.ndarray


class Batch(NamedTuple):
    """A batch's constants as the kernels see them (a :class:`Model`'s arrays
    in scenario order, controls in CSR form, sample times in CSR form), for
    both loops (the spinning one reads ``wall_height`` and ignores the
    controls, dt and integrator)."""

    body_count: np.ndarray
    body_shape: np.ndarray
    body_radius: np.ndarray
    body_mass: np.ndarray
    body_material: np.ndarray
    wall_count: np.ndarray
    wall_normal: np.ndarray
    wall_offset: np.ndarray
    wall_material: np.ndarray
    ctrl_ptr: np.ndarray
    ctrl_body: np.ndarray
    ctrl_t0: np.ndarray
    ctrl_t1: np.ndarray
    ctrl_force: np.ndarray
    scen_t_end: np.ndarray
    scen_dt: np.ndarray
    samp_ptr: np.ndarray
    samp_t: np.ndarray
    params: np.ndarray
    bb_idx: np.ndarray
    bw_idx: np.ndarray
    bg_idx: np.ndarray
    laws: np.ndarray
    gravity: float
    ground_z: float
    integrator: int
    wall_height: np.ndarray
    ctrl_torque: np.ndarray


class Outputs(NamedTuple):
    """What a batch run writes, the same record for every engine (a field an
    engine does not write has no rows): the state ``pos``, ``vel``, ``omega
    (nscen, nbmax, 3)``, ``quat (nscen, nbmax, 4)`` and ``time (nscen,)``
    (start times in, end times out); the samples ``out_pos``, ``out_vel``,
    ``out_omega (M, nbmax, 3)``, ``out_quat (M, nbmax, 4)`` (or no rows: not
    kept); the event logs ``ev_f (nscen, cap, EVF_WIDTH)``, ``ev_i (nscen,
    cap, EVI_WIDTH)``; each scenario's ``status``
    (:mod:`simcore.kernel.status`), event count ``ev_count`` and steps taken
    ``steps (nscen,)`` (the time-stepper's)."""

    pos: np.ndarray
    vel: np.ndarray
    omega: np.ndarray
    quat: np.ndarray
    time: np.ndarray
    out_pos: np.ndarray
    out_vel: np.ndarray
    out_omega: np.ndarray
    out_quat: np.ndarray
    ev_f: np.ndarray
    ev_i: np.ndarray
    status: np.ndarray
    ev_count: np.ndarray
    steps: np.ndarray


def outputs(pos, vel, time, *, omega=None, quat=None, rows=0, cap=0, spin=False, turn=False,
            zeros=np.zeros):
    """The :class:`Outputs` of a run from the state ``pos``, ``vel``, ``time``
    (and ``omega``, ``quat`` where the engine carries them): ``rows`` samples
    kept (``zeros`` allocates the positions and velocities; the angular
    velocities with ``spin``, the orientations with ``turn``), ``cap`` events
    per scenario (logs left uninitialised: the kernels write what they count)."""
    nscen, nb = pos.shape[:2]
    no3, no4 = np.zeros((0, nb, 3)), np.zeros((0, nb, 4))
    return Outputs(
        pos=pos, vel=vel, omega=no3 if omega is None else omega,
        quat=no4 if quat is None else quat, time=time,
        out_pos=zeros((rows, nb, 3)), out_vel=zeros((rows, nb, 3)),
        out_omega=np.zeros((rows, nb, 3)) if spin else no3,
        out_quat=np.zeros((rows, nb, 4)) if turn else no4,
        ev_f=np.empty((nscen, cap, EVF_WIDTH)), ev_i=np.empty((nscen, cap, EVI_WIDTH), np.int64),
        status=np.zeros(nscen, np.int64), ev_count=np.zeros(nscen, np.int64),
        steps=np.zeros(nscen, np.int64))

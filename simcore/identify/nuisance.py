"""Nuisance kinds: per-scenario unknowns fitted beside the coefficients.

One class per kind, each answering the same questions for a
:class:`~simcore.identify.problem.Problem`: how many values a scenario
has (``size``), what each column is (``columns``), which are real rather
than padding (``count`` per scenario), where a fit starts (``start``), how
a value enters the simulation (``apply``), which values a truncated
horizon cuts (``cut``) and along which directions the engine's tangents
run (``directions``).  :data:`KINDS` is the table
``Problem`` and the fit read; a kind not in it is refused by name.

Layouts of ``nuis (nscen, size)``, body-major:

* ``velocity``: each body's initial horizontal velocity ``(vx0, vy0)``;
* ``push``: each control window's horizontal force ``(fx, fy)``, in the
  scenario's control order;
* ``spin`` (the spinning model): ``(vx0, vy0)`` of every body, then
  ``(wx0, wy0, wz0)`` of every body;
* ``state`` (the time-stepper): ``(vx0, vy0, vz0)`` of every body, then
  ``(wx0, wy0, wz0)`` of every body;
* ``pose`` (the time-stepper): ``state``'s columns, then ``(x0, y0, z0)``
  of every body, then ``(rx0, ry0, rz0)``: a small world-frame turn of each
  body's recorded start orientation (``exp(r / 2) q``), the whole start of
  a toss refined from its samples, since a real toss's first sample is as
  noisy as any.
"""

from dataclasses import replace

import numpy as np

from .. import params as P
from ..sliding.integrate import RIGID


class Nuisance:
    """No nuisance (``"none"``): the base every kind refines."""

    name = "none"
    #: Whether a run without tangents (secant derivatives, an orientation
    #: loss) takes central differences of the values (else it holds them);
    #: a differenced kind gives each column's natural size, ``scales``
    #: (its ``components`` as :meth:`columns` names them), which the
    #: relative step multiplies.
    differenced = False

    def size(self, model):
        """Nuisance values per scenario (the widest scenario's)."""
        return 0

    def columns(self, k):
        """``(slot, component)`` of each of the ``k`` columns: the body or
        control window it belongs to, and what it is."""
        return np.arange(k) // 2, np.array(["x", "y"] * (k // 2), object)

    def count(self, model):
        """Slots (bodies or control windows) each scenario really has."""
        return np.zeros(model.nscen, np.int64)

    def start(self, problem, k, theta):
        """The values a fit starts from, ``(nscen, k)``."""
        return np.zeros((problem.nscen, k))

    def apply(self, model, state, nuis):
        """``(model, state)`` with the nuisance values set."""
        return model, state

    def cut(self, model, k, theta):
        """``(nscen, k)``: values a truncated problem's horizon
        (``model.scen_t_end``) cuts, to be held; or None."""
        return None

    def directions(self, nbmax, ncmax):
        """``(velocities, controls, spins, positions, turns)``: the engine's
        tangent directions (slot, component) of the nuisance columns, in
        their order (:meth:`simcore.engine.Directions.build`'s)."""
        return [], [], [], [], []


class Velocity(Nuisance):
    """Each body's initial horizontal velocity."""

    name = "velocity"

    def size(self, model):
        return 2 * model.body_radius.shape[1]

    def count(self, model):
        return model.body_count

    def start(self, problem, k, theta):
        return problem.state.body_vel[:, :, :2].reshape(problem.nscen, -1).copy()

    def apply(self, model, state, nuis):
        state = state.copy()
        state.body_vel[:, :, :2] = nuis.reshape(model.nscen, -1, 2)
        return model, state

    def directions(self, nbmax, ncmax):
        return [(i, d) for i in range(nbmax) for d in (0, 1)], [], [], [], []


class Push(Nuisance):
    """Each control window's horizontal force, the ``input`` loss its
    regulariser; a push stuck on the static plateau starts from its
    window's measured motion (:meth:`Problem.push_from_data`)."""

    name = "push"

    def size(self, model):
        return 2 * int(np.diff(model.ctrl_ptr).max(initial=0))

    def count(self, model):
        return np.diff(model.ctrl_ptr)

    def start(self, problem, k, theta):
        m = problem.model
        out = np.zeros((problem.nscen, k))
        force = m.ctrl_force[:, :2].copy()
        if theta is not None and force.shape[0]:
            est, stuck = problem.push_from_data(theta)
            force[stuck] = est[stuck]
        for s in range(problem.nscen):
            rows = np.arange(m.ctrl_ptr[s], m.ctrl_ptr[s + 1])
            out[s, :2 * rows.size] = force[rows].ravel()
        return out

    def apply(self, model, state, nuis):
        if not model.ctrl_body.shape[0]:
            return model, state
        force = model.ctrl_force.copy()
        owner = np.repeat(np.arange(model.nscen), np.diff(model.ctrl_ptr))
        local = np.arange(force.shape[0]) - model.ctrl_ptr[owner]
        force[:, 0] = nuis[owner, 2 * local]
        force[:, 1] = nuis[owner, 2 * local + 1]
        return replace(model, ctrl_force=force), state

    def cut(self, model, k, theta):
        """Windows that started before the horizon's end and end after it:
        their few samples inside barely inform them, and a warm-up stage
        that moves them anyway can leave the next stage in a basin of its
        own; each is held until a stage covers it whole."""
        lag = theta[P.TIME_OFFSET]
        owner = np.repeat(np.arange(model.nscen), np.diff(model.ctrl_ptr))
        local = np.arange(owner.size) - model.ctrl_ptr[owner]
        end = model.scen_t_end[owner]
        cut = (model.ctrl_t0 + lag < end) & (model.ctrl_t1 + lag > end)
        out = np.zeros((model.nscen, k), bool)
        out[owner[cut], 2 * local[cut]] = True
        out[owner[cut], 2 * local[cut] + 1] = True
        return out

    def directions(self, nbmax, ncmax):
        return [], [(q, d) for q in range(ncmax) for d in (0, 1)], [], [], []


class _Launch(Nuisance):
    """Each body's initial velocity (its first ``planar`` components) and
    angular velocity: the velocities of every body, then the spins."""

    planar = 2

    def size(self, model):
        return (self.planar + 3) * model.body_radius.shape[1]

    def columns(self, k):
        nb, v = k // (self.planar + 3), self.planar
        slot = np.r_[np.arange(v * nb) // v, np.arange(3 * nb) // 3]
        return slot, np.array(["vx", "vy", "vz"][:v] * nb + ["wx", "wy", "wz"] * nb, object)

    def count(self, model):
        return model.body_count

    def start(self, problem, k, theta):
        nb, v = k // (self.planar + 3), self.planar
        out = np.zeros((problem.nscen, k))
        out[:, :v * nb] = problem.state.body_vel[:, :, :v].reshape(problem.nscen, -1)
        out[:, v * nb:] = problem.state.body_omega.reshape(problem.nscen, -1)
        return out

    def apply(self, model, state, nuis):
        state = state.copy()
        nb, v = state.body_vel.shape[1], self.planar
        state.body_vel[:, :, :v] = nuis[:, :v * nb].reshape(model.nscen, -1, v)
        state.body_omega[:] = nuis[:, v * nb:].reshape(model.nscen, -1, 3)
        return model, state

    def directions(self, nbmax, ncmax):
        vel = [(i, d) for i in range(nbmax) for d in range(self.planar)]
        return vel, [], [(i, d) for i in range(nbmax) for d in (0, 1, 2)], [], []


class Spin(_Launch):
    """The spinning model's horizontal launch velocity and spin: a real shot
    never knows the cue ball's spin exactly."""

    name = "spin"

    def size(self, model):
        if not model.spin:
            raise ValueError("nuisance 'spin' (initial velocities and spins): the model "
                             "does not spin; add model: {spin: true} to dataset.yaml")
        return super().size(model)


class State(_Launch):
    """The time-stepper's 3D initial velocity and angular velocity, where a
    toss's or a segment's start is estimated from measured samples.  Held
    where the run has no tangents (secants, an orientation loss): a
    segmented fit of contact coefficients holds its starts there, and one
    that frees the body's own coefficients refines them whole
    (:class:`Pose`; :func:`simcore.identify.fit._segment_nuisance`)."""

    name = "state"
    planar = 3

    def size(self, model):
        if model.integrator not in RIGID:
            raise ValueError("nuisance 'state' (initial 3D velocities and angular "
                             "velocities) needs the time-stepper: boxes or a penalty law")
        return super().size(model)


class Pose(State):
    """The time-stepper's whole start: :class:`State`'s velocities and spins,
    then each body's position and a small turn of its orientation;
    differenced where the run has no tangents."""

    name = "pose"
    differenced = True
    #: The blocks of three columns per body, in the order of the directions.
    BLOCKS = (("vx", "vy", "vz"), ("wx", "wy", "wz"), ("x", "y", "z"), ("rx", "ry", "rz"))

    def size(self, model):
        if model.integrator not in RIGID:
            raise ValueError("nuisance 'pose' (each toss's whole start: position, "
                             "orientation, velocity, spin) needs the time-stepper: boxes or a "
                             "penalty law")
        return 12 * model.body_radius.shape[1]

    def columns(self, k):
        nb = k // 12
        slot = np.tile(np.repeat(np.arange(nb), 3), 4)
        return slot, np.array([c for block in self.BLOCKS for c in block * nb], object)

    def start(self, problem, k, theta):
        nb = k // 12
        st = problem.state
        out = np.zeros((problem.nscen, k))
        for j, field in enumerate(("body_vel", "body_omega", "body_pos")):
            out[:, 3 * nb * j:3 * nb * (j + 1)] = getattr(st, field).reshape(problem.nscen, -1)
        return out  # the turns start at zero: the recorded orientation

    def apply(self, model, state, nuis):
        state = state.copy()
        nscen, nb = state.body_vel.shape[:2]
        block = [nuis[:, 3 * nb * j:3 * nb * (j + 1)].reshape(nscen, nb, 3) for j in range(4)]
        state.body_vel[:], state.body_omega[:], state.body_pos[:] = block[:3]
        state.body_quat[:] = turned(state.body_quat, block[3])
        return model, state

    def directions(self, nbmax, ncmax):
        pairs = [(i, d) for i in range(nbmax) for d in (0, 1, 2)]
        return pairs, [], pairs, pairs, pairs

    def scales(self, components):
        """Each column's natural size: velocities 1 m/s, spins 10 rad/s,
        positions 1 cm, turns 0.1 rad."""
        size = {"v": 1.0, "w": 10.0, "r": 0.1}
        return np.array([size.get(c[0], 0.01) for c in components], np.float64)


def turned(quat, rot):
    """``exp(rot / 2) q`` for quaternions ``quat (..., 4)`` (scalar first)
    and world-frame rotation vectors ``rot (..., 3)`` [rad]."""
    angle = np.linalg.norm(rot, axis=-1, keepdims=True)
    half = 0.5 * angle
    axis = np.divide(rot, angle, out=np.zeros_like(rot), where=angle > 0.0)
    w, v = np.cos(half), np.sin(half) * axis
    q0, qv = quat[..., :1], quat[..., 1:]
    return np.concatenate([w * q0 - np.sum(v * qv, axis=-1, keepdims=True),
                           w * qv + q0 * v + np.cross(v, qv)], axis=-1)


#: Every nuisance kind by name.
KINDS = {kind.name: kind() for kind in (Nuisance, Velocity, Push, Spin, State, Pose)}


def kind_of(name):
    """The nuisance kind called ``name``; ValueError naming the known ones."""
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown nuisance {name!r}; expected one of {list(KINDS)}") from None

"""Time integration between events, and the times of mode changes.

Exact integrator (default, ``INTEGRATOR_EXACT``)
    Between two events every body's acceleration ``a`` is constant (gravity,
    control force, kinetic friction ``-mu N t / m`` with a frozen direction,
    contact normal forces), so the motion is integrated in closed form::

        p(s) = p + v s + a s^2 / 2,        v(s) = v + a s.

    It is exact (no truncation error at any order) whenever the sliding
    directions do not rotate; the engine then jumps from event to event and
    ``dt`` plays no part.  Where a direction rotates (a control force across
    the motion, two bodies sliding over each other) the step is bounded by
    ``dt`` and the scheme is first order in ``dt``.

Symplectic Euler (``INTEGRATOR_SYMPLECTIC``, the patent's scheme, claim 5)
    At each grid time ``t_k = t_0 + k dt``: ``v' = v + a dt``, then the bodies
    drift ``p' = p + v' s`` with the new velocity, impacts within the drift
    still found exactly (on the straight drift path).  A body sliding on the
    ground whose velocity would reverse in the kick stops instead (static
    friction never reverses motion).  First order: the stop distance of a
    body sliding from ``v0`` carries an error of about ``v0 dt / 2``.

Mode events (exact integrator only):

* stop: a body in contact with planes and sliding along ``t = v / |v|``
  reaches ``(v + a s) . t = 0`` at ``s = -(v . t) / (a . t)``;
* ``v_th`` crossing: ``|v + a s|^2 = v_th^2``, the first root crossing out of
  the body's current speed regime (the ground friction coefficient changes);
* body-body stick: the relative tangential velocity of a sliding body contact
  reaches zero along its direction.
"""

from dataclasses import dataclass

import numpy as np

from ..geometry.collision import NO_ROOT, first_entry_quadratic
from ..kernel.config import jit

INTEGRATOR_EXACT = 0
INTEGRATOR_SYMPLECTIC = 1
INTEGRATOR_PENALTY = 2
INTEGRATOR_MOREAU = 3
#: The integrators of rigid bodies (:mod:`simcore.rigid.rigid_engine`).
RIGID = (INTEGRATOR_PENALTY, INTEGRATOR_MOREAU)


@dataclass(frozen=True)
class Integrator:
    """A registered integrator: its name (``build(integrator=...)``,
    ``contactfit simulate --integrator``), its code in the kernels, and its
    capabilities: ``runs``, the shapes it can run under each family of
    contact laws (``impulse``: impacts, the patent's laws; ``penalty``:
    forces from penetration, :mod:`simcore.laws.penalty`), whether its
    sensitivities are exact (``differentiable``), and its kind
    (``event-driven``: exact impact times; ``time-stepping``: a fixed step,
    impacts within a step; ``002_*``'s two ways)."""

    name: str
    code: int
    runs: tuple
    differentiable: bool
    meaning: str
    kind: str

    @property
    def shapes(self):
        """Every shape it runs, under any family."""
        return tuple(dict.fromkeys(s for _, shapes in self.runs for s in shapes))

    def covers(self, shapes, family=None):
        """Whether it runs ``shapes`` under laws of ``family`` (None: any)."""
        return any(family in (None, f) and not set(shapes) - set(s) for f, s in self.runs)


EVENT_DRIVEN, TIME_STEPPING = "event-driven", "time-stepping"

#: The integrators, in order of preference: :func:`choose` takes the first
#: whose capabilities cover a batch (a dataset's choice between an
#: event-driven and a time-stepping one follows the events' density:
#: :mod:`simcore.data.dataset.choice`).
REGISTRY = (
    Integrator("exact", INTEGRATOR_EXACT, (("impulse", ("sphere",)),), True,
               "event-exact: closed-form motion between events, exact event times",
               EVENT_DRIVEN),
    Integrator("symplectic", INTEGRATOR_SYMPLECTIC, (("impulse", ("sphere",)),), False,
               "the patent's symplectic Euler over the dt grid, impacts found exactly",
               EVENT_DRIVEN),
    Integrator("penalty", INTEGRATOR_PENALTY, (("penalty", ("sphere", "box")),), True,
               "time-stepping rigid bodies (semi-implicit Euler, sub-stepped to the "
               "contacts' stable step) under penalty contact laws (simcore/rigid_engine.py)",
               TIME_STEPPING),
    Integrator("moreau", INTEGRATOR_MOREAU,
               (("penalty", ("sphere", "box")), ("impulse", ("sphere",))), True,
               "Moreau-Jean time-stepping of rigid bodies against the ground, walls and each "
               "other: velocity-level impulses per step, Newton restitution, Coulomb "
               "friction over the model's cone (simcore/rigid/moreau.py); the sliding "
               "spheres of the patent's impulse law too, where their events are dense",
               TIME_STEPPING),
)
INTEGRATORS = {i.name: i.code for i in REGISTRY}
BY_CODE = {i.code: i for i in REGISTRY}


def candidates(shapes, family=None):
    """The registered integrators that run ``shapes`` under laws of
    ``family`` (None: any), in order of preference."""
    return tuple(it for it in REGISTRY if it.covers(shapes, family))


def choose(shapes, name=None, family=None):
    """The :class:`Integrator` for a batch with these shape names whose
    contact laws are of ``family`` (None: either): ``name`` when given (a
    ``ValueError`` says what it cannot run), else the first registered one
    that runs them all."""
    shapes = set(shapes)
    if name is not None:
        it = next((i for i in REGISTRY if i.name == name), None)
        if it is None:
            raise ValueError(f"integrator = {name!r}: expected one of {list(INTEGRATORS)}")
        if shapes - set(it.shapes):
            raise ValueError(f"integrator {name!r} cannot run shapes "
                             f"{sorted(shapes - set(it.shapes))} (it runs {list(it.shapes)})")
        if family is not None and not it.covers(shapes, family):
            runs = "; ".join(f"{', '.join(s)} under {f} laws" for f, s in it.runs)
            raise ValueError(f"integrator {name!r} runs {runs}; this model's laws are "
                             f"{family} laws")
        return it
    found = candidates(shapes, family)
    if found:
        return found[0]
    raise ValueError(f"no integrator runs shapes {sorted(shapes)}"
                     + (f" with {family} laws" if family else ""))


@jit
def drift(nb, pos, vel, acc, s):
    """Advance every body by ``s`` seconds along its parabola."""
    hs2 = 0.5 * s * s
    for i in range(nb):
        for d in range(3):
            pos[i, d] += vel[i, d] * s + acc[i, d] * hs2
            vel[i, d] += acc[i, d] * s


@jit
def sample(nb, pos, vel, acc, s, out_pos, out_vel):
    """Write the state ``s`` seconds ahead (without advancing) into ``out_*``."""
    hs2 = 0.5 * s * s
    for i in range(nb):
        for d in range(3):
            out_pos[i, d] = pos[i, d] + vel[i, d] * s + acc[i, d] * hs2
            out_vel[i, d] = vel[i, d] + acc[i, d] * s


@jit
def stop_time(v, a, h):
    """Time at which a body sliding along ``v / |v|`` stops, or ``inf``."""
    speed = np.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    if speed == 0.0:
        return NO_ROOT
    # Deceleration along the sliding direction t = v / |v|.
    a_t = (a[0] * v[0] + a[1] * v[1] + a[2] * v[2]) / speed
    if a_t >= 0.0:
        return NO_ROOT
    s = -speed / a_t
    return s if s <= h else NO_ROOT


@jit
def vth_crossing(v, a, v_th, above, h):
    """First time the speed leaves its regime (``above`` or below ``v_th``)."""
    sign = 1.0 if above else -1.0
    # f(s) = |v + a s|^2 - v_th^2, searched for a decreasing crossing of sign * f.
    c0 = sign * ((v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) - v_th * v_th)
    c1 = sign * 2.0 * (v[0] * a[0] + v[1] * a[1] + v[2] * a[2])
    c2 = sign * (a[0] * a[0] + a[1] * a[1] + a[2] * a[2])
    return first_entry_quadratic(c0, c1, c2, h)

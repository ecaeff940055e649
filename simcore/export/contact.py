"""A fitted contact law's two figures that other engines' contact models are
set from: its rebound ratio and its contact duration for a body of mass
``m`` met at speed ``v`` (a drop along the normal, gravity aside).

For the event-exact (impulse) laws the contact is rigid: the rebound is the
coefficient of restitution itself and the duration 0.  For the penalty laws
(:mod:`simcore.laws.penalty`) the drop is integrated with the law's own
force, ``m x'' = -max(F_s(x) + c(x) x', 0)`` from ``x = 0``, ``x' = v``, by
semi-implicit Euler at :data:`DROP_STEPS` steps over the undamped contact's
half period, until the force vanishes with the bodies separating; the
rebound ratio is the separation speed over ``v``.  Hunt-Crossley's is its
``e`` (exactly, by construction); the spring-damper's and the ``003_*``
law's follow from their coefficients and the mass.
"""

import numpy as np

from ..laws import penalty
from ..laws import registry as contact_laws
from ..laws.penalty_row import NCOEF, OWN, SHARED

#: Steps of the drop's integration per undamped half period.
DROP_STEPS = 4000
#: The pair coefficients' row columns, in :data:`~simcore.laws.penalty_row.OWN` order.
_OWN_COLUMNS = (penalty.C_MU_S, penalty.C_MU_K, penalty.C_E)


def law_row(fitted, kind, *materials):
    """The penalty family's coefficient row ``(NCOEF,)`` of contact ``kind``
    between ``materials`` (derived columns filled)."""
    row = np.zeros(NCOEF)
    for col, name in zip(_OWN_COLUMNS, OWN[kind]):
        row[col] = fitted.value(name, *materials)
    for col, name in enumerate(SHARED, start=penalty.C_VE1):
        row[col] = fitted.value(name)
    penalty.derive.py_func(row)
    return row


def drop(fitted, kind, mass, speed, *materials):
    """``(rebound ratio, duration [s])`` of contact ``kind`` between
    ``materials`` for a body of ``mass`` [kg] met at ``speed`` [m/s] (see
    the module)."""
    law = contact_laws.BY_NAME[fitted.law(kind)]
    if law.family != penalty.FAMILY:
        return fitted.value(OWN[kind][2], *materials), 0.0  # its restitution
    code, row = law.code, law_row(fitted, kind, *materials)
    k, n = penalty.spring(code, row)
    depth = penalty.penetration(code, row, mass, speed, 0.0)  # damping aside: an upper bound
    h = np.pi * np.sqrt(mass * depth / max(n * k * depth ** n, 1e-300)) / DROP_STEPS
    x, v, t = 0.0, speed, 0.0  # v: the approach rate x'
    for _ in range(50 * DROP_STEPS):
        spring, damping = penalty.spring_damper_py(code, row, x, speed) if x > 0 else (0.0, 0.0)
        force = max(spring + damping * v, 0.0) if x > 0 else 0.0
        v -= h * force / mass
        x += h * v
        t += h
        if v < 0.0 and (x <= 0.0 or force == 0.0):
            return -v / speed, t
    raise ValueError(f"{fitted.where}: the {law.name} contact of a {mass:g} kg body met at "
                     f"{speed:g} m/s did not end")

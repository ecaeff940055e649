"""Event kinds and the fields of the event log.

Every event the engine logs has one :class:`EventKind`; the kernels write
its integer value, users see its label (``EVENT_KINDS[kind]``).  A new kind
is a new member here (with its label) and the code that logs it
(``engine._log``).

Fields of an event (SI units, world frame; :class:`simcore.engine.SimResult`):

``t``        time [s]
``kind``     :class:`EventKind` value
``a``, ``b`` the body; the other body, the wall index, or -1 (ground, stop, start)
``n (3,)``   normal from a to b, the plane's normal, or the sliding direction (start)
``jn``, ``jt`` normal and tangential impulse [N s]
``dva``, ``dvb (3,)`` velocity change of a and b [m/s]
``slip``     1 slipped, 0 stuck, -1 not an impact
and, with sensitivities, the tangents of ``t``, ``dva`` and ``dvb``.
"""

import enum

import numpy as np


class EventKind(enum.IntEnum):
    """What happened (the integer the kernels log)."""

    BODY_BODY = 0
    BODY_WALL = 1
    BODY_GROUND = 2
    STOP = 3
    START = 4


#: The label of each kind, by value (what tables and reports show).
EVENT_KINDS = ("body-body", "body-wall", "body-ground", "stop", "start")
#: The kinds that are impacts (an impulse between a body and a surface).
IMPACT_KINDS = (EventKind.BODY_BODY, EventKind.BODY_WALL, EventKind.BODY_GROUND)
#: The fields of an event as :meth:`simcore.engine.SimResult.events` returns them.
EVENT_FIELDS = ("t", "kind", "a", "b", "normal", "jn", "jt", "dva", "dvb", "slip")

assert len(EVENT_KINDS) == len(EventKind)


def is_impact(kind):
    """Boolean mask (or bool) of the impact kinds among ``kind`` values."""
    return np.isin(kind, np.array(IMPACT_KINDS, np.int64))

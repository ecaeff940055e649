"""Event kinds and the fields of the event log.

Every event the engine logs has one :class:`EventKind`; the kernels write
its integer value, users see its label (``EVENT_KINDS[kind]``).  A new kind
is a new member here (with its label) and the code that logs it
(``stages.log``).

Fields of an event (SI units, world frame; :class:`simcore.engine.SimResult`):

``t``        time [s]
``kind``     :class:`EventKind` value
``a``, ``b`` the body; the other body, the wall index, or -1 (ground, stop,
             start, the spinning model's transitions)
``n (3,)``   normal from a to b, the plane's normal, or the sliding direction (start)
``jn``, ``jt`` normal and tangential impulse [N s]
``dva``, ``dvb (3,)`` velocity change of a and b [m/s]
``slip``     1 slipped, 0 stuck, -1 not an impact

The time-steppers (:mod:`simcore.rigid.rigid_engine`) log contact phases, not
instantaneous impacts: a pair's ``start`` (the first step at whose start
the two touch) and its ``end`` (the first step at whose start they no longer
do); the end carries the phase's totals: the normal and tangential impulse
on ``a``, its velocity change from the contact ``dva = J / m_a`` (``dvb =
-J / m_b``, 0 for a plane or a fixed body) and the impulse-weighted normal.
A bounce is a phase that ends; a contact still on at the run's end has no
end row.
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
    # The spinning model's transitions (simcore.spin.spin), at closed-form times.
    SLIDE_ROLL = 5
    ROLL_REST = 6
    ROLL_SPIN = 7
    SPIN_REST = 8
    ROLL_SLIDE = 9  # a push makes a rolling ball slip
    # The time-steppers' contact phases (simcore.rigid.rigid_engine): a pair
    # begins touching (start) or stops (end), by the partner's kind.
    BODY_BODY_START = 10
    BODY_WALL_START = 11
    BODY_GROUND_START = 12
    BODY_BODY_END = 13
    BODY_WALL_END = 14
    BODY_GROUND_END = 15


#: The label of each kind, by value (what tables and reports show).
EVENT_KINDS = ("body-body", "body-wall", "body-ground", "stop", "start", "slide_roll",
               "roll_rest", "roll_spin", "spin_rest", "roll_slide", "body-body start",
               "body-wall start", "body-ground start", "body-body end", "body-wall end",
               "body-ground end")
#: The kinds that are impacts (an impulse between a body and a surface).
IMPACT_KINDS = (EventKind.BODY_BODY, EventKind.BODY_WALL, EventKind.BODY_GROUND)
#: The kinds whose ``b`` is a body (the others: a wall index or -1).
BODY_PARTNER_KINDS = (EventKind.BODY_BODY, EventKind.BODY_BODY_START, EventKind.BODY_BODY_END)
#: The fields of an event as :meth:`simcore.engine.SimResult.events` returns them.
EVENT_FIELDS = ("t", "kind", "a", "b", "normal", "jn", "jt", "dva", "dvb", "slip")

assert len(EVENT_KINDS) == len(EventKind)

# Every kind, and the partner or slip flag of an event that has none, as an
# int64 scalar for the kernels: numba types a global Python int as a literal
# and would compile a kernel once for every kind and partner it is passed.
EV_BODY_BODY = np.int64(EventKind.BODY_BODY)
EV_BODY_WALL = np.int64(EventKind.BODY_WALL)
EV_BODY_GROUND = np.int64(EventKind.BODY_GROUND)
EV_STOP = np.int64(EventKind.STOP)
EV_START = np.int64(EventKind.START)
EV_SLIDE_ROLL = np.int64(EventKind.SLIDE_ROLL)
EV_ROLL_REST = np.int64(EventKind.ROLL_REST)
EV_ROLL_SPIN = np.int64(EventKind.ROLL_SPIN)
EV_SPIN_REST = np.int64(EventKind.SPIN_REST)
EV_ROLL_SLIDE = np.int64(EventKind.ROLL_SLIDE)
EV_PHASE_START = np.int64(EventKind.BODY_BODY_START)  # + 0 body, 1 wall, 2 ground
EV_PHASE_END = np.int64(EventKind.BODY_BODY_END)
NA = np.int64(-1)

#: Columns of a scenario's float event log ``f (cap, EVF_WIDTH)``: the time,
#: the impulses, then three columns each for ``n``, ``dva`` and ``dvb``.
EVF_T, EVF_JN, EVF_JT, EVF_N, EVF_DVA, EVF_DVB = 0, 1, 2, 3, 6, 9
EVF_WIDTH = 12
#: Columns of its integer log ``i (cap, EVI_WIDTH)``.
EVI_KIND, EVI_A, EVI_B, EVI_SLIP = 0, 1, 2, 3
EVI_WIDTH = 4
#: Where each field of :data:`EVENT_FIELDS` is: (log, first column, columns).
FIELD_COLUMNS = {"t": ("f", EVF_T, 1), "kind": ("i", EVI_KIND, 1), "a": ("i", EVI_A, 1),
                 "b": ("i", EVI_B, 1), "normal": ("f", EVF_N, 3), "jn": ("f", EVF_JN, 1),
                 "jt": ("f", EVF_JT, 1), "dva": ("f", EVF_DVA, 3), "dvb": ("f", EVF_DVB, 3),
                 "slip": ("i", EVI_SLIP, 1)}


def is_impact(kind):
    """Boolean mask (or bool) of the impact kinds among ``kind`` values."""
    return np.isin(kind, np.array(IMPACT_KINDS, np.int64))

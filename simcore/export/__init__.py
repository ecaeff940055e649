"""A fit in another simulator's own terms (``contactfit export``).

Each target is a module with ``write(fitted, scene=None, timestep=None) ->
(text, notes)``: the file's text and one line per thing the target cannot
express exactly and the export approximates (also written into the file as
comments).  A fit the target has no counterpart for raises ``ValueError``
with one line saying so.

source    what an export reads: a fit (:class:`Fitted`) and a dataset's scene (:class:`Scene`)
contact   a fitted contact law's rebound ratio and duration (what other engines are set from)
mujoco    MJCF: default classes, and with a dataset the whole scene
mujoco_match  the MJCF's body-ground contact matched in MuJoCo on contactfit's own
          trajectories of a dataset's training scenarios (``--match``; runs MuJoCo)
pooltool  pooltool 0.6's ball parameters, resolver and cushion height
drake     SDFormat with drake:proximity_properties (point contact), the dataset's scene
"""

from . import drake, mujoco, pooltool
from .source import Fitted, Scene

#: The targets, by the name ``--to`` takes: (module, the file suffix).
TARGETS = {"mujoco": (mujoco, ".xml"), "drake": (drake, ".sdf"), "pooltool": (pooltool, ".yaml")}


def write(fitted, target, scene=None, timestep=None):
    """``(text, notes)`` of ``fitted`` for ``target`` (a :data:`TARGETS` name)."""
    if target not in TARGETS:
        raise ValueError(f"--to {target!r}: expected one of {', '.join(TARGETS)}")
    return TARGETS[target][0].write(fitted, scene, timestep)


__all__ = ["TARGETS", "Fitted", "Scene", "write"]

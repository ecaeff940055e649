"""A coefficient's declaration, and the fixed slots the kernels index.

Every physics module declares the coefficients it reads as a tuple
``PARAMETERS`` of :class:`Parameter` (the impulse law in :mod:`impulse`, the
ground friction of sustained contact in :mod:`contact`); the set-up offsets
are declared here, :data:`SETUP_PARAMETERS`; :mod:`simcore.params` gathers them into the named vector,
its defaults, bounds, units and the per-material layout.

The first ``NPARAM`` entries of every coefficient vector are the global
values, in the slot order below; kernels read the offsets at their slot and
every contact coefficient through the material tables
(:class:`simcore.params.Layout`), so per-material entries appended after the
slots need no kernel change.  This module is read by jitted code (the slot
constants): keep it small, since editing it recompiles the engine.
"""

from typing import NamedTuple

import numpy as np

#: Fixed slots of the global coefficients.
MU_S, MU_K, V_TH, MU_BB, E_BB, MU_W, E_BW, E_BG, GROUND_OFFSET, TIME_OFFSET = range(10)
NPARAM = 10

#: The columns of the per-material tables (:class:`simcore.params.Layout`
#: ``bg``, ``bw``, ``bb``): a body of a material on the ground, against a
#: wall, against another body.  Kernels read a column through the index
#: constants below, made from these names, never through a literal.
GROUND_COLUMNS = ("mu_s", "mu_k", "v_th", "e_bg", "mu_r", "mu_sp")
WALL_COLUMNS = ("mu_w", "e_bw", "omega_ratio_w")
BODY_COLUMNS = ("mu_bb", "e_bb", "mu_bb_b", "mu_bb_c")
G_MU_S, G_MU_K, G_V_TH, G_E_BG, G_MU_R, G_MU_SP = map(GROUND_COLUMNS.index, GROUND_COLUMNS)
W_MU_W, W_E_BW, W_OMEGA_RATIO_W = map(WALL_COLUMNS.index, WALL_COLUMNS)
B_MU_BB, B_E_BB, B_MU_BB_B, B_MU_BB_C = map(BODY_COLUMNS.index, BODY_COLUMNS)
#: The columns of the body table (:class:`simcore.params.Layout` ``mass``): a
#: body's own coefficients by its material; and of the scene's (``scene``):
#: the recording's gravity and the ground plane's tilt.  Kernels read them
#: through the constants below; -1 in a table: the layout does not hold it.
MASS_COLUMNS = ("com_x", "com_y", "com_z", "inertia_scale")
SCENE_COLUMNS = ("gravity", "tilt_x", "tilt_y")
M_COM_X, M_COM_Y, M_COM_Z, M_INERTIA = map(MASS_COLUMNS.index, MASS_COLUMNS)
S_GRAVITY, S_TILT_X, S_TILT_Y = map(SCENE_COLUMNS.index, SCENE_COLUMNS)

#: How a coefficient can be addressed per material (see :mod:`simcore.params`):
#: ``ground``: ``NAME@MAT`` (a body of material MAT on the ground);
#: ``wall``: ``NAME@MAT`` (a wall without a material) or ``NAME@A+B`` (body A, wall B);
#: ``body``: ``NAME@A+B`` only (a body-body pair);
#: ``any``: every contact kind (the penalty laws' coefficients): ``NAME@MAT``
#: (a body of MAT on the ground or a wall without a material) or ``NAME@A+B``
#: (bodies A and B, or body A against a wall B);
#: ``mass``: ``NAME@MAT`` only (the bodies of material MAT: a body's own
#: coefficient, not a contact's);
#: ``global``: never (a property of the measurement set-up, not of a material).
CONTACTS = ("ground", "wall", "body", "any", "mass", "global")


class Parameter(NamedTuple):
    """One coefficient: its name, default, closed bounds, SI unit, a one-line
    meaning, what kind of event or segment carries signal for it (the
    identifiability report), the contact it belongs to (one of
    :data:`CONTACTS`), its slot, and, for the set-up offsets, the natural
    size that relative measures take against an offset's zero truth.

    ``law``: the contact law that reads the coefficient (:mod:`simcore.laws.registry`),
    or the family of laws (``"penalty"``: all of them read it), or ``""`` for
    one every model reads.  A law's coefficients have no fixed
    slot (``slot = -1``): a vector holds them, after the fixed slots, only when
    its layout uses the law, and kernels read them through the material tables.
    ``model``: likewise, the motion model that alone reads the coefficient
    (``"spin"``: :mod:`simcore.spin.spin`), or ``""``.  ``named``: a vector
    holds the coefficient only when a fit frees it or a value is given for it
    (the body's own coefficients and the scene's, :data:`BODY_PARAMETERS`,
    :data:`SCENE_PARAMETERS`): a model without it reads the dataset's
    tables (the bodies' centres of mass and inertia, ``gravity``)."""

    name: str
    default: float
    bounds: tuple
    unit: str
    meaning: str
    signal: str
    contact: str
    slot: int
    scale: float = 0.0
    law: str = ""
    model: str = ""
    named: bool = False


#: The offsets of the measurement set-up that every engine applies (the ground
#: plane's height and the controls' clock): not material properties but
#: nuisance unknowns, fixed at 0 unless a fit frees them.
SETUP_PARAMETERS = (
    Parameter("ground_offset", 0.0, (-np.inf, np.inf), "m",
              "height of the real ground above the dataset's ground_z; bodies that start "
              "resting on the nominal ground start resting on the offset one (for offsets "
              "within the reader's 3 mm snap)",
              "body resting on or hitting the ground", "global", GROUND_OFFSET, 1e-3),
    Parameter("time_offset", 0.0, (-np.inf, np.inf), "s",
              "delay of the controls' clock behind the trajectories': a window logged as "
              "[t0, t1) acts over [t0 + time_offset, t1 + time_offset)",
              "control window edge", "global", TIME_OFFSET, 1e-2),
)


#: A body's own coefficients, per material (``com_z@resin``): corrections to
#: the ``bodies`` table, held only when named.  Read by the rigid-body
#: time-steppers (:mod:`simcore.rigid.rigid_engine`); an engine that does not
#: read them refuses a model that holds them.
BODY_PARAMETERS = tuple(
    Parameter(f"com_{axis}", 0.0, (-np.inf, np.inf), "m",
              f"shift of the centre of mass along the body's {axis} axis from the bodies "
              f"table's com_{axis} (the inertia stays the table's, about the shifted centre)",
              "tumbling (a body turning about its centre of mass)", "mass", -1, 5e-3,
              named=True)
    for axis in "xyz") + (
    Parameter("inertia_scale", 1.0, (0.05, 20.0), "1",
              "the principal moments of inertia over the bodies table's ixx, iyy, izz (one "
              "factor for the three: the shape of the mass distribution is the table's)",
              "tumbling and impacts off the centre of mass", "mass", -1, 0.1, named=True),
)

#: The recording's own coefficients, held only when named: its free fall
#: (which a tracker's clock scale ``c`` changes to ``c^2 g``: gravity is
#: fitted, not a clock, since every engine reads it and a clock scale acts
#: on rigid contact exactly as gravity does; a length scale would also scale
#: the bodies' apparent size, which no coefficient here models) and the
#: ground plane's tilt: the table turned by ``tilt_x`` about the world x axis,
#: then by ``tilt_y`` about the world y axis, about the point (0, 0, ground),
#: so that its normal is ``(cos tx sin ty, -sin tx, cos tx cos ty)``
#: (``tilt_x > 0`` lifts the table's +y side, ``tilt_y > 0`` lowers its +x
#: side); gravity stays along -z.
SCENE_PARAMETERS = (
    Parameter("gravity", 9.81, (0.0, 100.0), "m/s^2",
              "the recording's free fall (default: the dataset's gravity, which an import "
              "measures from its flights)", "flight (a body in the air)", "global", -1, 0.1,
              named=True),
    Parameter("tilt_x", 0.0, (-0.5, 0.5), "rad",
              "the ground plane turned about the world x axis (its +y side up)",
              "body sliding or resting on the ground", "global", -1, 1e-2, named=True),
    Parameter("tilt_y", 0.0, (-0.5, 0.5), "rad",
              "the ground plane turned about the world y axis, after tilt_x (its +x side "
              "down)", "body sliding or resting on the ground", "global", -1, 1e-2,
              named=True),
)

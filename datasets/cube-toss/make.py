"""Import the ContactNets cube tosses into ``datasets/cube-toss``, with the
facts of this recording that no import can measure by itself.

Usage: ``python datasets/cube-toss/make.py SOURCE [OUT_DIR]`` where SOURCE
is ContactNets' training tosses as one long table (``toss_id, step, t, x,
y, z, qw..qz, vx..vz, wx..wz``, converted to SI) with
``duplicate_pairs.csv`` beside it.  The same as::

    contactfit import cube-toss SOURCE datasets/cube-toss --duplicates duplicate_pairs.csv \\
        --ground-z -0.0012

Held-out tosses of this recording import under the same model with
``contactfit import cube-toss OTHER OUT --like datasets/cube-toss``.
"""

import sys
from pathlib import Path

from simcore.data.importers import TossModel, cube_tosses

#: The model of this recording (each choice measured on the 453 training
#: tosses; the dataset's README has the figures):
MODEL = TossModel(
    # The free fall is measured by the import (a parabola through each toss's
    # flight samples, the median over the tosses: 9.61 m/s^2, not 9.81) and
    # is the start of the ``gravity`` coefficient the calibration fits; the
    # centre of mass is the cube's centre in the bodies table, the start of
    # the ``com_z`` the calibration fits (``calibrate.yaml``).
    # The table: the median resting centre height (0.0512 m) less the cube's
    # half width.
    ground_z=-0.0012,
    # Below the stability guard's step for this cube's Hunt-Crossley contact
    # (0.26 ms), fixed so that every coefficient set steps alike.
    dt=2.5e-4,
    laws={"body_ground": "hunt_crossley"},
    model={"cone": "elliptic"},
)


def main(argv):
    src = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent
    cube_tosses(src, out, duplicates=src.parent / "duplicate_pairs.csv", model=MODEL)
    print(f"wrote {out}/")


if __name__ == "__main__":
    main(sys.argv[1:])

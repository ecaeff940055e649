"""contactfit's computational core: the contact engines and identification.

Pure computation: nothing here imports Prefect or MLflow.  The rooms, lowest
layer first: ``kernel/``, ``geometry/`` and ``laws/``, the engines
``sliding/``, ``spin/`` and ``rigid/``, then ``params``, ``model``, ``engine``
(:func:`simulate`), ``data/`` and ``identify/`` (``docs/ARCHITECTURE.md``).
"""

from .engine import SimResult, simulate
from .kernel.events import EVENT_KINDS, EventKind
from .model import Model, Scenario, State, build
from .params import DEFAULTS, NAMES

__all__ = ["EVENT_KINDS", "EventKind", "DEFAULTS", "NAMES", "Model", "Scenario", "SimResult",
           "State", "build", "simulate"]

"""contactfit's computational core: the contact engine and (next) identification.

Pure computation: nothing here imports Prefect or MLflow.
"""

from .engine import SimResult, simulate
from .kernel.events import EVENT_KINDS, EventKind
from .model import Model, Scenario, State, build
from .params import DEFAULTS, NAMES

__all__ = ["EVENT_KINDS", "EventKind", "DEFAULTS", "NAMES", "Model", "Scenario", "SimResult",
           "State", "build", "simulate"]

"""contactfit's computational core: the contact engine and (next) identification.

Pure computation: nothing here imports Prefect or MLflow.
"""

from .engine import EVENT_KINDS, SimResult, simulate
from .model import Model, Scenario, State, build
from .params import DEFAULTS, NAMES

__all__ = ["EVENT_KINDS", "DEFAULTS", "NAMES", "Model", "Scenario", "SimResult", "State",
           "build", "simulate"]

"""Reading and writing datasets in the contactfit contract (``datasets/README.md``).

A dataset is a directory: ``dataset.yaml`` plus tables ``NAME.parquet`` or
``NAME.csv`` (same columns): ``bodies``, ``trajectories`` and the optional
``walls``, ``controls``, ``events``, ``scenarios``.  Lengths and times are
converted to SI on read (``units.length`` m, cm or mm; ``units.time`` s or
ms); every table is read with pyarrow, projecting only the contract's
columns, and turned into engine arrays without per-row Python loops.

:func:`read` raises on the first unusable dataset with the grouped report of
every problem; :func:`validate` checks the whole contract and never raises;
:func:`validate_stream` makes the same checks with the trajectories read in
batches, in memory bounded whatever their length (``contactfit validate``);
:func:`shards` and :func:`split` partition scenarios deterministically.

The package by job, each module importing only those above it:

============  ==============================================================
contract      tables, columns, units, ``dataset.yaml`` keys; Report, Dataset
tables        one table's file: read, check columns, convert units, write
scenarios     scenarios, model, measured series, final and initial states
scan          the trajectories in batches and their row checks
load          a directory read into a Dataset
validate      the rules across rows and tables; validate, read
split         shards and the train/held-out split
============  ==============================================================

Names with a leading underscore are the package's own, shared between its
modules; the names below are its interface.
"""

from .contract import (
    TABLES,
    Dataset,
    DatasetError,
    Report,
    Violation,
)
from .scenarios import (
    IDENTITY,
    body_series,
    final_states,
    fitted_initial_states,
    groups,
    position_noise,
    scatter_series,
    scenarios,
    series_index,
    time_offsets,
)
from .split import folds, held_out, shards, split, stable_hash
from .tables import safe_yaml, write_table
from .validate import read, validate, validate_stream

__all__ = [
    "IDENTITY", "TABLES", "Dataset", "DatasetError", "Report", "Violation", "body_series",
    "final_states", "fitted_initial_states", "groups", "position_noise", "read", "safe_yaml",
    "scatter_series", "scenarios", "series_index", "shards", "split", "stable_hash", "held_out",
    "folds", "time_offsets", "validate", "validate_stream", "write_table",
]

"""Printing of the figures, shared by the benchmark modules."""

import json


def emit(out, as_json, width=22):
    """Print the figures ``out``: one JSON object, or one ``name value`` line each."""
    if as_json:
        print(json.dumps(out))
        return
    for k, v in out.items():
        print(f"{k:{width}s} {v:.4g}" if isinstance(v, float) else f"{k:{width}s} {v}")

"""The engine stays readable: no function in simcore/ longer than 120 lines
(def to end, docstring included) or with more than 12 positional parameters
(options of a public function can be keyword-only; a kernel takes its
arrays as records or tuples, which a borrowing kernel reads for free).

An exception would be listed by name with the measurement that keeps it (a
counting kernel on the hot path pays a reference count for every field it
reads from a record); there is none."""

import ast
from pathlib import Path

import pytest

SIMCORE = Path(__file__).resolve().parents[1] / "simcore"
MAX_LINES = 120
MAX_POSITIONAL = 12
#: Kernels kept over the limit, and why (their docstrings say the same).
MEASURED = {}


def _functions():
    for path in sorted(SIMCORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{path.relative_to(SIMCORE)} {node.name}", node


@pytest.mark.parametrize("limit", ["lines", "positional"])
def test_no_function_outgrows_the_limits(limit):
    over = []
    for where, node in _functions():
        lines = node.end_lineno - node.lineno + 1
        positional = len(node.args.posonlyargs) + len(node.args.args)
        if limit == "lines" and lines > MAX_LINES:
            over.append(f"{where}: {lines} lines")
        if limit == "positional" and positional > MAX_POSITIONAL and where not in MEASURED:
            over.append(f"{where}: {positional} positional parameters")
    assert not over, "split these functions or pass records:\n" + "\n".join(over)

"""simcore's rooms: each folder imports only from the layers below it, the
three engines never from each other, no module imports another that
imports it back, and nothing in simcore imports Prefect or MLflow.

Read from the source (every import statement, at module level or inside a
function), not from what happens to be imported at run time."""

import ast
import sys
from pathlib import Path

SIMCORE = Path(__file__).resolve().parents[1] / "simcore"

#: The layers, lowest first: a room imports from lower layers and itself.
#: Rooms of one layer never import each other.
LAYERS = (
    ("kernel",),                     # JIT policy, records, event log, statuses, drivers
    ("geometry", "laws"),            # shapes and contact points; contact laws
    ("sliding", "spin", "rigid", "impacts"),  # the engines: three in time, one of impact maps
    ("params",),                     # the coefficient registry and layout
    ("model",),                      # scenarios built into a batch's constants
    ("engine",),                     # simulate(): one entry for every engine
    ("choice",),                     # which integrator runs a batch: 002's rule, a pilot run
    ("data",),                       # the dataset contract, reading, replay, synthesis
    ("identify", "export"),          # problems, losses, fits; a fit in other engines' terms
)
LAYER = {room: k for k, rooms in enumerate(LAYERS) for room in rooms}


def _module(path):
    parts = list(path.relative_to(SIMCORE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(target, name):
    """``from TARGET import NAME``: the module NAME when it is one, else TARGET."""
    sub = target + [name]
    where = SIMCORE.joinpath(*sub)
    return ".".join(sub if where.with_suffix(".py").exists() or where.is_dir() else target)


def _imports(path):
    """``(line, target)`` of every simcore module or package a file imports,
    as a dotted name relative to simcore; and the third-party roots."""
    name = _module(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found, roots = [], set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - (node.level - 1)]
            target = base + (node.module.split(".") if node.module else [])
            found += [(node.lineno, _resolve(target, a.name)) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root == "simcore":
                found += [(node.lineno, _resolve(node.module.split(".")[1:], a.name))
                          for a in node.names]
            roots.add(root)
        elif isinstance(node, ast.Import):
            for a in node.names:
                roots.add(a.name.split(".")[0])
                if a.name.startswith("simcore."):
                    found.append((node.lineno, a.name.partition(".")[2]))
    return found, roots


def _files():
    return sorted(p for p in SIMCORE.rglob("*.py") if p.name != "__init__.py" or p.parent != SIMCORE)


def test_every_room_is_in_a_layer():
    rooms = {_module(p).split(".")[0] for p in _files()}
    assert rooms == set(LAYER), rooms ^ set(LAYER)


def test_no_room_imports_a_higher_layer_or_a_sibling():
    wrong = []
    for path in _files():
        here = _module(path).split(".")[0]
        for line, target in _imports(path)[0]:
            there = target.split(".")[0]
            if there and there != here and LAYER[there] >= LAYER[here]:
                wrong.append(f"simcore/{path.relative_to(SIMCORE)}:{line} ({here}) imports "
                             f"{target} ({there})")
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    graph = {}
    for path in _files():
        graph.setdefault(_module(path), set()).update(
            t for _, t in _imports(path)[0] if t and (SIMCORE / f"{t.replace('.', '/')}.py").exists())
    state, cycle = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycle.append(stack[stack.index(nxt):] + [nxt] if nxt in stack else [node, nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycle, cycle


def test_simcore_never_imports_prefect_or_mlflow():
    bad = [f"{p.relative_to(SIMCORE)}: {r}" for p in _files()
           for r in _imports(p)[1] & {"prefect", "mlflow", "flows"}]
    assert not bad, bad


def test_the_layering_test_sees_a_violation(tmp_path, monkeypatch):
    """A kernel module importing an engine is caught (the test is not blind)."""
    import shutil

    copy = tmp_path / "simcore"
    shutil.copytree(SIMCORE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    bad = copy / "kernel" / "status.py"
    bad.write_text(bad.read_text() + "\nfrom ..sliding import stages  # noqa\n")
    monkeypatch.setattr(sys.modules[__name__], "SIMCORE", copy)
    try:
        test_no_room_imports_a_higher_layer_or_a_sibling()
    except AssertionError as exc:
        assert "kernel/status.py" in str(exc) and "sliding.stages" in str(exc)
    else:
        raise AssertionError("a kernel module importing an engine went unseen")

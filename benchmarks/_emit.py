"""Timing and printing of the figures, shared by the benchmark modules."""

import json
import time


def best(fn, repeat):
    """The shortest wall time of ``repeat`` calls of ``fn`` [s]."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def best_alternated(fns, repeat):
    """The shortest wall time [s] of each of ``fns`` over ``repeat`` rounds,
    each round calling them in turn: a change of the machine's load
    touches them alike, so their ratios hold."""
    out = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            out[k].append(time.perf_counter() - t)
    return [min(x) for x in out]


def emit(out, as_json, width=22):
    """Print the figures ``out``: one JSON object, or one ``name value`` line each."""
    if as_json:
        print(json.dumps(out))
        return
    for k, v in out.items():
        if isinstance(v, dict):  # a row of figures: one line each, under its key
            print(k)
            for kk, vv in v.items():
                print(f"  {kk:{width - 2}s} {vv:.4g}" if isinstance(vv, float)
                      else f"  {kk:{width - 2}s} {vv}")
            continue
        print(f"{k:{width}s} {v:.4g}" if isinstance(v, float) else f"{k:{width}s} {v}")

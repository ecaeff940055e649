"""Deterministic partitions of a dataset's scenarios: :func:`shards` for
parallel simulation, :func:`split` into training and held-out sets, both
from :func:`stable_hash` of the scenario ids."""

import hashlib

import numpy as np

from .scenarios import series_index
from .tables import _col


def stable_hash(text, seed=0):
    """A 64-bit hash of a string, the same in every process and run (unlike ``hash``)."""
    digest = hashlib.blake2b(f"{seed}:{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def shards(ds, n):
    """Deterministic shards of the scenario ids, balanced by sample count.

    Scenarios are taken largest first (ties broken by their stable hash) and
    each goes to the shard with the fewest samples so far (ties: the lowest
    shard).  The result depends only on the ids and their sample counts:
    the same in every run and process.  Returns a list of ``n`` sorted lists.
    """
    if n < 1:
        raise ValueError(f"shards: n = {n}: expected n >= 1")
    ser = series_index(ds)
    per_code = np.bincount(ser["code"], weights=ser["count"], minlength=len(ds.names))
    counts = {str(ds.names[c]): int(per_code[c]) for c in np.flatnonzero(per_code)}
    order = sorted(counts, key=lambda sid: (-counts[sid], stable_hash(sid)))
    load = [0] * n
    out = [[] for _ in range(n)]
    for sid in order:
        k = min(range(n), key=lambda j: (load[j], j))
        out[k].append(sid)
        load[k] += counts[sid]
    return [sorted(x) for x in out]


def split(ds, test_fraction=0.2, seed=0):
    """``{scenario_id: "train" | "test"}``: the ``scenarios`` table's split when
    it has one, else a seeded fraction by stable hash (the same in every run)."""
    ids = ds.scenario_ids()
    if "scenarios" in ds.tables and "split" in ds.tables["scenarios"].column_names:
        sids = ds.ids_of("scenarios")
        splits = _col(ds, "scenarios", "split").astype(str)
        given = {sids[r]: splits[r] for r in range(len(splits))}
        return {sid: given.get(sid, "train") for sid in ids}
    if not 0.0 <= test_fraction <= 1.0:
        raise ValueError(f"split: test_fraction = {test_fraction}: expected 0 <= f <= 1")
    return dict(zip(ids, np.where(held_out(ids, test_fraction, seed), "test", "train").tolist()))


def held_out(ids, share, seed=0):
    """Which of ``ids`` are held out: those whose :func:`stable_hash` with
    ``seed`` falls in the first ``share`` of its range (the same in any
    order, run and subset of the ids).  ``(len(ids),)`` bool."""
    return np.array([stable_hash(str(i), seed) / 2.0**64 < share for i in ids], bool)


def folds(ids, k, seed=0):
    """Which of ``k`` disjoint folds each of ``ids`` falls in: fold ``j``
    holds those whose :func:`stable_hash` with ``seed`` lies in the ``j``-th
    ``1/k`` of its range, so fold 0 is exactly ``held_out(ids, 1/k, seed)``
    (the importers' test split at ``k = 5``) and every id is held out by
    exactly one fold.  ``(len(ids),)`` int."""
    if k < 2:
        raise ValueError(f"folds: k = {k}: expected k >= 2")
    u = np.array([stable_hash(str(i), seed) / 2.0**64 for i in ids])
    return sum((u >= j / k).astype(int) for j in range(1, k))

"""Datasets: the contract, reading and validation, replay, synthesis, importers."""

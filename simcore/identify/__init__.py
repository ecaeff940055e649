"""Identification: calibration problems, losses and the optimisers."""

"""Shapes: gaps, times of impact and the shape-pair table; rigid-body rotation and inertia; the time-stepper's contact points."""

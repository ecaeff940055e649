"""The sliding spheres' event-exact engine (the patent's model): its loop, stages, sustained contact, drift and tangents."""

"""The spinning balls' event-exact engine (pooltool's motion states): its loop, impacts and tangents."""

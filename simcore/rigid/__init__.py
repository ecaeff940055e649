"""The rigid bodies' penalty time-stepper: its step's stages and tangents."""

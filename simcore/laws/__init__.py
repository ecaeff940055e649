"""Contact laws, one module each, and the registry that chooses one per contact kind."""

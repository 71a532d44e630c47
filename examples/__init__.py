"""The model that docs/migrating.md migrates, one module per step (not part of the package)."""

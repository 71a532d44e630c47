"""The model the README's migration guide migrates, one module per step (not in the package)."""

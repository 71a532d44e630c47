"""The model the migration guide (docs/migrating.md) migrates, one module per step."""

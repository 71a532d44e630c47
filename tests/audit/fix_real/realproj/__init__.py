"""Patterns of real model code that keep tensors where .to() cannot see them."""

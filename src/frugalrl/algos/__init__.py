"""Algorithms: one readable file each."""

"""Thin page functions, one module per page."""

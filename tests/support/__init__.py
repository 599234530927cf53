"""Helpers shared by the test suites (a real PostgreSQL, raw table access)."""

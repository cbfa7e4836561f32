"""Fakes for tests and benchmarks, faithful to verl's interfaces (never used in production paths)."""

"""Scaffolding for tests and benchmarks, not for training: tiny random-weight diffusers pipelines built offline."""

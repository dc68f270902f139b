"""Shared test doubles, loopback servers and fixtures' helpers, imported as ``tests.helpers.<module>``."""

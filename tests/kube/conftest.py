"""Fixtures of the kube tests: ``k8s_double``, the loopback Kubernetes API double (tests/helpers/k8s_double.py)."""

from tests.helpers.k8s_double import k8s_double

__all__ = ["k8s_double"]

"""The GPU monitoring mixin: Prometheus alerts and recording rules and Grafana dashboards, generated from the same
data as ``gpuops alerts`` (kubernetes-mixin's layout: kubernetes-monitoring/kubernetes-mixin: mixin.libsonnet
@16f3cbb405cb34049f970addda755e627aac024e). :mod:`gpulib.mixin.build` writes ``mixin/``; :mod:`gpulib.mixin.lint`
checks the dashboards.

The dashboards need the ``mixin`` extra (``grafana-foundation-sdk``); the rules need nothing beyond the package.
"""

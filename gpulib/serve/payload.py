"""The bodies of ``gpuops serve``'s webhook: Alertmanager's (version 4,
https://prometheus.io/docs/alerting/latest/configuration/#webhook_config) and the answer to it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Alert(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str = ""
    endsAt: str = ""
    generatorURL: str = ""
    fingerprint: str = ""


class WebhookPayload(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: Literal["4"]
    groupKey: str = Field(max_length=4096)
    status: Literal["firing", "resolved"]
    receiver: str = ""
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    truncatedAlerts: int = 0
    alerts: list[Alert] = Field(max_length=1000)


class Accepted(BaseModel):
    runs: list[str]
    attached: list[str]
    deduped: list[str]
    held: int
    elsewhere: int = 0
    resolved: int
    rejected: list[str]

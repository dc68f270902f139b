"""The HTTP side of the Prometheus source: queries go through prometheus-api-client's ``PrometheusConnect``
(https://github.com/4n4nd/prometheus-api-client-python, ``prometheus_api_client/prometheus_connect.py``), with a
deadline, bounded retries, a circuit breaker and a check of the answer's shape around it.

What **prometheus-api-client** does for us: it builds each request of the HTTP API
(https://prometheus.io/docs/prometheus/latest/querying/api/): ``custom_query`` the ``GET /api/v1/query``
with ``query`` and our ``time``, ``custom_query_range`` the ``GET /api/v1/query_range`` with ``query``,
``start``/``end`` (``round(datetime.timestamp())``: we hand it whole seconds, so they pass unchanged) and our
``step`` string; it sends the bearer header (``headers=``) and basic auth (``auth=``) with each request,
through our ``requests.Session`` (``session=``: connection pool, and the TLS verification / CA bundle, which it
reads from a session it is handed; its ``disable_ssl=`` only sets up a session it makes) with the per-attempt
timeout we pass it, and it tells a 200 from any other status (``PrometheusApiClientException``).

What we add, because its API cannot express it:

- **The raw answer.** A response hook on the session keeps each attempt's ``requests.Response`` (per
  thread: ``gpulib/cost/steps.py`` queries one source from two threads). Its 200 branch returns
  ``response.json()["data"]["result"]``, which would raise ``KeyError``/``TypeError`` or requests'
  ``JSONDecodeError`` (a ``RequestException``, by type the same as a network failure) on exactly the
  answers the shape check below exists to name, and would build a Python list per sample where
  :func:`gpulib.sources.prometheus.parse_matrix` reads the bytes with numpy. So the hook gives the Response a
  ``json()`` that decodes nothing, and the kept body is decoded and checked here. Its exception carries only
  a message, so status, ``Retry-After`` and body are read from the kept Response too.
- **Deadline.** Every query (all its attempts and waits together) takes at most the configured timeout
  (``GPUOPS_PROMETHEUS_TIMEOUT``); each attempt gets what is left as its timeout. requests' read timeout is per
  read (a server sending one byte per read never passes it), so the body is read in the response hook with a
  timer armed at the deadline that shuts the connection's socket (the blocked read ends at once) and the query is
  a :class:`~gpulib.core.errors.PrometheusTimeout`. A ``Retry-After``
  (RFC 9110 §10.2.3, https://www.rfc-editor.org/rfc/rfc9110#field.retry-after) longer than what is left ends
  the retries instead of being waited out. Its own retries (urllib3 ``Retry``, by default 3 with
  ``backoff_factor=1`` on 408/429/5xx, ``Retry-After`` honoured however long) know no deadline, so it is
  given ``Retry(0, read=False)`` (requests' own default) and the retries are ours.
- Queries stay ``GET`` (the library's default ``method``); its ``POST`` would carry longer PromQL than a URL
  can, which the selectors built here never need.
- **Circuit breaker.** Once the backend is unreachable, times out, or stays unavailable (502/503/504)
  after the retries, every later call of the same source fails at once with the same cause, so a
  runbook's later steps do not each wait out the timeout again.
- **Shape.** An answer is used only if it is the JSON envelope the HTTP API documents
  (https://prometheus.io/docs/prometheus/latest/querying/api/#format-overview): ``status``,
  ``data.resultType`` and ``data.result`` a list of ``{"metric": {...}, "value" | "values": ...}``.
  Anything else (an HTML login page, a proxy's error page, an empty body, JSON without ``data``) is a
  :class:`~gpulib.core.errors.PrometheusBadResponse` naming the URL.
- **Errors** are this package's :mod:`gpulib.core.errors` classes with the URL and query, the server's
  ``error`` text redacted (:func:`gpulib.core.redact.redact`); the library's exception text (the whole
  body's repr) is never shown.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

from gpulib.core.errors import (
    InvalidQuery,
    PrometheusBadResponse,
    PrometheusError,
    PrometheusHTTPError,
    PrometheusTimeout,
    PrometheusUnreachable,
)
from gpulib.core.redact import redact

#: statuses worth another attempt (a proxy or Prometheus restarting / overloaded)
RETRY_STATUSES = (502, 503, 504)
#: first backoff in seconds, doubled per attempt (urllib3's backoff_factor convention)
BACKOFF = 0.3


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    v = value.strip()
    if v.isdigit():
        return float(v)
    try:
        return max(0.0, parsedate_to_datetime(v).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def _detail(body: bytes, limit: int = 200) -> str:
    text = body[:4096].decode("utf-8", errors="replace")
    m = re.search(r'"error"\s*:\s*"((?:[^"\\]|\\.){0,400})"', text)
    s = m.group(1) if m else " ".join(text.split())
    return redact(s[:limit])


def check_result(doc, url: str, query: str, kind: str) -> list:
    """``data.result`` of a decoded answer, after checking its shape; PrometheusBadResponse otherwise.
    ``kind`` is ``vector`` (instant query) or ``matrix`` (range query)."""

    def bad(why: str):
        return PrometheusBadResponse(
            f"{url} answered 200 but not like a Prometheus API for query {query!r}: {why}", url=url, query=query
        )

    if not isinstance(doc, dict):
        raise bad(f"the JSON is a {type(doc).__name__}, not an object")
    if doc.get("status") != "success":
        raise bad(f"status is {str(doc.get('status'))[:40]!r}, not 'success'")
    data = doc.get("data")
    if not isinstance(data, dict) or "result" not in data:
        raise bad("it has no data.result")
    result = data["result"]
    if data.get("resultType") == "scalar" and kind == "vector" and isinstance(result, list) and len(result) == 2:
        return [{"metric": {}, "value": result}]
    if not isinstance(result, list):
        raise bad(f"data.result is a {type(result).__name__}, not a list")
    key = "value" if kind == "vector" else "values"
    for r in result:
        if not isinstance(r, dict) or not isinstance(r.get("metric"), dict):
            raise bad("a data.result item has no metric object")
        v = r.get(key)
        if kind == "vector" and not (isinstance(v, list) and len(v) == 2):
            raise bad(f"a data.result item has no [time, value] pair (resultType {str(data.get('resultType'))[:20]!r})")
        if kind == "matrix" and not (isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 for p in v)):
            raise bad(
                "a data.result item has no list of [time, value] pairs (resultType "
                f"{str(data.get('resultType'))[:20]!r})"
            )
    return result


def _read_body_by(resp, deadline: float) -> None:
    """Read ``resp``'s whole body (requests' ``resp.content``) before the ``time.monotonic()`` ``deadline``; the
    socket is shut when it passes, and requests' ReadTimeout is raised (the caller's PrometheusTimeout)."""
    import requests

    sock = getattr(getattr(resp.raw, "connection", None), "sock", None)
    fired = threading.Event()

    def cut():
        fired.set()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass

    timer = threading.Timer(max(0.0, deadline - time.monotonic()), cut)
    timer.daemon = True
    timer.start()
    try:
        resp.content  # reads and keeps the body
    except requests.exceptions.RequestException:
        if not fired.is_set():
            raise
    finally:
        timer.cancel()
    if fired.is_set():
        resp.close()
        raise requests.exceptions.ReadTimeout("the whole body was not read by the deadline")


def _undecoded(**kwargs) -> dict:
    """What the library's ``response.json()`` returns instead of decoding (see :meth:`PromHTTP._keep`)."""
    return {"data": {"result": None}}


class PromHTTP:
    """Instant and range queries against one Prometheus-compatible API through ``PrometheusConnect``, with the
    settings of :class:`~gpulib.sources.prometheus.PrometheusSettings`."""

    def __init__(self, settings):
        import requests
        from prometheus_api_client import PrometheusConnect
        from urllib3.util.retry import Retry

        s = self.settings = settings
        self.url = settings.url
        self.session = requests.Session()
        self.session.verify = s.ca_bundle if (s.verify and s.ca_bundle) else s.verify
        self._kept = threading.local()  # the last Response of this thread's attempt (see _keep)
        self.session.hooks["response"].append(self._keep)
        self.client = PrometheusConnect(
            s.url,
            headers={"Authorization": f"Bearer {s.token}"} if s.token else None,
            disable_ssl=not s.verify,
            auth=(s.user, s.password or "") if s.user else None,
            session=self.session,
            timeout=s.timeout,
            retry=Retry(0, read=False),
        )  # one attempt per call: the retries are ours, bounded by the deadline
        self.broken: PrometheusError | None = None

    def _keep(self, resp, *args, **kwargs):
        """requests response hook (https://requests.readthedocs.io/en/latest/user/advanced/#event-hooks): keep this
        thread's Response, and give it a ``json()`` that decodes nothing, so the library's 200 branch
        (``response.json()["data"]["result"]``) neither fails on a non-API body nor decodes a matrix that
        :meth:`decode` / ``parse_matrix`` read from the bytes anyway."""
        self._kept.response = resp
        resp.json = _undecoded  # a plain function (no closure over resp: no reference cycle holding the body)
        deadline = getattr(self._kept, "deadline", None)
        if deadline is not None:
            _read_body_by(resp, deadline)
        return resp

    # ---- circuit breaker --------------------------------------------------------------
    def _fail_fast(self, query: str):
        first = self.broken
        msg = f"{first.args[0]} (earlier in this run; not asked again for query {query!r})"
        kw = {"url": first.url, "query": query, "hint": first.hint}
        if isinstance(first, PrometheusHTTPError):
            return type(first)(msg, status=first.status, **kw)
        return type(first)(msg, **kw)

    def _trip(self, exc: PrometheusError) -> PrometheusError:
        if isinstance(exc, (PrometheusUnreachable, PrometheusTimeout)) or (
            isinstance(exc, PrometheusHTTPError) and exc.status in RETRY_STATUSES
        ):
            self.broken = exc
        return exc

    # ---- requests ----------------------------------------------------------------------
    def instant(self, promql: str, at: float) -> list[dict]:
        """``data.result`` of ``custom_query(promql, params={"time": at})``, its shape checked."""
        resp = self.call(lambda timeout: self.client.custom_query(promql, params={"time": at}, timeout=timeout), promql)
        return check_result(self.decode(resp, promql), self.url, promql, "vector")

    def range(self, promql: str, start: int, end: int, step: str):
        """The raw 200 Response of ``custom_query_range`` over [start, end] (whole epoch seconds) every ``step``."""
        t0, t1 = (datetime.fromtimestamp(int(t), tz=timezone.utc) for t in (start, end))
        return self.call(
            lambda timeout: self.client.custom_query_range(
                promql, start_time=t0, end_time=t1, step=step, timeout=timeout
            ),
            promql,
        )

    def call(self, send, query: str):
        """The 200 Response that ``send(timeout)`` (one library call) got; a PrometheusError subclass for every
        failure, and the same at once for every call after the circuit breaker tripped."""
        if self.broken is not None:
            raise self._fail_fast(query)
        try:
            return self._call(send, query)
        except PrometheusError as exc:
            raise self._trip(exc) from None

    def _call(self, send, query: str):
        import requests
        from prometheus_api_client import PrometheusApiClientException

        s, url = self.settings, self.url
        deadline = time.monotonic() + s.timeout
        attempt = 0
        refused = ""  # why the last attempt could not connect: the cause to name if the time runs out retrying
        while True:
            left = deadline - time.monotonic()
            if left <= 0 and refused:
                raise PrometheusUnreachable(
                    f"cannot reach Prometheus at {url} ({refused}) for query {query!r}", url=url, query=query
                )
            if left <= 0:
                raise PrometheusTimeout(
                    f"Prometheus at {url} did not answer within {s.timeout:g}s for query {query!r}",
                    url=url,
                    query=query,
                )
            self._kept.response, self._kept.deadline = None, deadline
            try:
                send((min(left, s.timeout), left))
            except PrometheusApiClientException:  # a status other than 200: read from the kept Response below
                pass
            except requests.exceptions.Timeout:
                if refused:  # the connection was refused before and the retry ran out of time connecting
                    raise PrometheusUnreachable(
                        f"cannot reach Prometheus at {url} ({refused}) for query {query!r}", url=url, query=query
                    ) from None
                raise PrometheusTimeout(
                    f"Prometheus at {url} did not answer within {s.timeout:g}s for query {query!r}",
                    url=url,
                    query=query,
                ) from None
            except requests.exceptions.RequestException as exc:
                why = "connection refused" if "refused" in str(exc).lower() else type(exc).__name__
                if attempt < s.retries and isinstance(exc, requests.exceptions.ConnectionError):
                    wait = BACKOFF * 2**attempt
                    if time.monotonic() + wait < deadline:
                        attempt += 1
                        refused = why
                        time.sleep(wait)
                        continue
                raise PrometheusUnreachable(
                    f"cannot reach Prometheus at {url} ({why}) for query {query!r}", url=url, query=query
                ) from None
            resp, self._kept.response = self._kept.response, None
            if resp is None:  # only if something replaced the session's hooks
                raise PrometheusBadResponse(
                    f"no HTTP answer from {url} was kept for query {query!r}", url=url, query=query
                )
            if resp.status_code == 200:
                return resp
            if resp.status_code in RETRY_STATUSES and attempt < s.retries:
                ra = _retry_after(resp.headers.get("Retry-After"))
                wait = BACKOFF * 2**attempt if ra is None else ra
                if time.monotonic() + wait < deadline:
                    attempt += 1
                    time.sleep(wait)
                    continue
                if ra is not None:
                    raise PrometheusHTTPError(
                        f"Prometheus at {url} answered HTTP {resp.status_code} for query {query!r} and asked to retry "
                        f"after {ra:g}s, beyond the {s.timeout:g}s timeout",
                        status=resp.status_code,
                        url=url,
                        query=query,
                    )
            raise self._status_error(resp, query)

    def _status_error(self, resp, query: str) -> PrometheusError:
        url, status, body = self.url, resp.status_code, resp.content or b""
        detail = _detail(body)
        low = body[:4096].lower()
        if status == 400 and (b"parse error" in low or b"bad_data" in low):
            return InvalidQuery(f"invalid PromQL {query!r}: {detail}", url=url, query=query)
        if status in (503, 422) and b"timeout" in low:
            return PrometheusTimeout(f"Prometheus at {url} timed out evaluating {query!r}", url=url, query=query)
        if b"<html" in low or b"<!doctype" in low:
            detail = "an HTML page (a proxy or gateway answered, not Prometheus)"
        return PrometheusHTTPError(
            f"Prometheus at {url} answered HTTP {status} for query {query!r}: {detail}",
            status=status,
            url=url,
            query=query,
        )

    def decode(self, resp, query: str):
        """The JSON document of a 200 answer; PrometheusBadResponse for HTML or non-JSON bodies."""
        url = self.url
        body = resp.content or b""
        ctype = resp.headers.get("Content-Type", "")
        if "html" in ctype.lower() or body[:200].lstrip().lower().startswith((b"<!doctype", b"<html")):
            raise PrometheusBadResponse(
                f"{url} answered with an HTML page, not the Prometheus API, for query {query!r} "
                "(a login page or proxy?)",
                url=url,
                query=query,
            )
        if not body.strip():
            raise PrometheusBadResponse(
                f"{url} answered 200 with an empty body for query {query!r}", url=url, query=query
            )
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as exc:
            raise PrometheusBadResponse(
                f"{url} answered 200 with a body that is not JSON for query {query!r} ({type(exc).__name__})",
                url=url,
                query=query,
            ) from None

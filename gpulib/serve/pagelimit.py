"""How many runs one client may start from pages (GET /run/..., the runbook_url of an alert: no token): at most
``per`` new runs in any ``window_s`` seconds per client address, counted in a sliding window; the settings are rows of
``gpulib/data/serve/serve_limits.csv``. At most ``clients`` addresses are remembered (the one seen least recently is
forgotten first), so a flood of addresses cannot grow the server's memory."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque


class ClientRate:
    def __init__(self, per: int, window_s: float, clients: int):
        self.per, self.window_s, self.clients = int(per), float(window_s), int(clients)
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def wait_s(self, client: str, now: float | None = None) -> int:
        """0 when ``client`` may start a run now (which is then counted), else the whole seconds until it may."""
        now = time.monotonic() if now is None else now
        with self._lock:
            times = self._seen.pop(client, None) or deque()
            while times and now - times[0] >= self.window_s:
                times.popleft()
            wait = 0
            if len(times) >= self.per:
                wait = max(1, math.ceil(self.window_s - (now - times[0])))
            else:
                times.append(now)
            self._seen[client] = times  # the most recently seen last
            while len(self._seen) > self.clients:
                self._seen.popitem(last=False)
            return wait

"""What every provider says and waits when it retries a failed request: one place, no SDK.

Invariants:
- A retry note is one line: what failed, how long until the next attempt (``~`` when it
  is memagent's backoff, exact when the server said), and the attempt number, e.g.
  ``rate limited by the model API (429), retrying in 1.2s (attempt 2 of 5)``.
- Which statuses are retried follows the Anthropic SDK's documented policy (408, 409,
  429 and 5xx, unless the server's ``x-should-retry`` says otherwise), for every provider.
- A connection refused by a loopback address is not retried (``refused_locally``): nothing
  listens there, and waiting will not start it (a busy server answers, or times out).
- Importing this module imports no provider SDK.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0


def retryable(status: int, headers: Mapping[str, str]) -> bool:
    """The retry policy for an error response."""
    should = headers.get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    return status in (408, 409, 429) or status >= 500


def refused_locally(err: BaseException, base_url: str) -> bool:
    """Whether ``err`` (an SDK's connection error) is a refused connection to a loopback
    ``base_url``: a server that is not running, which a retry cannot fix."""
    try:
        host = urlsplit(base_url).hostname or ""
    except ValueError:
        return False
    if host != "localhost":
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
        except ValueError:
            return False
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or "connection refused" in str(current).lower():
            return True
        current = current.__cause__ or current.__context__
    return False


def backoff(retries_taken: int, base: float = INITIAL_RETRY_DELAY) -> float:
    """memagent's own wait before the next attempt: doubling, capped."""
    return min(base * 2.0**retries_taken, MAX_RETRY_DELAY)


def retry_delay(headers: Mapping[str, str] | None, retries_taken: int, *,
                cap: float | None = None) -> tuple[float, bool]:
    """(seconds, exact): the server's retry-after(-ms) if it sent a usable one (at most
    ``cap`` seconds when given), else the backoff."""
    if headers is not None:
        for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
            raw = headers.get(name)
            if raw is None:
                continue
            try:
                value = float(raw) * scale
            except ValueError:
                continue  # an HTTP date: not worth parsing here
            if value > 0 and (cap is None or value <= cap):
                return value, True
    return backoff(retries_taken), False


def describe_status(status: int) -> str:
    if status == 529:
        return "model API overloaded (529)"
    if status == 429:
        return "rate limited by the model API (429)"
    if status == 408:
        return "model API request timed out (408)"
    if status == 409:
        return "model API conflict (409)"
    return f"model API error ({status})"


def retry_note(what: str, delay: float, exact: bool, attempt: int, total: int) -> str:
    amount = f"{delay * 1000:.0f}ms" if delay < 0.1 else f"{delay:.1f}s"
    when = amount if exact else f"~{amount}"
    return f"{what}, retrying in {when} (attempt {attempt} of {total})"

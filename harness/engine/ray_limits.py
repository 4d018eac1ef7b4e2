"""Per-endpoint call limits and retry budgets shared by every Ray worker of a driver.

On one process, `ModelRuntime` keeps a semaphore per endpoint; with episodes on many worker
processes, per-process semaphores would multiply the limit by the number of workers. Here one
Ray actor (`EndpointLimits`) holds every endpoint's call slots and retry budget, and a worker's
`SharedRuntime` takes its slots there. A slot is a lease: a worker that dies holding one gives
it back when it restarts (`forget`), and any lease lapses after the longest a live call can hold
it (the per-call timeout, plus a grace), so a lost worker never shrinks a limit for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from harness.models import ModelRuntime

LEASE_GRACE_S = 30.0
"""How long past the per-call timeout a lease may be held before it lapses."""
RETRY_REFILL = 0.1
"""Retry tokens a successful call gives back: past the initial budget, at most one retry per
ten successful calls to the endpoint."""
RETRY_BUDGET_MAX = 10_000


@dataclass
class _Endpoint:
    limit: int
    leases: dict[int, tuple[str, float]] = field(default_factory=dict)  # id -> owner, lapses at
    freed: asyncio.Condition = field(default_factory=asyncio.Condition)
    tokens: float | None = None  # the retry budget, set on the first retry
    capacity: float = 0.0
    peak: int = 0  # most slots ever held at once
    retries: int = 0
    refused: int = 0

    def lapse(self, now: float) -> None:
        for lease, (_, until) in list(self.leases.items()):
            if until <= now:
                del self.leases[lease]

    def next_lapse(self, now: float) -> float | None:
        return min((until - now for _, until in self.leases.values()), default=None)


class EndpointLimits:
    """Every endpoint's call slots and retry budget (a Ray actor: async, one per driver)."""

    def __init__(self) -> None:
        self.endpoints: dict[Any, _Endpoint] = {}
        self.ids = itertools.count(1)

    def _endpoint(self, key: Any, limit: int) -> _Endpoint:
        if key not in self.endpoints:
            self.endpoints[key] = _Endpoint(limit)
        return self.endpoints[key]

    async def acquire(self, key: Any, limit: int, owner: str, hold_s: float) -> int:
        """A slot of the endpoint, waited for while `limit` are held; its lease id."""
        endpoint = self._endpoint(key, limit)
        async with endpoint.freed:
            while True:
                now = time.monotonic()
                endpoint.lapse(now)
                if len(endpoint.leases) < endpoint.limit:
                    break
                with contextlib.suppress(TimeoutError):  # a lease lapsed: look again
                    await asyncio.wait_for(endpoint.freed.wait(), endpoint.next_lapse(now))
            lease = next(self.ids)
            endpoint.leases[lease] = (owner, time.monotonic() + hold_s)
            endpoint.peak = max(endpoint.peak, len(endpoint.leases))
        return lease

    async def release(self, key: Any, lease: int, succeeded: bool) -> None:
        endpoint = self.endpoints[key]
        async with endpoint.freed:
            if endpoint.leases.pop(lease, None) is not None:
                endpoint.freed.notify()
            if succeeded and endpoint.tokens is not None:
                endpoint.tokens = min(endpoint.capacity, endpoint.tokens + RETRY_REFILL)

    async def retry(self, key: Any, max_retries: int) -> bool:
        """Whether a failed call may be retried: the endpoint's budget starts at what one
        process could spend at once (`limit` calls x `max_retries` each) and is refilled by
        successful calls, so that many workers retrying together do not multiply it."""
        endpoint = self.endpoints[key]
        if endpoint.tokens is None:
            endpoint.capacity = float(min(RETRY_BUDGET_MAX, endpoint.limit * max_retries))
            endpoint.tokens = endpoint.capacity
        if endpoint.tokens < 1:
            endpoint.refused += 1
            return False
        endpoint.tokens -= 1
        endpoint.retries += 1
        return True

    async def forget(self, owner: str) -> None:
        """Give back every slot a worker held before it died and restarted."""
        for endpoint in self.endpoints.values():
            async with endpoint.freed:
                held = [lease for lease, (who, _) in endpoint.leases.items() if who == owner]
                for lease in held:
                    del endpoint.leases[lease]
                endpoint.freed.notify(len(held))

    async def status(self) -> dict[str, dict[str, Any]]:
        """Per endpoint: its limit, slots held now and at most, retries made and refused."""
        return {
            repr(key): {
                "limit": e.limit,
                "held": len(e.leases),
                "peak": e.peak,
                "retries": e.retries,
                "refused": e.refused,
            }
            for key, e in self.endpoints.items()
        }


class SharedSlot:
    """One call's slot of an endpoint, taken from the `EndpointLimits` actor."""

    def __init__(self, limits: Any, key: Any, limit: int, owner: str, hold_s: float):
        self.limits = limits
        self.key = key
        self.limit = limit
        self.owner = owner
        self.hold_s = hold_s
        self.lease = 0

    async def __aenter__(self) -> SharedSlot:
        granted = self.limits.acquire.remote(self.key, self.limit, self.owner, self.hold_s)
        try:
            self.lease = await granted
        except asyncio.CancelledError:  # e.g. the episode's time ran out while it waited
            self.limits.release.remote(self.key, granted, False)  # once granted, given back
            raise
        return self

    async def __aexit__(self, exc_type: Any, *_: Any) -> None:
        # Not waited for: the slot is free as soon as the actor reads this.
        self.limits.release.remote(self.key, self.lease, exc_type is None)


@dataclass
class SharedRuntime(ModelRuntime):
    """A worker's model runtime: the cache, prices and call policy of the driver's, with the
    limits of remote endpoints and their retry budgets kept by `limits` for all workers.
    A model in the worker's own process (embedded, scripted) keeps a limit per process."""

    limits: Any = None  # the EndpointLimits actor
    owner: str = ""  # the worker holding the slots it takes

    def limiter(self, key: Any, limit: int, in_process: bool = False) -> Any:
        if in_process:
            return super().limiter(key, limit)
        hold_s = self.policy.timeout_s + LEASE_GRACE_S
        return SharedSlot(self.limits, key, limit, self.owner, hold_s)

    async def retry_delay(self, key: Any, delay: float, in_process: bool = False) -> float | None:
        if in_process:
            return delay
        allowed = await self.limits.retry.remote(key, self.policy.max_retries)
        return delay if allowed else None

"""Kafka's windowed rate and token bucket, as plain classes taking `now_ms`.

Why Kafka's exact arithmetic: a client's throttle time is what its librdkafka / Java client
sleeps for, and users size quotas from Kafka's documentation; the rate a sensor reports and the
throttle time it derives must be the numbers Kafka would give for the same traffic.

`Rate` (Kafka's `Rate` over a `SampledTotal`): `samples` windows of `window_ms` each (Kafka's
`quota.window.num` = 11 and `quota.window.size.seconds` = 1). A record lands in the current
window, which is replaced by a fresh one once it is `window_ms` old; a window older than
`samples * window_ms` counts for nothing. The rate is the sum of the live windows divided by the
elapsed time since the oldest one started - but never by less than `samples - 1` whole windows,
so a first burst is spread over ten seconds rather than read as an enormous rate.

Throttle time for a rate above its bound (Kafka's `ClientQuotaManager.throttleTime`):
`(rate - bound) / bound * window`, the time after which the same bytes over the longer window
are back at the bound.

`TokenBucket` (Kafka's, for `controller_mutation_rate`): `rate` tokens a second, at most
`burst` = rate * samples * window seconds held; a record takes its tokens (the balance may go
negative); a negative balance is a violation with throttle time `-balance / rate` seconds.
"""

from __future__ import annotations

__all__ = ["Rate", "TokenBucket"]


class Rate:
    """See the module docstring. `record(value, now_ms)`, `measure(now_ms)` (per second)."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int = 11, window_ms: int = 1000) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one sample of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        # [start ms, total] per window, in the ring order Kafka's SampledStat keeps
        self._samples: list[list[float]] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples:
            self._samples.append([now_ms, 0.0])
            self._current = 0
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append([now_ms, 0.0])
            else:
                self._samples[self._current][:] = [now_ms, 0.0]
            sample = self._samples[self._current]
        sample[1] += value

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample[0] >= expire:
                sample[:] = [now_ms, 0.0]

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate divides by (Kafka's `Rate.windowSize`)."""
        self._purge(now_ms)
        oldest = min((s[0] for s in self._samples), default=now_ms)
        elapsed = int(now_ms - oldest)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)
        total = sum(s[1] for s in self._samples)
        return total / (window / 1000.0)

    def throttle_ms(self, bound: float, now_ms: int) -> int:
        """How long to hold the client so the rate is back at `bound` (0 when within it)."""
        value = self.measure(now_ms)
        if value <= bound:
            return 0
        return round((value - bound) / bound * self.window_size_ms(now_ms))


class TokenBucket:
    """See the module docstring."""

    __slots__ = ("_last_ms", "_tokens", "burst", "rate")

    def __init__(self, rate: float, now_ms: int, samples: int = 11, window_ms: int = 1000) -> None:
        self.rate = rate
        self.burst = rate * samples * window_ms / 1000.0
        self._tokens = self.burst
        self._last_ms = now_ms

    def _refill(self, now_ms: int) -> None:
        if now_ms > self._last_ms:
            self._tokens = min(self.burst, self._tokens + (now_ms - self._last_ms) / 1000.0 * self.rate)
            self._last_ms = now_ms

    def tokens(self, now_ms: int) -> float:
        self._refill(now_ms)
        return self._tokens

    def record(self, value: float, now_ms: int) -> None:
        self._refill(now_ms)
        self._tokens -= value

    def throttle_ms(self, now_ms: int) -> int:
        tokens = self.tokens(now_ms)
        return 0 if tokens >= 0 else round(-tokens / self.rate * 1000)

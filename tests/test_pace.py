"""A client's share of a running job (agent/serve/pace.py), on a fake clock: the rest after
a costly request, the rate, and no pacing at all while the job is paused."""

from __future__ import annotations

from stepdbg.agent.serve.pace import Pace


class FakeTime:
    """A clock, and a stop event whose wait() moves the clock instead of sleeping."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.now += seconds
        return False

    def is_set(self) -> bool:
        return False


def test_a_request_that_held_the_cpu_is_followed_by_a_rest():
    """10 clients asking for every thread's stack made the steps 9-28x slower: status was
    paced, a costly request was not. A request of 2 ms of CPU now buys 198 ms of rest (1%)."""
    t = FakeTime()
    pace = Pace(share=0.01, clock=t)
    pace.wait(lambda: True, t)
    start = t.now
    pace.spent(0.002)
    pace.wait(lambda: True, t)
    assert t.now - start >= 0.198 - 1e-9


def test_cheap_requests_are_held_to_the_rate_after_the_burst():
    t = FakeTime()
    pace = Pace(rate=20.0, burst=40, clock=t)
    start = t.now
    for _ in range(40 + 20):
        pace.wait(lambda: True, t)
        pace.spent(0.0)
    assert 0.95 <= t.now - start <= 1.1  # the burst at once, then 20 a second


def test_nothing_waits_while_the_job_is_paused():
    t = FakeTime()
    pace = Pace(share=0.01, clock=t)
    pace.spent(10.0)
    start = t.now
    for _ in range(1000):
        pace.wait(lambda: False, t)
    assert t.now == start


def test_all_clients_together_are_held_to_the_jobs_rate():
    """Ten clients each within their own rate still cost ten times one: the job's bucket
    holds them together to JOB_RATE a second after JOB_BURST at once."""
    from stepdbg.agent.serve.pace import Bucket

    t = FakeTime()
    job = Bucket(rate=40.0, burst=40, clock=t)
    clients = [Pace(rate=20.0, burst=40, clock=t, job=job) for _ in range(10)]
    start = t.now
    answered = 0
    while t.now - start < 10.0:
        for pace in clients:
            pace.wait(lambda: True, t)
            answered += 1
    assert answered <= 40 + 40 * (t.now - start) + len(clients), answered


def test_a_costly_request_of_any_client_rests_them_all():
    """Ten clients each within their own 1% share took 10% of a CPU together: the job's
    bucket rests every client after a costly request, to JOB_SHARE of the time in all."""
    from stepdbg.agent.serve.pace import Bucket

    t = FakeTime()
    job = Bucket(rate=1000.0, burst=1000, share=0.03, clock=t)
    a, b = Pace(share=0.01, clock=t, job=job), Pace(share=0.01, clock=t, job=job)
    a.wait(lambda: True, t)
    start = t.now
    a.spent(0.002)  # 2 ms of CPU: every thread's stack, say
    b.wait(lambda: True, t)  # another client, with nothing of its own to rest for
    assert t.now - start >= 0.002 * (1 / 0.03 - 1) - 1e-9

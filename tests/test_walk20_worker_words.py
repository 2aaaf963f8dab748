"""A DataLoader worker's wait is said in words, its kernel name after them (issue 45's
nineteenth walk, 14: `info status` and the Threads panel said `sleeping in
poll_schedule_timeout.constprop.0`, a kernel function's name with its compiler suffix)."""

from __future__ import annotations

import pytest

from stepdbg.client.info_text import worker_words


@pytest.mark.parametrize(("wchan", "said"), [
    ("poll_schedule_timeout.constprop.0", "sleeping, waiting for input (kernel: poll_schedule_timeout)"),
    ("pipe_read", "sleeping, waiting on a pipe (kernel: pipe_read)"),
    ("futex_wait_queue", "sleeping, waiting on a lock (kernel: futex_wait_queue)"),
    ("do_epoll_wait", "sleeping, waiting for input (kernel: do_epoll_wait)"),
    ("some_new_thing", "sleeping, in the kernel (kernel: some_new_thing)"),
    (None, "sleeping"),
    ("0", "sleeping"),
])
def test_a_workers_wait_is_said_in_words(wchan, said):
    assert worker_words({"pid": 81, "alive": True, "state": "S", "wchan": wchan}) == f"pid 81 alive, {said}"

"""The front-end side, torch-free: drive a running job from a script, a test or a UI.

    from stepdbg import client
    with client.connect() as c:              # the only local session
        brk = c.wait_paused(timeout=60)
        print(c.evaluate("loss.item()")["value"])
        c.set_lr(1e-4, pin=True)
        c.cont()

Modules: ``connection`` (the sync Client), ``async_client`` (for the TUI), ``targets``
(finding a session or a job), ``remote`` (ssh), ``job`` (every rank of a distributed
job), ``console`` (the line console).
"""

from .connection import Client, ClientError, connect, connect_address, connect_job, resolve
from .targets import Endpoint, TargetError, find_job, find_local, format_listing

__all__ = ["Client", "ClientError", "Endpoint", "TargetError", "connect", "connect_address", "connect_job",
           "find_job", "find_local", "format_listing", "resolve"]

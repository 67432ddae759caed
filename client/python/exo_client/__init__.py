"""exo_client: the Python client of the exo daemon's local API.

Applications talk to the exo daemon of their host over its Unix socket
(docs/api.md in the exo repository): publish a message and get its
position in the rack's agreed order once it is agreed; follow the agreed
stream from a position; read the status. Pure Python, standard library
only; the same protocol and semantics as the Go package
``github.com/exo-rack/exo/client``.

Blocking::

    import exo_client

    with exo_client.connect("/run/exo/exo.sock") as c:
        pos = c.publish(b"hello")                  # Position(seq, index), agreed
        futs = [c.publish_async(b"m%d" % i) for i in range(100)]  # pipelined
        print([f.result() for f in futs], c.status()["agreement_pointer"])
    for m in exo_client.subscribe("/run/exo/exo.sock", from_seq=pos.seq):
        print(m.seq, m.index, m.sender, m.payload)

asyncio: the same in :mod:`exo_client.aio` (``await aio.connect(...)``,
``async for m in await aio.subscribe(...)``).

Errors are exceptions carrying the daemon's code and text
(:class:`APIError` and a subclass per code: QueueFullError,
TooLargeError, DroppedError, ShuttingDownError, CompactedError,
TooSlowError, VersionError, ...); an unreachable or vanished daemon is
:class:`ExoConnectionError`.
"""

from ._proto import (API_VERSION, CLIENT_NAME, DEFAULT_SOCKET, MAX_BATCH, MAX_FRAME, MIN_API_VERSION,
                     Hello, Message, Position, Result)
from .client import Client, Subscription, connect, subscribe
from .errors import (APIError, BadChangeError, BadRequestError, BatchError, ChangeInFlightError,
                     CompactedError, DroppedError, ExoConnectionError, ExoError, FrameError,
                     NotStalledError, QueueFullError, ShuttingDownError, TooLargeError, TooSlowError,
                     UnknownFateError, VersionError, api_error)
from . import aio

__version__ = "0.1.0"

__all__ = [
    "API_VERSION", "MIN_API_VERSION", "CLIENT_NAME", "DEFAULT_SOCKET", "MAX_BATCH", "MAX_FRAME",
    "Hello", "Message", "Position", "Result",
    "Client", "Subscription", "connect", "subscribe", "aio",
    "ExoError", "ExoConnectionError", "FrameError", "APIError", "BatchError", "api_error",
    "QueueFullError", "TooLargeError", "DroppedError", "ShuttingDownError", "BadRequestError",
    "CompactedError", "TooSlowError", "ChangeInFlightError", "BadChangeError", "UnknownFateError",
    "NotStalledError", "VersionError",
]

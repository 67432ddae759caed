"""The exceptions of the exo client.

Every error the daemon sends (an Error frame, or a failed message of a
batch) is an :class:`APIError` carrying the daemon's ``code`` and ``text``;
each code of docs/api.md ("Errors") has its own subclass, so a caller
catches what it can handle::

    try:
        pos = client.publish(b"hello")
    except exo_client.QueueFullError:
        ...  # back off and retry: nothing was queued

The Go client's sentinels (``client.ErrQueueFull`` and friends) match by
code; here the classes do.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Type, Union

# Error codes of the local API (client/proto.go).
CODE_QUEUE_FULL = 1
CODE_TOO_LARGE = 2
CODE_DROPPED = 3
CODE_SHUTTING_DOWN = 4
CODE_BAD_REQUEST = 5
CODE_COMPACTED = 6
CODE_TOO_SLOW = 7
CODE_CHANGE_IN_FLIGHT = 8
CODE_BAD_CHANGE = 9
CODE_UNKNOWN_FATE = 10
CODE_NOT_STALLED = 11
CODE_VERSION = 12


class ExoError(Exception):
    """The base of every error this package raises (besides TypeError,
    ValueError and TimeoutError for misuse and timeouts)."""


class ExoConnectionError(ExoError, ConnectionError):
    """The daemon cannot be reached, or its connection ended: no socket at
    the path, nobody answering on it, the daemon gone. Every request
    waiting on the connection fails with it."""


class FrameError(ExoError):
    """A malformed frame from the daemon (the Go client's ``ErrFrame``): a
    bad length, a reply too short for its type, an unexpected type. The
    connection is closed."""


class APIError(ExoError):
    """An error reply of the daemon: ``code`` and ``text`` as it sent them.

    ``str()`` gives ``exo daemon: <text> (code <code>)``, as the Go client's
    ``APIError`` does.
    """

    code: int = 0

    def __init__(self, code: int, text: str, message: Optional[str] = None):
        self.code = code
        self.text = text
        super().__init__(message if message is not None else "exo daemon: %s (code %d)" % (text, code))

    def __reduce__(self):
        return (type(self), (self.code, self.text, str(self)))


class QueueFullError(APIError):
    """Code 1: more than ``queue_len`` records wait for the token (for a
    batch: its records do not all fit, none was queued). Back off and
    retry; nothing was dropped silently."""

    code = CODE_QUEUE_FULL


class TooLargeError(APIError):
    """Code 2: above the daemon's ``max_message_bytes`` (for a whole batch:
    it needs more records than ``queue_len``), or, raised before sending,
    above the frame bound of 64 MiB."""

    code = CODE_TOO_LARGE


class DroppedError(APIError):
    """Code 3: removed by a reconciliation after a partition before it was
    agreed: publish it again."""

    code = CODE_DROPPED


class ShuttingDownError(APIError):
    """Code 4: the daemon is stopping (or stopped sending: another host
    sends as its member id). Reconnect to another daemon."""

    code = CODE_SHUTTING_DOWN


class BadRequestError(APIError):
    """Code 5: the daemon found a request malformed and closed the
    connection."""

    code = CODE_BAD_REQUEST


class CompactedError(APIError):
    """Code 6: a subscription from a seq this host no longer holds; the
    text names the oldest one a subscription can start from."""

    code = CODE_COMPACTED


class TooSlowError(APIError):
    """Code 7: the subscriber fell more than 65,536 messages behind and was
    cut off: resubscribe from the last seq received
    (``Subscription.last``)."""

    code = CODE_TOO_SLOW


class ChangeInFlightError(APIError):
    """Code 8: a membership change is queued or not yet in effect."""

    code = CODE_CHANGE_IN_FLIGHT


class BadChangeError(APIError):
    """Code 9: the membership change does not apply (see the text)."""

    code = CODE_BAD_CHANGE


class UnknownFateError(APIError):
    """Code 10: the host lost its unagreed state; the message may or may
    not be agreed: look for it in the stream before publishing again."""

    code = CODE_UNKNOWN_FATE


class NotStalledError(APIError):
    """Code 11: accept-loss refused (no such stalled view change)."""

    code = CODE_NOT_STALLED


class VersionError(APIError):
    """Code 12: the client and the daemon do not speak one API version.

    Raised by ``connect`` and ``subscribe`` with one line that names both
    versions, when the daemon refuses the client's version (its Error 12,
    whose text names both), when it is older than the client
    (``daemon_version`` below ``client_version``), or when it predates API
    versions (it answered Hello with Error 5; ``daemon_version`` is None).
    """

    code = CODE_VERSION

    def __init__(self, code: int, text: str, message: Optional[str] = None,
                 client_version: Optional[int] = None, daemon_version: Optional[int] = None):
        super().__init__(code, text, message)
        self.client_version = client_version
        self.daemon_version = daemon_version


_BY_CODE: Dict[int, Type[APIError]] = {
    c.code: c
    for c in (QueueFullError, TooLargeError, DroppedError, ShuttingDownError, BadRequestError,
              CompactedError, TooSlowError, ChangeInFlightError, BadChangeError,
              UnknownFateError, NotStalledError, VersionError)
}


def api_error(code: int, text: str) -> APIError:
    """Return the exception of the daemon's error ``code``: an instance of
    its subclass (:class:`APIError` itself for a code this client does not
    know: a newer daemon may add codes)."""
    return _BY_CODE.get(code, APIError)(code, text)


class BatchError(ExoError):
    """Some messages of a batch failed; the others were agreed.

    ``results`` holds one entry per message, in the batch's order: its
    :class:`~exo_client.Position` or its :class:`APIError` (TooLargeError
    for one above ``max_message_bytes``, DroppedError, ShuttingDownError).
    ``failed`` counts the failures; ``index`` and ``error`` are the first's.
    """

    def __init__(self, results: List[Union["object", APIError]]):
        self.results = results
        errs = [(i, r) for i, r in enumerate(results) if isinstance(r, Exception)]
        self.failed = len(errs)
        self.index, self.error = errs[0] if errs else (-1, None)
        super().__init__("%d of %d messages of the batch failed; the first, message %d: %s"
                         % (self.failed, len(results), self.index, self.error))

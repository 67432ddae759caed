"""The asyncio client: the same operations as the blocking one, as
coroutines, over ``asyncio.open_unix_connection``.

One task reads the daemon's replies and resolves each request's future by
its request id, so many publishes can be in flight on one connection::

    client = await exo_client.aio.connect("/run/exo/exo.sock")
    positions = await asyncio.gather(*(client.publish(b"m%d" % i) for i in range(100)))
"""

from __future__ import annotations

import asyncio
import collections
from typing import Any, Deque, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _proto as p
from .errors import APIError, BatchError, ExoConnectionError, ExoError, FrameError, api_error


async def _read_frame(reader: asyncio.StreamReader, pending: List[bytes]) -> Optional[Tuple[int, bytes]]:
    """Read one frame: its (type, body), or None at the end of the stream
    between frames. pending keeps a header read before a cancellation (a
    timeout), so that reading again goes on where it stopped."""
    if not pending:
        try:
            pending.append(await reader.readexactly(5))
        except asyncio.IncompleteReadError as e:
            if e.partial:
                raise ExoConnectionError("unexpected EOF: the connection ended inside a frame") from None
            return None
    n, typ = p.HEADER.unpack(pending[0])
    p.check_length(n)
    try:
        body = await reader.readexactly(n - 1)
    except asyncio.IncompleteReadError:
        raise ExoConnectionError("unexpected EOF: the connection ended inside a frame") from None
    pending.clear()
    return typ, body


async def _with_timeout(aw, timeout: Optional[float], what: str):
    """Await aw, raising the built-in TimeoutError after timeout seconds."""
    if timeout is None:
        return await aw
    try:
        return await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError:
        raise TimeoutError("%s: no answer from the exo daemon within %ss" % (what, timeout)) from None


async def _dial(path: str, name: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, p.Hello]:
    try:
        reader, writer = await asyncio.open_unix_connection(path, limit=256 << 10)
    except OSError as e:
        raise ExoConnectionError("connect to exo daemon at %s: %s (is the daemon running?)"
                                 % (path, e.strerror or e)) from None
    try:
        writer.write(p.encode_hello(name))
        try:
            got = await _read_frame(reader, [])
        except OSError as e:
            raise ExoConnectionError("hello to exo daemon at %s: %s" % (path, e.strerror or e)) from None
        if got is None:
            raise ExoConnectionError("hello to exo daemon at %s: EOF (the connection closed)" % path)
        return reader, writer, p.check_hello(got[0], got[1], path)
    except BaseException:
        writer.close()
        raise


async def connect(path: str = p.DEFAULT_SOCKET, *, timeout: Optional[float] = None,
                  name: str = p.CLIENT_NAME) -> "AsyncClient":
    """Connect to the exo daemon's Unix socket at ``path`` and return an
    :class:`AsyncClient` (the asyncio twin of :func:`exo_client.connect`:
    Hello with API version 1, VersionError on a mismatch,
    ExoConnectionError when no daemon answers; ``timeout`` bounds the
    connect and the Hello)."""
    reader, writer, hello = await _with_timeout(_dial(path, name), timeout, "connect to exo daemon at %s" % path)
    return AsyncClient(reader, writer, hello, path)


class AsyncClient:
    """An asyncio connection to a daemon's local API, for publishes and
    status. Made by :func:`connect`; an async context manager. Use it from
    the event loop that made it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: p.Hello, path: str):
        self.hello = hello
        self.path = path
        self._reader = reader
        self._writer = writer
        self._next = 0
        self._waiting: Dict[int, Tuple[asyncio.Future, Optional[int]]] = {}
        self._status: Deque[asyncio.Future] = collections.deque()
        self._err: Optional[ExoError] = None
        self._closed = False
        self._drain = asyncio.Lock()  # Python 3.9's drain() takes one waiter at a time
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with
        ExoConnectionError."""
        self._closed = True
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        await asyncio.gather(self._task, return_exceptions=True)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- publishing

    def publish_nowait(self, payload: bytes) -> "asyncio.Future[p.Position]":
        """Send a publish and return at once a future of its Position (the
        errors of :meth:`publish`): for many in flight. Await the futures,
        or the writes pile up in memory."""
        data = p.as_bytes(payload)
        return self._request(lambda req: p.encode_publish(req, data), None)

    async def publish(self, payload: bytes) -> p.Position:
        """Broadcast ``payload`` and return its position once the rack
        agreed it. Raises QueueFullError, TooLargeError, DroppedError,
        ShuttingDownError or ExoConnectionError. Concurrent calls (tasks,
        ``asyncio.gather``) are pipelined on the connection."""
        f = self.publish_nowait(payload)
        await self._drained()
        return await f

    async def publish_many(self, payloads: Iterable[bytes], window: int = 256) -> List[p.Position]:
        """Publish every payload, ``window`` in flight at a time; return
        their positions in order (the first failure raises its error)."""
        if window < 1:
            raise ValueError("window %d: at least 1" % window)
        out: List[p.Position] = []
        inflight: Deque[asyncio.Future] = collections.deque()
        try:
            for payload in payloads:
                if len(inflight) >= window:
                    await self._drained()
                    out.append(await inflight.popleft())
                inflight.append(self.publish_nowait(payload))
            await self._drained()
            while inflight:
                out.append(await inflight.popleft())
        finally:
            for f in inflight:  # after a failure: nobody will look at these
                f.add_done_callback(_consume)
        return out

    def publish_batch_nowait(self, payloads: Sequence[bytes]) -> "asyncio.Future[List[p.Result]]":
        """Send payloads as one batch; a future of one result per message
        (Position or APIError), or the batch's error (see
        :meth:`exo_client.Client.publish_batch_async`)."""
        data = [p.as_bytes(x) for x in payloads]
        if not data:
            f = asyncio.get_running_loop().create_future()
            f.set_result([])
            return f
        return self._request(lambda req: p.encode_publish_batch(req, data), len(data))

    async def publish_batch(self, payloads: Sequence[bytes]) -> List[p.Position]:
        """Broadcast payloads as one batch and return their positions;
        BatchError when some failed, QueueFullError or TooLargeError when
        the daemon refused the batch whole (see
        :meth:`exo_client.Client.publish_batch`)."""
        f = self.publish_batch_nowait(payloads)
        await self._drained()
        results = await f
        if any(isinstance(r, Exception) for r in results):
            raise BatchError(results)
        return results

    # -- status

    async def status(self) -> Dict[str, Any]:
        """Return the daemon's status (``exo status --json``) as a dict."""
        self._check()
        f = asyncio.get_running_loop().create_future()
        self._status.append(f)  # replies come in the order of the requests
        self._writer.write(p.encode_status())
        await self._drained()
        return await f

    # -- internals

    def _check(self) -> None:
        if self._err is not None:
            raise ExoConnectionError(str(self._err))
        if self._writer.transport.is_closing():
            raise ExoConnectionError("exo daemon connection: closed")

    def _request(self, encode, batch: Optional[int]) -> asyncio.Future:
        self._check()
        frame = encode(self._next + 1)
        self._next += 1
        f = asyncio.get_running_loop().create_future()
        self._waiting[self._next] = (f, batch)
        self._writer.write(frame)
        return f

    async def _drained(self) -> None:
        if self._writer.transport.get_write_buffer_size() == 0:
            return
        async with self._drain:
            try:
                await self._writer.drain()
            except OSError:
                pass  # the read loop fails the requests

    async def _read_loop(self) -> None:
        said: Optional[APIError] = None
        pending: List[bytes] = []
        try:
            while True:
                try:
                    got = await _read_frame(self._reader, pending)
                except OSError as e:
                    if self._closed:
                        raise ExoConnectionError("exo daemon connection: closed by the client") from None
                    raise ExoConnectionError("exo daemon connection: %s%s" % (e.strerror or e, p.describe_said(said))) from None
                if got is None:
                    if self._closed:
                        raise ExoConnectionError("exo daemon connection: closed by the client")
                    raise ExoConnectionError("exo daemon connection: EOF%s" % p.describe_said(said))
                typ, body = got
                if typ == p.T_PUBLISHED:
                    req, pos = p.decode_published(body)
                    f, batch = self._waiting.pop(req, (None, None))
                    if f is None or f.done():
                        continue
                    if batch is None:
                        f.set_result(pos)
                    else:
                        f.set_exception(FrameError("malformed api frame: a single answer to a publish batch"))
                elif typ == p.T_ERROR:
                    req, err = p.decode_error(body)
                    if req == 0:
                        said = err
                        continue
                    f, _ = self._waiting.pop(req, (None, None))
                    if f is not None and not f.done():
                        f.set_exception(err)
                elif typ == p.T_PUBLISHED_BATCH:
                    req, results = p.decode_published_batch(body)
                    f, batch = self._waiting.pop(req, (None, None))
                    if f is None or f.done():
                        continue
                    if batch is None:
                        f.set_exception(FrameError("malformed api frame: a batch answer to a single request"))
                    elif len(results) != batch:
                        f.set_exception(FrameError("malformed api frame: %d results for a batch of %d messages"
                                                   % (len(results), batch)))
                    else:
                        f.set_result(results)
                elif typ == p.T_STATUS_REPLY:
                    f = self._status.popleft() if self._status else None
                    if f is not None and not f.done():
                        try:
                            f.set_result(p.decode_status(body))
                        except FrameError as e:
                            f.set_exception(e)
                else:
                    raise FrameError("malformed api frame: unexpected type %#x" % typ)
        except ExoError as e:
            self._fail(e)
        except asyncio.CancelledError:
            self._fail(ExoConnectionError("exo daemon connection: closed by the client"))
            raise
        except BaseException as e:
            self._fail(ExoConnectionError("exo daemon connection: %r" % e))
            raise
        finally:
            self._writer.close()

    def _fail(self, err: ExoError) -> None:
        if self._err is None:
            self._err = err
        waiting, self._waiting = self._waiting, {}
        status, self._status = self._status, collections.deque()
        for f, _ in waiting.values():
            if not f.done():
                f.set_exception(_copy(err))
        for f in status:
            if not f.done():
                f.set_exception(_copy(err))


def _copy(err: Exception) -> Exception:
    if isinstance(err, APIError):
        return api_error(err.code, err.text)
    return type(err)(str(err))


def _consume(f: asyncio.Future) -> None:
    if not f.cancelled():
        f.exception()


async def subscribe(path: str = p.DEFAULT_SOCKET, from_seq: int = 0, *, timeout: Optional[float] = None,
                    name: str = p.CLIENT_NAME) -> "AsyncSubscription":
    """Follow the agreed stream at the daemon at ``path`` from ``from_seq``
    on a new connection: an :class:`AsyncSubscription` to ``async for``
    over. ``timeout`` bounds the connect, the Hello and each wait for a
    message (TimeoutError; iterating again goes on)."""
    reader, writer, _ = await _with_timeout(_dial(path, name), timeout, "connect to exo daemon at %s" % path)
    writer.write(p.encode_subscribe(from_seq))
    return AsyncSubscription(reader, writer, path, timeout)


class AsyncSubscription:
    """The agreed stream of one daemon as an async iterator of
    :class:`~exo_client.Message`; the errors of
    :class:`exo_client.Subscription` (CompactedError, TooSlowError,
    ExoConnectionError). ``last`` is the last position returned."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str,
                 timeout: Optional[float]):
        self.path = path
        self.last: Optional[p.Position] = None
        self._reader = reader
        self._writer = writer
        self._timeout = timeout
        self._pending: List[bytes] = []
        self._closed = False

    def __aiter__(self) -> "AsyncSubscription":
        return self

    async def __anext__(self) -> p.Message:
        if self._closed:
            raise StopAsyncIteration
        try:
            got = await _with_timeout(_read_frame(self._reader, self._pending), self._timeout, "subscription")
        except (OSError, ExoConnectionError) as e:
            if isinstance(e, TimeoutError):
                raise
            if self._closed:
                raise StopAsyncIteration from None
            raise ExoConnectionError("subscription at %s: %s" % (self.path, getattr(e, "strerror", None) or e)) from None
        if got is None:
            if self._closed:
                raise StopAsyncIteration
            raise ExoConnectionError("subscription at %s: EOF (the daemon closed the connection)" % self.path)
        m = p.subscription_message(*got)
        self.last = m.position
        return m

    async def close(self) -> None:
        """End the subscription."""
        self._closed = True
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

    async def __aenter__(self) -> "AsyncSubscription":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

"""The blocking client: a connection with a reader thread, and
subscriptions as iterators.

``Client`` may be used from several threads: every request gets a request
id, a reader thread matches the daemon's replies to them (they come back
in any order), so many publishes can be in flight on one connection.
"""

from __future__ import annotations

import collections
import concurrent.futures
import socket as _socket
import threading
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from . import _proto as p
from .errors import APIError, BatchError, ExoConnectionError, ExoError, FrameError, api_error

_RECV = 256 << 10


class _Frames:
    """Reads frames from a socket through one buffer: one recv may bring
    many frames, and a frame may straddle two recvs."""

    def __init__(self, sock: _socket.socket):
        self._sock = sock
        self._buf = bytearray()
        self._pos = 0

    def read(self) -> Optional[Tuple[int, bytes]]:
        """Return the next frame's (type, body), or None at the end of the
        stream between frames. A stream cut inside a frame raises
        ExoConnectionError; a bad length FrameError; a socket timeout
        TimeoutError (what was read stays buffered: reading again goes
        on)."""
        buf = self._buf
        while True:
            avail = len(buf) - self._pos
            if avail >= 5:
                n, typ = p.HEADER.unpack_from(buf, self._pos)
                p.check_length(n)
                if avail >= 4 + n:
                    start = self._pos + 5
                    body = bytes(buf[start:start + n - 1])
                    self._pos += 4 + n
                    return typ, body
            if self._pos:
                del buf[:self._pos]
                self._pos = 0
            try:
                chunk = self._sock.recv(_RECV)
            except _socket.timeout:
                raise TimeoutError("no frame from the exo daemon within the timeout") from None
            if not chunk:
                if buf:
                    raise ExoConnectionError("unexpected EOF: the connection ended inside a frame")
                return None
            buf += chunk


def _dial(path: str, timeout: Optional[float], name: str) -> Tuple[_socket.socket, _Frames, p.Hello]:
    """Connect to the daemon's socket and exchange Hello/HelloReply."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except _socket.timeout:
            raise TimeoutError("connect to exo daemon at %s: no answer within %ss" % (path, timeout)) from None
        except OSError as e:
            raise ExoConnectionError("connect to exo daemon at %s: %s (is the daemon running?)"
                                     % (path, e.strerror or e)) from None
        frames = _Frames(sock)
        try:
            sock.sendall(p.encode_hello(name))
            got = frames.read()
        except TimeoutError:
            raise TimeoutError("hello to exo daemon at %s: no answer within %ss" % (path, timeout)) from None
        except OSError as e:
            raise ExoConnectionError("hello to exo daemon at %s: %s" % (path, e.strerror or e)) from None
        if got is None:
            raise ExoConnectionError("hello to exo daemon at %s: EOF (the connection closed)" % path)
        hello = p.check_hello(got[0], got[1], path)
        return sock, frames, hello
    except BaseException:
        sock.close()
        raise


def connect(path: str = p.DEFAULT_SOCKET, *, timeout: Optional[float] = None, name: str = p.CLIENT_NAME) -> "Client":
    """Connect to the exo daemon's Unix socket at ``path`` and return a
    :class:`Client`.

    The connection starts with Hello (API version 1) and checks the reply:
    a daemon that refuses the version, is older, or predates versions
    raises :class:`~exo_client.VersionError`; no daemon at the path
    :class:`~exo_client.ExoConnectionError`. ``timeout`` (seconds) bounds
    the connect and the Hello; ``name`` is the client's name in Hello.
    """
    sock, frames, hello = _dial(path, timeout, name)
    sock.settimeout(None)
    return Client(sock, frames, hello, path)


class Client:
    """A connection to a daemon's local API, for publishes and status.

    Made by :func:`connect`. Thread-safe; a context manager (closes on
    exit). ``hello`` is what the daemon said of itself at the start.
    """

    def __init__(self, sock: _socket.socket, frames: _Frames, hello: p.Hello, path: str):
        self.hello = hello
        self.path = path
        self._sock = sock
        self._frames = frames
        self._wlock = threading.Lock()  # one frame at a time on the socket
        self._lock = threading.Lock()  # what follows
        self._next = 0
        self._waiting: Dict[int, Tuple[concurrent.futures.Future, Optional[int]]] = {}
        self._status: Deque[concurrent.futures.Future] = collections.deque()
        self._err: Optional[ExoError] = None
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, name="exo-client-reader %s" % path, daemon=True)
        self._reader.start()

    # -- lifecycle

    def close(self) -> None:
        """Close the connection; requests still waiting fail with
        ExoConnectionError."""
        with self._lock:
            self._closed = True
        try:
            self._sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass
        if threading.current_thread() is not self._reader:
            self._reader.join()
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- publishing

    def publish_async(self, payload: bytes) -> "concurrent.futures.Future[p.Position]":
        """Send a publish and return at once a Future of its
        :class:`~exo_client.Position`: keep many in flight on one connection
        (pipelining). The Future's exception is an APIError subclass
        (QueueFullError, TooLargeError, DroppedError, ShuttingDownError) or
        ExoConnectionError."""
        data = p.as_bytes(payload)
        return self._request(lambda req: p.encode_publish(req, data), None)

    def publish(self, payload: bytes, timeout: Optional[float] = None) -> p.Position:
        """Broadcast ``payload`` and return its position once the rack
        agreed it.

        Raises QueueFullError (back off, retry), TooLargeError (above
        max_message_bytes), DroppedError (removed by a reconciliation
        before it was agreed: retry), ShuttingDownError,
        ExoConnectionError; TimeoutError after ``timeout`` seconds (the
        message may still be agreed).
        """
        return _wait(self.publish_async(payload), timeout, "publish")

    def publish_many(self, payloads: Iterable[bytes], window: int = 256,
                     timeout: Optional[float] = None) -> List[p.Position]:
        """Publish every payload, ``window`` of them in flight at a time, and
        return their positions in order. The first failure raises its error
        (the messages before it were agreed; those in flight after it may
        be too). ``timeout`` bounds the wait for each answer."""
        if window < 1:
            raise ValueError("window %d: at least 1" % window)
        out: List[p.Position] = []
        inflight: Deque[concurrent.futures.Future] = collections.deque()
        for payload in payloads:
            if len(inflight) >= window:
                out.append(_wait(inflight.popleft(), timeout, "publish"))
            inflight.append(self.publish_async(payload))
        while inflight:
            out.append(_wait(inflight.popleft(), timeout, "publish"))
        return out

    def publish_batch_async(self, payloads: Sequence[bytes]) -> "concurrent.futures.Future[List[p.Result]]":
        """Send payloads as one batch (one PublishBatch frame, 1 to 65,535
        messages) and return a Future of one result per message, in the
        batch's order: its Position or its APIError. The Future fails as a
        whole when the daemon refused the batch (QueueFullError: none of it
        was queued; TooLargeError: it needs more than the daemon's whole
        queue) or the connection failed. An empty batch is answered at once."""
        data = [p.as_bytes(x) for x in payloads]
        if not data:
            f: concurrent.futures.Future = concurrent.futures.Future()
            f.set_result([])
            return f
        return self._request(lambda req: p.encode_publish_batch(req, data), len(data))

    def publish_batch(self, payloads: Sequence[bytes], timeout: Optional[float] = None) -> List[p.Position]:
        """Broadcast payloads as one batch and return their positions (in
        order, increasing) once each is agreed.

        When some messages failed (one above max_message_bytes fails alone,
        the others are agreed), raises :class:`~exo_client.BatchError`,
        whose ``results`` say which and why. A batch refused whole raises
        QueueFullError (retry it: nothing was queued) or TooLargeError.
        """
        results = _wait(self.publish_batch_async(payloads), timeout, "publish batch")
        if any(isinstance(r, Exception) for r in results):
            raise BatchError(results)
        return results

    # -- status

    def status(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Return the daemon's status (``exo status --json``) as a dict."""
        f: concurrent.futures.Future = concurrent.futures.Future()
        f.set_running_or_notify_cancel()
        frame = p.encode_status()
        # Status replies carry no request id: they come in the order of the
        # requests, so the futures wait in that order.
        with self._wlock:
            with self._lock:
                if self._err is not None:
                    raise ExoConnectionError(str(self._err))
                self._status.append(f)
            self._send(frame)
        return _wait(f, timeout, "status")

    # -- internals

    def _request(self, encode, batch: Optional[int]) -> concurrent.futures.Future:
        f: concurrent.futures.Future = concurrent.futures.Future()
        f.set_running_or_notify_cancel()  # a request cannot be taken back
        with self._lock:
            if self._err is not None:
                raise ExoConnectionError(str(self._err))
            self._next += 1
            req = self._next
            self._waiting[req] = (f, batch)
        try:
            frame = encode(req)
        except BaseException:
            with self._lock:
                self._waiting.pop(req, None)
            raise
        with self._wlock:
            self._send(frame)
        return f

    def _send(self, frame: bytes) -> None:
        """Write one frame (under _wlock); a failed write closes the
        connection, and the reader fails every waiting request."""
        try:
            self._sock.sendall(frame)
        except OSError as e:
            self._fail(ExoConnectionError("exo daemon connection: %s" % (e.strerror or e)))
            try:
                self._sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass

    def _take(self, req: int):
        with self._lock:
            return self._waiting.pop(req, (None, None))

    def _read_loop(self) -> None:
        said: Optional[APIError] = None  # an Error with request id 0: why the daemon closed
        try:
            while True:
                try:
                    got = self._frames.read()
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
                    f, batch = self._take(req)
                    if f is None:
                        continue
                    if batch is None:
                        f.set_result(pos)
                    else:
                        f.set_exception(FrameError("malformed api frame: a single answer to a publish batch"))
                elif typ == p.T_ERROR:
                    req, err = p.decode_error(body)
                    if req == 0:
                        said = err  # a request it could not parse: it closes the connection
                        continue
                    f, _ = self._take(req)
                    if f is not None:
                        f.set_exception(err)  # a batch takes it as the batch's outcome
                elif typ == p.T_PUBLISHED_BATCH:
                    req, results = p.decode_published_batch(body)
                    f, batch = self._take(req)
                    if f is None:
                        continue
                    if batch is None:
                        f.set_exception(FrameError("malformed api frame: a batch answer to a single request"))
                    elif len(results) != batch:
                        f.set_exception(FrameError("malformed api frame: %d results for a batch of %d messages"
                                                   % (len(results), batch)))
                    else:
                        f.set_result(results)
                elif typ == p.T_STATUS_REPLY:
                    with self._lock:
                        f = self._status.popleft() if self._status else None
                    if f is not None:
                        try:
                            f.set_result(p.decode_status(body))
                        except FrameError as e:
                            f.set_exception(e)
                else:
                    raise FrameError("malformed api frame: unexpected type %#x" % typ)
        except ExoError as e:
            self._fail(e)
        except BaseException as e:  # never leave requests waiting forever
            self._fail(ExoConnectionError("exo daemon connection: %r" % e))
            raise
        finally:
            try:
                self._sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass

    def _fail(self, err: "ExoError") -> None:
        with self._lock:
            if self._err is None:
                self._err = err
            waiting, self._waiting = self._waiting, {}
            status, self._status = self._status, collections.deque()
        for f, _ in waiting.values():
            f.set_exception(_copy(err))
        for f in status:
            f.set_exception(_copy(err))


def _copy(err: Exception) -> Exception:
    """A fresh exception like err for each waiter (one instance raised in
    many threads would share its traceback)."""
    if isinstance(err, APIError):
        return api_error(err.code, err.text)
    return type(err)(str(err))


def _wait(f: concurrent.futures.Future, timeout: Optional[float], what: str):
    try:
        return f.result(timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError("%s: no answer from the exo daemon within %ss" % (what, timeout)) from None


def subscribe(path: str = p.DEFAULT_SOCKET, from_seq: int = 0, *, timeout: Optional[float] = None,
              name: str = p.CLIENT_NAME) -> "Subscription":
    """Follow the agreed stream at the daemon at ``path`` from the first
    message whose seq is at least ``from_seq``, on a new connection.

    Returns a :class:`Subscription`, an iterator of
    :class:`~exo_client.Message`. ``timeout`` (seconds) bounds the connect,
    the Hello and each wait for a message (TimeoutError; iterating again
    goes on). The same errors as :func:`connect`.
    """
    sock, frames, _ = _dial(path, timeout, name)
    try:
        sock.sendall(p.encode_subscribe(from_seq))
    except OSError as e:
        sock.close()
        raise ExoConnectionError("subscribe at exo daemon at %s: %s" % (path, e.strerror or e)) from None
    return Subscription(sock, frames, path)


class Subscription:
    """The agreed stream of one daemon, in order: iterate to get each
    :class:`~exo_client.Message`.

    The stream never ends by itself: iteration raises CompactedError (the
    start is no longer held: the text names the oldest seq one can start
    from), TooSlowError (the subscriber fell too far behind: subscribe
    again from ``last.seq``), or ExoConnectionError (the daemon is gone).
    ``last`` is the position of the last message returned (None before
    the first). A context manager; :meth:`close` ends it.
    """

    def __init__(self, sock: _socket.socket, frames: _Frames, path: str):
        self.path = path
        self.last: Optional[p.Position] = None
        self._sock = sock
        self._frames = frames
        self._closed = False

    def __iter__(self) -> Iterator[p.Message]:
        return self

    def __next__(self) -> p.Message:
        if self._closed:
            raise StopIteration
        try:
            got = self._frames.read()
        except (OSError, ExoConnectionError) as e:
            if isinstance(e, TimeoutError):
                raise
            if self._closed:
                raise StopIteration from None
            raise ExoConnectionError("subscription at %s: %s" % (self.path, getattr(e, "strerror", None) or e)) from None
        if got is None:
            if self._closed:
                raise StopIteration
            raise ExoConnectionError("subscription at %s: EOF (the daemon closed the connection)" % self.path)
        m = p.subscription_message(*got)
        self.last = m.position
        return m

    def close(self) -> None:
        """End the subscription (iteration stops)."""
        self._closed = True
        try:
            self._sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

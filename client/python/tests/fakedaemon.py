"""A fake exo daemon for the unit tests: the local API's framing on a Unix
socket, in threads, with behaviours the tests choose.

It answers Hello as a daemon of a chosen kind (current, older, newer,
refusing the version, from before versions), assigns positions to
publishes in their order of arrival (``positions`` maps each payload to
its position, for the tests to check the client's matching), and obeys
directives in payloads:

    !E<code>:<text>   answer this publish (or batch message) with that error
    !W<code>:<text>   as the first message of a batch: refuse the whole batch
    !CLOSE:<text>     send Error with request id 0 and close (a bad request)
    !DROP             close the connection without a word (the daemon gone)
    !JUNK             send a frame of an unknown type
    !HOLD             never answer

``reverse`` holds that many answers and sends them in reverse order, in
one write; ``split`` writes every reply one byte at a time, so frames
straddle the client's reads.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import tempfile
import threading
from typing import Dict, List, Optional, Sequence, Tuple

FEATURES = "publish,publish-batch,subscribe,status,roster,key,accept-loss"


def frame(typ: int, body: bytes = b"") -> bytes:
    return struct.pack(">IB", 1 + len(body), typ) + body


def error_frame(req: int, code: int, text: str) -> bytes:
    return frame(0xFF, struct.pack(">QH", req, code) + text.encode())


def read_exact(conn: socket.socket, n: int) -> Optional[bytes]:
    b = bytearray()
    while len(b) < n:
        chunk = conn.recv(n - len(b))
        if not chunk:
            return None
        b += chunk
    return bytes(b)


def read_frame(conn: socket.socket) -> Optional[Tuple[int, bytes]]:
    hdr = read_exact(conn, 5)
    if hdr is None:
        return None
    n, typ = struct.unpack(">IB", hdr)
    body = read_exact(conn, n - 1)
    if body is None:
        return None
    return typ, body


def directive(payload: bytes) -> Tuple[str, int, str]:
    """(kind, code, text) of a payload's directive; kind "" for none."""
    if not payload.startswith(b"!"):
        return "", 0, ""
    s = payload[1:].decode()
    if s[0] in "EW":
        code, _, text = s[1:].partition(":")
        return s[0], int(code), text
    kind, _, text = s.partition(":")
    return kind, 0, text


class Closed(Exception):
    pass


class FakeDaemon:
    """A fake daemon listening on ``path`` (a short temporary path); a
    context manager."""

    def __init__(self, hello: str = "current", reverse: int = 1, split: bool = False,
                 history: Sequence[Tuple[int, int, int, bytes]] = (), oldest: int = 0,
                 too_slow_after: Optional[int] = None):
        self.hello = hello  # current, older, newer, refuse, predates, none
        self.reverse = reverse
        self.split = split
        self.history = list(history)  # (seq, index, sender, payload) for subscribers
        self.oldest = oldest
        self.too_slow_after = too_slow_after
        self.hellos: List[Tuple[int, str]] = []  # (version, name) of every Hello received
        self.positions: Dict[bytes, Tuple[int, int]] = {}
        self.statuses = 0
        self._seq = 100
        self._lock = threading.Lock()
        self._dir = tempfile.mkdtemp(prefix="exo-fake")
        self.path = os.path.join(self._dir, "api.sock")
        self._ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._ln.bind(self.path)
        self._ln.listen(16)
        self._conns: List[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def __enter__(self) -> "FakeDaemon":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop listening and close every connection (the daemon gone)."""
        try:
            self._ln.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._ln.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(5)
        shutil.rmtree(self._dir, ignore_errors=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._ln.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _write(self, conn: socket.socket, data: bytes) -> None:
        if self.split:
            for i in range(len(data)):
                conn.sendall(data[i:i + 1])
        else:
            conn.sendall(data)

    def _position(self, payload: bytes) -> Tuple[int, int]:
        with self._lock:
            self._seq += 1
            pos = (self._seq, len(self.positions) % 3)
            self.positions[payload] = pos
            return pos

    def _serve(self, conn: socket.socket) -> None:
        try:
            self._serve1(conn)
        except (Closed, OSError):
            pass
        finally:
            conn.close()

    def _serve1(self, conn: socket.socket) -> None:
        if self.hello != "none":
            got = read_frame(conn)
            if got is None or got[0] != 0x08:
                return
            version, name = struct.unpack_from(">H", got[1])[0], got[1][2:].decode()
            with self._lock:
                self.hellos.append((version, name))
            if self.hello == "current":
                self._write(conn, frame(0x88, struct.pack(">H", 1) + FEATURES.encode()))
            elif self.hello == "newer":
                self._write(conn, frame(0x88, struct.pack(">H", 2) + (FEATURES + ",future").encode()))
            elif self.hello == "older":
                self._write(conn, frame(0x88, struct.pack(">H", 0) + b"publish"))
                return
            elif self.hello == "refuse":
                self._write(conn, error_frame(0, 12, 'the client (%r) speaks API version %d, this daemon speaks '
                                              'API version 2 (and serves clients of versions 2..2): use a client '
                                              'of version 2' % (name, version)))
                return
            elif self.hello == "predates":
                self._write(conn, error_frame(0, 5, "unknown request type 0x8"))
                return
        held: List[bytes] = []

        def answer(b: bytes) -> None:
            held.append(b)
            if len(held) >= self.reverse:
                self._write(conn, b"".join(reversed(held)))
                held.clear()

        while True:
            got = read_frame(conn)
            if got is None:
                return
            typ, body = got
            if typ == 0x01:
                req, payload = struct.unpack_from(">Q", body)[0], body[8:]
                kind, code, text = directive(payload)
                if kind == "E":
                    answer(error_frame(req, code, text))
                elif kind == "CLOSE":
                    self._write(conn, error_frame(0, 5, text))
                    return
                elif kind == "DROP":
                    return
                elif kind == "JUNK":
                    self._write(conn, frame(0x7E, b"junk"))
                elif kind == "HOLD":
                    pass
                else:
                    seq, index = self._position(payload)
                    answer(frame(0x81, struct.pack(">QQH", req, seq, index)))
            elif typ == 0x06:
                req, count = struct.unpack_from(">QH", body)
                off, payloads = 10, []
                for _ in range(count):
                    (n,) = struct.unpack_from(">I", body, off)
                    payloads.append(body[off + 4:off + 4 + n])
                    off += 4 + n
                assert off == len(body), "bytes after the batch"
                kind, code, text = directive(payloads[0])
                if kind == "W":
                    answer(error_frame(req, code, text))
                    continue
                out = [struct.pack(">QH", req, count)]
                for pl in payloads:
                    kind, code, text = directive(pl)
                    if kind == "E":
                        t = text.encode()
                        out.append(struct.pack(">HH", code, len(t)) + t)
                    else:
                        seq, index = self._position(pl)
                        out.append(struct.pack(">HQH", 0, seq, index))
                answer(frame(0x86, b"".join(out)))
            elif typ == 0x03:
                with self._lock:
                    self.statuses += 1
                    st = {"id": 0, "agreement_pointer": self._seq, "n": self.statuses}
                self._write(conn, frame(0x83, json.dumps(st).encode()))
            elif typ == 0x02:
                (from_seq,) = struct.unpack(">Q", body)
                self._subscribe(conn, from_seq)
                return
            else:
                self._write(conn, error_frame(0, 5, "unknown request type %#x" % typ))
                return

    def _subscribe(self, conn: socket.socket, from_seq: int) -> None:
        if from_seq < self.oldest:
            self._write(conn, error_frame(0, 6, "seq %d is no longer in memory; the oldest a subscription can "
                                          "start from is %d" % (from_seq, self.oldest)))
            return
        out = []
        sent = 0
        for seq, index, sender, payload in self.history:
            if seq < from_seq:
                continue
            if self.too_slow_after is not None and sent == self.too_slow_after:
                break
            out.append(frame(0x82, struct.pack(">QHB", seq, index, sender) + payload))
            sent += 1
        if self.too_slow_after is not None:
            out.append(error_frame(0, 7, "subscriber fell behind by more than its queue; resubscribe from the "
                                   "last seq received"))
        self._write(conn, b"".join(out))
        if self.too_slow_after is None:
            conn.recv(1)  # the live stream: wait until the client goes away (or stop)

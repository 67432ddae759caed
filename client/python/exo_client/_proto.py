"""The wire format of the daemon's local API (docs/api.md), without IO.

Every frame, in both directions::

    [length u32 BE: the type byte and the body][type u8][body]

All integers are big-endian. The blocking client (client.py) and the
asyncio one (aio.py) read and write frames their own way and share the
encoders and decoders here; so do the tests' fake daemon.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from .errors import (CODE_BAD_REQUEST, CODE_VERSION, APIError, FrameError, TooLargeError,
                     VersionError, api_error)

#: The API version this client speaks (the Go client's ``APIVersion``).
API_VERSION = 1
#: The oldest version a daemon of API_VERSION still serves.
MIN_API_VERSION = 1
#: The name this client gives itself in Hello (the daemon quotes it).
CLIENT_NAME = "exo-python"
#: The daemon's default socket (``api_socket`` in its config).
DEFAULT_SOCKET = "/run/exo/exo.sock"

# Frame types (client/proto.go).
T_PUBLISH = 0x01
T_SUBSCRIBE = 0x02
T_STATUS = 0x03
T_PUBLISH_BATCH = 0x06
T_HELLO = 0x08
T_PUBLISHED = 0x81
T_MESSAGE = 0x82
T_STATUS_REPLY = 0x83
T_PUBLISHED_BATCH = 0x86
T_HELLO_REPLY = 0x88
T_ERROR = 0xFF

#: The bound of one frame's length field (a 64 MiB message plus headers).
MAX_FRAME = (64 << 20) + 64
#: The most messages one PublishBatch carries (its count is a u16).
MAX_BATCH = 65535

HEADER = struct.Struct(">IB")  # length, type
_PUBLISH_HEAD = struct.Struct(">IBQ")  # length, type, req
_BATCH_HEAD = struct.Struct(">IBQH")  # length, type, req, count
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_PUBLISHED = struct.Struct(">QQH")  # req, seq, index
_ERROR = struct.Struct(">QH")  # req, code
_MESSAGE = struct.Struct(">QHB")  # seq, index, sender
_RESULT_OK = struct.Struct(">HQH")  # code 0, seq, index
_RESULT_ERR = struct.Struct(">HH")  # code, text_len


class Position(NamedTuple):
    """Where a message sits in the agreed order: the sequence number of the
    entry that completes it and its index among that entry's messages.
    Positions compare in the agreed order."""

    seq: int
    index: int


class Message(NamedTuple):
    """One agreed message of a subscription: its position, its sender's
    stable member id and its payload."""

    seq: int
    index: int
    sender: int
    payload: bytes

    @property
    def position(self) -> Position:
        """The message's :class:`Position`."""
        return Position(self.seq, self.index)


class Hello(NamedTuple):
    """What the daemon said of itself when the connection began: its API
    version and the features (requests) it serves."""

    version: int
    features: Tuple[str, ...]


#: One result of a batch: the message's position, or why it failed.
Result = Union[Position, APIError]


def as_bytes(payload: Any) -> bytes:
    """Return payload as bytes: bytes, bytearray, memoryview or any buffer
    (a str must be encoded by the caller: TypeError)."""
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        raise TypeError("an exo payload is bytes, not str: encode it (payload.encode())")
    return memoryview(payload).tobytes()


def frame(typ: int, body: bytes = b"") -> bytes:
    """Encode one frame; TooLargeError (before anything is sent) above
    MAX_FRAME."""
    n = 1 + len(body)
    if n > MAX_FRAME:
        raise TooLargeError(2, "api frame of %d bytes: above the frame bound %d" % (n, MAX_FRAME))
    return HEADER.pack(n, typ) + body


def encode_hello(name: str = CLIENT_NAME, version: int = API_VERSION) -> bytes:
    """Hello: [version u16][the client's name, UTF-8]."""
    return frame(T_HELLO, struct.pack(">H", version) + name.encode())


def encode_publish(req: int, payload: bytes) -> bytes:
    """Publish: [req u64][payload]."""
    n = 9 + len(payload)
    if n > MAX_FRAME:
        raise TooLargeError(2, "api frame of %d bytes: above the frame bound %d" % (n, MAX_FRAME))
    return _PUBLISH_HEAD.pack(n, T_PUBLISH, req) + payload


def encode_publish_batch(req: int, payloads: Sequence[bytes]) -> bytes:
    """PublishBatch: [req u64][count u16] then count times [len u32][payload].
    TooLargeError (before anything is sent) for 0 or more than MAX_BATCH
    messages or more than a frame's worth of bytes."""
    if not 1 <= len(payloads) <= MAX_BATCH:
        raise TooLargeError(2, "publish batch of %d messages: a batch has 1 to %d" % (len(payloads), MAX_BATCH))
    n = 1 + 10 + sum(4 + len(p) for p in payloads)
    if n > MAX_FRAME:
        raise TooLargeError(2, "publish batch of %d messages, %d bytes: above the frame bound %d, send smaller batches"
                            % (len(payloads), n, MAX_FRAME))
    parts = [_BATCH_HEAD.pack(n, T_PUBLISH_BATCH, req, len(payloads))]
    for p in payloads:
        parts.append(_U32.pack(len(p)))
        parts.append(p)
    return b"".join(parts)


def encode_subscribe(from_seq: int) -> bytes:
    """Subscribe: [from_seq u64]."""
    return frame(T_SUBSCRIBE, _U64.pack(from_seq))


def encode_status() -> bytes:
    """Status: empty."""
    return frame(T_STATUS)


def check_length(n: int) -> None:
    """Check a frame's length field (FrameError outside 1..MAX_FRAME)."""
    if n < 1 or n > MAX_FRAME:
        raise FrameError("malformed api frame: length %d" % n)


def decode_published(body: bytes) -> Tuple[int, Position]:
    """Published: [req u64][seq u64][index u16] -> (req, position)."""
    if len(body) < _PUBLISHED.size:
        raise FrameError("malformed api frame: short Published")
    req, seq, index = _PUBLISHED.unpack_from(body)
    return req, Position(seq, index)


def subscription_message(typ: int, body: bytes) -> "Message":
    """The message of a frame a subscription received; a daemon's Error
    frame is raised as its APIError, any other frame as FrameError."""
    if typ == T_MESSAGE:
        return decode_message(body)
    if typ == T_ERROR:
        _, err = decode_error(body)
        raise err
    raise FrameError("malformed api frame: unexpected type %#x in a subscription" % typ)


def decode_error(body: bytes) -> Tuple[int, APIError]:
    """Error: [req u64][code u16][text] -> (req, the APIError subclass of
    the code)."""
    if len(body) < _ERROR.size:
        raise FrameError("malformed api frame: short Error")
    req, code = _ERROR.unpack_from(body)
    return req, api_error(code, body[_ERROR.size:].decode("utf-8", "replace"))


def decode_message(body: bytes) -> Message:
    """Message: [seq u64][index u16][sender u8][payload]."""
    if len(body) < _MESSAGE.size:
        raise FrameError("malformed api frame: short Message")
    seq, index, sender = _MESSAGE.unpack_from(body)
    return Message(seq, index, sender, body[_MESSAGE.size:])


def decode_status(body: bytes) -> Dict[str, Any]:
    """StatusReply: the status JSON, decoded."""
    try:
        st = json.loads(body)
    except ValueError as e:
        raise FrameError("status: %s" % e) from None
    if not isinstance(st, dict):
        raise FrameError("status: a JSON %s, want an object" % type(st).__name__)
    return st


def decode_published_batch(body: bytes) -> Tuple[int, List[Result]]:
    """PublishedBatch: [req u64][count u16] then count results in the
    batch's order, each [code u16 = 0][seq u64][index u16] (agreed there) or
    [code u16 > 0][text_len u16][text] (failed) -> (req, results). A count
    of 0, a cut result and bytes after the last are FrameError."""
    if len(body) < 10:
        raise FrameError("malformed api frame: published batch of %d bytes" % len(body))
    req, count = struct.unpack_from(">QH", body)
    if count == 0:
        raise FrameError("malformed api frame: published batch of 0 results")
    results: List[Result] = []
    off = 10
    for i in range(count):
        if len(body) - off < 2:
            raise FrameError("malformed api frame: published batch: result %d of %d cut" % (i, count))
        (code,) = struct.unpack_from(">H", body, off)
        if code == 0:
            if len(body) - off < _RESULT_OK.size:
                raise FrameError("malformed api frame: published batch: result %d of %d cut" % (i, count))
            _, seq, index = _RESULT_OK.unpack_from(body, off)
            results.append(Position(seq, index))
            off += _RESULT_OK.size
            continue
        if len(body) - off < _RESULT_ERR.size:
            raise FrameError("malformed api frame: published batch: result %d of %d cut" % (i, count))
        _, tlen = _RESULT_ERR.unpack_from(body, off)
        start = off + _RESULT_ERR.size
        if len(body) - start < tlen:
            raise FrameError("malformed api frame: published batch: result %d of %d cut" % (i, count))
        results.append(api_error(code, body[start:start + tlen].decode("utf-8", "replace")))
        off = start + tlen
    if off != len(body):
        raise FrameError("malformed api frame: published batch: %d bytes after its %d results" % (len(body) - off, count))
    return req, results


def check_hello(typ: int, body: bytes, socket: str) -> Hello:
    """Check the daemon's answer to Hello and return its Hello.

    A daemon older than this client, one that refuses the client's version
    (Error 12) and one from before API versions (Error 5: Hello is an
    unknown request to it) raise VersionError with one line naming both
    versions; any other Error frame its APIError.
    """
    if typ == T_HELLO_REPLY and len(body) >= 2:
        (version,) = struct.unpack_from(">H", body)
        f = body[2:].decode("utf-8", "replace")
        hello = Hello(version, tuple(f.split(",")) if f else ())
        if version < API_VERSION:
            raise VersionError(
                CODE_VERSION, "API version not served",
                "exo client speaks API version %d, the daemon at %s speaks API version %d: "
                "upgrade the daemon, or use a client of version %d" % (API_VERSION, socket, version, version),
                client_version=API_VERSION, daemon_version=version)
        return hello
    if typ == T_ERROR and len(body) >= _ERROR.size:
        _, err = decode_error(body)
        if err.code == CODE_BAD_REQUEST:
            raise VersionError(
                CODE_VERSION, err.text,
                "exo client speaks API version %d, the daemon at %s predates API versions (it said: %s): "
                "upgrade the daemon" % (API_VERSION, socket, err.text),
                client_version=API_VERSION)
        if err.code == CODE_VERSION:
            raise VersionError(CODE_VERSION, err.text,
                               "exo daemon at %s: %s (code %d)" % (socket, err.text, CODE_VERSION),
                               client_version=API_VERSION)
        raise err
    raise FrameError("hello to exo daemon at %s: malformed api frame: reply type %#x" % (socket, typ))


def describe_said(err: Optional[APIError]) -> str:
    """The suffix naming what the daemon said before it closed."""
    return " (the daemon said: %s)" % err if err is not None else ""

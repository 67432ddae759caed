"""The wire format: frames as docs/api.md draws them, byte for byte, and
decoders that refuse what is malformed."""

import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from exo_client import _proto as p  # noqa: E402
from exo_client import (APIError, CompactedError, FrameError, Position, TooLargeError,  # noqa: E402
                        VersionError)


def hx(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


class TestEncode(unittest.TestCase):
    def test_publish(self):
        self.assertEqual(p.encode_publish(7, b"hi"), hx(
            "0000000b"            # length: type + req + payload = 11
            "01"                  # Publish
            "0000000000000007"    # req
            "6869"))              # payload

    def test_publish_batch(self):
        self.assertEqual(p.encode_publish_batch(1, [b"a", b"bc"]), hx(
            "00000016"            # length 22: type 1 + req 8 + count 2 + (4+1) + (4+2)
            "06"                  # PublishBatch
            "0000000000000001"    # req
            "0002"                # count
            "00000001 61"         # len, "a"
            "00000002 6263"))     # len, "bc"

    def test_hello_subscribe_status(self):
        self.assertEqual(p.encode_hello(), hx("0000000d 08 0001") + b"exo-python")
        self.assertEqual(p.encode_subscribe(258), hx("00000009 02 0000000000000102"))
        self.assertEqual(p.encode_status(), hx("00000001 03"))

    def test_batch_bounds(self):
        with self.assertRaises(TooLargeError):
            p.encode_publish_batch(1, [])
        with self.assertRaises(TooLargeError):
            p.encode_publish_batch(1, [b""] * (p.MAX_BATCH + 1))
        self.assertEqual(len(p.encode_publish_batch(1, [b""] * p.MAX_BATCH)), 5 + 10 + 4 * p.MAX_BATCH)

    def test_frame_bound(self):
        big = bytes(p.MAX_FRAME - 9)  # type + req + payload = MAX_FRAME: fits
        self.assertEqual(len(p.encode_publish(1, big)), 4 + p.MAX_FRAME)
        with self.assertRaises(TooLargeError) as cm:
            p.encode_publish(1, big + b"x")
        self.assertIn("frame bound", str(cm.exception))

    def test_payload_types(self):
        self.assertEqual(p.as_bytes(bytearray(b"ab")), b"ab")
        self.assertEqual(p.as_bytes(memoryview(b"ab")), b"ab")
        with self.assertRaises(TypeError):
            p.as_bytes("text")


class TestDecode(unittest.TestCase):
    def test_published(self):
        self.assertEqual(p.decode_published(hx("0000000000000005 0000000000000063 0002")), (5, Position(99, 2)))
        with self.assertRaises(FrameError):
            p.decode_published(hx("0000000000000005 00000000000000"))

    def test_error(self):
        req, err = p.decode_error(hx("0000000000000000 0006") + b"seq 1 gone")
        self.assertEqual(req, 0)
        self.assertIsInstance(err, CompactedError)
        self.assertEqual((err.code, err.text, str(err)), (6, "seq 1 gone", "exo daemon: seq 1 gone (code 6)"))
        _, err = p.decode_error(hx("0000000000000001 0063") + b"new")
        self.assertIs(type(err), APIError)
        with self.assertRaises(FrameError):
            p.decode_error(hx("00000000000000 01"))

    def test_message(self):
        m = p.decode_message(hx("0000000000000010 0003 02") + b"pay")
        self.assertEqual(m, (16, 3, 2, b"pay"))
        self.assertEqual(m.position, Position(16, 3))
        with self.assertRaises(FrameError):
            p.decode_message(hx("0000000000000010 0003"))

    def test_published_batch(self):
        body = hx("0000000000000009 0003"
                  "0000 0000000000000020 0001"   # agreed at (32, 1)
                  "0002 0003") + b"big" + hx(    # too large
                  "0000 0000000000000021 0000")  # agreed at (33, 0)
        req, res = p.decode_published_batch(body)
        self.assertEqual(req, 9)
        self.assertEqual(res[0], Position(32, 1))
        self.assertIsInstance(res[1], TooLargeError)
        self.assertEqual(res[1].text, "big")
        self.assertEqual(res[2], Position(33, 0))
        bad = {
            "count 0": hx("0000000000000009 0000"),
            "short": hx("0000000000000009 00"),
            "cut ok": hx("0000000000000009 0001 0000 00000000"),
            "cut text": hx("0000000000000009 0001 0002 0005") + b"abc",
            "more than count": body + hx("00"),
            "fewer than count": hx("0000000000000009 0002 0000 0000000000000020 0001"),
        }
        for name, b in bad.items():
            with self.subTest(name), self.assertRaises(FrameError):
                p.decode_published_batch(b)

    def test_length(self):
        for n in (0, p.MAX_FRAME + 1):
            with self.assertRaises(FrameError):
                p.check_length(n)
        p.check_length(1)
        p.check_length(p.MAX_FRAME)

    def test_status(self):
        self.assertEqual(p.decode_status(b'{"agreement_pointer": 3}'), {"agreement_pointer": 3})
        for b in (b"{", b"[1]"):
            with self.assertRaises(FrameError):
                p.decode_status(b)


class TestHello(unittest.TestCase):
    def test_current_and_newer(self):
        h = p.check_hello(0x88, struct.pack(">H", 1) + b"publish,status", "/s")
        self.assertEqual(h, (1, ("publish", "status")))
        self.assertEqual(p.check_hello(0x88, struct.pack(">H", 3), "/s"), (3, ()))

    def test_mismatch(self):
        cases = {
            "older": (0x88, struct.pack(">H", 0) + b"publish", ["API version 1", "daemon at /s speaks API version 0"]),
            "refused": (0xFF, struct.pack(">QH", 0, 12) + b"the client speaks API version 1, this daemon speaks API version 2",
                        ["API version 1", "API version 2", "code 12"]),
            "predates": (0xFF, struct.pack(">QH", 0, 5) + b"unknown request type 0x8",
                         ["API version 1", "predates API versions", "unknown request type 0x8"]),
        }
        for name, (typ, body, want) in cases.items():
            with self.subTest(name):
                with self.assertRaises(VersionError) as cm:
                    p.check_hello(typ, body, "/s")
                e = cm.exception
                self.assertEqual(e.code, 12)
                self.assertEqual(e.client_version, 1)
                self.assertNotIn("\n", str(e))
                for w in want:
                    self.assertIn(w, str(e))

    def test_other(self):
        with self.assertRaises(FrameError):
            p.check_hello(0x81, b"", "/s")
        with self.assertRaises(APIError) as cm:
            p.check_hello(0xFF, struct.pack(">QH", 0, 4) + b"daemon shutting down", "/s")
        self.assertEqual(cm.exception.code, 4)


if __name__ == "__main__":
    unittest.main()

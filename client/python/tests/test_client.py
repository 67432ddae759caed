"""The blocking client against the fake daemon: Hello and version
mismatch, publishes (one, pipelined, from threads, batches), errors,
status, subscriptions, a daemon that goes away."""

import os
import socket
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import exo_client  # noqa: E402
from exo_client import (APIError, BatchError, CompactedError, DroppedError, ExoConnectionError,  # noqa: E402
                        FrameError, Position, QueueFullError, ShuttingDownError, TooLargeError, TooSlowError,
                        UnknownFateError, VersionError)
from fakedaemon import FakeDaemon  # noqa: E402

HISTORY = [(s, i, s % 3, b"m%d.%d" % (s, i)) for s in range(1, 11) for i in range(2)]


class Base(unittest.TestCase):
    def daemon(self, **kw) -> FakeDaemon:
        d = FakeDaemon(**kw)
        self.addCleanup(d.stop)
        return d

    def client(self, d: FakeDaemon) -> exo_client.Client:
        c = exo_client.connect(d.path, timeout=5)
        self.addCleanup(c.close)
        return c


class TestHello(Base):
    def test_current(self):
        d = self.daemon()
        c = self.client(d)
        self.assertEqual(c.hello.version, 1)
        self.assertIn("publish-batch", c.hello.features)
        self.assertEqual(d.hellos, [(1, "exo-python")])

    def test_newer_daemon(self):
        c = self.client(self.daemon(hello="newer"))
        self.assertEqual(c.hello.version, 2)
        self.assertEqual(c.publish(b"x"), Position(101, 0))

    def test_version_mismatch(self):
        want = {"older": "speaks API version 0", "refuse": "speaks API version 2", "predates": "predates API versions"}
        for kind, text in want.items():
            d = self.daemon(hello=kind)
            for name, call in (("connect", lambda: exo_client.connect(d.path, timeout=5)),
                               ("subscribe", lambda: exo_client.subscribe(d.path, 0, timeout=5))):
                with self.subTest(kind=kind, call=name):
                    with self.assertRaises(VersionError) as cm:
                        call()
                    msg = str(cm.exception)
                    self.assertNotIn("\n", msg)
                    self.assertIn("API version 1", msg)
                    self.assertIn(text, msg)
                    self.assertEqual(cm.exception.code, 12)
                    self.assertIsInstance(cm.exception, APIError)


class TestPublish(Base):
    def test_one(self):
        d = self.daemon()
        c = self.client(d)
        pos = c.publish(b"hello")
        self.assertEqual(pos, Position(*d.positions[b"hello"]))
        self.assertEqual(c.publish(bytearray(b"again")), Position(*d.positions[b"again"]))

    def test_pipelined_out_of_order(self):
        # The daemon answers 50 at a time in reverse order, in one write:
        # each future gets its own message's position.
        d = self.daemon(reverse=50)
        c = self.client(d)
        futs = {b"p%d" % i: c.publish_async(b"p%d" % i) for i in range(200)}
        for payload, f in futs.items():
            self.assertEqual(f.result(5), Position(*d.positions[payload]))
        self.assertEqual(c.publish_many([b"w%d" % i for i in range(100)], window=50),
                         [Position(*d.positions[b"w%d" % i]) for i in range(100)])

    def test_threads(self):
        # 4 threads, one publish in flight each: the daemon answers the 4
        # together, in reverse order.
        d = self.daemon(reverse=4)
        c = self.client(d)
        got = {}

        def run(t):
            for i in range(70):
                payload = b"t%d.%d" % (t, i)
                got[payload] = c.publish(payload, timeout=5)

        ths = [threading.Thread(target=run, args=(t,)) for t in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        self.assertEqual(len(got), 280)
        for payload, pos in got.items():
            self.assertEqual(pos, Position(*d.positions[payload]))

    def test_split_frames(self):
        # Every reply written one byte at a time: frames straddle reads.
        d = self.daemon(split=True, reverse=3, history=HISTORY)
        c = self.client(d)
        futs = [c.publish_async(b"s%d" % i) for i in range(9)]
        self.assertEqual([f.result(5) for f in futs], [Position(*d.positions[b"s%d" % i]) for i in range(9)])
        self.assertEqual(c.status(timeout=5)["n"], 1)
        with exo_client.subscribe(d.path, 9, timeout=5) as sub:
            self.assertEqual([next(sub) for _ in range(4)], [m for m in HISTORY if m[0] >= 9])

    def test_errors(self):
        c = self.client(self.daemon())
        for code, cls in ((1, QueueFullError), (2, TooLargeError), (3, DroppedError), (4, ShuttingDownError),
                          (10, UnknownFateError), (42, APIError)):
            with self.subTest(code=code):
                with self.assertRaises(cls) as cm:
                    c.publish(b"!E%d:the text" % code)
                e = cm.exception
                self.assertEqual((e.code, e.text), (code, "the text"))
                self.assertEqual(str(e), "exo daemon: the text (code %d)" % code)
        self.assertEqual(c.publish(b"still fine").seq, 101)  # the connection goes on

    def test_too_large_for_a_frame(self):
        c = self.client(self.daemon())
        with self.assertRaises(TooLargeError):
            c.publish(bytes(exo_client.MAX_FRAME))
        with self.assertRaises(TypeError):
            c.publish("a str")
        self.assertEqual(c.publish(b"after").seq, 101)

    def test_timeout(self):
        c = self.client(self.daemon())
        with self.assertRaises(TimeoutError):
            c.publish(b"!HOLD", timeout=0.1)


class TestBatch(Base):
    def test_batch(self):
        d = self.daemon(reverse=2)
        c = self.client(d)
        f1 = c.publish_batch_async([b"a", b"b"])
        f2 = c.publish_batch_async([b"c"])
        self.assertEqual(f1.result(5), [Position(*d.positions[b"a"]), Position(*d.positions[b"b"])])
        self.assertEqual(f2.result(5), [Position(*d.positions[b"c"])])
        self.assertEqual(c.publish_batch([]), [])

    def test_partial_failure(self):
        d = self.daemon()
        c = self.client(d)
        with self.assertRaises(BatchError) as cm:
            c.publish_batch([b"x", b"!E2:message of 70000 bytes is larger than max_message_bytes 65536", b"y"])
        e = cm.exception
        self.assertEqual((e.failed, e.index), (1, 1))
        self.assertIsInstance(e.error, TooLargeError)
        self.assertEqual(e.results[0], Position(*d.positions[b"x"]))
        self.assertEqual(e.results[2], Position(*d.positions[b"y"]))
        self.assertIn("1 of 3 messages of the batch failed", str(e))

    def test_refused_whole(self):
        c = self.client(self.daemon())
        with self.assertRaises(QueueFullError):
            c.publish_batch([b"!W1:queue full", b"b"])
        with self.assertRaises(TooLargeError):
            c.publish_batch([b""] * (exo_client.MAX_BATCH + 1))


class TestStatus(Base):
    def test_status(self):
        c = self.client(self.daemon())
        c.publish(b"x")
        st = c.status()
        self.assertEqual(st["agreement_pointer"], 101)
        # Replies carry no request id: they are matched in order.
        results = [None] * 6

        def run(i):
            results[i] = c.status(timeout=5)["n"]

        ths = [threading.Thread(target=run, args=(i,)) for i in range(6)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        self.assertEqual(sorted(results), [2, 3, 4, 5, 6, 7])


class TestSubscribe(Base):
    def test_from_the_middle(self):
        d = self.daemon(history=HISTORY)
        with exo_client.subscribe(d.path, 4, timeout=0.3) as sub:
            got = [next(sub) for _ in range(14)]
            self.assertEqual(got, [m for m in HISTORY if m[0] >= 4])
            self.assertEqual(got[0].position, Position(4, 0))
            self.assertEqual(sub.last, Position(10, 1))
            with self.assertRaises(TimeoutError):  # the live stream is quiet
                next(sub)
        self.assertEqual(list(sub), [])  # closed: iteration ends

    def test_compacted(self):
        d = self.daemon(history=HISTORY, oldest=5)
        sub = exo_client.subscribe(d.path, 2, timeout=5)
        with self.assertRaises(CompactedError) as cm:
            next(sub)
        self.assertIn("the oldest a subscription can start from is 5", cm.exception.text)
        sub.close()

    def test_too_slow(self):
        d = self.daemon(history=HISTORY, too_slow_after=3)
        sub = exo_client.subscribe(d.path, 0, timeout=5)
        got = []
        with self.assertRaises(TooSlowError):
            for m in sub:
                got.append(m)
        self.assertEqual(got, HISTORY[:3])
        self.assertEqual(sub.last, Position(2, 0))
        sub.close()

    def test_daemon_gone(self):
        d = self.daemon(history=HISTORY)
        sub = exo_client.subscribe(d.path, 10, timeout=5)
        self.assertEqual(len([next(sub), next(sub)]), 2)
        d.stop()
        with self.assertRaises(ExoConnectionError) as cm:
            next(sub)
        self.assertIn("EOF", str(cm.exception))
        sub.close()

    def test_close_from_another_thread(self):
        d = self.daemon(history=HISTORY)
        sub = exo_client.subscribe(d.path, 11)
        threading.Timer(0.2, sub.close).start()
        self.assertEqual(list(sub), [])


class TestConnection(Base):
    def test_bad_path(self):
        with self.assertRaises(ExoConnectionError) as cm:
            exo_client.connect("/nonexistent/exo.sock")
        self.assertIn("connect to exo daemon at /nonexistent/exo.sock", str(cm.exception))
        self.assertIn("is the daemon running?", str(cm.exception))
        self.assertIsInstance(cm.exception, ConnectionError)
        with self.assertRaises(ExoConnectionError):
            exo_client.subscribe("/nonexistent/exo.sock")

    def test_nobody_listening(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "stale.sock")
            s = socket.socket(socket.AF_UNIX)
            s.bind(path)
            s.close()  # a socket file nobody answers on (a crashed daemon's)
            with self.assertRaises(ExoConnectionError) as cm:
                exo_client.connect(path)
            self.assertIn("refused", str(cm.exception))

    def test_daemon_gone(self):
        d = self.daemon()
        c = self.client(d)
        held = c.publish_async(b"!HOLD")
        with self.assertRaises(ExoConnectionError):
            c.publish(b"!DROP", timeout=5)
        with self.assertRaises(ExoConnectionError) as cm:
            held.result(5)
        self.assertIn("exo daemon connection: EOF", str(cm.exception))
        with self.assertRaises(ExoConnectionError):
            c.publish(b"after")
        with self.assertRaises(ExoConnectionError):
            c.status()

    def test_daemon_stopped(self):
        d = self.daemon()
        c = self.client(d)
        held = [c.publish_async(b"!HOLD") for _ in range(3)]
        d.stop()
        for f in held:
            with self.assertRaises(ExoConnectionError):
                f.result(5)

    def test_bad_request_said(self):
        c = self.client(self.daemon())
        with self.assertRaises(ExoConnectionError) as cm:
            c.publish(b"!CLOSE:publish: short request", timeout=5)
        self.assertIn("the daemon said: exo daemon: publish: short request (code 5)", str(cm.exception))

    def test_malformed_reply(self):
        c = self.client(self.daemon())
        with self.assertRaises(FrameError) as cm:
            c.publish(b"!JUNK", timeout=5)
        self.assertIn("unexpected type 0x7e", str(cm.exception))

    def test_close(self):
        c = exo_client.connect(self.daemon().path)
        held = c.publish_async(b"!HOLD")
        t0 = time.monotonic()
        c.close()
        self.assertLess(time.monotonic() - t0, 2)
        with self.assertRaises(ExoConnectionError) as cm:
            held.result(5)
        self.assertIn("closed by the client", str(cm.exception))
        with self.assertRaises(ExoConnectionError):
            c.publish(b"after")


if __name__ == "__main__":
    unittest.main()

"""The asyncio client against the fake daemon: the same behaviours as the
blocking one (test_client.py)."""

import asyncio
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from exo_client import (MAX_FRAME, APIError, BatchError, CompactedError, DroppedError,  # noqa: E402
                        ExoConnectionError, FrameError, Position, QueueFullError, TooLargeError, TooSlowError, VersionError, aio)
from fakedaemon import FakeDaemon  # noqa: E402
from test_client import HISTORY  # noqa: E402


class Base(unittest.IsolatedAsyncioTestCase):
    def daemon(self, **kw) -> FakeDaemon:
        d = FakeDaemon(**kw)
        self.addCleanup(d.stop)
        return d

    async def client(self, d: FakeDaemon) -> aio.AsyncClient:
        c = await aio.connect(d.path, timeout=5)
        self.addAsyncCleanup(c.close)
        return c


class TestAsync(Base):
    async def test_hello(self):
        d = self.daemon()
        c = await self.client(d)
        self.assertEqual(c.hello.version, 1)
        self.assertIn("subscribe", c.hello.features)
        self.assertEqual(d.hellos, [(1, "exo-python")])

    async def test_version_mismatch(self):
        for kind, text in {"older": "speaks API version 0", "refuse": "speaks API version 2",
                           "predates": "predates API versions"}.items():
            d = self.daemon(hello=kind)
            with self.subTest(kind=kind):
                with self.assertRaises(VersionError) as cm:
                    await aio.connect(d.path, timeout=5)
                self.assertIn("API version 1", str(cm.exception))
                self.assertIn(text, str(cm.exception))
                self.assertNotIn("\n", str(cm.exception))
                with self.assertRaises(VersionError):
                    await aio.subscribe(d.path, 0, timeout=5)

    async def test_publish_pipelined(self):
        d = self.daemon(reverse=25)
        c = await self.client(d)
        payloads = [b"g%d" % i for i in range(100)]
        got = await asyncio.gather(*(c.publish(x) for x in payloads))
        self.assertEqual(got, [Position(*d.positions[x]) for x in payloads])
        futs = [c.publish_nowait(b"n%d" % i) for i in range(50)]
        self.assertEqual(await asyncio.gather(*futs), [Position(*d.positions[b"n%d" % i]) for i in range(50)])
        many = [b"w%d" % i for i in range(75)]
        self.assertEqual(await c.publish_many(many, window=25), [Position(*d.positions[x]) for x in many])

    async def test_split_frames(self):
        d = self.daemon(split=True, history=HISTORY)
        c = await self.client(d)
        self.assertEqual(await c.publish(b"s"), Position(*d.positions[b"s"]))
        self.assertEqual((await c.status())["n"], 1)
        sub = await aio.subscribe(d.path, 10, timeout=5)
        async with sub:
            self.assertEqual([await sub.__anext__() for _ in range(2)], HISTORY[-2:])

    async def test_errors(self):
        c = await self.client(self.daemon())
        for code, cls in ((1, QueueFullError), (2, TooLargeError), (3, DroppedError), (77, APIError)):
            with self.subTest(code=code):
                with self.assertRaises(cls) as cm:
                    await c.publish(b"!E%d:why" % code)
                self.assertEqual((cm.exception.code, cm.exception.text), (code, "why"))
        with self.assertRaises(TooLargeError):
            await c.publish(bytes(MAX_FRAME))
        self.assertEqual((await c.publish(b"ok")).seq, 101)

    async def test_batch(self):
        d = self.daemon()
        c = await self.client(d)
        self.assertEqual(await c.publish_batch([b"a", b"b"]), [Position(*d.positions[b"a"]), Position(*d.positions[b"b"])])
        with self.assertRaises(BatchError) as cm:
            await c.publish_batch([b"c", b"!E3:dropped by reconciliation"])
        self.assertIsInstance(cm.exception.results[1], DroppedError)
        self.assertEqual(cm.exception.results[0], Position(*d.positions[b"c"]))
        with self.assertRaises(QueueFullError):
            await c.publish_batch([b"!W1:queue full"])
        self.assertEqual(await c.publish_batch([]), [])

    async def test_status(self):
        c = await self.client(self.daemon())
        got = await asyncio.gather(*(c.status() for _ in range(5)))
        self.assertEqual([st["n"] for st in got], [1, 2, 3, 4, 5])

    async def test_subscribe(self):
        d = self.daemon(history=HISTORY)
        sub = await aio.subscribe(d.path, 7, timeout=0.5)
        got = []
        with self.assertRaises(TimeoutError):
            async for m in sub:
                got.append(m)
        self.assertEqual(got, [m for m in HISTORY if m[0] >= 7])
        self.assertEqual(sub.last, Position(10, 1))
        await sub.close()

    async def test_subscribe_errors(self):
        d = self.daemon(history=HISTORY, oldest=3)
        sub = await aio.subscribe(d.path, 1)
        with self.assertRaises(CompactedError):
            await sub.__anext__()
        await sub.close()
        d = self.daemon(history=HISTORY, too_slow_after=2)
        sub = await aio.subscribe(d.path, 0)
        with self.assertRaises(TooSlowError):
            async for _ in sub:
                pass
        self.assertEqual(sub.last, Position(1, 1))
        await sub.close()
        d = self.daemon(history=HISTORY)
        sub = await aio.subscribe(d.path, 10)
        await sub.__anext__()
        await sub.__anext__()
        d.stop()
        with self.assertRaises(ExoConnectionError):
            await sub.__anext__()
        await sub.close()

    async def test_connection(self):
        with self.assertRaises(ExoConnectionError) as cm:
            await aio.connect("/nonexistent/exo.sock")
        self.assertIn("is the daemon running?", str(cm.exception))
        c = await self.client(self.daemon())
        held = c.publish_nowait(b"!HOLD")
        with self.assertRaises(ExoConnectionError):
            await c.publish(b"!CLOSE:publish: short request")
        with self.assertRaises(ExoConnectionError) as cm:
            await held
        self.assertIn("the daemon said: exo daemon: publish: short request (code 5)", str(cm.exception))
        with self.assertRaises(ExoConnectionError):
            await c.publish(b"after")

    async def test_malformed_and_close(self):
        c = await self.client(self.daemon())
        with self.assertRaises(FrameError):
            await c.publish(b"!JUNK")
        c = await aio.connect(self.daemon().path)
        held = c.publish_nowait(b"!HOLD")
        await c.close()
        with self.assertRaises(ExoConnectionError) as cm:
            await held
        self.assertIn("closed by the client", str(cm.exception))


if __name__ == "__main__":
    unittest.main()

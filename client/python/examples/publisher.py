#!/usr/bin/env python3
"""Publish each line of stdin to the rack, --window of them in flight on one
connection, and print where each was agreed (seq.index, then the line)."""
import argparse
import collections
import sys

import exo_client


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--socket", default=exo_client.DEFAULT_SOCKET, help="the daemon's API socket")
    ap.add_argument("--window", type=int, default=64, help="publishes in flight")
    args = ap.parse_args()
    try:
        with exo_client.connect(args.socket, timeout=5) as c:
            inflight = collections.deque()
            for line in sys.stdin:
                if len(inflight) >= args.window:
                    text, fut = inflight.popleft()
                    print("%d.%d\t%s" % (*fut.result(), text))
                inflight.append((line.rstrip("\n"), c.publish_async(line.rstrip("\n").encode())))
            for text, fut in inflight:
                print("%d.%d\t%s" % (*fut.result(), text))
    except exo_client.ExoError as e:  # QueueFullError, TooLargeError, no daemon...
        print("publisher: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

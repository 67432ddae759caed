#!/usr/bin/env python3
"""Follow the rack's agreed stream and print each message (seq.index, sender,
payload), from --from or from where the rack is now; when cut off for being
too slow, subscribe again where it stopped."""
import argparse
import sys

import exo_client


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--socket", default=exo_client.DEFAULT_SOCKET, help="the daemon's API socket")
    ap.add_argument("--from", dest="start", type=int, help="the first seq (default: the rack's agreement point)")
    args = ap.parse_args()
    try:
        start = args.start
        if start is None:
            with exo_client.connect(args.socket, timeout=5) as c:
                start = c.status()["agreement_pointer"]
        last = None
        while True:
            try:
                for m in exo_client.subscribe(args.socket, start):
                    if last is None or m.position > last:  # skip what came before a resubscription
                        last = m.position
                        print("%d.%d\t%d\t%r" % (m.seq, m.index, m.sender, m.payload), flush=True)
            except exo_client.TooSlowError:
                start = last.seq if last else start
    except (exo_client.ExoError, KeyboardInterrupt) as e:  # CompactedError, the daemon gone...
        print("follower: %s" % (e or "interrupted"), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

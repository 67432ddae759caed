package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/exo-rack/exo/lab"
)

// bulkLike sends, for d, what a state transfer at rate bytes a second
// sends over the rack's network, without exo: chunk-byte writes on TCP
// connections from the members' namespaces, in turns of turn bytes each,
// to a listener in host to's namespace that reads and discards them (the
// test process plays both ends). It returns the bytes sent. What a
// transfer costs the rack beyond its bytes' way through the kernel (the
// members' reads of their logs, their commits, the joiner's daemon) is
// then the difference (TestRackJoinCycles, EXO_JOIN_BULK).
//
// fresh writes and reads each chunk in memory of its own, as the members
// and the joiner do (an answer's buffers), instead of one buffer reused.
func bulkLike(ctx context.Context, r *lab.Rack, members []int, to int, rate float64, chunk, turn int, d time.Duration, fresh bool) (int64, error) {
	addr := net.JoinHostPort(r.Hosts[to].OOBAddr.String(), "7799")
	var ln net.Listener
	if err := lab.InNetns(r.Hosts[to].Netns, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		return 0, fmt.Errorf("bulk: listen in %s: %w", r.Hosts[to].Name, err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if !fresh {
					io.Copy(io.Discard, c)
					return
				}
				for {
					// Each chunk into memory of its own, as the joiner reads
					// an answer: the pages are new to the process.
					b := make([]byte, chunk)
					if _, err := io.ReadFull(c, b); err != nil {
						return
					}
				}
			}()
		}
	}()
	conns := make([]net.Conn, len(members))
	for i, m := range members {
		if err := lab.InNetns(r.Hosts[m].Netns, func() (err error) {
			conns[i], err = net.Dial("tcp", addr)
			return err
		}); err != nil {
			return 0, fmt.Errorf("bulk: dial from %s: %w", r.Hosts[m].Name, err)
		}
		defer conns[i].Close()
	}
	buf := make([]byte, chunk)
	every := time.Duration(float64(chunk) / rate * float64(time.Second))
	var sent int64
	start := time.Now()
	for k, inTurn := 0, 0; time.Since(start) < d; {
		if fresh {
			buf = make([]byte, chunk) // as a member encodes an answer
			for i := 0; i < len(buf); i += 4096 {
				buf[i] = byte(i)
			}
		}
		if _, err := conns[k].Write(buf); err != nil {
			return sent, fmt.Errorf("bulk: write from %s: %w", r.Hosts[members[k]].Name, err)
		}
		sent += int64(chunk)
		if inTurn += chunk; inTurn >= turn {
			k, inTurn = (k+1)%len(conns), 0
		}
		next := start.Add(time.Duration(sent/int64(chunk)) * every)
		select {
		case <-ctx.Done():
			return sent, ctx.Err()
		case <-time.After(time.Until(next)):
		}
	}
	return sent, nil
}

// Package top is `exo top`: a live view of the daemons of a rack, one row
// per host, read from each daemon's status over its local API socket.
//
// Every interval it reads the status of every daemon at once (one API
// connection per socket, kept between refreshes and dialled again when it
// breaks), turns two consecutive reads into a [Snapshot] (pointers, lag
// behind the rack, the token holder, rates of frames, agreed messages,
// fetched entries and rejects, the fast path's counters; a host that did
// not answer is down, the view goes on), and draws it: over the previous
// frame on a terminal, one frame after the other elsewhere, or one JSON
// object per refresh.
//
//	snap, err := top.Once(ctx, top.Options{ClusterDir: dir, Interval: time.Second})
//	if err != nil {
//		return err // top.ErrNoSockets: nothing to watch in dir
//	}
//	fmt.Print(top.Render(snap))
//
// [Run] is the live view until ctx ends or the user presses q; [Once] reads
// two samples one interval apart and returns the frame, for scripts.
//
// It is a package of its own, beside package daemon, because it is a
// client of the daemons (package client) that reads their status as
// package daemon defines it; the command exo top is flags and one call to
// Run or Once.
package top

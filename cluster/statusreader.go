package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
)

// statusReader reads the hosts' statuses over a connection it keeps to
// each daemon, dialled again after an error (a daemon killed and
// restarted): a sampler that read every host's status every 20 ms over a
// new connection each time cost every daemon 50 connections a second
// (BenchmarkStatusRead: a read over a new connection costs the daemon
// about three times one over an open connection).
type statusReader struct {
	c     *Cluster
	conns map[int]*client.Client
}

func newStatusReader(c *Cluster) *statusReader {
	return &statusReader{c: c, conns: map[int]*client.Client{}}
}

// status reads host i's status; a read waits at most a second.
func (s *statusReader) status(ctx context.Context, i int) (daemon.Status, error) {
	var st daemon.Status
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	cl := s.conns[i]
	if cl == nil {
		var err error
		if cl, err = client.Dial(ctx, s.c.Socket(i)); err != nil {
			return st, err
		}
		s.conns[i] = cl
	}
	raw, err := cl.StatusRaw(ctx)
	if err != nil {
		s.drop(i)
		return st, err
	}
	err = json.Unmarshal(raw, &st)
	return st, err
}

// drop closes the connection to host i, if any.
func (s *statusReader) drop(i int) {
	if cl := s.conns[i]; cl != nil {
		cl.Close()
		delete(s.conns, i)
	}
}

func (s *statusReader) close() {
	for i := range s.conns {
		s.drop(i)
	}
}

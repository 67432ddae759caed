// Package apitest serves fake exo daemons' local API on Unix sockets, for
// the tests of the packages that talk to daemons (exo top, the roster and
// key operations, exo status): a listener whose connections get their
// Hello answered as a daemon of this version would, then the test's
// handler.
package apitest

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"testing"

	"github.com/exo-rack/exo/client"
)

// Dir returns a new temporary directory with a short path, removed when
// the test ends: a Unix socket's path has at most 108 bytes, which
// t.TempDir's may exceed.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "exo-api")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Listen serves the local API on a Unix socket at path until the test
// ends: every connection, once its Hello is answered, goes to handle
// (one goroutine each) and is closed when handle returns.
func Listen(t testing.TB, path string, handle func(c net.Conn, r *bufio.Reader)) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				if client.AnswerHello(r, c) == nil {
					handle(c, r)
				}
			}()
		}
	}()
}

// Requests is a handler for Listen that reads one request after the
// other and answers each with answer's frame (none when it returns no
// type), until a read fails or answer says to stop.
func Requests(answer func(typ byte, body []byte) (reply byte, parts [][]byte, ok bool)) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, r *bufio.Reader) {
		var buf []byte
		for {
			typ, body, b, err := client.ReadFrame(r, buf)
			buf = b
			if err != nil {
				return
			}
			reply, parts, ok := answer(typ, body)
			if !ok {
				return
			}
			if reply != 0 && client.WriteFrame(c, reply, parts...) != nil {
				return
			}
		}
	}
}

// Status is a handler for Listen that answers every Status request with
// the JSON of what status returns then, and ends the connection at any
// other request.
func Status(status func() any) func(net.Conn, *bufio.Reader) {
	return Requests(func(typ byte, _ []byte) (byte, [][]byte, bool) {
		if typ != client.TypeStatus {
			return 0, nil, false
		}
		raw, err := json.Marshal(status())
		if err != nil {
			return 0, nil, false
		}
		return client.TypeStatusReply, [][]byte{raw}, true
	})
}

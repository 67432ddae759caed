package client

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelloVersionMismatch: a daemon older than this client, or one from
// before API versions, makes Dial and Subscribe fail with one line that
// names both versions; a daemon of this version gives its features.
func TestHelloVersionMismatch(t *testing.T) {
	serve := func(reply func(c net.Conn)) string {
		return rawDaemon(t, func(c net.Conn, r *bufio.Reader) {
			if typ, body, _, err := ReadFrame(r, nil); err == nil && typ == TypeHello && len(body) >= 2 {
				reply(c)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	old := serve(func(c net.Conn) { WriteFrame(c, TypeHelloReply, U16(0), []byte("publish")) })
	pre := serve(func(c net.Conn) {
		WriteFrame(c, TypeError, U64(0), U16(CodeBadRequest), []byte("unknown request type 0x8"))
	})
	for name, sock := range map[string]string{"older daemon": old, "daemon before versions": pre} {
		_, err := Dial(ctx, sock)
		if err == nil || !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "API version 1") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Dial: %v, want one line naming API version 1 (ErrVersion)", name, err)
		}
		if name == "older daemon" && !strings.Contains(err.Error(), "daemon at "+sock+" speaks API version 0") {
			t.Errorf("%s: Dial: %v, want the daemon's version 0", name, err)
		}
		err = Subscribe(ctx, sock, 0, func(Message) error { return nil })
		if !errors.Is(err, ErrVersion) {
			t.Errorf("%s: Subscribe: %v, want ErrVersion", name, err)
		}
	}
	cur := serve(func(c net.Conn) { c.Write(AppendHelloReply(nil)) })
	c, err := Dial(ctx, cur)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if h := c.Hello(); h.Version != APIVersion || !strings.Contains(strings.Join(h.Features, ","), "publish-batch") {
		t.Fatalf("hello %+v", h)
	}
}

// shortSock returns a socket path short enough for a Unix socket (at most
// 108 bytes; t.TempDir's can be longer).
func shortSock(t *testing.T) string {
	dir, err := os.MkdirTemp("", "exo-hello")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "api.sock")
}

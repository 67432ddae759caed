package client

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// Hello is what the daemon said of itself when the connection began.
type Hello struct {
	Version  uint16   // the daemon's API version
	Features []string // the requests it serves (Features)
}

// hello sends the Hello request on a new connection and reads the answer:
// the daemon's version and features, or an error that names both versions
// when they do not match (a daemon older than this client, or one that
// does not serve its version), or says the daemon predates versions.
func hello(w io.Writer, r *bufio.Reader, socket, name string) (Hello, error) {
	if err := WriteFrame(w, TypeHello, U16(APIVersion), []byte(name)); err != nil {
		return Hello{}, fmt.Errorf("hello to exo daemon at %s: %w", socket, err)
	}
	typ, body, _, err := ReadFrame(r, nil)
	if err != nil {
		return Hello{}, fmt.Errorf("hello to exo daemon at %s: %w", socket, err)
	}
	rep, perr := parseReply(typ, body)
	switch {
	case perr == nil && typ == TypeHelloReply:
		h := rep.hello
		if h.Version < APIVersion {
			return h, fmt.Errorf("exo client speaks API version %d, the daemon at %s speaks API version %d: upgrade the daemon, or use a client of version %d: %w",
				APIVersion, socket, h.Version, h.Version, ErrVersion)
		}
		return h, nil
	case perr == nil && typ == TypeError:
		if rep.err.Code == CodeBadRequest {
			// A daemon from before versions: Hello is an unknown request.
			return Hello{}, fmt.Errorf("exo client speaks API version %d, the daemon at %s predates API versions (it said: %s): upgrade the daemon: %w",
				APIVersion, socket, rep.err.Text, ErrVersion)
		}
		return Hello{}, rep.err
	}
	return Hello{}, fmt.Errorf("hello to exo daemon at %s: %w: reply type %#x", socket, ErrFrame, typ)
}

// AppendHelloReply appends the daemon's answer to a Hello: this API
// version and the features it serves.
func AppendHelloReply(b []byte) []byte {
	body := append(U16(APIVersion), strings.Join(Features(), ",")...)
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)+1))
	hdr[4] = TypeHelloReply
	return append(append(b, hdr[:]...), body...)
}

// AnswerHello reads a connection's first request, which must be Hello,
// and answers it as a daemon of this API version does: for stand-ins of
// the daemon (tests, proxies).
func AnswerHello(r *bufio.Reader, w io.Writer) error {
	typ, _, _, err := ReadFrame(r, nil)
	if err != nil {
		return err
	}
	if typ != TypeHello {
		return fmt.Errorf("%w: first request %#x, want Hello", ErrFrame, typ)
	}
	_, err = w.Write(AppendHelloReply(nil))
	return err
}

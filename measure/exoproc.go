package measure

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/exo-rack/exo/cluster"
)

// exoProc is the exo binary running one of the measurement helpers (exo
// raw, exo probe-endpoint) inside a host of the lab rack: the helpers
// that must sit in a host's network namespace are this same binary run
// again there, each printing one JSON object.
type exoProc struct {
	cmd  *exec.Cmd
	what string       // "exo raw on B"
	out  bytes.Buffer // its JSON
	errb bytes.Buffer // its stderr, when not passed on
}

// startExo starts exo with args inside host id. Its stderr goes to
// stderr, or, when that is nil, into the error of wait.
func startExo(ctx context.Context, l *cluster.Lab, id int, stderr io.Writer, args ...string) (*exoProc, error) {
	p := &exoProc{what: fmt.Sprintf("exo %s on %s", args[0], l.Rack.Hosts[id].Name)}
	p.cmd = l.Rack.CommandContext(ctx, id, l.Bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, stderr
	if stderr == nil {
		p.cmd.Stderr = &p.errb
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", p.what, err)
	}
	return p, nil
}

// runExo runs exo with args inside host id and decodes its output into v.
func runExo(ctx context.Context, l *cluster.Lab, id int, stderr io.Writer, v any, args ...string) error {
	p, err := startExo(ctx, l, id, stderr, args...)
	if err != nil {
		return err
	}
	return p.wait(v)
}

// wait waits for the helper to exit and decodes its output into v.
func (p *exoProc) wait(v any) error {
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w: %s", p.what, err, strings.TrimSpace(p.out.String()+" "+p.errb.String()))
	}
	if err := json.Unmarshal(p.out.Bytes(), v); err != nil {
		return fmt.Errorf("%s: output: %w: %q %s", p.what, err, p.out.String(), strings.TrimSpace(p.errb.String()))
	}
	return nil
}

// kill ends a helper that runs until it is stopped (an echo server).
func (p *exoProc) kill() {
	if p != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

package lab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// needTool returns an error naming the Debian package when tool is missing.
func needTool(tool, pkg string) error {
	if _, err := exec.LookPath(tool); err != nil {
		return fmt.Errorf("%w: %s not found: apt-get install %s", ErrMissingTool, tool, pkg)
	}
	return nil
}

// refusals are the kernel's answers that mean "not here": no privilege for
// namespaces, or a missing feature (no veth, no bridge, no nf_tables).
var refusals = []string{
	"Operation not permitted",
	"Permission denied",
	"Operation not supported",
	"Protocol not supported",
	"Address family not supported",
	"Unknown device type",
}

// run runs name with args, stdin as its input, and returns its standard
// output. The error carries the command and its standard error, and wraps
// ErrRefused when the kernel said no.
func run(ctx context.Context, stdin, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		what := name + " " + strings.Join(args, " ")
		if i := strings.Index(stdin, "\n"); stdin != "" && (i < 0 || i == len(stdin)-1) {
			what += " <<< " + strings.TrimSpace(stdin)
		}
		for _, r := range refusals {
			if strings.Contains(msg, r) {
				return out.String(), fmt.Errorf("%s: %w: %s", what, ErrRefused, msg)
			}
		}
		return out.String(), fmt.Errorf("%s: %s", what, msg)
	}
	return out.String(), nil
}

// Command returns a command that runs name with args inside host id's
// network namespace (through `ip netns exec`). The caller sets its
// standard streams and starts it, like any exec.Cmd; the process sees only
// the host's loopback and its exo0.
func (r *Rack) Command(id int, name string, args ...string) *exec.Cmd {
	return r.CommandContext(context.Background(), id, name, args...)
}

// CommandContext is [Rack.Command] with a context that kills the process.
// An unknown id yields a command whose Start fails.
func (r *Rack) CommandContext(ctx context.Context, id int, name string, args ...string) *exec.Cmd {
	ns := "<no host " + fmt.Sprint(id) + ">"
	if h, err := r.host(id); err == nil {
		ns = h.Netns
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// Exec runs argv inside host id's namespace and returns its combined
// standard output and error.
func (r *Rack) Exec(ctx context.Context, id int, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("lab exec: no command")
	}
	h, err := r.host(id)
	if err != nil {
		return nil, err
	}
	out, err := r.CommandContext(ctx, id, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("lab exec on %s (%s): %s: %w", h.Name, h.Netns, strings.Join(argv, " "), err)
	}
	return out, nil
}

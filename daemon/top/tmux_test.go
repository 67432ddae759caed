package top

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/cluster"
	"github.com/exo-rack/exo/lab"
)

// TestTmux runs exo top in a terminal: a 3-host lab rack with daemons,
// some messages published and a light load running, exo top --cluster-dir
// inside a detached tmux session of 160x40. The screen must show every
// host's row with its append and agreement pointers above 0, the token
// holder marked, the rack totals line with agreed messages per second;
// once host C's daemon is killed its row must say down while the others
// keep going; q must end the process, with exit status 0.
func TestTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("short: skipping exo top in tmux on a lab rack")
	}
	if os.Geteuid() != 0 {
		t.Skip("exo top tmux test skipped: needs root for the lab rack (network namespaces, raw frames); run as root, CI does")
	}
	tmuxBin, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("exo top tmux test skipped: tmux is not installed (apt-get install tmux)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "exo")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/exo-rack/exo/cmd/exo").CombinedOutput(); err != nil {
		t.Fatalf("building exo: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("tp%d", os.Getpid()%100000)
	rack, err := lab.Up(ctx, lab.Options{Prefix: prefix, Hosts: 3, Force: true})
	if err != nil {
		t.Skipf("exo top tmux test skipped: the kernel refused the lab rack: %v", err)
	}
	t.Cleanup(func() {
		if err := lab.Down(context.Background(), prefix); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	cdir := filepath.Join(dir, "rack")
	c, err := cluster.Start(ctx, rack, cluster.Options{Bin: bin, Dir: cdir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if t.Failed() {
			for i, h := range rack.Hosts {
				b, _ := os.ReadFile(c.LogPath(i))
				if len(b) > 2000 {
					b = b[len(b)-2000:]
				}
				t.Logf("log of %s:\n%s", h.Name, b)
			}
		}
	})

	// 50 messages from every host, agreed; then a light load from A while
	// exo top watches.
	for i := range rack.Hosts {
		cl, err := client.Dial(ctx, c.Socket(i))
		if err != nil {
			t.Fatal(err)
		}
		var acks []<-chan client.Ack
		for k := range 50 {
			ch, err := cl.PublishAsync([]byte(fmt.Sprintf("top %d %d", i, k)))
			if err != nil {
				t.Fatal(err)
			}
			acks = append(acks, ch)
		}
		for k, ch := range acks {
			a := <-ch
			for errors.Is(a.Err, client.ErrDropped) {
				// A reconciliation dropped it before agreement: the
				// client's contract is to publish it again.
				_, a.Err = cl.Publish(ctx, []byte(fmt.Sprintf("top %d %d", i, k)))
			}
			if a.Err != nil {
				t.Fatalf("publish on %s: %v", rack.Hosts[i].Name, a.Err)
			}
		}
		cl.Close()
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go func() {
		cl, err := client.Dial(loadCtx, c.Socket(0))
		if err != nil {
			return
		}
		defer cl.Close()
		for k := 0; loadCtx.Err() == nil; k++ {
			cl.PublishAsync([]byte(fmt.Sprintf("load %d", k)))
			time.Sleep(2 * time.Millisecond)
		}
	}()

	// A tmux server of our own (-L), without the user's configuration; a
	// pane stays after its process exits so that its exit status can be read.
	conf := filepath.Join(dir, "tmux.conf")
	if err := os.WriteFile(conf, []byte("set -g remain-on-exit on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	server := fmt.Sprintf("exotop%d", os.Getpid())
	tmux := func(args ...string) (string, error) {
		cmd := exec.Command(tmuxBin, append([]string{"-L", server, "-f", conf}, args...)...)
		cmd.Env = append(os.Environ(), "TERM=xterm-256color")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("tmux %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := tmux("new-session", "-d", "-s", "top", "-x", "160", "-y", "40",
		bin, "top", "--cluster-dir", cdir, "--interval", "300ms"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmux("kill-server") })
	out, err := tmux("display-message", "-p", "-t", "top", "#{pane_pid}")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("pane pid %q: %v", out, err)
	}

	// screen waits until check accepts the screen, or fails with the last one.
	screen := func(what string, check func(string) error) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			s, err := tmux("capture-pane", "-p", "-t", "top")
			if err == nil {
				if err = check(s); err == nil {
					return s
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v; the screen:\n%s", what, err, s)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// row returns the fields of host name's row.
	row := func(s, name string) []string {
		for l := range strings.Lines(s) {
			if f := strings.Fields(l); len(f) > 2 && f[0] == name {
				return f
			}
		}
		return nil
	}
	healthy := func(s string) error {
		if !strings.Contains(s, "hosts 3/3 up") {
			return errors.New(`no "hosts 3/3 up" in the header`)
		}
		var totals string
		for l := range strings.Lines(s) {
			if strings.HasPrefix(l, "rack: agreed ") {
				totals = l
			}
		}
		if totals == "" || !strings.Contains(totals, "slowest lag") {
			return errors.New("no rack totals line")
		}
		if f := strings.Fields(totals); len(f) < 3 || f[2] == "0" || f[2] == "-" {
			return fmt.Errorf("rack totals: no agreed msgs/s yet: %q", totals)
		}
		holders := 0
		for _, h := range rack.Hosts {
			f := row(s, h.Name)
			if len(f) < 16 {
				return fmt.Errorf("no full row for host %s", h.Name)
			}
			if f[1] != strconv.Itoa(h.ID) {
				return fmt.Errorf("host %s: id %s, want %d", h.Name, f[1], h.ID)
			}
			if f[5] != "0" && f[5] != "1" {
				return fmt.Errorf("host %s: key %q, want the slot it sends under", h.Name, f[5])
			}
			for col, name := range map[int]string{6: "append", 7: "agreement"} {
				if v, err := strconv.ParseUint(f[col], 10, 64); err != nil || v == 0 {
					return fmt.Errorf("host %s: %s pointer %q, want > 0", h.Name, name, f[col])
				}
			}
			if f[10] == "-" {
				return fmt.Errorf("host %s: no rates yet", h.Name)
			}
			if strings.HasPrefix(f[2], "*") {
				holders++
			}
		}
		if holders != 1 {
			return fmt.Errorf("%d rows marked as the token holder, want 1", holders)
		}
		return nil
	}
	s := screen("every host's row", healthy)
	t.Logf("exo top in tmux (160x40):\n%s", strings.TrimRight(s, "\n"))

	// Host C's daemon dies (and its socket goes): its row says down, the
	// other two still answer.
	if err := c.Kill(2); err != nil {
		t.Fatal(err)
	}
	s = screen("host C down", func(s string) error {
		if f := row(s, "C"); len(f) < 3 || f[2] != "down" {
			return fmt.Errorf("row C: %q", f)
		}
		if !strings.Contains(s, "hosts 2/3 up") {
			return errors.New(`no "hosts 2/3 up" in the header`)
		}
		for _, name := range []string{"A", "B"} {
			if f := row(s, name); len(f) < 15 || f[2] == "down" {
				return fmt.Errorf("row %s: %q", name, f)
			}
		}
		return nil
	})
	t.Logf("after killing host C's daemon:\n%s", strings.TrimRight(s, "\n"))

	// q quits: the pane's process ends with status 0.
	if _, err := tmux("send-keys", "-t", "top", "q"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, err := tmux("display-message", "-p", "-t", "top", "#{pane_dead} #{pane_dead_status}")
		if err != nil {
			t.Fatal(err)
		}
		// tmux may report a dead pane before it has the exit status
		// ("1 "): dead is enough, the pid check below confirms it.
		if f := strings.Fields(out); len(f) >= 1 && f[0] == "1" {
			if len(f) == 2 && f[1] != "0" {
				t.Fatalf("exo top exited with status %s after q", f[1])
			}
			break
		}
		if time.Now().After(deadline) {
			s, _ := tmux("capture-pane", "-p", "-t", "top")
			t.Fatalf("exo top still running 5s after q (pane: %q); the screen:\n%s", out, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Gone, or a zombie its parent (tmux) has not reaped yet: exited.
	for wait := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		if st, rerr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); rerr == nil {
			if _, after, ok := strings.Cut(string(st), ") "); ok && strings.HasPrefix(after, "Z") {
				break
			}
		}
		if time.Now().After(wait) {
			t.Errorf("exo top (pid %d) still running 3s after its pane died: %v", pid, err)
			break
		}
	}
}

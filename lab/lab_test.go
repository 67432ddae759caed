package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// needRack skips only when the machine cannot build a rack at all: not
// root, or the kernel refuses namespaces or veth. A missing ip or nft fails
// the test (tools/setup.sh installs iproute2 and nftables).
func needRack(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the lab tests need root (network namespaces, veth, nftables); CI runs them as root")
	}
	for tool, pkg := range map[string]string{"ip": "iproute2", "nft": "nftables"} {
		if err := needTool(tool, pkg); err != nil {
			t.Fatal(err)
		}
	}
}

func upOrSkip(t *testing.T, ctx context.Context, opts Options) *Rack {
	t.Helper()
	start := time.Now()
	r, err := Up(ctx, opts)
	if errors.Is(err, ErrRefused) {
		t.Skipf("SKIP: the kernel refused to build a rack here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("up %d hosts in %v", len(r.Hosts), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := Down(context.Background(), opts.Prefix); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return r
}

// reach checks the whole reachability matrix against want, given as the
// pairs that must NOT get through ("A>B"); every other pair must.
func reach(t *testing.T, ctx context.Context, r *Rack, cut ...string) {
	t.Helper()
	timeout := 2 * time.Second
	if len(cut) > 0 {
		timeout = 500 * time.Millisecond // the cut pairs wait the whole timeout
	}
	m, err := r.Matrix(ctx, timeout)
	if err != nil {
		t.Fatal(err)
	}
	blocked := map[string]bool{}
	for _, c := range cut {
		blocked[c] = true
	}
	for a := range m {
		for b := range m[a] {
			if a == b {
				continue
			}
			pair := HostName(a) + ">" + HostName(b)
			if want := !blocked[pair]; m[a][b] != want {
				t.Errorf("%s: got through = %v, want %v (cut %v)", pair, m[a][b], want, cut)
			}
		}
	}
}

func netnsList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	return string(out)
}

func TestRackLab(t *testing.T) {
	needRack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prefix := fmt.Sprintf("exot%d", os.Getpid())
	r := upOrSkip(t, ctx, Options{Prefix: prefix, Hosts: 3})

	t.Run("namespaces", func(t *testing.T) {
		list := netnsList(t)
		for _, ns := range []string{prefix + "-sw", prefix + "-A", prefix + "-B", prefix + "-C"} {
			if !regexp.MustCompile(`(?m)^` + ns + `\b`).MatchString(list) {
				t.Errorf("ip netns list has no %s:\n%s", ns, list)
			}
		}
	})

	t.Run("interfaces", func(t *testing.T) {
		for _, h := range r.Hosts {
			out, err := r.Exec(ctx, h.ID, "ip", "-j", "link", "show", "dev", "exo0")
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var links []struct {
				Address   string   `json:"address"`
				MTU       int      `json:"mtu"`
				Flags     []string `json:"flags"`
				Operstate string   `json:"operstate"`
			}
			if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
				t.Fatalf("%s: %v: %s", h.Name, err, out)
			}
			l := links[0]
			if want := fmt.Sprintf("02:e0:00:00:00:%02x", h.ID+1); l.Address != want || h.MAC.String() != want {
				t.Errorf("%s: MAC %s (rack says %s), want %s", h.Name, l.Address, h.MAC, want)
			}
			if l.Operstate != "UP" || l.MTU != 1500 {
				t.Errorf("%s: exo0 %s mtu %d, want UP 1500 (flags %v)", h.Name, l.Operstate, l.MTU, l.Flags)
			}
			out, err = r.Exec(ctx, h.ID, "cat", "/proc/sys/net/ipv6/conf/exo0/disable_ipv6")
			if err == nil && strings.TrimSpace(string(out)) != "1" {
				t.Errorf("%s: IPv6 still on exo0", h.Name)
			}
			out, err = r.Exec(ctx, h.ID, "ip", "-4", "-o", "addr", "show", "dev", "exo0")
			if err != nil || !strings.Contains(string(out), " "+h.OOBAddr.String()+"/16 ") {
				t.Errorf("%s: want OOB address %s on exo0: %v %s", h.Name, h.OOBAddr, err, out)
			}
		}
	})

	t.Run("load", func(t *testing.T) {
		l, err := Load(ctx, prefix)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(r.Hosts)
		b, _ := json.Marshal(l.Hosts)
		if string(a) != string(b) || l.MTU != r.MTU || l.Subnet != r.Subnet {
			t.Errorf("Load read back\n%s mtu %d %s\nwant\n%s mtu %d %s", b, l.MTU, l.Subnet, a, r.MTU, r.Subnet)
		}
		if _, err := Up(ctx, Options{Prefix: prefix, Hosts: 3}); !errors.Is(err, ErrExists) {
			t.Errorf("a second Up with the same prefix: %v, want ErrExists", err)
		}
	})

	t.Run("reachable", func(t *testing.T) {
		reach(t, ctx, r)
		// The MTU is 1500: a 1500-byte IP packet crosses, a 1501-byte one does not.
		if ok, err := r.ProbeSize(ctx, 0, 1, 1472, 2*time.Second); err != nil || !ok {
			t.Errorf("a 1500-byte packet from A to B: %v %v", ok, err)
		}
		if ok, err := r.ProbeSize(ctx, 0, 1, 1473, 200*time.Millisecond); err != nil || ok {
			t.Errorf("a 1501-byte packet from A to B with don't-fragment: %v %v", ok, err)
		}
	})

	t.Run("partition", func(t *testing.T) {
		if err := r.Partition(ctx, [][]int{{0}, {1, 2}}); err != nil {
			t.Fatal(err)
		}
		reach(t, ctx, r, "A>B", "B>A", "A>C", "C>A")
		rules, err := r.LiveRuleset(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The drop rule itself counted the frames it dropped.
		m := regexp.MustCompile(`@cut counter packets (\d+)`).FindStringSubmatch(rules)
		if m == nil || m[1] == "0" {
			t.Errorf("the cut rule dropped nothing:\n%s", rules)
		}
		// A later process sees the partition.
		l, err := Load(ctx, prefix)
		if err != nil || fmt.Sprint(l.Faults.Groups) != "[[0] [1 2]]" {
			t.Errorf("Load: faults %+v, %v", l.Faults, err)
		}
	})

	t.Run("heal", func(t *testing.T) {
		if err := r.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		reach(t, ctx, r)
		if rules, err := r.LiveRuleset(ctx); err != nil || rules != "" {
			t.Errorf("after heal the table is still there: %v\n%s", err, rules)
		}
	})

	t.Run("one-way", func(t *testing.T) {
		if err := r.PartitionOneWay(ctx, []int{0}, []int{1}); err != nil {
			t.Fatal(err)
		}
		reach(t, ctx, r, "A>B")
		if err := r.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("link", func(t *testing.T) {
		if err := r.SetLink(ctx, 2, false); err != nil {
			t.Fatal(err)
		}
		up, err := r.LinkStates(ctx)
		if err != nil || fmt.Sprint(up) != "[true true false]" {
			t.Errorf("link states %v, %v", up, err)
		}
		reach(t, ctx, r, "A>C", "B>C", "C>A", "C>B")
		if err := r.SetLink(ctx, 2, true); err != nil {
			t.Fatal(err)
		}
		reach(t, ctx, r)
	})

	t.Run("loss", func(t *testing.T) {
		if err := r.DropRate(ctx, 1, 1); err != nil {
			t.Fatal(err)
		}
		reach(t, ctx, r, "A>B", "B>A", "B>C", "C>B")
		if err := r.DropRate(ctx, 1, 0.5); err != nil {
			t.Fatal(err)
		}
		rules, _ := r.LiveRuleset(ctx)
		if !strings.Contains(rules, `iifname "port-B" numgen random mod 1000 < 500`) {
			t.Errorf("no 50%% rule for B:\n%s", rules)
		}
		if err := r.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		reach(t, ctx, r)
	})

	t.Run("concurrent", func(t *testing.T) {
		// Separate processes (here: separate Racks from Load) changing
		// faults at once take turns on the lock and all their faults stay.
		errs := make(chan error, len(r.Hosts))
		for _, h := range r.Hosts {
			go func() {
				l, err := Load(ctx, prefix)
				if err == nil {
					err = l.DropRate(ctx, h.ID, 0.001*float64(h.ID+1))
				}
				errs <- err
			}()
		}
		for range r.Hosts {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		l, err := Load(ctx, prefix)
		if err != nil || len(l.Faults.Loss) != len(r.Hosts) {
			t.Errorf("losses after concurrent changes: %v %v", l.Faults.Loss, err)
		}
		rules, _ := r.LiveRuleset(ctx)
		if n := strings.Count(rules, "numgen random"); n != 2*len(r.Hosts) {
			t.Errorf("%d loss rules, want %d:\n%s", n, 2*len(r.Hosts), rules)
		}
		if err := r.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("down", func(t *testing.T) {
		// A daemon left running in a host's namespace is stopped by Down.
		sleeper := r.Command(1, "sleep", "60")
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { waited <- sleeper.Wait() }()
		// ip netns exec enters the namespace after it starts: wait for it.
		nsB, _ := os.Stat(netnsPath(r.Hosts[1].Netns))
		for i := 0; ; i++ {
			if ns, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", sleeper.Process.Pid)); err == nil && os.SameFile(ns, nsB) {
				break
			}
			if i == 200 {
				t.Fatal("sleep never entered the namespace")
			}
			time.Sleep(10 * time.Millisecond)
		}
		start := time.Now()
		if err := Down(ctx, prefix); err != nil {
			t.Fatal(err)
		}
		t.Logf("down in %v", time.Since(start).Round(time.Millisecond))
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			t.Errorf("the process in %s-B survived Down", prefix)
			sleeper.Process.Kill()
		}
		if list := netnsList(t); strings.Contains(list, prefix+"-") {
			t.Errorf("namespaces left after Down:\n%s", list)
		}
		if _, err := os.Stat(statePath(prefix)); !os.IsNotExist(err) {
			t.Errorf("state file left: %v", err)
		}
		if _, err := Load(ctx, prefix); !errors.Is(err, ErrNoRack) {
			t.Errorf("Load after Down: %v, want ErrNoRack", err)
		}
		if err := Down(ctx, prefix); err != nil {
			t.Errorf("a second Down: %v", err)
		}
	})
}

// TestForceAndPartialDown: --force replaces a rack, unless a live run
// claims it; Down cleans up a rack left half built.
func TestForceAndPartialDown(t *testing.T) {
	needRack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := fmt.Sprintf("exof%d", os.Getpid())
	upOrSkip(t, ctx, Options{Prefix: prefix, Hosts: 2})

	// A rack a live run claims is not taken from under it, by a second
	// claim or by --force; its own claim lets its holder replace it.
	claim, err := ClaimPrefix(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ClaimPrefix(prefix); !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		c.Release()
		t.Fatalf("a second claim on a claimed rack: %v, want ErrInUse naming pid %d", err, os.Getpid())
	}
	if _, err := Up(ctx, Options{Prefix: prefix, Hosts: 3, Force: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("--force on a rack a live run claims: %v, want ErrInUse", err)
	}
	if l, err := Load(ctx, prefix); err != nil || len(l.Hosts) != 2 {
		t.Fatalf("the claimed rack after a refused --force: %v %+v", err, l)
	}
	if _, err := Up(ctx, Options{Prefix: prefix, Hosts: 3, Force: true, Claim: claim}); err != nil {
		t.Fatalf("--force by the claim's holder: %v", err)
	}
	claim.Release()
	again, err := ClaimPrefix(prefix)
	if err != nil {
		t.Fatalf("a claim after the last one was released: %v", err)
	}
	again.Release()

	r, err := Up(ctx, Options{Prefix: prefix, Hosts: 4, MTU: 9000, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hosts) != 4 {
		t.Fatalf("--force rack has %d hosts", len(r.Hosts))
	}
	l, err := Load(ctx, prefix)
	if err != nil || l.MTU != 9000 || len(l.Hosts) != 4 {
		t.Fatalf("Load: %v %+v", err, l)
	}
	reach(t, ctx, r)
	// Jumbo frames cross the bridge whole: a 8972-byte UDP payload with the
	// don't-fragment bit is one 9000-byte IP packet.
	if ok, err := r.ProbeSize(ctx, 0, 3, 8972, 2*time.Second); err != nil || !ok {
		t.Errorf("a 9000-byte packet from A to D: %v %v", ok, err)
	}

	// Half a rack: a host namespace without its switch.
	if _, err := run(ctx, "", "ip", "netns", "del", prefix+"-sw"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ctx, prefix); !errors.Is(err, ErrNoRack) {
		t.Errorf("Load of a rack without its switch: %v", err)
	}
	if err := Down(ctx, prefix); err != nil {
		t.Fatal(err)
	}
	if list := netnsList(t); strings.Contains(list, prefix+"-") {
		t.Errorf("namespaces left after Down:\n%s", list)
	}
}

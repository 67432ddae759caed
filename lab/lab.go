package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/internal/bpffs"
)

// Defaults of [Options].
const (
	DefaultPrefix = "exo"
	DefaultMTU    = 1500
	// Ifname is the name of every host's interface inside its namespace.
	Ifname = "exo0"
	// Bridge is the name of the bridge inside the switch namespace.
	Bridge = "br0"
	// NftTable is the nftables table (family bridge) that holds the faults.
	NftTable = "exo_lab"
	// StateDir keeps one <prefix>.json per running rack.
	StateDir = "/run/exo-lab"
	// netnsDir is where ip netns keeps its bind mounts.
	netnsDir = "/run/netns"
	// switchName is the suffix of the switch namespace: lower case, so it
	// never collides with a host name (upper case).
	switchName = "sw"
)

// DefaultSubnet is the private subnet of the OOB addresses. It exists only
// inside the lab's namespaces; host id i gets the address base + i + 1.
var DefaultSubnet = netip.MustParsePrefix("10.77.0.0/16")

// Errors a caller can test with errors.Is.
var (
	// ErrNotRoot: the lab needs root (network namespaces, veth, nftables).
	ErrNotRoot = errors.New("exo lab needs root (network namespaces, veth, nftables): run with sudo")
	// ErrRefused: the kernel refused to create a namespace, a link or a rule
	// (no CAP_SYS_ADMIN/CAP_NET_ADMIN, or a missing feature).
	ErrRefused = errors.New("the kernel refused")
	// ErrExists: a rack with this prefix is already up.
	ErrExists = errors.New("rack already exists")
	// ErrInUse: a live process holds a claim on the rack (ClaimPrefix).
	ErrInUse = errors.New("rack in use")
	// ErrNoRack: no rack with this prefix is up.
	ErrNoRack = errors.New("no such rack")
	// ErrMissingTool: ip or nft is not installed.
	ErrMissingTool = errors.New("missing tool")
)

// Options configure [Up].
type Options struct {
	// Prefix names the rack: namespaces are <Prefix>-A, <Prefix>-B, ... and
	// <Prefix>-sw. Lower-case letters and digits, starting with a letter, at
	// most 12 characters. Default "exo".
	Prefix string
	// Hosts is the number of hosts, 1..255.
	Hosts int
	// MTU of every link and of the bridge, 68..65535. Default 1500; 9000
	// for jumbo frames.
	MTU int
	// Subnet of the OOB addresses (IPv4). Default 10.77.0.0/16.
	Subnet netip.Prefix
	// Force removes a rack with the same prefix first instead of refusing,
	// unless a live process other than the caller's Claim uses it
	// (ErrInUse).
	Force bool
	// Claim is the caller's claim on Prefix (ClaimPrefix), if it holds
	// one: Force then removes the old rack without asking whose it is.
	Claim *Claim
	// BPFDir, if set, gets a bpffs mounted on it (unless it is one): the
	// daemons' bpf_dir in token mode, mounted here, in the mount
	// namespace the hosts' commands start from, so that the maps a killed
	// daemon pinned outlive the namespace ip netns exec gave it.
	BPFDir string
}

// Host is one host of the rack.
type Host struct {
	ID      int              // 0..n-1, the host's id in the roster
	Name    string           // A, B, C, ... Z, AA, AB, ...
	Netns   string           // <prefix>-<Name>
	Ifname  string           // the interface inside Netns (exo0)
	MAC     net.HardwareAddr // 02:e0:00:00:00:<id+1>
	OOBAddr netip.Addr       // on Ifname; the host's OOB TCP service listens here
	Port    string           // the host's bridge port in the switch namespace (port-<Name>)
}

// Rack is a running lab rack.
type Rack struct {
	Name        string       `json:"name"`         // the prefix
	Hosts       []Host       `json:"hosts"`        // indexed by id
	Bridge      string       `json:"bridge"`       // the bridge, inside SwitchNetns
	SwitchNetns string       `json:"switch_netns"` // <prefix>-sw
	MTU         int          `json:"mtu"`          // of every link
	Subnet      netip.Prefix `json:"subnet"`       // of the OOB addresses
	Created     time.Time    `json:"created"`      // when Up built it
	Faults      Faults       `json:"faults"`       // in force, as last applied by this process or read by Load
}

// Faults are the injected faults, kept in the state file so that a later
// process (exo lab status, exo lab heal) sees them.
type Faults struct {
	// Groups is the two-way partition in force: frames only flow between
	// hosts of one group. Empty when none.
	Groups [][]int `json:"groups,omitempty"`
	// OneWay are one-way cuts: frames from any host of From to any host of
	// To are dropped (the other direction still flows).
	OneWay []OneWayCut `json:"one_way,omitempty"`
	// Loss maps a host id to the fraction of its frames (sent and received,
	// each direction drawn independently) that the bridge drops.
	Loss map[int]float64 `json:"loss,omitempty"`
	// LinksDown lists hosts whose switch port is down.
	LinksDown []int `json:"links_down,omitempty"`
	// HostCuts are one-way cuts on hosts' own interfaces (nftables netdev
	// family in the host's namespace): by host id, "ingress" (the host
	// sends, hears nothing) or "egress" (it hears, sends nothing: its
	// writes fail). Frames and OOB traffic alike.
	HostCuts map[int]string `json:"host_cuts,omitempty"`
}

// OneWayCut drops every frame from a host of From to a host of To.
type OneWayCut struct {
	From []int `json:"from"`
	To   []int `json:"to"`
}

// Empty reports whether no fault is in force.
func (f Faults) Empty() bool {
	return len(f.Groups) == 0 && len(f.OneWay) == 0 && len(f.Loss) == 0 && len(f.LinksDown) == 0 && len(f.HostCuts) == 0
}

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)

// ValidPrefix checks a rack prefix.
func ValidPrefix(p string) error {
	if !prefixRE.MatchString(p) {
		return fmt.Errorf("prefix %q: want lower-case letters and digits, starting with a letter, at most 12 characters", p)
	}
	return nil
}

// HostName returns the name of host id: 0 -> A, 25 -> Z, 26 -> AA, 27 -> AB.
func HostName(id int) string {
	var b []byte
	for n := id + 1; n > 0; n = (n - 1) / 26 {
		b = append(b, byte('A'+(n-1)%26))
	}
	slices.Reverse(b)
	return string(b)
}

// ParseHostName is the inverse of [HostName] (case-insensitive).
func ParseHostName(s string) (int, bool) {
	if s == "" || len(s) > 3 {
		return 0, false
	}
	n := 0
	for _, c := range strings.ToUpper(s) {
		if c < 'A' || c > 'Z' {
			return 0, false
		}
		n = n*26 + int(c-'A') + 1
	}
	return n - 1, true
}

// HostMAC is the deterministic, locally administered MAC of host id.
func HostMAC(id int) net.HardwareAddr { return net.HardwareAddr{0x02, 0xe0, 0, 0, 0, byte(id + 1)} }

// portMAC is the MAC of the switch side of host id's veth.
func portMAC(id int) net.HardwareAddr { return net.HardwareAddr{0x02, 0xe0, 0, 0, 1, byte(id + 1)} }

// bridgeMAC is the bridge's own MAC (otherwise it copies a port's).
var bridgeMAC = net.HardwareAddr{0x02, 0xe0, 0, 0, 0xff, 0xfe}

// HostAddr is the OOB address of host id in subnet.
func HostAddr(subnet netip.Prefix, id int) netip.Addr {
	a := subnet.Masked().Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(id + 1)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func netnsName(prefix, name string) string { return prefix + "-" + name }
func portName(name string) string          { return "port-" + name }

// newRack lays out a rack without touching the system.
func newRack(prefix string, hosts, mtu int, subnet netip.Prefix) *Rack {
	r := &Rack{
		Name:        prefix,
		Bridge:      Bridge,
		SwitchNetns: netnsName(prefix, switchName),
		MTU:         mtu,
		Subnet:      subnet,
	}
	for id := range hosts {
		name := HostName(id)
		r.Hosts = append(r.Hosts, Host{
			ID:      id,
			Name:    name,
			Netns:   netnsName(prefix, name),
			Ifname:  Ifname,
			MAC:     HostMAC(id),
			OOBAddr: HostAddr(subnet, id),
			Port:    portName(name),
		})
	}
	return r
}

func (o *Options) setDefaults() error {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if !o.Subnet.IsValid() {
		o.Subnet = DefaultSubnet
	}
	if err := ValidPrefix(o.Prefix); err != nil {
		return err
	}
	if o.Hosts < 1 || o.Hosts > exo.MaxRoster {
		return fmt.Errorf("hosts: %d is outside 1..%d", o.Hosts, exo.MaxRoster)
	}
	if o.MTU < 68 || o.MTU > 65535 {
		return fmt.Errorf("mtu: %d is outside 68..65535", o.MTU)
	}
	if !o.Subnet.Addr().Is4() {
		return fmt.Errorf("subnet %s: want an IPv4 prefix", o.Subnet)
	}
	o.Subnet = o.Subnet.Masked()
	if room := 1<<(32-o.Subnet.Bits()) - 2; o.Hosts > room {
		return fmt.Errorf("subnet %s has room for %d hosts, not %d", o.Subnet, max(room, 0), o.Hosts)
	}
	return nil
}

// CheckRoot returns ErrNotRoot unless the process runs as root.
func CheckRoot() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	return nil
}

// Up builds a rack: the namespaces, the bridge, one veth pair per host, the
// MACs, the MTU, the OOB addresses and static neighbour entries, everything
// up. It refuses when a rack with the same prefix exists, unless
// opts.Force, which removes that rack first. On failure it removes what it
// built.
func Up(ctx context.Context, opts Options) (*Rack, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, fmt.Errorf("lab up: %w", err)
	}
	if err := CheckRoot(); err != nil {
		return nil, err
	}
	if err := needTool("ip", "iproute2"); err != nil {
		return nil, err
	}
	l, err := lock(opts.Prefix)
	if err != nil {
		return nil, err
	}
	existing, err := listNetns(opts.Prefix)
	if err != nil {
		l.release()
		return nil, err
	}
	if len(existing) > 0 {
		if !opts.Force {
			l.release()
			return nil, fmt.Errorf("lab up: %w: prefix %q has namespaces %s; run `exo lab down --prefix %s` or use --force",
				ErrExists, opts.Prefix, strings.Join(existing, " "), opts.Prefix)
		}
		if opts.Claim == nil {
			// A run that ended left it, or a live one uses it: only the
			// first may be removed (a second chaos run on one prefix took
			// the first one's namespaces from under its daemons).
			c, err := ClaimPrefix(opts.Prefix)
			if err != nil {
				l.release()
				return nil, fmt.Errorf("lab up --force: %w", err)
			}
			c.Release()
		}
		if err := down(ctx, opts.Prefix); err != nil {
			l.release()
			return nil, fmt.Errorf("lab up --force: removing the old rack: %w", err)
		}
	}
	if opts.BPFDir != "" {
		if _, err := bpffs.Mount(opts.BPFDir); err != nil {
			l.release()
			return nil, fmt.Errorf("lab up: %w", err)
		}
	}
	r := newRack(opts.Prefix, opts.Hosts, opts.MTU, opts.Subnet)
	r.Created = time.Now().UTC().Truncate(time.Second)
	err = r.build(ctx)
	if err == nil {
		err = r.save()
	}
	if err != nil {
		if derr := down(context.WithoutCancel(ctx), opts.Prefix); derr != nil {
			err = fmt.Errorf("%w (and cleaning up: %v)", err, derr)
			l.release()
		} else {
			l.removeAndRelease()
		}
		return nil, fmt.Errorf("lab up: %w", err)
	}
	l.release()
	return r, nil
}

// ipv6Off are the sysctls written in every namespace before its links
// exist: no IPv6 at all, so no DAD, router solicitations or MLD reports
// clutter captures.
var ipv6Off = map[string]string{
	"net/ipv6/conf/all/disable_ipv6":     "1",
	"net/ipv6/conf/default/disable_ipv6": "1",
}

func (r *Rack) build(ctx context.Context) error {
	// 1. The namespaces, in one ip process.
	var b strings.Builder
	fmt.Fprintf(&b, "netns add %s\n", r.SwitchNetns)
	for _, h := range r.Hosts {
		fmt.Fprintf(&b, "netns add %s\n", h.Netns)
	}
	if _, err := run(ctx, b.String(), "ip", "-batch", "-"); err != nil {
		return err
	}
	// 2. No IPv6 noise, set before any link exists in the namespace.
	for _, ns := range append([]string{r.SwitchNetns}, r.hostNetns()...) {
		if err := writeSysctls(ns, ipv6Off); err != nil {
			return err
		}
	}
	// 3. The switch: the bridge (no STP, no forwarding delay, no multicast
	// snooping: every broadcast and multicast frame is flooded to every
	// port), one veth pair per host created straight across the two
	// namespaces, and the ports enslaved.
	b.Reset()
	fmt.Fprintf(&b, "link set lo up\n")
	fmt.Fprintf(&b, "link add %s address %s mtu %d type bridge stp_state 0 forward_delay 0 mcast_snooping 0\n", r.Bridge, bridgeMAC, r.MTU)
	for _, h := range r.Hosts {
		fmt.Fprintf(&b, "link add name %s address %s mtu %d type veth peer name %s address %s mtu %d netns %s\n",
			h.Port, portMAC(h.ID), r.MTU, h.Ifname, h.MAC, r.MTU, h.Netns)
		fmt.Fprintf(&b, "link set %s master %s up\n", h.Port, r.Bridge)
	}
	fmt.Fprintf(&b, "link set %s mtu %d up\n", r.Bridge, r.MTU)
	if _, err := run(ctx, b.String(), "ip", "-n", r.SwitchNetns, "-batch", "-"); err != nil {
		return err
	}
	// Static forwarding entries: the switch knows every host's port from
	// the start, like a configured rack switch, instead of flooding unicast
	// frames to every port until it has learned the MACs (with no ARP a
	// host may receive long before it first sends). They are sticky and
	// the ports do not learn, as on a switch with port security: a frame
	// that spoofs a host's source MAC (a replayed or forged frame) must not
	// move that host's entry to the spoofer's port, which would send the
	// host's unicast traffic (its OOB connections) to the spoofer.
	b.Reset()
	for _, h := range r.Hosts {
		fmt.Fprintf(&b, "fdb replace %s dev %s master static sticky\n", h.MAC, h.Port)
		fmt.Fprintf(&b, "link set dev %s learning off\n", h.Port)
	}
	if _, err := run(ctx, b.String(), "bridge", "-n", r.SwitchNetns, "-batch", "-"); err != nil {
		return err
	}
	// 4. Each host: loopback, the OOB address, the link up, and a permanent
	// neighbour entry for every other host. The rack's membership is fixed
	// and its MACs are known, so there is no ARP: a one-way cut stays
	// one-way for IP traffic too (ARP would need both directions).
	for _, h := range r.Hosts {
		b.Reset()
		fmt.Fprintf(&b, "link set lo up\n")
		fmt.Fprintf(&b, "addr add %s/%d brd + dev %s\n", h.OOBAddr, r.Subnet.Bits(), h.Ifname)
		fmt.Fprintf(&b, "link set %s up\n", h.Ifname)
		for _, o := range r.Hosts {
			if o.ID != h.ID {
				fmt.Fprintf(&b, "neigh replace %s lladdr %s dev %s nud permanent\n", o.OOBAddr, o.MAC, h.Ifname)
			}
		}
		if _, err := run(ctx, b.String(), "ip", "-n", h.Netns, "-batch", "-"); err != nil {
			return err
		}
	}
	// 5. Wait until every link is operationally up. Until the kernel's
	// link watcher (rate-limited: up to a second after "link set up") has
	// run, a device keeps the noop qdisc and silently drops what is sent
	// on it, so a rack handed over earlier can lose its first frames.
	return r.waitOperUp(ctx, 10*time.Second)
}

// waitOperUp polls until every host interface, switch port and the bridge
// report operstate UP, or fails after d.
func (r *Rack) waitOperUp(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := WaitOperUp(ctx, r.SwitchNetns, r.Bridge); err != nil {
		return err
	}
	for _, h := range r.Hosts {
		if err := WaitOperUp(ctx, r.SwitchNetns, h.Port); err != nil {
			return err
		}
		if err := WaitOperUp(ctx, h.Netns, h.Ifname); err != nil {
			return err
		}
	}
	return nil
}

// WaitOperUp polls until link dev in network namespace ns reports
// operstate UP, or ctx ends. Until the kernel's link watcher has run
// (rate-limited: up to a second after "link set up"), a new device keeps
// the noop qdisc and silently drops what is sent on it, so whoever sends
// right after bringing a link up waits for this first.
func WaitOperUp(ctx context.Context, ns, dev string) error {
	for {
		out, err := run(ctx, "", "ip", "-n", ns, "-o", "link", "show", "dev", dev)
		if err != nil {
			return err
		}
		if strings.Contains(out, "state UP") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("link %s in %s is not operationally up: %s (%w)", dev, ns, strings.TrimSpace(out), ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (r *Rack) hostNetns() []string {
	ns := make([]string, len(r.Hosts))
	for i, h := range r.Hosts {
		ns[i] = h.Netns
	}
	return ns
}

// listNetns returns the namespaces of rack prefix, switch first.
func listNetns(prefix string) ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	sw := netnsName(prefix, switchName)
	for _, e := range ents {
		n := e.Name()
		if n == sw {
			out = append([]string{n}, out...)
			continue
		}
		if rest, ok := strings.CutPrefix(n, prefix+"-"); ok {
			if _, ok := ParseHostName(rest); ok && rest == strings.ToUpper(rest) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// Racks returns the prefixes of the racks that are up (that have
// namespaces), sorted.
func Racks() ([]string, error) {
	ents, err := os.ReadDir(netnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if p, ok := strings.CutSuffix(e.Name(), "-"+switchName); ok && ValidPrefix(p) == nil {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Down removes rack prefix: it stops the processes still running in its
// namespaces (SIGTERM, then SIGKILL after 2 s), deletes the namespaces
// (which destroys the veth pairs, the bridge and the nftables table with
// them) and the state file. It tolerates a partly built or partly removed
// rack, and a rack that is not there at all.
func Down(ctx context.Context, prefix string) error {
	if err := ValidPrefix(prefix); err != nil {
		return fmt.Errorf("lab down: %w", err)
	}
	if err := CheckRoot(); err != nil {
		return err
	}
	l, err := lock(prefix)
	if err != nil {
		return err
	}
	if err := down(ctx, prefix); err != nil {
		l.release()
		return err
	}
	l.removeAndRelease()
	return nil
}

// Down removes the rack; see [Down].
func (r *Rack) Down(ctx context.Context) error { return Down(ctx, r.Name) }

func down(ctx context.Context, prefix string) error {
	names, err := listNetns(prefix)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		if err := killNetnsProcs(names, 2*time.Second); err != nil {
			return err
		}
		if err := needTool("ip", "iproute2"); err != nil {
			return err
		}
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, "netns del %s\n", n)
		}
		// -force: go on after an error, so one odd namespace does not keep
		// the others alive.
		if _, err := run(ctx, b.String(), "ip", "-force", "-batch", "-"); err != nil {
			left, _ := listNetns(prefix)
			if len(left) > 0 {
				return fmt.Errorf("lab down: %w (left: %s)", err, strings.Join(left, " "))
			}
		}
	}
	if err := os.Remove(statePath(prefix)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Load finds the running rack prefix: it reads the namespaces, MACs,
// addresses and MTU back from the kernel and the faults in force from the
// state file.
func Load(ctx context.Context, prefix string) (*Rack, error) {
	if err := ValidPrefix(prefix); err != nil {
		return nil, err
	}
	if err := CheckRoot(); err != nil {
		return nil, err
	}
	if err := needTool("ip", "iproute2"); err != nil {
		return nil, err
	}
	names, err := listNetns(prefix)
	if err != nil {
		return nil, err
	}
	sw := netnsName(prefix, switchName)
	if len(names) == 0 || names[0] != sw {
		return nil, fmt.Errorf("%w %q (no namespace %s): run `exo lab up --prefix %s --hosts N`", ErrNoRack, prefix, sw, prefix)
	}
	st, _ := readState(prefix) // a missing or stale state file only loses the faults
	r := &Rack{Name: prefix, Bridge: Bridge, SwitchNetns: sw, Subnet: DefaultSubnet}
	if st != nil {
		r.Created, r.Faults, r.Subnet = st.Created, st.Faults, st.Subnet
	}
	for _, ns := range names[1:] {
		name := strings.TrimPrefix(ns, prefix+"-")
		id, _ := ParseHostName(name)
		h, mtu, bits, err := readHost(ctx, ns, id, name)
		if err != nil {
			return nil, err
		}
		r.MTU = mtu
		if bits > 0 && h.OOBAddr.IsValid() {
			r.Subnet = netip.PrefixFrom(h.OOBAddr, bits).Masked()
		}
		r.Hosts = append(r.Hosts, h)
	}
	slices.SortFunc(r.Hosts, func(a, b Host) int { return a.ID - b.ID })
	for i, h := range r.Hosts {
		if h.ID != i {
			return nil, fmt.Errorf("rack %q is incomplete: host %s (id %d) is missing; run `exo lab up --prefix %s --force`", prefix, HostName(i), i, prefix)
		}
	}
	return r, nil
}

// readHost reads one host's interface back from its namespace.
func readHost(ctx context.Context, ns string, id int, name string) (Host, int, int, error) {
	out, err := run(ctx, "", "ip", "-n", ns, "-j", "addr", "show", "dev", Ifname)
	if err != nil {
		return Host{}, 0, 0, err
	}
	var links []struct {
		Ifname   string `json:"ifname"`
		MTU      int    `json:"mtu"`
		Address  string `json:"address"`
		AddrInfo []struct {
			Family    string `json:"family"`
			Local     string `json:"local"`
			Prefixlen int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return Host{}, 0, 0, fmt.Errorf("reading %s in %s: unexpected ip output %q", Ifname, ns, out)
	}
	l := links[0]
	mac, err := net.ParseMAC(l.Address)
	if err != nil {
		return Host{}, 0, 0, fmt.Errorf("reading %s in %s: %w", Ifname, ns, err)
	}
	h := Host{ID: id, Name: name, Netns: ns, Ifname: l.Ifname, MAC: mac, Port: portName(name)}
	bits := 0
	for _, a := range l.AddrInfo {
		if a.Family == "inet" {
			if ip, err := netip.ParseAddr(a.Local); err == nil {
				h.OOBAddr, bits = ip, a.Prefixlen
				break
			}
		}
	}
	return h, l.MTU, bits, nil
}

// Host returns the host named by s: a name (A, b, AA) or a decimal id.
func (r *Rack) Host(s string) (Host, error) {
	id, ok := ParseHostName(s)
	if !ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return Host{}, fmt.Errorf("host %q: want a name (A, B, ...) or an id (0, 1, ...)", s)
		}
		id = n
	}
	if id < 0 || id >= len(r.Hosts) {
		return Host{}, fmt.Errorf("host %q: the rack has hosts %s..%s (ids 0..%d)", s, HostName(0), HostName(len(r.Hosts)-1), len(r.Hosts)-1)
	}
	return r.Hosts[id], nil
}

func (r *Rack) host(id int) (Host, error) {
	if id < 0 || id >= len(r.Hosts) {
		return Host{}, fmt.Errorf("host id %d: the rack has ids 0..%d", id, len(r.Hosts)-1)
	}
	return r.Hosts[id], nil
}

// netnsPath is the bind mount of a namespace, for setns(2).
func netnsPath(ns string) string { return filepath.Join(netnsDir, ns) }

// ParseGroups reads a partition as the CLI writes it: groups of hosts
// (names or ids) separated by "/", hosts by ",": "A,B/C,D,E". A host may
// appear at most once.
func (r *Rack) ParseGroups(spec string) ([][]int, error) {
	seen := map[int]string{}
	var groups [][]int
	for _, gs := range strings.Split(spec, "/") {
		var g []int
		for _, s := range strings.Split(gs, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				return nil, fmt.Errorf("partition %q: empty host name (want e.g. A,B/C,D,E)", spec)
			}
			h, err := r.Host(s)
			if err != nil {
				return nil, fmt.Errorf("partition %q: %w", spec, err)
			}
			if prev, ok := seen[h.ID]; ok {
				return nil, fmt.Errorf("partition %q: host %s appears more than once (%s and %s)", spec, h.Name, prev, s)
			}
			seen[h.ID] = s
			g = append(g, h.ID)
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// ParseOneWay reads a one-way cut as the CLI writes it: "A,B:C,D,E" drops
// the frames from A and B to C, D and E.
func (r *Rack) ParseOneWay(spec string) (from, to []int, err error) {
	fs, ts, ok := strings.Cut(spec, ":")
	if !ok || strings.Contains(fs, "/") || strings.Contains(ts, "/") {
		return nil, nil, fmt.Errorf("one-way cut %q: want FROM:TO, e.g. A,B:C,D,E", spec)
	}
	g, err := r.ParseGroups(fs + "/" + ts)
	if err != nil {
		return nil, nil, err
	}
	return g[0], g[1], nil
}

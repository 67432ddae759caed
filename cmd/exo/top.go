package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/exo-rack/exo/client"
	"github.com/exo-rack/exo/daemon"
	"github.com/exo-rack/exo/exo"
)

// topOptions are the flags of exo top.
type topOptions struct {
	Sockets    []string
	ClusterDir string
	Interval   time.Duration
	Timeout    time.Duration
	Once       bool
	JSON       bool
	In         io.Reader
	Out        io.Writer
}

func newTopCmd() *cobra.Command {
	o := &topOptions{}
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Live view of the rack: pointers, lag, token, rates, rejects and offload of every host",
		Long: `top asks every given daemon for its status over its local API socket, every
--interval, and shows one row per host:

  HOST, ID      the socket's name (A, B, ... in a cluster directory) and the daemon's id
  ROLE          *holder: the token holder (as the host with the newest log sees it);
                skipped: the token order skips it; down: the socket did not answer
  EPOCH, HALT   the host's epoch (view) and whether a view change holds it
                (XFER: it fetches the rack's agreed log before it rejoins, a
                state transfer; FETCH/s is its rate)
  APPEND        the append pointer: the next sequence number the host expects
  AGREED        the agreement pointer: every entry below it is agreed
  LAG           how far the append pointer is behind the highest of the rack
  QUEUE         payload records waiting for the token
  IN/s, OUT/s   Exo frames received and broadcast per second
  AGREED/s      agreed messages delivered per second
  FETCH/s       entries its fetches brought per second: gap repair, a catch-up
  REJ/s         frames not appended per second, and the most frequent reason
  OFFLOAD       the fast path (xdp, fpga-sim): frames it dropped itself (and the
                most frequent reason), inline drops, pointer writes

The header has the time, the hosts that answered, the token holder and the rack
totals: agreed messages per second (every host delivers the same stream, so the
fastest host's rate) and the slowest host's lag. Rates are the difference of two
samples one interval apart. A host that does not answer shows as down and the
view keeps going.

Sockets: --socket (repeatable) names daemons' API sockets; --cluster-dir a
directory of <Host>.sock files (a cluster.Start directory, as exo demo and the
tests make), scanned again at every refresh. Unix sockets live in the file
system, so root in the root namespace reaches the daemons of every lab host.

Keys: q (or Ctrl-C) quits. --once prints one frame (two samples, one interval
apart) and exits, 1 when no host answered; --json prints the same data as JSON
(with --once one object, else one object per line per interval).`,
		Example: `  exo top                                   # the local daemon (/run/exo/exo.sock)
  sudo exo top --cluster-dir /tmp/exo-demo-909080201
  exo top --socket /run/exo/a.sock --socket /run/exo/b.sock --interval 1s
  exo top --cluster-dir DIR --once --json | jq '.totals'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{code: 2, err: fmt.Errorf("top takes no arguments (got %q): name daemons with --socket or --cluster-dir", args)}
			}
			if o.Interval < 10*time.Millisecond {
				return &exitError{code: 2, err: fmt.Errorf("--interval %v: want at least 10ms", o.Interval)}
			}
			if o.Timeout < 0 {
				return &exitError{code: 2, err: fmt.Errorf("--timeout %v: want a positive duration", o.Timeout)}
			}
			if len(o.Sockets) == 0 && o.ClusterDir == "" {
				o.Sockets = []string{defaultSocket}
			}
			o.In, o.Out = cmd.InOrStdin(), cmd.OutOrStdout()
			return runTop(cmd.Context(), o)
		},
	}
	cmd.Flags().StringArrayVar(&o.Sockets, "socket", nil, "a daemon's API socket (repeat for several hosts; default "+defaultSocket+" when no --cluster-dir)")
	cmd.Flags().StringVar(&o.ClusterDir, "cluster-dir", "", "a directory of <Host>.sock API sockets (cluster.Start's layout)")
	cmd.Flags().DurationVar(&o.Interval, "interval", 500*time.Millisecond, "refresh interval (and the window of the rates)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "how long to wait for a host's status before showing it down (default: the interval, at most 1s)")
	cmd.Flags().BoolVar(&o.Once, "once", false, "print one frame and exit (for scripts)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print JSON instead of the table")
	return cmd
}

// topTarget is one daemon to watch.
type topTarget struct {
	Name   string
	Socket string
}

// topSample is one status read of one host: St is nil when it did not
// answer (Err says why).
type topSample struct {
	At  time.Time
	St  *daemon.Status
	Err error
}

// topSnapshot is what one frame of exo top shows (and --json prints).
type topSnapshot struct {
	Time     time.Time `json:"time"`
	Interval float64   `json:"interval_seconds"`
	Hosts    []topHost `json:"hosts"`
	Totals   topTotals `json:"totals"`
}

// topHost is one row.
type topHost struct {
	Name        string `json:"name"`
	Socket      string `json:"socket"`
	Up          bool   `json:"up"`
	Error       string `json:"error,omitempty"`
	ID          int    `json:"id"`
	Role        string `json:"role"` // holder, member, skipped, down
	TokenHolder bool   `json:"token_holder"`
	Epoch       uint32 `json:"epoch"`
	Halted      bool   `json:"halted"`
	// Transfer: the host fetches the rack's agreed log before it rejoins
	// (a state transfer: --join, a wiped disk, or fallen behind).
	Transfer bool `json:"state_transfer,omitempty"`
	// TransferETA is the seconds the transfer still takes at its fetch rate
	// (0: not known yet); shown in the TOP REJECT column while it runs.
	TransferETA float64 `json:"transfer_eta_seconds,omitempty"`
	transferTo  uint64
	// Key is the key slot this host sends under, with the rotation in
	// flight: "1", "0>1" (slot 1 staged, waiting for announcements), "1+0"
	// (switched, the old key still valid); "" when the status has none.
	Key        string `json:"key,omitempty"`
	Append     uint64 `json:"append_pointer"`
	Agreed     uint64 `json:"agreement_pointer"`
	Lag        uint64 `json:"lag"`
	QueueDepth int    `json:"queue_depth"`
	// TimeoutMs is the token timeout in force (the failure detector's).
	TimeoutMs  float64     `json:"token_timeout_ms"`
	Rates      bool        `json:"rates"` // false: no earlier sample yet (rates are 0)
	FramesIn   float64     `json:"frames_in_per_second"`
	FramesOut  float64     `json:"frames_out_per_second"`
	AgreedRate float64     `json:"agreed_msgs_per_second"`
	Fetched    float64     `json:"fetched_entries_per_second"` // entries its fetches brought: a catch-up's speed
	Rejects    float64     `json:"rejects_per_second"`
	TopReject  string      `json:"top_reject,omitempty"`
	Offload    *topOffload `json:"offload,omitempty"`
}

// topOffload is a host's fast path.
type topOffload struct {
	Mode          string `json:"mode"`
	Dropped       uint64 `json:"dropped"` // frames the fast path dropped itself (not ACCEPT, not slow path)
	TopDrop       string `json:"top_drop,omitempty"`
	InlineDrops   uint64 `json:"inline_drops"`
	Disagreements uint64 `json:"inline_disagreements"`
	StateWrites   uint64 `json:"state_writes"`
	Error         string `json:"error,omitempty"`
}

// topTotals are the rack's figures of the header.
type topTotals struct {
	Hosts       int     `json:"hosts"`
	Up          int     `json:"up"`
	Holder      string  `json:"token_holder,omitempty"`
	Epoch       uint32  `json:"epoch"`
	MaxAppend   uint64  `json:"max_append_pointer"`
	AgreedRate  float64 `json:"agreed_msgs_per_second"`
	SlowestLag  uint64  `json:"slowest_lag"`
	SlowestHost string  `json:"slowest_host,omitempty"`
	Rejects     float64 `json:"rejects_per_second"`
	// RackFloor is the lowest seq a majority of the members serve to a
	// fetch, as the freshest status says (nil until it knows).
	RackFloor *uint64 `json:"rack_floor,omitempty"`
}

// topReasons maps a reason name to its value.
var topReasons = func() map[string]exo.Reason {
	m := map[string]exo.Reason{}
	for r := exo.Reason(0); r < exo.NumReasons; r++ {
		m[r.String()] = r
	}
	return m
}()

func topRejects(st *daemon.Status) map[string]uint64 {
	m := map[string]uint64{}
	for k, v := range st.Counters {
		if r, ok := strings.CutPrefix(k, "rejects."); ok {
			m[r] = v
		}
	}
	return m
}

// topBuild turns the samples of targets (cur, in order) and the previous
// samples (by socket; may be empty) into a snapshot.
func topBuild(targets []topTarget, prev map[string]topSample, cur []topSample, now time.Time, interval time.Duration) topSnapshot {
	s := topSnapshot{Time: now, Interval: interval.Seconds(), Hosts: make([]topHost, len(targets))}
	s.Totals.Hosts = len(targets)
	fresh := -1 // the host with the newest log: its holder and skip list
	for i := range targets {
		if st := cur[i].St; st != nil {
			s.Totals.Up++
			if fresh < 0 || st.Append > cur[fresh].St.Append {
				fresh = i
			}
			s.Totals.Epoch = max(s.Totals.Epoch, st.Epoch)
		}
	}
	if fresh >= 0 {
		s.Totals.MaxAppend = cur[fresh].St.Append
		s.Totals.RackFloor = cur[fresh].St.RackFloor
	}
	for i, t := range targets {
		h := &s.Hosts[i]
		h.Name, h.Socket, h.ID = t.Name, t.Socket, -1
		st := cur[i].St
		if st == nil {
			h.Role = "down"
			h.Error = topCause(cur[i].Err)
			continue
		}
		h.Up, h.ID, h.Epoch, h.Halted = true, st.ID, st.Epoch, st.Halted
		h.Transfer, h.transferTo = st.Recovery.StateTransfer, st.Recovery.TransferTo
		if k := st.Keys; k != nil {
			switch other := 1 - k.SendPhase; {
			case k.Staged:
				h.Key = fmt.Sprintf("%d>%d", k.SendPhase, other)
			case k.OldValid:
				h.Key = fmt.Sprintf("%d+%d", k.SendPhase, other)
			default:
				h.Key = fmt.Sprint(k.SendPhase)
			}
		}
		h.Append, h.Agreed, h.QueueDepth = st.Append, st.Agreed, st.Pending
		h.TimeoutMs = st.Detector.TimeoutMs
		h.Lag = s.Totals.MaxAppend - st.Append
		h.Role = "member"
		if f := cur[fresh].St; f.Holder == st.ID {
			h.Role, h.TokenHolder = "holder", true
			s.Totals.Holder = t.Name
		} else if slices.Contains(f.Skipped, st.ID) {
			h.Role = "skipped"
		}
		if h.Lag > s.Totals.SlowestLag || s.Totals.SlowestHost == "" {
			s.Totals.SlowestLag, s.Totals.SlowestHost = h.Lag, t.Name
		}
		if o := st.Offload; o != nil {
			ho := &topOffload{Mode: o.Mode, InlineDrops: o.Drops, Disagreements: o.Differs, StateWrites: o.Pushes, Error: o.Err}
			var top uint64
			for name, v := range o.Counters {
				r, ok := topReasons[name]
				if !ok || r == exo.ReasonAccept || r.SlowPath() {
					continue
				}
				ho.Dropped += v
				if v > top || (v == top && name < ho.TopDrop) {
					top, ho.TopDrop = v, name
				}
			}
			h.Offload = ho
		}
		p, ok := prev[t.Socket]
		if !ok || p.St == nil || p.St.ID != st.ID {
			continue
		}
		dt := cur[i].At.Sub(p.At).Seconds()
		if dt <= 0 {
			continue
		}
		rate := func(a, b uint64) float64 {
			if b < a {
				return 0 // restarted: counters began again
			}
			return float64(b-a) / dt
		}
		h.Rates = true
		h.FramesIn = rate(p.St.Counters["frames_in"], st.Counters["frames_in"])
		h.FramesOut = rate(p.St.Counters["frames_out"], st.Counters["frames_out"])
		h.AgreedRate = rate(p.St.Delivered, st.Delivered)
		h.Fetched = rate(p.St.Counters["fetched_entries"], st.Counters["fetched_entries"])
		if h.Transfer && h.Fetched > 0 && h.transferTo > st.Append {
			h.TransferETA = float64(h.transferTo-st.Append) / h.Fetched
		}
		before := topRejects(p.St)
		var top float64
		for name, v := range topRejects(st) {
			r := rate(before[name], v)
			h.Rejects += r
			if r > top || (r == top && r > 0 && name < h.TopReject) {
				top, h.TopReject = r, name
			}
		}
		s.Totals.AgreedRate = max(s.Totals.AgreedRate, h.AgreedRate)
		s.Totals.Rejects += h.Rejects
	}
	return s
}

// topCause shortens why a host did not answer.
func topCause(err error) string {
	switch {
	case err == nil:
		return "no answer"
	case errors.Is(err, syscall.ENOENT):
		return "no socket"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (daemon not running)"
	case errors.Is(err, context.DeadlineExceeded):
		return "no status in time"
	}
	msg := err.Error()
	if len(msg) > 80 {
		msg = msg[:77] + "..."
	}
	return msg
}

// renderTop renders a snapshot as the text of one frame (no escape codes).
func renderTop(s topSnapshot) string {
	var b strings.Builder
	holder := s.Totals.Holder
	if holder == "" {
		holder = "-"
	}
	fmt.Fprintf(&b, "exo top  %s  hosts %d/%d up  token at %s  epoch %d  every %v\n",
		s.Time.Format("2006-01-02 15:04:05"), s.Totals.Up, s.Totals.Hosts, holder, s.Totals.Epoch,
		time.Duration(s.Interval*float64(time.Second)).Round(time.Millisecond))
	slowest := "-"
	if s.Totals.SlowestHost != "" {
		slowest = fmt.Sprintf("%d (%s)", s.Totals.SlowestLag, s.Totals.SlowestHost)
	}
	floor := "-"
	if s.Totals.RackFloor != nil {
		floor = fmt.Sprint(*s.Totals.RackFloor)
	}
	fmt.Fprintf(&b, "rack: agreed %s msgs/s  slowest lag %s  append %d  floor %s  rejects %s/s\n",
		topRate(s.Totals.AgreedRate, true), slowest, s.Totals.MaxAppend, floor, topRate(s.Totals.Rejects, true))
	nw := 4
	for _, h := range s.Hosts {
		nw = max(nw, len(h.Name))
	}
	const format = "%-*s %3s  %-8s %5s %4s %4s %11s %11s %7s %6s %7s %8s %8s %9s %8s %7s  %-17s %s"
	line := func(cells ...any) {
		fmt.Fprintf(&b, format, append([]any{nw}, cells...)...)
		b.WriteByte('\n')
	}
	line("HOST", "ID", "ROLE", "EPOCH", "HALT", "KEY", "APPEND", "AGREED", "LAG", "QUEUE", "TIMEOUT", "IN/s", "OUT/s", "AGREED/s", "FETCH/s", "REJ/s", "TOP REJECT", "OFFLOAD")
	for _, h := range s.Hosts {
		if !h.Up {
			fmt.Fprintf(&b, "%-*s %3s  %-8s %s\n", nw, h.Name, "-", "down", h.Error)
			continue
		}
		role := " " + h.Role
		if h.TokenHolder {
			role = "*" + h.Role
		}
		halt := "no"
		switch {
		case h.Transfer:
			halt = "XFER"
		case h.Halted:
			halt = "YES"
		}
		top := h.TopReject
		if top == "" {
			top = "-"
		}
		if h.Transfer && h.TransferETA > 0 {
			top = "xfer ETA " + time.Duration(h.TransferETA*float64(time.Second)).Round(time.Second).String()
		}
		key := h.Key
		if key == "" {
			key = "-"
		}
		line(h.Name, fmt.Sprint(h.ID), role, fmt.Sprint(h.Epoch), halt, key, fmt.Sprint(h.Append), fmt.Sprint(h.Agreed),
			fmt.Sprint(h.Lag), fmt.Sprint(h.QueueDepth), topTimeout(h.TimeoutMs), topRate(h.FramesIn, h.Rates), topRate(h.FramesOut, h.Rates),
			topRate(h.AgreedRate, h.Rates), topRate(h.Fetched, h.Rates), topRate(h.Rejects, h.Rates), top, topOffloadCell(h.Offload))
	}
	return b.String()
}

// topTimeout is the token timeout cell: "-" when the status has none.
func topTimeout(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", ms)
}

func topRate(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	if v > 0 && v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func topOffloadCell(o *topOffload) string {
	if o == nil {
		return "-"
	}
	cell := o.Mode + " dropped " + fmt.Sprint(o.Dropped)
	if o.TopDrop != "" {
		cell += " (" + o.TopDrop + ")"
	}
	if o.InlineDrops > 0 {
		cell += fmt.Sprintf(" inline %d", o.InlineDrops)
	}
	if o.Disagreements > 0 {
		cell += fmt.Sprintf(" DIFFER %d", o.Disagreements)
	}
	cell += fmt.Sprintf(" writes %d", o.StateWrites)
	if o.Error != "" {
		cell += " error: " + o.Error
	}
	return cell
}

// topPoller keeps one API connection per socket and reads the status of
// every target at once.
type topPoller struct {
	timeout time.Duration
	mu      sync.Mutex
	conns   map[string]*client.Client
}

func (p *topPoller) poll(ctx context.Context, targets []topTarget) []topSample {
	out := make([]topSample, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { out[i] = p.status(ctx, t.Socket) })
	}
	wg.Wait()
	return out
}

func (p *topPoller) status(ctx context.Context, socket string) topSample {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	p.mu.Lock()
	c := p.conns[socket]
	delete(p.conns, socket) // put back only after a good answer
	p.mu.Unlock()
	var raw []byte
	err := errors.New("no connection")
	if c != nil {
		if raw, err = c.StatusRaw(ctx); err != nil {
			c.Close() // a late reply must not answer the next request
		}
	}
	if err != nil && ctx.Err() == nil {
		// No connection yet, or it broke (the daemon restarted or died):
		// a new one, whose error says why.
		if c, err = client.Dial(ctx, socket); err != nil {
			return topSample{At: time.Now(), Err: err}
		}
		if raw, err = c.StatusRaw(ctx); err != nil {
			c.Close()
		}
	}
	at := time.Now()
	if err != nil {
		return topSample{At: at, Err: err}
	}
	var st daemon.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		c.Close()
		return topSample{At: at, Err: fmt.Errorf("status: %w", err)}
	}
	p.mu.Lock()
	p.conns[socket] = c
	p.mu.Unlock()
	return topSample{At: at, St: &st}
}

func (p *topPoller) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s, c := range p.conns {
		c.Close()
		delete(p.conns, s)
	}
}

// topHostLess orders lab host names: A..Z, then AA, AB, ...
func topHostLess(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// topTargets lists the sockets to watch: the --socket ones in their order,
// then those of the cluster directory by host name; known are the targets
// of earlier refreshes, which stay (a daemon that died may have removed
// its socket: it shows down instead of vanishing).
func topTargets(o *topOptions, known []topTarget) ([]topTarget, error) {
	seen := map[string]bool{}
	var out []topTarget
	add := func(t topTarget) {
		if !seen[t.Socket] {
			seen[t.Socket] = true
			out = append(out, t)
		}
	}
	if known == nil {
		var named []topTarget
		stems := map[string]int{}
		for _, s := range o.Sockets {
			stem := strings.TrimSuffix(filepath.Base(s), ".sock")
			stems[stem]++
			named = append(named, topTarget{Name: stem, Socket: s})
		}
		for _, t := range named {
			if stems[t.Name] > 1 {
				t.Name = t.Socket
			}
			add(t)
		}
	} else {
		for _, t := range known {
			add(t)
		}
	}
	if o.ClusterDir != "" {
		socks, err := filepath.Glob(filepath.Join(o.ClusterDir, "*.sock"))
		if err != nil {
			return nil, err
		}
		var found []topTarget
		for _, s := range socks {
			if !seen[s] {
				found = append(found, topTarget{Name: strings.TrimSuffix(filepath.Base(s), ".sock"), Socket: s})
			}
		}
		slices.SortFunc(found, func(a, b topTarget) int { return topHostLess(a.Name, b.Name) })
		for _, t := range found {
			add(t)
		}
	}
	return out, nil
}

func runTop(ctx context.Context, o *topOptions) error {
	if o.ClusterDir != "" {
		if fi, err := os.Stat(o.ClusterDir); err != nil || !fi.IsDir() {
			return &exitError{code: 2, err: fmt.Errorf("--cluster-dir %s: not a directory", o.ClusterDir)}
		}
	}
	targets, err := topTargets(o, nil)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("no *.sock in %s: is it a cluster directory with daemons running?", o.ClusterDir)}
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = min(o.Interval, time.Second)
	}
	p := &topPoller{timeout: timeout, conns: map[string]*client.Client{}}
	defer p.close()
	prev := map[string]topSample{}
	sample := func() topSnapshot {
		if t, err := topTargets(o, targets); err == nil {
			targets = t
		}
		cur := p.poll(ctx, targets)
		snap := topBuild(targets, prev, cur, time.Now(), o.Interval)
		for i, t := range targets {
			prev[t.Socket] = cur[i]
		}
		return snap
	}
	wait := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}

	if o.Once {
		sample()
		if !wait(o.Interval) {
			return ctx.Err()
		}
		snap := sample()
		if o.JSON {
			if err := writeJSON(o.Out, snap); err != nil {
				return err
			}
		} else {
			fmt.Fprint(o.Out, renderTop(snap))
		}
		if snap.Totals.Up == 0 {
			return &exitError{code: 1, err: fmt.Errorf("no host answered (of %d)", len(snap.Hosts))}
		}
		return nil
	}

	quit := make(chan struct{})
	restore := topKeys(o.In, quit)
	defer restore()
	tty := !o.JSON && isTerminal(o.Out)
	if tty {
		fmt.Fprint(o.Out, "\x1b[?25l\x1b[H\x1b[2J") // hide the cursor, clear
		defer fmt.Fprint(o.Out, "\x1b[?25h")
	}
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	for {
		snap := sample()
		switch {
		case o.JSON:
			b, _ := json.Marshal(snap)
			fmt.Fprintf(o.Out, "%s\n", b)
		case tty:
			fmt.Fprint(o.Out, topScreen(renderTop(snap)+"q or Ctrl-C quits\n", topWidth(o.Out)))
		default:
			fmt.Fprintln(o.Out, renderTop(snap))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case <-tick.C:
		}
	}
}

// topScreen draws a frame over the previous one: home, each line cut to
// the terminal's width and cleared to its end, the rest of the screen
// cleared (no flicker of a full clear).
func topScreen(frame string, width int) string {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for line := range strings.Lines(frame) {
		line = strings.TrimSuffix(line, "\n")
		if width > 0 && len(line) > width {
			line = line[:width]
		}
		b.WriteString(line)
		b.WriteString("\x1b[K\r\n")
	}
	b.WriteString("\x1b[J")
	return b.String()
}

func topWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// topKeys closes quit when the user presses q (or Ctrl-C, or Ctrl-D). On
// a terminal it turns off line buffering and echo (signals stay on: Ctrl-C
// is also SIGINT); it returns the function that restores the terminal.
// Other input is read by lines: a line "q" quits, the end of input does
// not.
func topKeys(in io.Reader, quit chan struct{}) (restore func()) {
	var once sync.Once
	stop := func() { once.Do(func() { close(quit) }) }
	restore = func() {}
	f, isFile := in.(*os.File)
	if isFile {
		fd := int(f.Fd())
		if old, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			raw := *old
			raw.Lflag &^= unix.ICANON | unix.ECHO
			raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
			if unix.IoctlSetTermios(fd, unix.TCSETS, &raw) == nil {
				restore = func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }
			}
			go func() {
				buf := make([]byte, 64)
				for {
					n, err := f.Read(buf)
					for _, c := range buf[:n] {
						if c == 'q' || c == 'Q' || c == 3 || c == 4 {
							stop()
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
			return restore
		}
	}
	if in == nil {
		return restore
	}
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l == "q" || l == "Q" {
				stop()
				return
			}
		}
	}()
	return restore
}

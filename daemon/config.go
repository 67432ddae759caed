// Package daemon is the rack-level broadcast daemon: it runs the Exo core
// (package exo) on a raw-frame broadcast Conn (package broadcast) and an OOB
// transport (package oob), delivers agreed messages to local applications
// and takes messages to broadcast through a local API on a Unix socket
// (package client speaks it), and exports Prometheus metrics.
package daemon

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/wal"
)

// Config is the daemon's configuration file (JSON).
type Config struct {
	// Group is the group id of the rack.
	Group uint16 `json:"group"`
	// ID is this host's stable member id (one of the roster's ids).
	ID int `json:"id"`
	// Interface is the broadcast interface (e.g. exo0).
	Interface string `json:"interface"`
	// Roster lists every host that is or may become a member of the rack,
	// by stable member id (docs/protocol.md section 7). Which of them are
	// members is the core's business: the rack starts with the members
	// 0..hosts-1, and agreed configuration entries (exo roster add|remove)
	// change that; a member can only be added if it is listed here (its MAC
	// and OOB address are needed).
	Roster []Member `json:"roster"`
	// Hosts is the size of the rack's first roster, member ids
	// 0..hosts-1 (default: every host of Roster, which then holds the ids
	// 0..n-1). Every host of a rack must use the same value.
	Hosts int `json:"hosts,omitempty"`
	// KeyFile holds the group key (at least 16 bytes, mode 0600): the OOB
	// connections between hosts prove it both ways.
	KeyFile string `json:"key_file"`
	// KeyPhase is the key slot (0 or 1) of key_file's frame key: 0 for a
	// rack that never rotated its key, then alternating with each rotation
	// (docs/security.md section 5; exo key status shows it).
	KeyPhase int `json:"key_phase,omitempty"`
	// NextKeyFile, if set, holds the next group key: the daemon stages it
	// at start (as exo key stage does) and switches to it once every member
	// holds it. Kept in the config while a rotation runs, so that a
	// restarted host comes back holding both keys.
	NextKeyFile string `json:"next_key_file,omitempty"`
	// KeyGraceText is how long the old key stays valid after this host
	// switched to the new one, at least (default "5s"); it is retired once
	// every member was also seen sending under the new key.
	KeyGraceText string        `json:"key_grace,omitempty"`
	KeyGrace     time.Duration `json:"-"`
	// Key, when set, is the contents of KeyFile as the embedder read it
	// (daemon/host reads the file once, for the OOB transport and the
	// daemon): New uses it instead of reading the file again.
	Key []byte `json:"-"`
	// Offload is the fast path: "software" (default), "xdp" (the XDP
	// program in front of the socket; the daemon refuses to start without
	// it), "auto" (xdp, else software with one log line) or "fpga-sim" (the
	// simulated FPGA engine, in a build with -tags fpgasim).
	Offload string `json:"offload,omitempty"`
	// XDPMode is how offload "xdp" attaches: "auto" (default: generic
	// mode on a veth, where it measured faster; elsewhere native driver
	// mode, else generic with a log line), "native" or "generic".
	XDPMode string `json:"xdp_mode,omitempty"`
	// XDPDelivery is how offload "xdp" hands passed frames to the daemon:
	// "afpacket" (default: XDP_PASS to the AF_PACKET socket) or "afxdp"
	// (redirected to AF_XDP sockets, with the program's verdict).
	XDPDelivery string `json:"xdp_delivery,omitempty"`
	// XDPToken ("on" or "off", default off) is token mode (docs/token.md):
	// the XDP program answers this host's predecessor's frame with this
	// host's next frame itself (XDP_TX), from a queue the daemon fills,
	// and hands up what it did in a ring buffer the daemon reads in
	// batches. Needs offload "xdp" and frames of at most 4096 bytes (the
	// daemon caps batch_bytes so).
	XDPToken string `json:"xdp_token,omitempty"`
	// FPGAToken ("on" or "off", default off) is token mode on the FPGA
	// engine (docs/token.md section 7, docs/fpga.md section 5): the
	// engine answers this host's predecessor's frame with this host's next
	// frame on its TX port, from a transmit queue the daemon fills through
	// its registers, and hands up what it did as records. Needs offload
	// "fpga-sim" (the simulated engine, in a build with -tags fpgasim),
	// where a goroutine of the daemon plays the NIC: it hands the engine
	// every frame the interface receives and sends what the engine sends.
	FPGAToken string `json:"fpga_token,omitempty"`
	// BPFDir is the bpffs directory token mode pins its maps under, per
	// data_dir (default /run/exo/bpf; mounted if it is not a bpffs): a
	// daemon killed with records it had not logged hands them to the next
	// one (docs/token.md section 5). Without data_dir nothing is pinned.
	BPFDir string `json:"bpf_dir,omitempty"`
	// RxPoll is how the protocol loop waits for frames on its AF_PACKET
	// socket (broadcast.RxPoll): "runtime" (the default: Go's network
	// poller), "block" (its own OS thread blocked in ppoll) or "busy"
	// (spins: a whole core per daemon, even idle). docs/BENCHMARKS.md
	// has the measurement that made runtime the default.
	RxPoll string `json:"rx_poll,omitempty"`
	// Procs is the daemon process's GOMAXPROCS: 1 by default (the
	// protocol runs under one lock; with one P a frame's wake-up needs no
	// hand-off between threads, measured faster in docs/BENCHMARKS.md),
	// -1 for Go's default (every CPU, or the GOMAXPROCS variable). Set by
	// daemon/host when it opens the daemon.
	Procs int `json:"procs,omitempty"`
	// HugePages asks the kernel to back the daemon process's heap with
	// transparent huge pages where it offers them only on request
	// ("madvise"): "on" or "off" (default). A daemon killed with SIGKILL
	// closes its connections only once the kernel has freed its memory,
	// sooner in 2 MiB pages than in 4 KiB ones, and its peers learn of its
	// death from that close (package daemon/hugepage). Off by default: on
	// the lab rack it cut a kill's wait for the process to go from 30-32
	// to 20-22 ms, and doubled or tripled the token takeovers, with and
	// without faults (docs/operator.md). Applied by daemon/host when it runs the
	// daemon.
	HugePages string `json:"huge_pages,omitempty"`
	// APISocket is the local API's Unix socket path.
	APISocket string `json:"api_socket"`
	// MetricsAddr serves /metrics when set (e.g. 127.0.0.1:9477).
	MetricsAddr string `json:"metrics_addr,omitempty"`
	// EnablePprof also serves Go's profiles (net/http/pprof: CPU, heap,
	// goroutines, the runtime's execution trace) under /debug/pprof/ on
	// metrics_addr, as etcd's --enable-pprof does: for finding where a
	// daemon's time goes on a running rack. Off by default: anyone who
	// reaches metrics_addr can then make the daemon profile itself.
	EnablePprof bool `json:"enable_pprof,omitempty"`
	// TickText is the protocol tick as a Go duration (default "250us"); the
	// timeouts below count ticks.
	TickText     string        `json:"tick,omitempty"`
	Tick         time.Duration `json:"-"`
	TokenTimeout int           `json:"token_timeout_ticks,omitempty"`
	// TokenTimeoutMin is the floor of the adaptive token timeout: the
	// timeout in force follows the gaps between appends this host sees,
	// between it and token_timeout_ticks (the ceiling). Defaults: 40 and
	// 200 (tokenTimeouts); token_timeout_ticks set alone fixes the timeout
	// at it. A floor of 8 ticks (2 ms) took live hosts over 708 times a
	// minute on the 2-vCPU lab rack without a fault (docs/recovery.md):
	// set a lower floor only where a hop's jitter is known to stay below it.
	TokenTimeoutMin int `json:"token_timeout_min_ticks,omitempty"`
	RetransmitTicks int `json:"retransmit_ticks,omitempty"`
	// GoneTicks is how many ticks the token holder's successor waits
	// before it takes the token over once the holder's process is known
	// to be gone: its OOB connection to this host ended and a dial to
	// its OOB address was refused (its kernel closed its sockets: a
	// kill -9, a crash of the daemon alone, a stop). 0: the default, 1
	// tick; -1: such notices are ignored, and only the token timeout
	// detects a dead holder (as it does a dead machine or a partition).
	GoneTicks      int `json:"gone_ticks,omitempty"`
	IdleBackoffMax int `json:"idle_backoff_max_ticks,omitempty"`
	// IdleRotations is how many rotations of empty passes go at full speed
	// before the idle back-off (default 4; in token mode 32: the kernel
	// passes a hop in microseconds, and the rack should not go idle, and
	// hand the token up, in the time a daemon takes to refill its queue).
	IdleRotations     int `json:"idle_rotations,omitempty"`
	ViewChangeTimeout int `json:"view_change_timeout_ticks,omitempty"`
	// MaxMessage bounds one published message (default 1 MiB); larger
	// messages are split across consecutive entries and reassembled.
	MaxMessage int `json:"max_message_bytes,omitempty"`
	// BatchBytes caps the payload bytes of one frame (records with their
	// length prefixes); 0 = as much as the MTU allows. A small value turns
	// batching off (one message per frame).
	BatchBytes int `json:"batch_bytes,omitempty"`
	// QueueLen bounds the payloads waiting for the token (default 8192);
	// publish fails with "queue full" beyond it.
	QueueLen int `json:"queue_len,omitempty"`
	// FetchBytes sizes one answer to a fetch (a host catching up, a gap):
	// entries up to this many bytes, at least 1,024 of them (default 4 MiB;
	// 64 KiB..32 MiB, below the OOB transport's 64 MiB message cap).
	// Larger answers mean fewer round trips for a host far behind.
	FetchBytes int `json:"fetch_bytes,omitempty"`
	// FetchWindow is how many batches of fetch_bytes a host catching up to
	// a later epoch keeps in flight, asked of the members heard in that
	// epoch in turn (default 4; 1..16; 1: one batch a round trip).
	FetchWindow int `json:"fetch_window,omitempty"`
	// KeepEntries is how many agreed entries stay in memory for gap repair
	// and subscribers (default 262144); older ones are compacted.
	KeepEntries int `json:"keep_entries,omitempty"`
	// Retain is the durable log's retention policy: how much agreed log
	// the disk keeps below the in-memory log (keep_entries), from which a
	// host that joins or fell far behind is answered (docs/recovery.md,
	// "Retention"). Unset keeps no more than the in-memory log.
	Retain Retain `json:"retain,omitzero"`
	// TransferRateText ("50MB", "200MiB": bytes per second; "off") paces
	// a state transfer of this host (a --join, a host fallen past the
	// floor): the next batch is asked for no sooner than its
	// predecessor's bytes allow at this rate, so the members it fetches
	// from keep serving the rack (default DefaultTransferRate; "off": no
	// pacing). Where the rack's log grows faster, batches follow at once
	// until the transfer gains again (exo.Config.TransferBytesPerTick): a
	// transfer always ends.
	TransferRateText string `json:"transfer_rate,omitempty"`
	TransferRate     int64  `json:"-"`
	// TransferYieldText ("80%"; "off") makes transfer_rate the ceiling
	// of an adaptive pace: the transfer pauses for TransferProbe now and
	// then, compares how fast the rack's log grows (in the frames this
	// host hears) while it fetches and while it pauses, and slows while
	// the rack grows at less than this share of its rate in the pauses
	// (exo.Config.TransferYield; default DefaultTransferYield; "off": the
	// fixed pace). Ignored with transfer_rate "off".
	TransferYieldText string `json:"transfer_yield,omitempty"`
	TransferYield     int    `json:"-"`
	// ArchiveIO is the I/O class of this host's reads of its retained
	// log (the answers to a state transfer or a far-behind host, a
	// subscriber's history): "idle" (default: the disk serves them only
	// when nothing else waits for it, so the fsyncs that every frame this
	// host sends waits for come first; wal.IOClass) or "normal".
	ArchiveIOText string      `json:"archive_io,omitempty"`
	ArchiveIO     wal.IOClass `json:"-"`
	// SegmentBytes is the size of the durable log's segment files
	// (default 64 MiB, 1 MiB..1 GiB): the unit in which retention removes
	// the log, so a bytes bound is kept to within one segment.
	SegmentBytes int64 `json:"segment_bytes,omitempty"`
	// Preallocate writes the durable log's next segment file ahead of
	// time, zeros to segment_bytes, on a goroutine of its own, in pieces:
	// "on" (default) or "off". The appends to a prepared segment grow no
	// file, so the sync that every frame this host sends waits for is an
	// fdatasync of the data alone (wal.Options.Preallocate). It costs one
	// segment of disk space ahead and the zeros' writes.
	Preallocate string `json:"preallocate,omitempty"`
	// DataDir holds the durable log; empty keeps the log in memory only.
	DataDir string `json:"data_dir,omitempty"`
	// Fsync is the durable log's policy: "none", "batch" (default: before
	// anything that depends on the log is sent, when the meta changes, and
	// within 100 ms of entries received) or "entry" (also after every
	// batch of entries received: the policy before "batch" became lazy;
	// see wal.Sync).
	Fsync string `json:"fsync,omitempty"`
	// Join starts the host as one that lost its state (an empty data
	// directory joining a running rack): it rejoins through a view change.
	Join bool `json:"join,omitempty"`
}

// Member is one host of the roster.
type Member struct {
	ID  int    `json:"id"`
	MAC string `json:"mac"`
	OOB string `json:"oob"` // host:port of its OOB service
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("config")

func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
}

// LoadConfig reads, defaults and validates a configuration file.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return ParseConfig(b)
}

// ParseConfig parses, defaults and validates a configuration.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more after the config's JSON object (one object per file)", ErrConfig)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: more after the config's JSON object (one object per file)", ErrConfig)
	}
	c.defaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// maxTicks bounds every tick count of the config (10^6 ticks: 250 s at
// the default tick).
const maxTicks = 1_000_000

// DefaultTokenTimeout is the token timeout's default, in ticks (250 us):
// the ceiling of the adaptive timeout (the whole timeout until the
// failure detector has samples; docs/protocol.md section 3).
const DefaultTokenTimeout = exo.LabTokenTimeout

// DefaultTokenTimeoutMin is the adaptive timeout's floor when neither
// token_timeout_min_ticks nor token_timeout_ticks is set. An operator who
// sets token_timeout_ticks alone gets that timeout, fixed.
const DefaultTokenTimeoutMin = exo.LabTokenTimeoutMin

// tokenTimeouts is the token timeout's ceiling and floor, in ticks.
func (c *Config) tokenTimeouts() (hi, lo int) {
	switch {
	case c.TokenTimeoutMin > 0:
		return orDefault(c.TokenTimeout, DefaultTokenTimeout), c.TokenTimeoutMin
	case c.TokenTimeout > 0:
		return c.TokenTimeout, c.TokenTimeout
	}
	return DefaultTokenTimeout, DefaultTokenTimeoutMin
}

// DefaultFetchBytes is the default fetch_bytes: 4 MiB, some 5,000 entries of
// a loaded rack (11 records of 64 bytes each), against 1,024 before.
const DefaultFetchBytes = 4 << 20

func (c *Config) defaults() {
	if c.RxPoll == "" {
		c.RxPoll = "runtime"
	}
	if c.HugePages == "" {
		c.HugePages = "off"
	}
	if c.Preallocate == "" {
		c.Preallocate = "on"
	}
	if c.Procs == 0 {
		c.Procs = 1
	}
	if c.BPFDir == "" {
		c.BPFDir = DefaultBPFDir
	}
	if c.Offload == "" {
		c.Offload = "software"
	}
	if c.TickText == "" && c.Tick == 0 {
		c.Tick = 250 * time.Microsecond
	}
	if c.MaxMessage == 0 {
		c.MaxMessage = 1 << 20
	}
	if c.QueueLen == 0 {
		c.QueueLen = 8192
	}
	if c.FetchBytes == 0 {
		c.FetchBytes = DefaultFetchBytes
	}
	if c.KeepEntries == 0 {
		c.KeepEntries = 1 << 18
	}
	if c.Hosts == 0 {
		c.Hosts = len(c.Roster)
	}
}

// Retain is the retention policy of the durable log (config "retain").
// Every bound set applies: the log below the in-memory one is removed,
// whole segments at a time, past the first bound reached. It never
// removes what the in-memory log holds (unagreed entries among it); a
// bound tighter than keep_entries compacts the in-memory log too.
type Retain struct {
	// Entries keeps at most this many agreed entries behind the
	// agreement pointer.
	Entries uint64 `json:"entries,omitempty"`
	// BytesText ("512MiB", "2GiB", or a number of bytes) bounds the
	// segments' bytes, to within one segment (segment_bytes).
	BytesText string `json:"bytes,omitempty"`
	Bytes     int64  `json:"-"`
	// AgeText ("24h") removes segments whose newest entry is older.
	AgeText string        `json:"age,omitempty"`
	Age     time.Duration `json:"-"`
}

// Policy returns the policy for the durable log (Validate parsed it).
func (r Retain) Policy() wal.Policy {
	return wal.Policy{Entries: r.Entries, Bytes: r.Bytes, Age: r.Age}
}

// parseBytes reads a byte count: a number, optionally with KiB, MiB, GiB
// or TiB (or KB, MB, GB, TB, as powers of 1000).
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size such as \"512MiB\" or \"2GiB\"", s)
	}
	return int64(v * float64(mult)), nil
}

// DefaultTransferRate is transfer_rate when the config does not set it:
// 25 MB/s, the ceiling of the adaptive pace (transfer_yield). At that
// fixed pace 2 GiB joins on the lab rack of a 2-vCPU machine kept the
// rack's agreed rate at 0.48-1.08 of its rate before, as the machine and
// the rack's own rate moved between sessions (0.62-0.84 at 40-50 MB/s;
// docs/recovery.md).
const DefaultTransferRate = 25_000_000

// DefaultTransferYield is transfer_yield when the config does not set it,
// in percent.
const DefaultTransferYield = 80

// TransferProbe is the length of a transfer's pauses with transfer_yield
// (exo.Config.TransferProbeTicks): the rack's growth is measured over
// their second half. With pauses of 300 ms (150 ms measured) the 2 GiB
// joins of the lab rack measured the rack at 65-90 % of its rate in the
// pauses while it delivered 0.56-0.57 of its rate before the joins: the
// transfer's cost outlasted 150 ms (docs/recovery.md, session r).
const TransferProbe = time.Second

// transferPerTick is transfer_rate in bytes per tick (at least 1 when set).
func (c *Config) transferPerTick() int {
	if c.TransferRate == 0 {
		return 0
	}
	return max(1, int(float64(c.TransferRate)*c.Tick.Seconds()))
}

// transferYield is transfer_yield as exo.Config.TransferYield: 0 when
// transfers are not paced.
func (c *Config) transferYield() int {
	if c.TransferRate == 0 {
		return 0
	}
	return c.TransferYield
}

// transferTicks is the least wait for a state transfer's answer: a batch
// of fetch_bytes at 50 MB/s (a loaded member's OOB sender reading its
// retained log and encoding, as measured on the lab rack: 20-80 ms for
// 4 MiB), at most 2 s.
func (c *Config) transferTicks() int {
	d := time.Duration(float64(c.FetchBytes) / 50e6 * float64(time.Second))
	return int(min(d, 2*time.Second) / c.Tick)
}

// segmentBytes is segment_bytes or its default.
func (c *Config) segmentBytes() int64 {
	if c.SegmentBytes == 0 {
		return wal.DefaultSegmentBytes
	}
	return c.SegmentBytes
}

// member returns the roster entry of member id, or nil.
func (c *Config) member(id int) *Member {
	for i := range c.Roster {
		if c.Roster[i].ID == id {
			return &c.Roster[i]
		}
	}
	return nil
}

// Validate checks every field and names the first bad one.
func (c *Config) Validate() error {
	if _, err := wal.ParseSync(c.Fsync); err != nil {
		return fieldErr("fsync", "%v", err)
	}
	if c.TickText != "" {
		d, err := time.ParseDuration(c.TickText)
		if err != nil {
			return fieldErr("tick", "%q is not a duration such as \"1ms\"", c.TickText)
		}
		c.Tick = d
	}
	if c.Retain.BytesText != "" {
		b, err := parseBytes(c.Retain.BytesText)
		if err != nil {
			return fieldErr("retain.bytes", "%v", err)
		}
		c.Retain.Bytes = b
	}
	switch c.TransferRateText {
	case "":
		c.TransferRate = DefaultTransferRate
	case "off":
		c.TransferRate = 0
	default:
		b, err := parseBytes(c.TransferRateText)
		if err != nil || b < 1<<20 {
			return fieldErr("transfer_rate", "%q is not a rate of at least 1MiB (bytes per second, such as \"50MB\") nor \"off\"", c.TransferRateText)
		}
		c.TransferRate = b
	}
	switch y := c.TransferYieldText; {
	case y == "":
		c.TransferYield = DefaultTransferYield
	case y == "off":
		c.TransferYield = 0
	default:
		v, err := strconv.Atoi(strings.TrimSuffix(y, "%"))
		if err != nil || !strings.HasSuffix(y, "%") || v < 1 || v > 99 {
			return fieldErr("transfer_yield", "%q is not a share of the rack's rate from \"1%%\" to \"99%%\" (such as \"80%%\") nor \"off\"", y)
		}
		c.TransferYield = v
	}
	class, err := wal.ParseIOClass(c.ArchiveIOText)
	if err != nil {
		return fieldErr("archive_io", "%q is not \"idle\" nor \"normal\"", c.ArchiveIOText)
	}
	c.ArchiveIO = class
	if c.Retain.AgeText != "" {
		d, err := time.ParseDuration(c.Retain.AgeText)
		if err != nil || d <= 0 {
			return fieldErr("retain.age", "%q is not a positive duration such as \"24h\"", c.Retain.AgeText)
		}
		c.Retain.Age = d
	}
	c.KeyGrace = 5 * time.Second
	if c.KeyGraceText != "" {
		d, err := time.ParseDuration(c.KeyGraceText)
		if err != nil || d <= 0 {
			return fieldErr("key_grace", "%q is not a positive duration such as \"5s\"", c.KeyGraceText)
		}
		c.KeyGrace = d
	}
	n := len(c.Roster)
	switch {
	case n < 1 || n > exo.MaxRoster:
		return fieldErr("roster", "%d hosts, want 1..%d", n, exo.MaxRoster)
	case c.Hosts < 1 || c.Hosts > n:
		return fieldErr("hosts", "%d is outside 1..%d (the roster's size)", c.Hosts, n)
	case c.member(c.ID) == nil:
		return fieldErr("id", "%d is not in the roster", c.ID)
	case c.Interface == "":
		return fieldErr("interface", "missing (the broadcast interface, e.g. exo0)")
	case c.APISocket == "":
		return fieldErr("api_socket", "missing (e.g. /run/exo/exo.sock)")
	case c.KeyFile == "":
		return fieldErr("key_file", "missing (the group key: OOB connections are never anonymous; e.g. head -c 32 /dev/urandom > /etc/exo/key; chmod 600 /etc/exo/key)")
	case c.KeyPhase != 0 && c.KeyPhase != 1:
		return fieldErr("key_phase", "%d is neither 0 nor 1", c.KeyPhase)
	case c.NextKeyFile != "" && c.NextKeyFile == c.KeyFile:
		return fieldErr("next_key_file", "is key_file: the next key must be another key")
	case c.Offload != "software" && c.Offload != "xdp" && c.Offload != "auto" && c.Offload != "fpga-sim":
		return fieldErr("offload", "%q is none of software, xdp, auto, fpga-sim", c.Offload)
	case c.XDPMode != "" && c.XDPMode != "auto" && c.XDPMode != "native" && c.XDPMode != "generic":
		return fieldErr("xdp_mode", "%q is none of auto, native, generic", c.XDPMode)
	case c.XDPDelivery != "" && c.XDPDelivery != "afpacket" && c.XDPDelivery != "afxdp":
		return fieldErr("xdp_delivery", "%q is neither afpacket nor afxdp", c.XDPDelivery)
	case c.XDPToken != "" && c.XDPToken != "on" && c.XDPToken != "off":
		return fieldErr("xdp_token", "%q is neither on nor off", c.XDPToken)
	case c.XDPToken == "on" && c.Offload != "xdp":
		return fieldErr("xdp_token", "on needs offload \"xdp\" (offload is %q)", c.Offload)
	case c.XDPToken == "on" && c.XDPDelivery == "afxdp":
		return fieldErr("xdp_token", "on hands frames up in its own ring: xdp_delivery afxdp does not apply")
	case c.FPGAToken != "" && c.FPGAToken != "on" && c.FPGAToken != "off":
		return fieldErr("fpga_token", "%q is neither on nor off", c.FPGAToken)
	case c.FPGAToken == "on" && c.Offload != "fpga-sim":
		return fieldErr("fpga_token", "on needs offload \"fpga-sim\" (offload is %q): the FPGA engine sends the frames", c.Offload)
	case c.RxPoll != "runtime" && c.RxPoll != "block" && c.RxPoll != "busy":
		return fieldErr("rx_poll", "%q is none of runtime, block, busy", c.RxPoll)
	case c.HugePages != "on" && c.HugePages != "off":
		return fieldErr("huge_pages", "%q is neither on nor off", c.HugePages)
	case c.Preallocate != "on" && c.Preallocate != "off":
		return fieldErr("preallocate", "%q is neither on nor off", c.Preallocate)
	case c.Procs < -1 || c.Procs > 1024:
		return fieldErr("procs", "%d is outside -1 (every CPU) and 1..1024", c.Procs)
	case c.Tick < 10*time.Microsecond || c.Tick > time.Second:
		return fieldErr("tick", "%v is outside 10us..1s", c.Tick)
	case c.MaxMessage < 1 || c.MaxMessage > 64<<20:
		return fieldErr("max_message_bytes", "%d is outside 1..64MiB", c.MaxMessage)
	case c.QueueLen < 1:
		return fieldErr("queue_len", "%d must be at least 1", c.QueueLen)
	case c.FetchBytes < 64<<10 || c.FetchBytes > 32<<20:
		return fieldErr("fetch_bytes", "%d is outside 64KiB..32MiB", c.FetchBytes)
	case c.FetchWindow < 0 || c.FetchWindow > exo.MaxFetchWindow:
		return fieldErr("fetch_window", "%d is outside 1..%d (0: the default, %d)", c.FetchWindow, exo.MaxFetchWindow, exo.DefaultFetchWindow)
	case c.BatchBytes != 0 && (c.BatchBytes < 2+fragHeader+4+1 || c.BatchBytes > 65535):
		return fieldErr("batch_bytes", "%d is outside %d..65535", c.BatchBytes, 2+fragHeader+4+1)
	case c.DataDir == "" && c.Fsync != "":
		return fieldErr("fsync", "%q needs data_dir", c.Fsync)
	case c.KeepEntries < 1024 || c.KeepEntries > 1<<30:
		return fieldErr("keep_entries", "%d is outside 1024..%d", c.KeepEntries, 1<<30)
	case c.SegmentBytes != 0 && (c.SegmentBytes < 1<<20 || c.SegmentBytes > 1<<30):
		return fieldErr("segment_bytes", "%d is outside 1MiB..1GiB", c.SegmentBytes)
	case !c.Retain.Policy().Zero() && c.DataDir == "":
		return fieldErr("retain", "needs data_dir (it is the durable log's policy)")
	case c.Retain.Bytes != 0 && c.Retain.Bytes < 2*c.segmentBytes():
		return fieldErr("retain.bytes", "%d bytes is under two segments (segment_bytes %d): the segment being written alone may reach one", c.Retain.Bytes, c.segmentBytes())
	}
	// Tick counts: the core adds and multiplies them (takeover ranks, the
	// doubling view-change timeout), so they stay far from overflow.
	for _, t := range []struct {
		name string
		v    int
	}{{"token_timeout_ticks", c.TokenTimeout}, {"token_timeout_min_ticks", c.TokenTimeoutMin}, {"retransmit_ticks", c.RetransmitTicks},
		{"idle_backoff_max_ticks", c.IdleBackoffMax}, {"view_change_timeout_ticks", c.ViewChangeTimeout}, {"idle_rotations", c.IdleRotations},
		{"gone_ticks", c.GoneTicks}} {
		if (t.v < 0 && !((t.name == "idle_backoff_max_ticks" || t.name == "gone_ticks") && t.v == -1)) || t.v > maxTicks {
			return fieldErr(t.name, "%d is outside 0..%d (0: the default)", t.v, maxTicks)
		}
	}
	hi, lo := c.tokenTimeouts()
	if lo > hi {
		return fieldErr("token_timeout_min_ticks", "%d is above token_timeout_ticks (%d): it is the floor of the adaptive timeout, that its ceiling", lo, hi)
	}
	if c.GoneTicks > hi {
		return fieldErr("gone_ticks", "%d is above token_timeout_ticks (%d): a takeover from a holder known dead waits at most what one from a silent holder does", c.GoneTicks, hi)
	}
	macs := map[string]int{}
	ids := map[int]int{}
	for i, m := range c.Roster {
		f := fmt.Sprintf("roster[%d]", i)
		if m.ID < 0 || m.ID >= int(exo.HistoryNone) {
			return fieldErr(f+".id", "%d is outside 0..%d", m.ID, exo.HistoryNone-1)
		}
		if j, dup := ids[m.ID]; dup {
			return fieldErr(f+".id", "%d is also roster[%d]'s", m.ID, j)
		}
		ids[m.ID] = i
		hw, err := net.ParseMAC(m.MAC)
		if err != nil || len(hw) != 6 {
			return fieldErr(f+".mac", "%q is not a MAC address", m.MAC)
		}
		if j, dup := macs[hw.String()]; dup {
			return fieldErr(f+".mac", "%s is also roster[%d]'s", hw, j)
		}
		macs[hw.String()] = i
		if _, err := netip.ParseAddrPort(m.OOB); err != nil {
			return fieldErr(f+".oob", "%q is not an ip:port (%v)", m.OOB, err)
		}
	}
	for id := 0; id < c.Hosts; id++ {
		if _, ok := ids[id]; !ok {
			return fieldErr("roster", "member id %d of the first roster (0..%d, hosts) is missing", id, c.Hosts-1)
		}
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			return fieldErr("metrics_addr", "%q: %v", c.MetricsAddr, err)
		}
	}
	if c.EnablePprof && c.MetricsAddr == "" {
		return fieldErr("enable_pprof", "the profiles are served on metrics_addr, which is not set")
	}
	if _, err := exo.NewNode(c.coreConfig(1500)); err != nil {
		return fieldErr("timeouts", "%v", err)
	}
	return nil
}

// coreConfig is the exo.Config of this host for an interface MTU. Its
// TagKey is zero: New sets it to FrameKey of the key file's contents.
func (c *Config) coreConfig(mtu int) exo.Config {
	n := len(c.Roster) // the largest roster possible: the longest history
	batch := mtu - exo.HeaderLen - exo.HistoryLen(n)
	if c.BatchBytes > 0 {
		batch = min(batch, c.BatchBytes)
	}
	if c.Token() {
		// The XDP program handles frames of at most TokenMaxFrame bytes,
		// and a queued batch of at most TokenMaxBatch (the FPGA engine
		// the same: exo.MaxFastFrame, and slots of 4096 bytes).
		batch = min(batch, TokenMaxFrame-exo.HeaderLen-exo.HistoryLen(n), TokenMaxBatch)
	}
	hi, lo := c.tokenTimeouts()
	return exo.Config{
		ID: uint8(c.ID), Hosts: c.Hosts, Group: c.Group,
		TokenTimeout: hi, TokenTimeoutMin: lo,
		RetransmitTicks: orDefault(c.RetransmitTicks, exo.LabRetransmitTicks), GoneTicks: c.goneTicks(),
		IdleBackoffMax: orDefault(c.IdleBackoffMax, 256), ViewChangeTimeout: orDefault(c.ViewChangeTimeout, exo.LabViewChangeTimeout),
		IdleRotations:   c.idleRotations(),
		TakeoverStagger: exo.LabTakeoverStagger, RejoinTicks: exo.LabRejoinTicks, FetchTicks: exo.LabFetchTicks, FetchBytes: c.FetchBytes, FetchWindow: c.FetchWindow,
		TransferBytesPerTick: c.transferPerTick(), TransferTicks: c.transferTicks(), TransferTurnBytes: int(c.segmentBytes()),
		TransferYield: c.transferYield(), TransferProbeTicks: max(4, int(TransferProbe/c.Tick)),
		MaxBatchBytes: min(batch, 65535), MaxPending: c.QueueLen,
		KeyPhase: uint8(c.KeyPhase), KeyGraceTicks: keyGraceTicks(c.KeyGrace, c.Tick),
	}
}

// goneTicks is gone_ticks as exo.Config.GoneTicks: 1 by default, 0 (off)
// for -1.
func (c *Config) goneTicks() int {
	switch {
	case c.GoneTicks < 0:
		return 0
	case c.GoneTicks == 0:
		return 1
	}
	return c.GoneTicks
}

// frameKeyInfo is the HMAC-SHA256 message of the frame-key derivation.
const frameKeyInfo = "exo frame tag v1"

// FrameKey derives the frame-tag key (exo.Config.TagKey: SipHash-2-4 of
// every frame, docs/security.md) from the group key, the key file's
// contents: the first 16 bytes of HMAC-SHA256(groupKey, "exo frame tag v1").
// The OOB service proves the group key itself; the frames carry a tag under
// a key derived for them alone.
func FrameKey(groupKey []byte) [exo.TagKeyLen]byte {
	m := hmac.New(sha256.New, groupKey)
	m.Write([]byte(frameKeyInfo))
	var k [exo.TagKeyLen]byte
	copy(k[:], m.Sum(nil))
	return k
}

// idleRotations is IdleRotations with its default.
func (c *Config) idleRotations() int {
	switch {
	case c.IdleRotations != 0:
		return c.IdleRotations
	case c.Token():
		return 32
	}
	return exo.DefaultIdleRotations
}

// Token reports whether token mode is on: the fast path sends this host's
// frames (xdp_token or fpga_token).
func (c *Config) Token() bool { return c.XDPToken == "on" || c.FPGAToken == "on" }

// TokenMaxFrame and TokenMaxBatch bound token mode's frames (bytes after
// the Ethernet header; the XDP program's linear buffer) and the batches of
// its transmit queue (its slots).
const (
	TokenMaxFrame = 4096
	TokenMaxBatch = 4064
)

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// ReadKey reads the group key file: at least 16 bytes, not readable by
// group or others.
func ReadKey(path string) ([]byte, error) { return readKey(path, "key_file") }

// readKey is ReadKey with the config field its errors name.
func readKey(path, field string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fieldErr(field, "%v", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fieldErr(field, "%s is readable by group or others (mode %v): chmod 600 %s", path, st.Mode().Perm(), path)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fieldErr(field, "%v", err)
	}
	if len(key) < 16 {
		return nil, fieldErr(field, "%s holds %d bytes, the key needs at least 16", path, len(key))
	}
	return key, nil
}

// DefaultBPFDir is bpf_dir's default: where token mode pins its maps. A
// bpffs mounted there before the daemons start (exo lab up, the cluster
// runner) outlives a daemon's own mount namespace (ip netns exec), so a
// killed daemon's records reach its restart.
const DefaultBPFDir = "/run/exo/bpf"

package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
	"github.com/exo-rack/exo/wal"
)

// goodConfigJSON is a valid configuration of a 5-host rack, as an operator
// writes it (docs/operator.md).
const goodConfigJSON = `{
  "group": 7,
  "id": 2,
  "interface": "exo0",
  "key_file": "/etc/exo/key",
  "api_socket": "/run/exo/exo.sock",
  "metrics_addr": "127.0.0.1:9477",
  "tick": "250us",
  "roster": [
    {"id": 0, "mac": "02:e0:00:00:00:01", "oob": "10.77.0.1:7700"},
    {"id": 1, "mac": "02:e0:00:00:00:02", "oob": "10.77.0.2:7700"},
    {"id": 2, "mac": "02:e0:00:00:00:03", "oob": "10.77.0.3:7700"},
    {"id": 3, "mac": "02:e0:00:00:00:04", "oob": "10.77.0.4:7700"},
    {"id": 4, "mac": "02:e0:00:00:00:05", "oob": "[fd00::5]:7700"}
  ]
}`

// configFields are the JSON names a configuration error may name: every
// json tag of Config and Member (roster[i].<member field>).
func configFields() map[string]bool {
	out := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeFor[Config](), reflect.TypeFor[Member]()} {
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out[name] = true
			}
		}
	}
	return out
}

var (
	validFields = configFields()
	rosterField = regexp.MustCompile(`^roster\[(\d+)\]\.(\w+)$`)
	// The core's field names that "timeouts" errors carry, and the json
	// field each comes from.
	coreTimeoutFields = map[string]string{
		"TokenTimeout": "token_timeout_ticks", "RetransmitTicks": "retransmit_ticks",
		"ViewChangeTimeout": "view_change_timeout_ticks", "IdleBackoffMax": "idle_backoff_max_ticks",
		"GoneTicks": "gone_ticks",
	}
)

// checkConfigError: every error wraps ErrConfig; one from Validate (the
// JSON decoded) names a field: "config: <json field>: ..." (or
// "config: timeouts: <core field>: ..." for the tick counts).
func checkConfigError(t *testing.T, in []byte, err error) {
	t.Helper()
	if !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), "config: ") {
		t.Fatalf("%q: error %q does not wrap ErrConfig", in, err)
	}
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(in)))
	dec.DisallowUnknownFields()
	if dec.Decode(&c) != nil {
		return // a JSON error: "config: json: ..."
	}
	if _, terr := dec.Token(); terr != io.EOF {
		if !strings.Contains(err.Error(), "after the config's JSON object") {
			t.Fatalf("%q: trailing data, but the error %q does not say so", in, err)
		}
		return
	}
	field, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "config: "), ": ")
	if m := rosterField.FindStringSubmatch(field); m != nil {
		field = m[2]
	}
	switch {
	case field == "timeouts":
		for core := range coreTimeoutFields {
			if strings.Contains(err.Error(), core) {
				return
			}
		}
		t.Fatalf("%q: %q names no tick count", in, err)
	case !validFields[field]:
		t.Fatalf("%q: error %q does not name a config field (got %q)", in, err, field)
	}
}

// checkConfigInvariants is what the daemon relies on in a config that
// ParseConfig returned.
func checkConfigInvariants(t *testing.T, in []byte, c *Config) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%q: accepted, but %s", in, fmt.Sprintf(format, args...))
	}
	n := len(c.Roster)
	if n < 1 || n > exo.MaxRoster || n > 255 {
		fail("%d hosts", n)
	}
	if c.member(c.ID) == nil {
		fail("id %d not in the roster", c.ID)
	}
	if c.Hosts < 1 || c.Hosts > n {
		fail("hosts %d of %d", c.Hosts, n)
	}
	if c.Interface == "" || c.APISocket == "" || c.KeyFile == "" {
		fail("interface %q api_socket %q key_file %q", c.Interface, c.APISocket, c.KeyFile)
	}
	macs := map[string]bool{}
	ids := map[int]bool{}
	for i, m := range c.Roster {
		if m.ID < 0 || m.ID >= 255 || ids[m.ID] {
			fail("roster[%d].id is %d", i, m.ID)
		}
		ids[m.ID] = true
		hw, err := net.ParseMAC(m.MAC)
		if err != nil || len(hw) != 6 {
			fail("roster[%d].mac %q: %v", i, m.MAC, err)
		}
		if macs[hw.String()] {
			fail("roster[%d].mac %s twice", i, hw)
		}
		macs[hw.String()] = true
		ap, err := netip.ParseAddrPort(m.OOB)
		if err != nil {
			fail("roster[%d].oob %q: %v", i, m.OOB, err)
		}
		// The daemon dials it: it must survive a round trip through the
		// string form net.Dial takes.
		if _, _, err := net.SplitHostPort(ap.String()); err != nil {
			fail("roster[%d].oob %q: %v", i, m.OOB, err)
		}
	}
	if c.Tick < 10*time.Microsecond || c.Tick > time.Second {
		fail("tick %v", c.Tick)
	}
	if c.TickText != "" {
		if d, err := time.ParseDuration(c.TickText); err != nil || d != c.Tick {
			fail("tick %q is %v", c.TickText, c.Tick)
		}
	}
	if c.MaxMessage < 1 || c.MaxMessage > 64<<20 || c.QueueLen < 1 || c.KeepEntries < 1024 {
		fail("max_message_bytes %d queue_len %d keep_entries %d", c.MaxMessage, c.QueueLen, c.KeepEntries)
	}
	if c.BatchBytes != 0 && (c.BatchBytes < 2+fragHeader+4+1 || c.BatchBytes > 65535) {
		fail("batch_bytes %d: split needs room for one byte of data", c.BatchBytes)
	}
	switch c.Offload {
	case "software", "xdp", "auto", "fpga-sim":
	default:
		fail("offload %q", c.Offload)
	}
	if (c.XDPToken == "on" && c.Offload != "xdp") || (c.FPGAToken == "on" && c.Offload != "fpga-sim") {
		fail("xdp_token %q, fpga_token %q with offload %q", c.XDPToken, c.FPGAToken, c.Offload)
	}
	switch c.XDPMode {
	case "", "auto", "native", "generic":
	default:
		fail("xdp_mode %q", c.XDPMode)
	}
	if _, err := broadcast.ParseRxPoll(c.RxPoll); err != nil || c.RxPoll == "" {
		fail("rx_poll %q (the default is set: runtime)", c.RxPoll)
	}
	if c.Procs < -1 || c.Procs == 0 || c.Procs > 1024 {
		fail("procs %d (the default is set: 1)", c.Procs)
	}
	if _, err := wal.ParseSync(c.Fsync); err != nil || (c.Fsync != "" && c.DataDir == "") {
		fail("fsync %q with data_dir %q", c.Fsync, c.DataDir)
	}
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			fail("metrics_addr %q: %v", c.MetricsAddr, err)
		}
	}
	if c.EnablePprof && c.MetricsAddr == "" {
		fail("enable_pprof without metrics_addr")
	}
	if !json.Valid(in) {
		fail("it is not one JSON value")
	}
	// The daemon's and the core's arithmetic on them does not overflow:
	// the history trim (keep+keep/4), the takeover deadline (token
	// timeout + rank*stagger).
	if k := c.KeepEntries; k+k/4 < k {
		fail("keep_entries %d overflows the history trim", k)
	}
	for id := 0; id < c.Hosts; id++ {
		if !ids[id] {
			fail("first-roster member %d missing", id)
		}
	}
	if c.TokenTimeout > math.MaxInt-len(c.Roster)*20 {
		fail("token_timeout_ticks %d overflows the takeover deadline", c.TokenTimeout)
	}
	cc := c.coreConfig(1500)
	if _, err := exo.NewNode(cc); err != nil {
		fail("the core refuses it: %v", err)
	}
	if cc.MaxBatchBytes-2-fragHeader-4 < 1 {
		fail("a record of %d bytes has no room for data", cc.MaxBatchBytes)
	}
	// Validate again: it is idempotent.
	again := *c
	if err := again.Validate(); err != nil || !reflect.DeepEqual(&again, c) {
		fail("Validate again: %v", err)
	}
	// What the daemon writes back (json.Marshal) parses to the same config.
	b, err := json.Marshal(c)
	if err != nil {
		fail("does not marshal: %v", err)
	}
	c2, err := ParseConfig(b)
	if err != nil {
		fail("its own JSON %s is refused: %v", b, err)
	}
	if !reflect.DeepEqual(c2, c) {
		fail("its JSON %s parses to %+v, want %+v", b, c2, c)
	}
}

// FuzzConfig: ParseConfig of any bytes never panics and returns either a
// config that holds every invariant the daemon relies on (roster of
// 1..255 hosts in token order, id in it, unique parseable MACs, OOB
// addresses ip:port, tick, sizes, enums, a core config the core accepts,
// room for a fragment), that validates again unchanged and survives a JSON
// round trip; or an error that wraps ErrConfig and, when the JSON decoded,
// names the bad field by its JSON name.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(goodConfigJSON))
	f.Add([]byte(`{"id":0,"interface":"e","key_file":"k","api_socket":"s","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"127.0.0.1:1"}]}`))
	f.Add([]byte(`{"id":0,"interface":"e","key_file":"k","api_socket":"s","offload":"xdp","xdp_mode":"generic","data_dir":"/var/lib/exo","fsync":"entry","batch_bytes":16,"queue_len":1,"keep_entries":1024,"max_message_bytes":67108864,"tick":"1s","token_timeout_ticks":9,"gone_ticks":-1,"idle_backoff_max_ticks":-1,"retransmit_ticks":1,"view_change_timeout_ticks":1,"join":true,"roster":[{"id":0,"mac":"02-00-00-00-00-01","oob":"[::1]:7700"}]}`))
	for _, edit := range [][2]string{
		{`"id": 2,`, `"id": 5,`},
		{`"id": 2,`, `"id": -1,`},
		{`"02:e0:00:00:00:05"`, `"02:e0:00:00:00:01"`},
		{`"02:e0:00:00:00:05"`, `"02-E0-00-00-00-01"`},
		{`"02:e0:00:00:00:05"`, `"00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"`},
		{`"[fd00::5]:7700"`, `"host5:7700"`},
		{`{"id": 3,`, `{"id": 4,`},
		{`"tick": "250us",`, `"tick": "5us",`},
		{`"tick": "250us",`, `"tick": "1h",`},
		{`"tick": "250us",`, `"tick": 250,`},
		{`"tick": "250us",`, `"keep_entries": 9223372036854775807,`},
		{`"tick": "250us",`, `"view_change_timeout_ticks": 4611686018427387904,`},
		{`"tick": "250us",`, `"token_timeout_ticks": 3,`},
		{`"tick": "250us",`, `"batch_bytes": 15,`},
		{`"tick": "250us",`, `"fsync": "entry",`},
		{`"tick": "250us",`, `"max_message_bytes": 67108865,`},
		{`"tick": "250us",`, `"unknown": 1,`},
		{`"group": 7,`, `"group": 65536,`},
		{`"metrics_addr": "127.0.0.1:9477",`, `"metrics_addr": "9477",`},
		{`"metrics_addr": "127.0.0.1:9477",`, `"enable_pprof": true,`},
		{`"interface": "exo0",`, ``},
	} {
		f.Add([]byte(strings.Replace(goodConfigJSON, edit[0], edit[1], 1)))
	}
	f.Add([]byte(goodConfigJSON + `{"id": 3}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := ParseConfig(in)
		if err != nil {
			if c != nil {
				t.Fatalf("%q: a config and an error %v", in, err)
			}
			checkConfigError(t, in, err)
			return
		}
		checkConfigInvariants(t, in, c)
	})
}

// TestLoadConfigErrors: LoadConfig wraps ErrConfig for a missing file too,
// and loads the example config.
func TestLoadConfigErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadConfig(filepath.Join(dir, "nope.json")); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing file: %v", err)
	}
	p := filepath.Join(dir, "exo.json")
	if err := os.WriteFile(p, []byte(goodConfigJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	checkConfigInvariants(t, []byte(goodConfigJSON), c)
}

// TestConfigKeepEntriesOverflow: keep_entries is accepted up to MaxInt, but
// fanOut trims the history when len > keep+keep/4: above ~7.4e18 that sum
// overflows, the trim runs at the first delivery with a negative capacity,
// and the daemon panics ("makeslice: cap out of range", api.go fanOut).
func TestConfigKeepEntriesOverflow(t *testing.T) {
	in := strings.Replace(goodConfigJSON, `"tick": "250us",`, `"keep_entries": 9223372036854775807,`, 1)
	if _, err := ParseConfig([]byte(in)); err == nil {
		t.Fatal("keep_entries 9223372036854775807 accepted (the daemon panics at its first delivery)")
	}
}

// TestConfigTickCountOverflow: the tick counts are accepted up to MaxInt,
// but the core adds to and shifts them: with token_timeout_ticks =
// MaxInt, TokenTimeout+(rank-1)*TakeoverStagger wraps negative and a host
// that is not next in line takes the token over at its very first tick
// (the timeout meant as "never" fires at once).
func TestConfigTickCountOverflow(t *testing.T) {
	in := strings.Replace(goodConfigJSON, `"tick": "250us",`, fmt.Sprintf(`"token_timeout_ticks": %d,`, math.MaxInt), 1)
	in = strings.Replace(in, `"id": 2,`, `"id": 3,`, 1) // third in line after host 0
	c, err := ParseConfig([]byte(in))
	if err != nil {
		return // refused: fixed
	}
	nd, err := exo.NewNode(c.coreConfig(1500))
	if err != nil {
		t.Fatal(err)
	}
	nd.Tick()
	for _, e := range nd.Ready().Events {
		if e.Kind == exo.EventTakeover {
			t.Fatalf("Validate accepts token_timeout_ticks %d; the core's takeover deadline overflows and host 3 takes the token over at its first tick (%+v)", c.TokenTimeout, e)
		}
	}
}

// TestConfigTrailingData: ParseConfig decodes the first JSON value and
// ignores the rest of the file: a config with a second object appended (an
// operator's override, a bad merge) is accepted and the override silently
// ignored.
func TestConfigTrailingData(t *testing.T) {
	in := goodConfigJSON + `{"id": 3}`
	if c, err := ParseConfig([]byte(in)); err == nil {
		t.Fatalf("trailing data accepted (id %d)", c.ID)
	}
}

// oneHostConfig is a minimal valid config of one host, its closing brace
// left off: a test appends fields to it.
const oneHostConfig = `{"id":0,"interface":"e","key_file":"k","api_socket":"s","roster":[{"id":0,"mac":"02:00:00:00:00:01","oob":"127.0.0.1:7700"}]`

// parseField parses oneHostConfig with field added. With refused named, it
// checks that the config is refused by an error naming that field and
// returns nil; else it returns the config, or nil after reporting the error.
func parseField(t *testing.T, field, refused string) *Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(oneHostConfig + field + "}"))
	switch {
	case refused != "":
		if err == nil || !strings.Contains(err.Error(), refused) {
			t.Errorf("%s: error %v, want one naming %s", field, err, refused)
		}
		return nil
	case err != nil:
		t.Errorf("%s: %v", field, err)
		return nil
	}
	return cfg
}

// TestGoneTicksConfig: gone_ticks' default (1), -1 (off) and its bounds.
func TestGoneTicksConfig(t *testing.T) {
	for _, c := range []struct {
		field string
		want  int // exo.Config.GoneTicks; -2: refused
	}{{"", 1}, {`,"gone_ticks":0`, 1}, {`,"gone_ticks":-1`, 0}, {`,"gone_ticks":3`, 3},
		{`,"gone_ticks":-2`, -2}, {`,"gone_ticks":201`, -2}, {`,"gone_ticks":41`, 41}, {`,"gone_ticks":41,"token_timeout_ticks":40`, -2},
		{`,"gone_ticks":41,"token_timeout_ticks":80`, 41}} {
		refused := ""
		if c.want == -2 {
			refused = "gone_ticks"
		}
		if cfg := parseField(t, c.field, refused); cfg != nil {
			if got := cfg.coreConfig(1500).GoneTicks; got != c.want {
				t.Errorf("%s: GoneTicks %d, want %d", c.field, got, c.want)
			}
		}
	}
}

// TestTokenTimeoutDefaults: the token timeout is adaptive by default (a
// ceiling of 200 ticks, a floor of 40); token_timeout_ticks alone fixes
// it (an operator's timeout is kept as it was meant); a floor above the
// ceiling is refused.
func TestTokenTimeoutDefaults(t *testing.T) {
	for _, c := range []struct {
		field  string
		hi, lo int // 0: refused
	}{{"", 200, 40}, {`,"token_timeout_ticks":80`, 80, 80}, {`,"token_timeout_min_ticks":20`, 200, 20},
		{`,"token_timeout_ticks":100,"token_timeout_min_ticks":50`, 100, 50},
		{`,"token_timeout_min_ticks":300`, 0, 0}, {`,"token_timeout_ticks":40,"token_timeout_min_ticks":60`, 0, 0}} {
		refused := ""
		if c.hi == 0 {
			refused = "token_timeout_min_ticks"
		}
		if cfg := parseField(t, c.field, refused); cfg != nil {
			if got := cfg.coreConfig(1500); got.TokenTimeout != c.hi || got.TokenTimeoutMin != c.lo {
				t.Errorf("%s: token timeout %d..%d, want %d..%d", c.field, got.TokenTimeoutMin, got.TokenTimeout, c.lo, c.hi)
			}
		}
	}
}

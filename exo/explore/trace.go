package explore

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/exo-rack/exo/exo"
)

// Trace is a replayable schedule: the rack (Hosts, Config) and the actions
// taken from the initial state, one Step each. A trace returned by Explore
// ends with the step at which Violation showed.
type Trace struct {
	Hosts  int
	Config exo.Config // as given to exo.NewNode; ID and Hosts are set per host
	Steps  []Step
	// Violation is what failed at the last step (nil for a trace that is
	// an example, not a counterexample).
	Violation *Violation
}

// Step is one action. Item is the canonical text of the in-flight item for
// OpDeliver, OpDrop and OpDup (see Trace.String); Host is the acting host
// for the other operations.
type Step struct {
	Op   Op
	Host int
	Item string
}

func (s Step) String() string {
	switch s.Op {
	case OpDeliver, OpDrop, OpDup:
		return s.Op.String() + " " + s.Item
	}
	return s.Op.String() + " " + strconv.Itoa(s.Host)
}

// String renders the trace one step a line, in the form ParseTrace reads:
//
//	hosts 3
//	config TokenTimeout=2 TakeoverStagger=1 ...
//	tick 0
//	deliver frame 0->1 #0 e0 by0 h[X] -
//	deliver Promise 2->1 ep=4 logep=0 agreed=1 ents=[#1 e0 by2 h[0] {p1}]
//	...
//
// Lines starting with '#' are comments. Entries are written
// "#seq e<epoch> by<sender> h[history] payload", the payload being "-" (a
// token pass), {p1,p2} (proposal records) or c=<count> x=<hex>.
func (t *Trace) String() string {
	var b strings.Builder
	if t.Violation != nil {
		fmt.Fprintf(&b, "# violation: %v\n", t.Violation)
	}
	fmt.Fprintf(&b, "hosts %d\nconfig %s\n", t.Hosts, configString(t.Config))
	proposed := 0
	for _, s := range t.Steps {
		if s.Op == OpPropose {
			proposed++
			fmt.Fprintf(&b, "%s p%d\n", s, proposed)
			continue
		}
		fmt.Fprintf(&b, "%s\n", s)
	}
	return b.String()
}

// configString writes every exported field of c but ID and Hosts as
// Name=value.
func configString(c exo.Config) string {
	v := reflect.ValueOf(c)
	var parts []string
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.IsExported() || f.Name == "ID" || f.Name == "Hosts" {
			continue
		}
		switch fv := v.Field(i); fv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			parts = append(parts, fmt.Sprintf("%s=%d", f.Name, fv.Int()))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			parts = append(parts, fmt.Sprintf("%s=%d", f.Name, fv.Uint()))
		case reflect.Bool:
			parts = append(parts, fmt.Sprintf("%s=%v", f.Name, fv.Bool()))
		}
	}
	return strings.Join(parts, " ")
}

func parseConfig(s string, c *exo.Config) error {
	v := reflect.ValueOf(c).Elem()
	for _, kv := range strings.Fields(s) {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("config: %q is not Name=value", kv)
		}
		f := v.FieldByName(k)
		if !f.IsValid() || !f.CanSet() {
			return fmt.Errorf("config: no field %q", k)
		}
		switch f.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			x, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return fmt.Errorf("config: %s: %v", k, err)
			}
			f.SetInt(x)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			x, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return fmt.Errorf("config: %s: %v", k, err)
			}
			f.SetUint(x)
		case reflect.Bool:
			x, err := strconv.ParseBool(val)
			if err != nil {
				return fmt.Errorf("config: %s: %v", k, err)
			}
			f.SetBool(x)
		default:
			return fmt.Errorf("config: field %q cannot be set from text", k)
		}
	}
	return nil
}

// ParseTrace reads a trace in the form Trace.String writes.
func ParseTrace(text string) (*Trace, error) {
	t := &Trace{}
	for ln, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		bad := func(err error) error { return fmt.Errorf("trace line %d: %q: %v", ln+1, line, err) }
		switch word {
		case "hosts":
			n, err := strconv.Atoi(rest)
			if err != nil {
				return nil, bad(err)
			}
			t.Hosts = n
		case "config":
			if err := parseConfig(rest, &t.Config); err != nil {
				return nil, bad(err)
			}
		case "deliver", "drop", "dup":
			op := map[string]Op{"deliver": OpDeliver, "drop": OpDrop, "dup": OpDup}[word]
			t.Steps = append(t.Steps, Step{Op: op, Item: rest})
		case "tick", "propose", "restart", "amnesia", "broadcast", "compact", "gone":
			op := map[string]Op{"tick": OpTick, "propose": OpPropose, "restart": OpRestart, "amnesia": OpAmnesia,
				"broadcast": OpBroadcast, "compact": OpCompact, "gone": OpGone}[word]
			h, err := strconv.Atoi(strings.Fields(rest + " x")[0])
			if err != nil {
				return nil, bad(err)
			}
			t.Steps = append(t.Steps, Step{Op: op, Host: h})
		default:
			return nil, bad(errors.New("unknown action"))
		}
	}
	if t.Hosts < 1 {
		return nil, errors.New("trace: no hosts line")
	}
	return t, nil
}

// ErrBadTrace is wrapped by Replay's errors: the trace does not fit the
// rack (an item not in flight, a host outside the roster).
var ErrBadTrace = errors.New("explore: trace does not replay")

// Replay runs t from the initial state, checking every invariant after
// every step, exactly as Explore does. It returns the first violation (with
// Step set), or nil if the whole trace ran clean; an error wrapping
// ErrBadTrace if a step cannot be taken. With w non-nil it writes each step,
// its events and deliveries, and the acting host's state after it.
func Replay(t *Trace, w io.Writer) (*Violation, error) {
	if t.Hosts < 1 || t.Hosts > MaxExploreHosts {
		return nil, fmt.Errorf("%w: hosts %d outside 1..%d", ErrBadTrace, t.Hosts, MaxExploreHosts)
	}
	m := newMachine(t.Hosts, t.Config, FingerprintExported)
	if w != nil {
		m.verbose = func(s string) { fmt.Fprintln(w, s) }
	}
	s, err := m.initial()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTrace, err)
	}
	for k, st := range t.Steps {
		a, err := resolveStep(s, st, t.Hosts, t.Config.TagKey)
		if err != nil {
			return nil, fmt.Errorf("%w: step %d (%s): %v", ErrBadTrace, k+1, st, err)
		}
		if w != nil {
			fmt.Fprintf(w, "%3d %s\n", k+1, st)
		}
		c, v := m.apply(s, a)
		if c == nil && v == nil {
			return nil, fmt.Errorf("%w: step %d (%s) does not apply", ErrBadTrace, k+1, st)
		}
		if v != nil {
			v.Step = k
			if w != nil {
				fmt.Fprintf(w, "    VIOLATION %v\n", v)
				for i := 0; c != nil && i < len(c.nodes); i++ {
					fmt.Fprintf(w, "    %s\n", nodeSummary(i, c.nodes[i]))
				}
			}
			return v, nil
		}
		if w != nil {
			h := a.host
			if a.kind == OpDeliver || a.kind == OpDup || a.kind == OpDrop {
				h = int(s.flight[a.item].to)
			}
			if a.kind != OpDrop {
				fmt.Fprintf(w, "    %s\n", nodeSummary(h, c.nodes[h]))
			}
		}
		s = c
	}
	return nil, nil
}

func resolveStep(s *state, st Step, n int, key [exo.TagKeyLen]byte) (action, error) {
	switch st.Op {
	case OpDeliver, OpDrop, OpDup:
		for k := range s.flight {
			if describeItem(&s.flight[k], key) == st.Item {
				return action{kind: st.Op, item: k}, nil
			}
		}
		var in []string
		for k := range s.flight {
			in = append(in, "\n\t"+describeItem(&s.flight[k], key))
		}
		return action{}, fmt.Errorf("no such item in flight; in flight:%s", strings.Join(in, ""))
	case OpTick, OpPropose, OpRestart, OpAmnesia, OpBroadcast, OpCompact, OpGone:
		if st.Host < 0 || st.Host >= n {
			return action{}, fmt.Errorf("host %d outside the roster", st.Host)
		}
		return action{kind: st.Op, host: st.Host}, nil
	}
	return action{}, fmt.Errorf("unknown op %d", st.Op)
}

// Minimize returns a shortest-found sub-trace of t (steps removed, none
// changed) that still shows a violation of the same kind as t's, checked
// by Replay; t itself when nothing can be removed. t must show a violation.
func Minimize(t *Trace) (*Trace, error) {
	v, err := Replay(t, nil)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, errors.New("explore: minimize: the trace shows no violation")
	}
	kind := v.Kind
	best := &Trace{Hosts: t.Hosts, Config: t.Config, Steps: t.Steps[:v.Step+1], Violation: v}
	try := func(steps []Step) *Violation {
		c := &Trace{Hosts: t.Hosts, Config: t.Config, Steps: steps}
		v, err := Replay(c, nil)
		if err != nil || v == nil || v.Kind != kind {
			return nil
		}
		return v
	}
	for changed := true; changed; {
		changed = false
		for size := max(len(best.Steps)/2, 1); size >= 1; size /= 2 {
			for i := 0; i+size <= len(best.Steps); {
				cand := append(append([]Step(nil), best.Steps[:i]...), best.Steps[i+size:]...)
				if v := try(cand); v != nil {
					best = &Trace{Hosts: t.Hosts, Config: t.Config, Steps: cand[:v.Step+1], Violation: v}
					changed = true
					continue
				}
				i += size
			}
		}
	}
	return best, nil
}

// describeItem returns the canonical text of an in-flight item. It writes
// every field that can differ between two items (fields at their usual
// value are left out, the tag when it is the frame's tag under the rack's
// key), so equal texts mean interchangeable items.
func describeItem(it *item, key [exo.TagKeyLen]byte) string {
	var b strings.Builder
	if f := it.frame; f != nil {
		fmt.Fprintf(&b, "frame %d->%d ", it.from, it.to)
		if f.Type != exo.FrameData {
			fmt.Fprintf(&b, "type=%d ", f.Type)
		}
		if f.Sender != it.from {
			fmt.Fprintf(&b, "sender=%d ", f.Sender)
		}
		if f.Group != 0 {
			fmt.Fprintf(&b, "group=%d ", f.Group)
		}
		if !f.VerifyTag(key) {
			fmt.Fprintf(&b, "tag=%#x ", f.Tag)
		}
		e := exo.Entry{Seq: f.Seq, Epoch: f.Epoch, Sender: f.Sender, History: f.History, Count: f.Count, Flags: f.Flags, Payload: f.Payload}
		b.WriteString(entryString(&e))
		return b.String()
	}
	m := it.msg
	fmt.Fprintf(&b, "%s %d->%d", m.Type, it.from, it.to)
	if m.From != it.from {
		fmt.Fprintf(&b, " from=%d", m.From)
	}
	num := func(name string, v uint64) {
		if v != 0 {
			fmt.Fprintf(&b, " %s=%d", name, v)
		}
	}
	num("ep", uint64(m.Epoch))
	num("logep", uint64(m.LogEpoch))
	num("lo", m.Lo)
	num("hi", m.Hi)
	num("start", m.Start)
	num("agreed", m.Agreed)
	if len(m.Skipped) > 0 {
		fmt.Fprintf(&b, " skip=%v", m.Skipped)
	}
	if m.Amnesiac {
		b.WriteString(" amnesiac")
	}
	if len(m.Entries) > 0 {
		b.WriteString(" ents=[")
		for k := range m.Entries {
			if k > 0 {
				b.WriteString("; ")
			}
			b.WriteString(entryString(&m.Entries[k]))
		}
		b.WriteString("]")
	}
	return b.String()
}

// entryString writes an entry as "#seq e<epoch> by<sender> h[history]
// payload", with " readmit=<id>" or " fl=<flags>" when flags are set.
func entryString(e *exo.Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d e%d by%d h[", e.Seq, e.Epoch, e.Sender)
	for k, id := range e.History {
		if k > 0 {
			b.WriteByte(' ')
		}
		if id == exo.HistoryNone {
			b.WriteByte('X')
		} else {
			b.WriteString(strconv.Itoa(int(id)))
		}
	}
	b.WriteString("] ")
	b.WriteString(payloadString(e))
	if e.Flags != 0 {
		if id, ok := e.Readmits(); ok && e.Flags&^(exo.FlagReadmit|exo.FlagHostMask) == 0 {
			fmt.Fprintf(&b, " readmit=%d", id)
		} else {
			fmt.Fprintf(&b, " fl=%#x", e.Flags)
		}
	}
	return b.String()
}

func payloadString(e *exo.Entry) string {
	if e.Count == 0 && len(e.Payload) == 0 {
		return "-"
	}
	var recs []string
	err := e.Records(func(rec []byte) error {
		for _, c := range rec {
			if c <= ' ' || c > '~' || c == ',' || c == '}' || c == ']' || c == ';' {
				return errors.New("not printable")
			}
		}
		if len(rec) == 0 {
			return errors.New("empty")
		}
		recs = append(recs, string(rec))
		return nil
	})
	if err != nil || e.Count == 0 {
		return fmt.Sprintf("c=%d x=%x", e.Count, e.Payload)
	}
	return "{" + strings.Join(recs, ",") + "}"
}

// nodeSummary is one line of a host's state, for Replay's output.
func nodeSummary(i int, nd *exo.Node) string {
	p := nd.Pointers()
	var b strings.Builder
	fmt.Fprintf(&b, "host %d: epoch=%d promised=%d halted=%v append=%d agreed=%d pending=%d",
		i, p.Epoch, nd.Promised(), p.Halted, p.Append, p.Agreed, nd.Pending())
	if nd.Amnesiac() {
		b.WriteString(" amnesiac")
	}
	var sk []int
	for x := 0; x < int(p.Hosts); x++ {
		if nd.Skipped(uint8(x)) {
			sk = append(sk, x)
		}
	}
	if len(sk) > 0 {
		fmt.Fprintf(&b, " skipped=%v", sk)
	}
	b.WriteString(" log=[")
	for k := range nd.Log() {
		if k > 0 {
			b.WriteString("; ")
		}
		b.WriteString(entryString(&nd.Log()[k]))
	}
	b.WriteString("]")
	return b.String()
}

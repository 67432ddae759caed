package wireshark

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/exo-rack/exo/exo"
)

var update = flag.Bool("update", false, "rewrite the wire constants block of exo.lua from hw/wire.json")

const (
	luaPath  = "exo.lua"
	wirePath = "../../hw/wire.json"
	begin    = "-- BEGIN wire constants"
	end      = "-- END wire constants"
)

// wireJSON is the part of hw/wire.json the dissector uses.
type wireJSON struct {
	Constants []struct {
		Name  string          `json:"name"`
		Value json.RawMessage `json:"value"`
	} `json:"constants"`
	Header []struct {
		Name   string `json:"name"`
		Offset int    `json:"offset"`
		Size   int    `json:"size"`
	} `json:"header"`
	Enums []struct {
		Name   string `json:"name"`
		Values []struct {
			Name  string `json:"name"`
			Value int    `json:"value"`
		} `json:"values"`
	} `json:"enums"`
}

func readWire(t *testing.T) wireJSON {
	t.Helper()
	b, err := os.ReadFile(wirePath)
	if err != nil {
		t.Fatal(err)
	}
	var w wireJSON
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("%s: %v", wirePath, err)
	}
	return w
}

// renderBlock is the generated block of exo.lua, markers included.
func renderBlock(w wireJSON) string {
	var b strings.Builder
	b.WriteString(begin + " (generated from hw/wire.json: go test ./tools/wireshark -update)\n")
	b.WriteString("local WIRE = {\n")
	for _, c := range w.Constants {
		v := string(c.Value)
		var s string
		if json.Unmarshal(c.Value, &s) == nil {
			v = s // "0x88B5" stays hex
		}
		fmt.Fprintf(&b, "\t%s = %s,\n", c.Name, v)
	}
	b.WriteString("}\nlocal FIELD = {\n")
	for _, h := range w.Header {
		fmt.Fprintf(&b, "\t%s = { off = %d, size = %d },\n", h.Name, h.Offset, h.Size)
	}
	b.WriteString("}\nlocal REASON = {\n")
	for _, e := range w.Enums {
		if e.Name != "reason" {
			continue
		}
		for _, v := range e.Values {
			fmt.Fprintf(&b, "\t[%d] = %q,\n", v.Value, v.Name)
		}
	}
	b.WriteString("}\n" + end)
	return b.String()
}

// TestWireConstants: the constants, field offsets and reason names of
// exo.lua are exactly hw/wire.json's.
func TestWireConstants(t *testing.T) {
	w := readWire(t)
	lua, err := os.ReadFile(luaPath)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(lua, []byte(begin))
	j := bytes.Index(lua, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("%s: no %q ... %q block", luaPath, begin, end)
	}
	got := string(lua[i : j+len(end)])
	want := renderBlock(w)
	if got != want {
		if *update {
			out := append(append(append([]byte{}, lua[:i]...), want...), lua[j+len(end):]...)
			if err := os.WriteFile(luaPath, out, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote the wire constants of %s", luaPath)
			return
		}
		t.Fatalf("%s drifted from %s: run go test ./tools/wireshark -update and review.\ngot:\n%s\nwant:\n%s", luaPath, wirePath, got, want)
	}
	// Every header field is declared as a ProtoField exo.<name> and
	// decoded from FIELD.
	for _, h := range w.Header {
		if !bytes.Contains(lua, []byte(fmt.Sprintf("%s = ProtoField.", h.Name))) || !bytes.Contains(lua, []byte(fmt.Sprintf(`"exo.%s"`, h.Name))) {
			t.Errorf("%s: header field %s has no ProtoField \"exo.%s\"", luaPath, h.Name, h.Name)
		}
		if !regexp.MustCompile(`"` + h.Name + `"[,\s}]`).Match(lua[j:]) {
			t.Errorf("%s: header field %s is not in the dissector's list of fields", luaPath, h.Name)
		}
	}
}

// TestWireMatchesGo: hw/wire.json (hence exo.lua) agrees with package
// exo's generated Go constants, the ones the codec and exo frame dump use.
func TestWireMatchesGo(t *testing.T) {
	w := readWire(t)
	goFields := map[string][2]int{
		"version": {exo.OffVersion, exo.SizeVersion}, "type": {exo.OffType, exo.SizeType},
		"group": {exo.OffGroup, exo.SizeGroup}, "sender": {exo.OffSender, exo.SizeSender},
		"hist_len": {exo.OffHistLen, exo.SizeHistLen}, "payload_len": {exo.OffPayloadLen, exo.SizePayloadLen},
		"epoch": {exo.OffEpoch, exo.SizeEpoch}, "count": {exo.OffCount, exo.SizeCount},
		"flags": {exo.OffFlags, exo.SizeFlags}, "seq": {exo.OffSeq, exo.SizeSeq}, "tag": {exo.OffTag, exo.SizeTag},
	}
	if len(w.Header) != len(goFields) {
		t.Errorf("hw/wire.json has %d header fields, this test knows %d: update goFields (and exo.lua)", len(w.Header), len(goFields))
	}
	for _, h := range w.Header {
		g, ok := goFields[h.Name]
		if !ok {
			t.Errorf("header field %s: unknown to this test", h.Name)
			continue
		}
		if g != [2]int{h.Offset, h.Size} {
			t.Errorf("field %s: wire.json offset %d size %d, Go %v", h.Name, h.Offset, h.Size, g)
		}
	}
	goConsts := map[string]int{
		"ether_type": exo.EtherType, "eth_header_len": exo.EthHeaderLen, "min_eth_frame": exo.MinEthFrame,
		"version": exo.Version, "type_data": exo.TypeData, "header_len": exo.HeaderLen, "max_history": exo.MaxHistory,
		"max_hosts": exo.MaxHosts, "history_none": exo.HistoryNone, "max_payload": exo.MaxPayload,
		"record_len_size": exo.RecordLenSize, "flag_readmit": exo.FlagReadmit, "flag_host_mask": exo.FlagHostMask,
		"flag_key_phase": exo.FlagKeyPhase,
	}
	for _, c := range w.Constants {
		var v int
		var s string
		if json.Unmarshal(c.Value, &s) == nil {
			if _, err := fmt.Sscan(s, &v); err != nil {
				t.Errorf("constant %s = %q: %v", c.Name, s, err)
			}
		} else if err := json.Unmarshal(c.Value, &v); err != nil {
			t.Errorf("constant %s: %v", c.Name, err)
		}
		g, ok := goConsts[c.Name]
		if !ok {
			t.Errorf("constant %s: unknown to this test (add it here, and to exo.lua if the dissector needs it)", c.Name)
		} else if g != v {
			t.Errorf("constant %s: wire.json %d, Go %d", c.Name, v, g)
		}
	}
	for _, e := range w.Enums {
		for _, v := range e.Values {
			if e.Name == "reason" && exo.Reason(v.Value).String() != v.Name {
				t.Errorf("reason %d: wire.json %s, Go %s", v.Value, v.Name, exo.Reason(v.Value))
			}
		}
	}
}

// TestDissectorLoads: tshark loads exo.lua without a Lua error and
// decodes the golden capture (testdata/pcap/golden.pcap) with it. The
// field-by-field comparison with exo frame dump's decoder is TestGolden
// in broadcast/frames.
func TestDissectorLoads(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed: skipped (apt-get install -y tshark; tools/setup.sh installs it)")
	}
	cmd := exec.Command(tshark, "-n", "-X", "lua_script:"+luaPath, "-r", "../../testdata/pcap/golden.pcap", "-V")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v: %s", err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(strings.ToLower(s), "lua") {
		t.Fatalf("tshark: %s", s)
	}
	for _, want := range []string{"Exo atomic broadcast frame", "Sequence number: 3", "History id: 255 (X)", "Record data: 68656c6c6f",
		"Codec verdict: BAD_HISTORY_ID (17)", "Frame shorter than its history", "Readmit: True"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("tshark -V output lacks %q", want)
		}
	}
}

package main

import "strings"

// Naming rule, the same for every twin: a name is a list of words written
// snake_case in the JSON. C and Verilog write it UPPER_SNAKE with the
// prefix (EXO_OFF_HIST_LEN); Go writes it CamelCase (OffHistLen), with the
// Go initialisms below in upper case (BadHistoryID). Either way the names
// are identical modulo case and underscores, so a grep for one finds the
// others.

// initialisms are words Go spells in upper case (as in golint's list).
var initialisms = map[string]bool{
	"id": true, "mac": true, "crc": true, "fcs": true, "ip": true,
	"mtu": true, "tcp": true, "udp": true, "xdp": true, "fpga": true,
}

// goName turns "hist_len" (or "HIST_LEN") into "HistLen", "history_id"
// into "HistoryID".
func goName(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		for _, w := range strings.Split(strings.ToLower(p), "_") {
			if w == "" {
				continue
			}
			if initialisms[w] {
				b.WriteString(strings.ToUpper(w))
				continue
			}
			b.WriteString(strings.ToUpper(w[:1]))
			b.WriteString(w[1:])
		}
	}
	return b.String()
}

// cName turns ("exo", "off", "hist_len") into "EXO_OFF_HIST_LEN".
func cName(parts ...string) string {
	up := make([]string, 0, len(parts))
	for _, p := range parts {
		if p != "" {
			up = append(up, strings.ToUpper(p))
		}
	}
	return strings.Join(up, "_")
}

// cLower turns ("exo", "reason") into "exo_reason".
func cLower(parts ...string) string {
	return strings.ToLower(cName(parts...))
}

package lab

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
)

// hostJSON is a Host as text: MACs and addresses as people write them.
type hostJSON struct {
	ID      int        `json:"id"`
	Name    string     `json:"name"`
	Netns   string     `json:"netns"`
	Ifname  string     `json:"ifname"`
	MAC     string     `json:"mac"`
	OOBAddr netip.Addr `json:"oob_addr"`
	Port    string     `json:"port"`
}

// MarshalJSON writes the MAC as 02:e0:00:00:00:01.
func (h Host) MarshalJSON() ([]byte, error) {
	return json.Marshal(hostJSON{h.ID, h.Name, h.Netns, h.Ifname, h.MAC.String(), h.OOBAddr, h.Port})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (h *Host) UnmarshalJSON(b []byte) error {
	var j hostJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	mac, err := net.ParseMAC(j.MAC)
	if err != nil {
		return err
	}
	*h = Host{j.ID, j.Name, j.Netns, j.Ifname, mac, j.OOBAddr, j.Port}
	return nil
}

func statePath(prefix string) string { return filepath.Join(StateDir, prefix+".json") }

// save writes the rack to its state file (atomically: a rename).
func (r *Rack) save() error {
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath(r.Name) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, statePath(r.Name))
}

func readState(prefix string) (*Rack, error) {
	b, err := os.ReadFile(statePath(prefix))
	if err != nil {
		return nil, err
	}
	var r Rack
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(prefix), err)
	}
	return &r, nil
}

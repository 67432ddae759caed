package daemon

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/exo-rack/exo/broadcast"
	"github.com/exo-rack/exo/exo"
)

// TestMetricsHandlerPprof: the metrics listener serves /metrics always
// and Go's profiles (the execution trace among them) only with
// enable_pprof.
func TestMetricsHandlerPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		dir := t.TempDir()
		roster := []Member{{ID: 0, MAC: "02:e0:00:00:00:01", OOB: "127.0.0.1:17790"}}
		cfg := &Config{Group: 7, ID: 0, Interface: "mem0", Roster: roster, APISocket: filepath.Join(dir, "h.sock"),
			KeyFile: writeKey(t, dir, testGroupKey), MetricsAddr: "127.0.0.1:0", EnablePprof: on}
		cfg.defaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		mac, _ := net.ParseMAC(roster[0].MAC)
		oobs := []*memOOB{{id: 0, in: make(chan exo.Message, 1)}}
		oobs[0].all = oobs
		d, err := New(cfg, attach(t, broadcast.NewMemNetwork(), mac), oobs[0], testLogger(0))
		if err != nil {
			t.Fatal(err)
		}
		h := d.metricsHandler()
		get := func(path string) (int, []byte) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			body, _ := io.ReadAll(rec.Result().Body)
			return rec.Code, body
		}
		if code, body := get("/metrics"); code != http.StatusOK || !bytes.Contains(body, []byte("exo_")) {
			t.Errorf("enable_pprof %v: /metrics answered %d, %d bytes", on, code, len(body))
		}
		code, body := get("/debug/pprof/trace?seconds=0.05")
		switch {
		case on && (code != http.StatusOK || !bytes.HasPrefix(body, []byte("go 1."))):
			t.Errorf("enable_pprof on: the trace answered %d, %q...", code, body[:min(len(body), 40)])
		case !on && code != http.StatusNotFound:
			t.Errorf("enable_pprof off: the trace answered %d, want 404", code)
		}
		if code, _ := get("/debug/pprof/goroutine?debug=1"); (code == http.StatusOK) != on {
			t.Errorf("enable_pprof %v: the goroutine profile answered %d", on, code)
		}
		d.Close()
	}
}

package daemon

import "sync"

// MemoryStatus is the status's memory: how much of the daemon process's
// anonymous memory (its Go heap, mostly) the kernel backs with huge pages
// (huge_pages; package daemon/hugepage says why a killed daemon's peers
// learn of its death sooner when it does).
type MemoryStatus struct {
	// HugePages is the config's huge_pages.
	HugePages string `json:"huge_pages"`
	// AnonBytes, HugeBytes: the anonymous memory resident, and the part
	// of it in huge pages, at the last pass.
	AnonBytes int64 `json:"anon_bytes"`
	HugeBytes int64 `json:"huge_bytes"`
	// Error is the last pass's error, if any (the kernel refused: the
	// pages stay small, nothing else changes).
	Error string `json:"error,omitempty"`
}

// memoryNote is what the process's huge-page passes last reported.
type memoryNote struct {
	mu sync.Mutex
	st *MemoryStatus
}

// NoteMemory records a huge-page pass of the process that runs the daemon
// (package daemon/host runs them): the status's memory and the metrics
// exo_memory_anon_bytes and exo_memory_huge_bytes.
func (d *Daemon) NoteMemory(anon, huge int64, err error) {
	st := &MemoryStatus{HugePages: d.cfg.HugePages, AnonBytes: anon, HugeBytes: huge}
	if err != nil {
		st.Error = err.Error()
	}
	d.memory.mu.Lock()
	d.memory.st = st
	d.memory.mu.Unlock()
	d.metrics.memAnon.Set(float64(anon))
	d.metrics.memHuge.Set(float64(huge))
}

// memoryStatus is the status's memory: nil before the first pass (and
// with huge_pages off, as no pass runs).
func (d *Daemon) memoryStatus() *MemoryStatus {
	d.memory.mu.Lock()
	defer d.memory.mu.Unlock()
	if d.memory.st == nil {
		return nil
	}
	st := *d.memory.st
	return &st
}

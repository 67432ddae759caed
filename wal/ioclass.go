package wal

import "fmt"

// IOClass is the I/O scheduling class a Reader's reads run in.
//
// A member serves a state transfer and a subscriber's history from its
// retained segments: on a rack whose log outgrew the page cache those
// reads go to the disk that the member fsyncs its tail to, and every frame
// it sends waits for that fsync (fsync: batch). In the idle class the
// disk's scheduler serves the reads only when no other I/O waits (Linux's
// IOPRIO_CLASS_IDLE: honoured by the mq-deadline and bfq schedulers, not by
// none), so the transfer, not the rack, waits for the disk.
type IOClass int

const (
	// IONormal reads in the process's own class.
	IONormal IOClass = iota
	// IOIdle reads in the idle class.
	IOIdle
)

// ParseIOClass parses the config's spelling of an IOClass: "idle"
// (the default, also "") or "normal".
func ParseIOClass(s string) (IOClass, error) {
	switch s {
	case "idle", "":
		return IOIdle, nil
	case "normal":
		return IONormal, nil
	}
	return 0, fmt.Errorf("I/O class %q: want idle or normal", s)
}

func (c IOClass) String() string {
	if c == IOIdle {
		return "idle"
	}
	return "normal"
}

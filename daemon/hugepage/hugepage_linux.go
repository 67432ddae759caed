package hugepage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hugeSize is the size of a transparent huge page on x86-64 and arm64
// with 4 KiB base pages.
const hugeSize = 2 << 20

// mapping is one entry of /proc/self/smaps.
type mapping struct {
	start, end uintptr
	anon       bool // private, writable, no file
	rss, huge  int64
	flags      []string // VmFlags
}

func (m mapping) has(flag string) bool { return slices.Contains(m.flags, flag) }

// Advise asks for huge pages on the process's anonymous private writable
// mappings of at least 2 MiB that are not advised either way yet ("hg",
// "nh" in smaps' VmFlags: the runtime's own MADV_NOHUGEPAGE is left as
// it is), and collapses the small pages they hold (MADV_COLLAPSE, Linux
// 6.1).
func Advise() (Stats, error) {
	var st Stats
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return st, fmt.Errorf("hugepage: %w", err)
	}
	ms, err := parseSmaps(b)
	if err != nil {
		return st, fmt.Errorf("hugepage: %w", err)
	}
	var errs []error
	for _, m := range ms {
		if !m.anon {
			continue
		}
		st.Anon += m.rss
		st.Huge += m.huge
		if m.end-m.start < hugeSize || m.has("hg") || m.has("nh") {
			continue
		}
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_HUGEPAGE); e != 0 {
			errs = append(errs, fmt.Errorf("madvise(MADV_HUGEPAGE) %#x-%#x: %w", m.start, m.end, e))
			continue
		}
		st.Advised++
		st.AdvisedBytes += int64(m.end - m.start)
		if m.rss-m.huge < hugeSize {
			continue
		}
		// Collapse it 2 MiB at a time: a call over the whole range stops
		// at the first part it cannot collapse (one the heap has not
		// touched yet, say), and leaves the rest small.
		n := 0
		for a := (m.start + hugeSize - 1) &^ (hugeSize - 1); a+hugeSize <= m.end; a += hugeSize {
			if _, _, e := unix.Syscall(unix.SYS_MADVISE, a, hugeSize, unix.MADV_COLLAPSE); e == 0 {
				n++
			}
		}
		if n > 0 {
			st.Collapsed++
			st.CollapsedBytes += int64(n) * hugeSize
		}
	}
	return st, errors.Join(errs...)
}

// parseSmaps reads /proc/<pid>/smaps: a header line per mapping
// ("start-end perms offset dev inode [path]") followed by "Key: value"
// lines.
func parseSmaps(b []byte) ([]mapping, error) {
	var ms []mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.Contains(k, " ") && !strings.Contains(k, "-") {
			if len(ms) == 0 {
				return nil, fmt.Errorf("smaps: %q before a mapping", line)
			}
			m := &ms[len(ms)-1]
			switch k {
			case "Rss":
				m.rss = kb(v)
			case "AnonHugePages":
				m.huge = kb(v)
			case "VmFlags":
				m.flags = strings.Fields(v)
			}
			continue
		}
		if len(f) < 5 {
			return nil, fmt.Errorf("smaps: %q is no mapping", line)
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("smaps: %q is no mapping", line)
		}
		ms = append(ms, mapping{start: uintptr(start), end: uintptr(end), anon: f[1] == "rw-p" && f[4] == "0" && len(f) == 5})
	}
	return ms, sc.Err()
}

// kb parses smaps' " 1234 kB" into bytes (0 when it is not that).
func kb(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}

package hugepage

import (
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestParseSmaps: mappings, their sizes, huge pages and flags, from the
// kernel's format; a file mapping and a read-only one are not anonymous.
func TestParseSmaps(t *testing.T) {
	const smaps = `c000000000-c004000000 rw-p 00000000 00:00 0 
Size:              65536 kB
Rss:               40960 kB
AnonHugePages:     32768 kB
THPeligible:    1
VmFlags: rd wr mr mw me ac sd hg 
7f0000000000-7f0000200000 r--p 00000000 fd:01 1234                       /usr/lib/libc.so.6
Rss:                 100 kB
VmFlags: rd mr mw me sd 
7f1000000000-7f1000400000 rw-p 00000000 00:00 0 
Rss:                 8 kB
AnonHugePages:         0 kB
VmFlags: rd wr mr mw me ac sd nh 
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  12 kB
VmFlags: rd wr mr mw me gd ac 
`
	ms, err := parseSmaps([]byte(smaps))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("%d mappings, want 4: %+v", len(ms), ms)
	}
	heap := ms[0]
	if heap.start != 0xc000000000 || heap.end != 0xc004000000 || !heap.anon || heap.rss != 40960<<10 || heap.huge != 32768<<10 || !heap.has("hg") || heap.has("nh") {
		t.Errorf("heap: %+v", heap)
	}
	if ms[1].anon || ms[3].anon {
		t.Errorf("a file mapping or the stack taken for anonymous memory: %+v %+v", ms[1], ms[3])
	}
	if !ms[2].anon || !ms[2].has("nh") {
		t.Errorf("the runtime's no-huge-page mapping: %+v", ms[2])
	}
	if _, err := parseSmaps([]byte("Rss: 4 kB\n")); err == nil {
		t.Error("a field before any mapping parsed")
	}
}

// TestAdviseCollapses: a mapping of small pages, written whole, is in
// huge pages after one pass (MADV_HUGEPAGE, then MADV_COLLAPSE), and a
// second pass leaves it alone.
func TestAdviseCollapses(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("no transparent huge pages on this kernel (%q, %v)", mode, err)
	}
	const size = 16 << 20
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if err := unix.Madvise(m, unix.MADV_NOHUGEPAGE); err != nil { // small pages while it is written
		t.Fatal(err)
	}
	for i := 0; i < size; i += 4096 {
		m[i] = 1
	}
	if err := unix.Madvise(m, unix.MADV_NORMAL); err != nil {
		t.Fatal(err)
	}
	// MADV_NORMAL leaves the nh flag (as the runtime's own
	// MADV_NOHUGEPAGE would be): a pass must leave the mapping small.
	mine := func() mapping {
		b, err := os.ReadFile("/proc/self/smaps")
		if err != nil {
			t.Fatal(err)
		}
		ms, err := parseSmaps(b)
		if err != nil {
			t.Fatal(err)
		}
		lo := uintptr(unsafe.Pointer(&m[0]))
		for _, x := range ms {
			if x.start <= lo && lo < x.end {
				return x
			}
		}
		t.Fatal("the test's mapping is not in smaps")
		return mapping{}
	}
	if st, _ := Advise(); st.Anon == 0 {
		t.Fatalf("a pass saw no anonymous memory: %+v", st)
	}
	if x := mine(); x.has("hg") || x.huge != 0 {
		t.Fatalf("a mapping the runtime or its owner marked nh was advised: %+v", x)
	}
	m2, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m2)
	for i := 0; i < size; i += 4096 {
		m2[i] = 1
	}
	m = m2 // a mapping without either flag, written in small pages
	before := mine()
	if before.has("hg") {
		t.Skipf("the new mapping is advised already: %+v", before)
	}
	st, err := Advise()
	if err != nil {
		t.Logf("pass: %v (some mapping of the test process refused)", err)
	}
	after := mine()
	if !after.has("hg") {
		t.Fatalf("the mapping was not advised: %+v (pass %+v)", after, st)
	}
	// Of the 16 MiB, the 2 MiB-aligned part (7 or 8 huge pages) is huge.
	if after.huge < size-hugeSize {
		t.Fatalf("%d bytes of %d in huge pages after the pass (before %d): %+v", after.huge, size, before.huge, st)
	}
	if st.Collapsed == 0 || st.CollapsedBytes < size-hugeSize {
		t.Errorf("the pass reports %+v", st)
	}
	st2, _ := Advise()
	if x := mine(); x.huge != after.huge {
		t.Errorf("a second pass changed the mapping: %+v -> %+v (%+v)", after, x, st2)
	}
}

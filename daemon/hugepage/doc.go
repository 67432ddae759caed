// Package hugepage backs a Go process's heap with transparent huge pages
// where the kernel offers them only on request (Linux's
// /sys/kernel/mm/transparent_hugepage/enabled set to "madvise", the
// common default), for one reason: how fast the rack learns that a daemon
// died.
//
// A process killed with SIGKILL closes its sockets only after the kernel
// has freed its memory (do_exit releases the address space before the
// file table), and freeing it takes time in proportion to its pages. On
// the lab machine a Go process holding 300 MB of 4 KiB pages closed its
// TCP connection 33-54 ms after SIGKILL, one holding 1 GB 106-199 ms;
// the same memory in 2 MiB pages 2.1-2.8 ms and 4.1-8.5 ms. A daemon's
// peers learn of its death from that close (its OOB connections end, a
// dial to it is refused: oob's gone notice), so its memory's page size
// is on the path from a kill to the token's takeover.
//
// The Go runtime maps its heap in pieces as it grows and asks for no page
// size. Advise walks the process's anonymous private writable mappings of
// at least 2 MiB (/proc/self/smaps) and asks for huge pages on those the
// runtime did not mark otherwise (madvise MADV_HUGEPAGE): the kernel then
// backs new faults in them with 2 MiB pages, and Advise turns
// the 4 KiB pages already there into huge ones at once (MADV_COLLAPSE,
// Linux 6.1) rather than over minutes (khugepaged). Run does it again
// every interval, for the mappings the heap grew into since.
//
// Where the kernel says no (no THP, "never", an older kernel), Advise
// reports the error and nothing changes: the pages stay small, the
// daemon's peers learn of its death later, nothing else differs.
//
// What it costs: on the lab rack (five daemons on two shared vCPUs) huge
// pages cut a kill's wait for the process to go from 30-32 ms to 20-22
// ms, and doubled or tripled the token takeovers, with kills and without
// (118 and 110 a minute against 41-56 without faults), the pass itself
// (reading smaps every second) not among the causes: the huge pages' own
// faults, splits and collapses are. So the daemon's huge_pages is off by default
// (docs/operator.md; docs/recovery.md, session o).
package hugepage

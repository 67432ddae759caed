package main

import (
	"cmp"
	"fmt"
	"runtime/debug"
	"strings"
)

// version is set at link time for releases (-ldflags "-X main.version=1.2.3");
// otherwise exo --version says the module's version, "devel" in a checkout.
var version = ""

// commit is the commit built from, set at link time by builds that know it
// (tools/deb: -X main.commit=...) for when Go records none (a git worktree,
// whose .git is a file, gets no vcs stamp); Go's record wins when present.
var commit = ""

// versionString is what exo --version prints: the version, the commit the
// binary was built from (and whether the tree had changes), and Go's
// version, from the build information Go records (the commit needs a
// build with -buildvcs=auto or true in a git checkout; tools/demo.sh and
// tools/test.sh build so).
func versionString() string {
	v, commit, at, dirty, gov := version, cmp.Or(commit, "unknown"), "", false, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		gov = bi.GoVersion
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" && !strings.HasPrefix(bi.Main.Version, "v0.0.0-") {
			// A tagged module version (a pseudo-version says no more than
			// the commit below).
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "devel"
	}
	out := fmt.Sprintf("%s (commit %s", v, commit)
	if at != "" {
		out += ", " + at
	}
	if dirty {
		out += ", with uncommitted changes"
	}
	return out + ", " + gov + ")"
}

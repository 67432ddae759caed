// Command deb builds the Debian package of exo, exo_<version>_amd64.deb,
// with nFPM (github.com/goreleaser/nfpm/v2):
//
//	go run ./tools/deb -out dist/
//
// It builds the exo binary, its manual pages and shell completions and
// the C client library (client/c, with make and cc) into a temporary
// directory, then packs them with the systemd unit, sysusers.d and
// tmpfiles.d entries, an example config taken from docs/operator.md and
// the docs. The version is `git describe --tags --always` made
// Debian-valid (v1.2.3-4-gabc1234 -> 1.2.3+4.gabc1234), or 0.0.0+<commit>
// when there is no tag; the binary is built with it (exo --version) and
// with the commit (-buildvcs=auto). Run it from the repository's root.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
)

const (
	libdir      = "/usr/lib/x86_64-linux-gnu"
	maintainer  = "exo maintainers <exo@localhost>"
	description = "rack atomic broadcast appliance\n" +
		"The hosts of one rack agree on one total order of messages by taking\n" +
		"turns broadcasting raw Ethernet frames. This package holds the exo\n" +
		"command (daemon, client, lab, tools), its systemd unit, manual pages,\n" +
		"shell completions, and the C client library (libexo, exo.h, exo.pc)."
)

func main() {
	out := flag.String("out", "dist", "directory the .deb is written to")
	version := flag.String("version", "", "package version (default: from git describe --tags --always)")
	keep := flag.Bool("keep", false, "keep the temporary build directory (its path is printed)")
	flag.Parse()
	if err := run(*out, *version, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "deb:", err)
		os.Exit(1)
	}
}

func run(out, version string, keep bool) error {
	if _, err := os.Stat("cmd/exo"); err != nil {
		return errors.New("run from the repository's root (cmd/exo not found)")
	}
	if version == "" {
		desc, err := output("git", "describe", "--tags", "--always")
		if err != nil {
			return err
		}
		version, err = debVersion(desc)
		if err != nil {
			return err
		}
	} else if !validDebVersion(version) {
		return fmt.Errorf("version %q is not a valid Debian version", version)
	}
	mtime := time.Now().UTC()
	if ct, err := output("git", "log", "-1", "--format=%ct"); err == nil {
		if s, err := strconv.ParseInt(ct, 10, 64); err == nil {
			mtime = time.Unix(s, 0).UTC()
		}
	}

	tmp, err := os.MkdirTemp("", "exo-deb-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("build directory:", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}

	// The binary: static, with the package version and the commit (also
	// by -X: Go records none in a git worktree).
	head, err := output("git", "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	bin := filepath.Join(tmp, "exo")
	build := exec.Command("go", "build", "-buildvcs=auto", "-trimpath",
		"-ldflags", "-s -w -X main.version="+version+" -X main.commit="+head, "-o", bin, "./cmd/exo")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if err := runCmd(build); err != nil {
		return err
	}

	// Manual pages, gzipped (-n: no name, no time).
	manDir := filepath.Join(tmp, "man")
	if err := runCmd(exec.Command(bin, "man", "--out", manDir)); err != nil {
		return err
	}
	pages, err := filepath.Glob(filepath.Join(manDir, "*.1"))
	if err != nil || len(pages) == 0 {
		return fmt.Errorf("exo man wrote no pages in %s", manDir)
	}
	var contents files.Contents
	for _, p := range pages {
		gz, err := gzipFile(p)
		if err != nil {
			return err
		}
		contents = append(contents, file(gz, "/usr/share/man/man1/"+filepath.Base(p)+".gz", 0o644))
	}

	// Shell completions, in their standard directories.
	for _, c := range []struct{ shell, dst string }{
		{"bash", "/usr/share/bash-completion/completions/exo"},
		{"zsh", "/usr/share/zsh/vendor-completions/_exo"},
		{"fish", "/usr/share/fish/vendor_completions.d/exo.fish"},
	} {
		text, err := output(bin, "completion", c.shell)
		if err != nil {
			return err
		}
		p := filepath.Join(tmp, "completion."+c.shell)
		if err := os.WriteFile(p, []byte(text+"\n"), 0o644); err != nil {
			return err
		}
		contents = append(contents, file(p, c.dst, 0o644))
	}

	// The C client library: built in a copy of client/c, so the tree stays clean.
	cdir := filepath.Join(tmp, "c")
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"Makefile", "exo.c", "exo.h", "exo_internal.h"} {
		b, err := os.ReadFile(filepath.Join("client/c", f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cdir, f), b, 0o644); err != nil {
			return err
		}
	}
	if err := runCmd(exec.Command("make", "-s", "-C", cdir, "libexo.a", "libexo.so")); err != nil {
		return err
	}
	libVersion, err := makeVar(filepath.Join(cdir, "Makefile"), "VERSION")
	if err != nil {
		return err
	}
	pc := filepath.Join(tmp, "exo.pc")
	pcText := fmt.Sprintf("prefix=/usr\nlibdir=%s\nincludedir=${prefix}/include\n\n"+
		"Name: exo\nDescription: C client of the exo daemon local API\nVersion: %s\n"+
		"Libs: -L${libdir} -lexo\nCflags: -I${includedir}\n", libdir, libVersion)
	if err := os.WriteFile(pc, []byte(pcText), 0o644); err != nil {
		return err
	}
	contents = append(contents,
		file(filepath.Join(cdir, "libexo.so"), libdir+"/libexo.so.1", 0o644),
		&files.Content{Source: "libexo.so.1", Destination: libdir + "/libexo.so", Type: files.TypeSymlink},
		file(filepath.Join(cdir, "libexo.a"), libdir+"/libexo.a", 0o644),
		file(pc, libdir+"/pkgconfig/exo.pc", 0o644),
		file(filepath.Join(cdir, "exo.h"), "/usr/include/exo.h", 0o644),
	)

	// The systemd unit, with the packaged binary's path.
	unitText, err := os.ReadFile("tools/systemd/exo.service")
	if err != nil {
		return err
	}
	unit := strings.ReplaceAll(string(unitText), "/usr/local/bin/exo", "/usr/bin/exo")
	unit = strings.ReplaceAll(unit, "file:///usr/share/doc/exo/operator.md", "file:///usr/share/doc/exo/docs/operator.md man:exo-daemon(1)")
	unit = strings.Replace(unit, "# Example systemd unit for the exo daemon. Copy to /etc/systemd/system/,\n"+
		"# put the config in /etc/exo/exo.json, then: systemctl enable --now exo\n",
		"# The exo daemon (Debian package). Put the config in /etc/exo/exo.json\n"+
			"# (see /etc/exo/exo.json.example), then: systemctl enable --now exo\n", 1)
	if !strings.Contains(unit, "ExecStart=/usr/bin/exo ") {
		return errors.New("tools/systemd/exo.service: no ExecStart=/usr/local/bin/exo line to rewrite")
	}
	unitPath := filepath.Join(tmp, "exo.service")
	if err := os.WriteFile(unitPath, []byte(unit), 0o644); err != nil {
		return err
	}

	// The example config: the operator guide's, checked to be JSON. An
	// example is not the config the daemon reads (/etc/exo/exo.json, which
	// the package does not ship), so it is a plain file, not a conffile:
	// an upgrade replaces it.
	example, err := exampleConfig("docs/operator.md")
	if err != nil {
		return err
	}
	examplePath := filepath.Join(tmp, "exo.json.example")
	if err := os.WriteFile(examplePath, example, 0o644); err != nil {
		return err
	}

	sysusers := filepath.Join(tmp, "sysusers.conf")
	if err := os.WriteFile(sysusers, []byte(
		"# The exo daemon's system user (owner of /run/exo and /var/lib/exo).\n"+
			"u exo - \"exo rack broadcast daemon\" /var/lib/exo -\n"), 0o644); err != nil {
		return err
	}
	tmpfiles := filepath.Join(tmp, "tmpfiles.conf")
	if err := os.WriteFile(tmpfiles, []byte(
		"# The exo daemon's API socket directory and durable log (data_dir).\n"+
			"d /run/exo 0750 exo exo -\n"+
			"d /var/lib/exo 0750 exo exo -\n"), 0o644); err != nil {
		return err
	}

	contents = append(contents,
		file(bin, "/usr/bin/exo", 0o755),
		file(unitPath, "/lib/systemd/system/exo.service", 0o644),
		file(examplePath, "/etc/exo/exo.json.example", 0o644),
		file(sysusers, "/usr/lib/sysusers.d/exo.conf", 0o644),
		file(tmpfiles, "/usr/lib/tmpfiles.d/exo.conf", 0o644),
		file("README.md", "/usr/share/doc/exo/README.md", 0o644),
	)
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		return err
	}
	for _, d := range docs {
		contents = append(contents, file(d, "/usr/share/doc/exo/docs/"+filepath.Base(d), 0o644))
	}

	scripts := map[string]string{
		"postinst": postinst,
		"postrm":   postrm,
	}
	for name, text := range scripts {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(text), 0o755); err != nil {
			return err
		}
	}

	info := nfpm.WithDefaults(&nfpm.Info{
		Name:          "exo",
		Arch:          "amd64",
		Platform:      "linux",
		Version:       version,
		VersionSchema: "none",
		Section:       "net",
		Priority:      "optional",
		Maintainer:    maintainer,
		Description:   description,
		Homepage:      "https://github.com/exo-rack/exo",
		MTime:         mtime,
		Overridables: nfpm.Overridables{
			Depends:  []string{"libc6"},
			Contents: contents,
			Scripts: nfpm.Scripts{
				PostInstall: filepath.Join(tmp, "postinst"),
				PostRemove:  filepath.Join(tmp, "postrm"),
			},
			Deb: nfpm.Deb{
				Triggers: nfpm.DebTriggers{ActivateNoAwait: []string{"ldconfig"}},
			},
		},
	})
	if err := nfpm.Validate(info); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	name := filepath.Join(out, fmt.Sprintf("exo_%s_amd64.deb", version))
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := deb.Default.Package(info, f); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	st, err := os.Stat(name)
	if err != nil {
		return err
	}
	fmt.Printf("%s (%d bytes, version %s)\n", name, st.Size(), version)
	return nil
}

// The maintainer scripts: what debhelper's dh_installsysusers,
// dh_installtmpfiles and dh_installsystemd would do, without enabling or
// starting the daemon (it needs /etc/exo/exo.json first). The system user
// stays on removal, as Debian's packages leave theirs.
const postinst = `#!/bin/sh
set -e
if [ "$1" = configure ]; then
	if command -v systemd-sysusers >/dev/null 2>&1; then
		systemd-sysusers /usr/lib/sysusers.d/exo.conf || true
	fi
	if command -v systemd-tmpfiles >/dev/null 2>&1; then
		systemd-tmpfiles --create /usr/lib/tmpfiles.d/exo.conf || true
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
	fi
fi
exit 0
`

const postrm = `#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
exit 0
`

var debVersionRE = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

func validDebVersion(v string) bool { return debVersionRE.MatchString(v) }

var (
	commitRE   = regexp.MustCompile(`^[0-9a-f]{4,40}$`)
	describeRE = regexp.MustCompile(`^(.*)-([0-9]+)-(g[0-9a-f]+)$`)
)

// debVersion turns git describe --tags --always into a Debian version
// without a revision: a tag v1.2.3 -> 1.2.3; 4 commits past it ->
// 1.2.3+4.gabc1234 (sorts after 1.2.3); no tag (a bare commit) ->
// 0.0.0+<commit>. Hyphens in a tag become "~" (v1.2.3-rc1 -> 1.2.3~rc1,
// before 1.2.3).
func debVersion(desc string) (string, error) {
	desc = strings.TrimSpace(desc)
	if commitRE.MatchString(desc) {
		return "0.0.0+" + desc, nil
	}
	m := describeRE.FindStringSubmatch(desc)
	tag, extra := desc, ""
	if m != nil {
		tag, extra = m[1], "+"+m[2]+"."+m[3]
	}
	tag = strings.ReplaceAll(strings.TrimPrefix(tag, "v"), "-", "~")
	v := tag + extra
	if !validDebVersion(v) {
		return "", fmt.Errorf("git describe %q: %q is not a valid Debian version (tags should look like v1.2.3)", desc, v)
	}
	return v, nil
}

// exampleConfig is the first ```json block of the operator guide,
// indented again.
func exampleConfig(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, rest, ok := strings.Cut(string(b), "```json\n")
	if !ok {
		return nil, fmt.Errorf("%s: no ```json block", path)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		return nil, fmt.Errorf("%s: unterminated ```json block", path)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(block), &v); err != nil {
		return nil, fmt.Errorf("%s: the example config is not JSON: %w", path, err)
	}
	for _, k := range []string{"interface", "roster", "api_socket", "data_dir"} {
		if _, ok := v[k]; !ok {
			return nil, fmt.Errorf("%s: the example config has no %q", path, k)
		}
	}
	return []byte(block), nil
}

// makeVar reads "NAME = value" from a Makefile.
func makeVar(path, name string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s: no %s", path, name)
}

func file(src, dst string, mode os.FileMode) *files.Content {
	return &files.Content{Source: src, Destination: dst, Type: files.TypeFile,
		FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode}}
}

func gzipFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write(b); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	out := path + ".gz"
	return out, os.WriteFile(out, buf.Bytes(), 0o644)
}

func runCmd(c *exec.Cmd) error {
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(c.Args, " "), err)
	}
	return nil
}

func output(name string, args ...string) (string, error) {
	c := exec.Command(name, args...)
	c.Stderr = os.Stderr
	b, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}

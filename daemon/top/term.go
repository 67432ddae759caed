package top

import (
	"bufio"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// screen draws a frame over the previous one: home, each line cut to the
// terminal's width and cleared to its end, the rest of the screen cleared
// (no flicker of a full clear).
func screen(frame string, width int) string {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for line := range strings.Lines(frame) {
		line = strings.TrimSuffix(line, "\n")
		if width > 0 && len(line) > width {
			line = line[:width]
		}
		b.WriteString(line)
		b.WriteString("\x1b[K\r\n")
	}
	b.WriteString("\x1b[J")
	return b.String()
}

// width is the terminal's width in columns, 0 when w is no terminal.
func width(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// keys closes quit when the user presses q (or Ctrl-C, or Ctrl-D). On a
// terminal it turns off line buffering and echo (signals stay on: Ctrl-C
// is also SIGINT); it returns the function that restores the terminal.
// Other input is read by lines: a line "q" quits, the end of input does
// not.
func keys(in io.Reader, quit chan struct{}) (restore func()) {
	var once sync.Once
	stop := func() { once.Do(func() { close(quit) }) }
	restore = func() {}
	f, isFile := in.(*os.File)
	if isFile {
		fd := int(f.Fd())
		if old, err := unix.IoctlGetTermios(fd, unix.TCGETS); err == nil {
			raw := *old
			raw.Lflag &^= unix.ICANON | unix.ECHO
			raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
			if unix.IoctlSetTermios(fd, unix.TCSETS, &raw) == nil {
				restore = func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }
			}
			go func() {
				buf := make([]byte, 64)
				for {
					n, err := f.Read(buf)
					for _, c := range buf[:n] {
						if c == 'q' || c == 'Q' || c == 3 || c == 4 {
							stop()
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
			return restore
		}
	}
	if in == nil {
		return restore
	}
	go func() {
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l == "q" || l == "Q" {
				stop()
				return
			}
		}
	}()
	return restore
}

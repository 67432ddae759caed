package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestProbeBadInput: bad flag values give one clear line and exit code 2,
// before anything needs root.
func TestProbeBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"probe", "--hosts", "1"},
		{"probe", "--count", "0"},
		{"probe", "--prefix", "Bad-Prefix"},
		{"probe", "--out", "/nonexistent/dir"},
		{"probe-endpoint", "--mode", "carrier-pigeon"},
	} {
		root := newRootCmd()
		root.SetArgs(args)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%v: got %v, want an exit-2 error", args, err)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || msg == "" {
			t.Errorf("%v: want one line, got %q", args, msg)
		}
	}
}

package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestNamed drives a rack by prefix and host names, as exo lab does.
func TestNamed(t *testing.T) {
	needRack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("exon%d", os.Getpid()%100000)
	upOrSkip(t, ctx, Options{Prefix: prefix, Hosts: 3, Force: true})

	if _, err := Find(ctx, "nosuch"); !errors.Is(err, ErrNoRack) || !strings.Contains(err.Error(), "racks up: ") || !strings.Contains(err.Error(), prefix) {
		t.Errorf("Find of a rack not up: %v", err)
	}
	r, err := PartitionSpec(ctx, prefix, "A/B,C", false)
	if err != nil || !reflect.DeepEqual(r.Faults.Groups, [][]int{{0}, {1, 2}}) {
		t.Fatalf("PartitionSpec: %v, %v", r, err)
	}
	if _, err := PartitionSpec(ctx, prefix, "A/Q", false); err == nil || !strings.HasPrefix(err.Error(), `lab partition: partition "A/Q": host "Q"`) {
		t.Errorf("PartitionSpec of a host not there: %v", err)
	}
	p, err := ProbePair(ctx, prefix, "A", "b", 200*time.Millisecond)
	if err != nil || p[0].From.Name != "A" || p[0].To.Name != "B" || p[1].From.Name != "B" || p[0].Reached || p[1].Reached {
		t.Errorf("ProbePair across the partition: %+v, %v", p, err)
	}
	if r, err = Heal(ctx, prefix); err != nil || !r.Faults.Empty() {
		t.Fatalf("Heal: %v, %+v", err, r)
	}
	if r, err = Link(ctx, prefix, "C", false); err != nil || !reflect.DeepEqual(r.Faults.LinksDown, []int{2}) {
		t.Fatalf("Link: %v, %+v", err, r)
	}
	if r, err = Cut(ctx, prefix, "1", CutEgress); err != nil || r.Faults.HostCuts[1] != CutEgress {
		t.Fatalf("Cut: %v, %+v", err, r)
	}
	if r, err = Loss(ctx, prefix, "a", 0.25); err != nil || r.Faults.Loss[0] != 0.25 {
		t.Fatalf("Loss: %v, %+v", err, r)
	}
	if _, err := Loss(ctx, prefix, "Z", 0.1); err == nil || !strings.HasPrefix(err.Error(), `lab loss: host "Z"`) {
		t.Errorf("Loss on a host not there: %v", err)
	}
	st, err := ReadStatus(ctx, prefix)
	if err != nil || !reflect.DeepEqual(st.LinksUp, []bool{true, true, false}) || !strings.Contains(st.Ruleset, "numgen random") || st.RulesetErr != nil {
		t.Errorf("ReadStatus: %v, %+v", err, st)
	}
	if _, err = Heal(ctx, prefix); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	err = RunOn(ctx, prefix, "B", []string{"sh", "-c", "echo $0; exit 3", "hi"}, nil, &out, &out)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || out.String() != "hi\n" || !strings.HasPrefix(err.Error(), "lab exec on B: sh -c") {
		t.Errorf("RunOn: %v, output %q", err, out.String())
	}
	if err := RunOn(ctx, prefix, "B", []string{"true"}, nil, &out, &out); err != nil {
		t.Errorf("RunOn true: %v", err)
	}
}

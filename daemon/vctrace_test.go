package daemon

import (
	"testing"
	"time"

	"github.com/exo-rack/exo/exo"
)

func TestVCTrace(t *testing.T) {
	var tr vcTrace
	t0 := time.Unix(100, 0)
	tr.start(5, exo.CauseDivergence, t0)
	tr.start(7, exo.CauseRetry, t0.Add(time.Millisecond))
	if _, led := tr.install(6, t0.Add(2*time.Millisecond)); led {
		t.Fatal("epoch 6 was led by another host")
	}
	if len(tr.started) != 1 {
		t.Fatalf("after installing 6: %d proposals kept, want 1 (epoch 7)", len(tr.started))
	}
	s, led := tr.install(7, t0.Add(5*time.Millisecond))
	if !led || s.cause != exo.CauseRetry || !s.at.Equal(t0.Add(time.Millisecond)) || len(tr.started) != 0 {
		t.Fatalf("install of its own epoch 7: led %v start %+v, %d kept", led, s, len(tr.started))
	}
	if _, ok := tr.firstFrame([]exo.Entry{{Seq: 9, Epoch: 6}}); ok {
		t.Fatal("an entry of epoch 6 taken for the first frame of 7")
	}
	f, ok := tr.firstFrame([]exo.Entry{{Seq: 10, Epoch: 6}, {Seq: 11, Epoch: 7, Sender: 2}})
	if !ok || f.Seq != 11 {
		t.Fatalf("first frame of epoch 7: %v %v", f, ok)
	}
	if _, ok := tr.firstFrame([]exo.Entry{{Seq: 12, Epoch: 7}}); ok {
		t.Fatal("a second first frame of epoch 7")
	}
	for e := uint32(1); e < 200; e++ {
		tr.start(e, exo.CauseRetry, t0)
	}
	if len(tr.started) > 64 {
		t.Fatalf("%d proposals kept, want at most 64", len(tr.started))
	}
}

//go:build linux

package broadcast

import (
	"sync/atomic"
	"testing"
	"time"
	"runtime"
	"fmt"
)

func TestDebugOneWay(t *testing.T) {
	for _, mode := range []string{"gosched", "spin", "sleep", "nowindow"} {
	p := newVethPair(t, 1500)
	a := listenIn(t, p.A, Options{})
	r := listenIn(t, p.B, Options{ReadBuffer: 64 << 20})
	N := 100000
	if mode == "nowindow" { N = 30000 }
	frame := frameOfLen(t, 1, 1, 64)
	var received atomic.Int64
	hist := map[int]int{}
	done := make(chan struct{})
	go func() {
		ms := make([]Message, 64)
		for i := range ms { ms[i].Buf = make([]byte, 1500); ms[i].Src = make([]byte,0,6) }
		for received.Load() < int64(N) {
			r.SetReadDeadline(time.Now().Add(time.Second))
			k, err := r.ReadFrames(ms)
			if err != nil { t.Error(err); break }
			hist[k]++
			received.Add(int64(k))
		}
		close(done)
	}()
	waits := 0
	start := time.Now()
	for i := range N {
		if mode != "nowindow" {
		for int64(i)-received.Load() >= 256 { waits++; 
			switch mode { case "gosched": runtime.Gosched(); case "sleep": time.Sleep(20*time.Microsecond) }
		}
		}
		a.WriteFrame(frame)
	}
	sendT := time.Since(start)
	<-done
	el := time.Since(start)
	b1 := hist[1]; b64 := hist[64]
	t.Logf("%s: send %v, total %v, %.0f frames/s, waits %d, batches %d calls, 1:%d 64:%d, drops %d", mode, sendT, el, float64(N)/el.Seconds(), waits, func() int { s:=0; for _, v := range hist { s+=v }; return s}(), b1, b64, r.Stats().Dropped)
	_ = fmt.Sprint
	}
}

package daemon

import (
	"errors"
	"fmt"
	"testing"
)

// TestReplyQueue: replies come out in order, in batches of what waited;
// a queue holding max refuses the next put; close ends the writer once
// what waits is written; after a write fails the rest is dropped.
func TestReplyQueue(t *testing.T) {
	rq := newReplyQueue(3)
	for i := range 3 {
		if !rq.put([]byte{byte(i)}) {
			t.Fatalf("put %d refused with %d of 3 waiting", i, i)
		}
	}
	if rq.put([]byte{9}) {
		t.Fatal("a fourth put was taken by a queue of at most 3")
	}
	var got []byte
	var batches []int
	done := make(chan error)
	wrote := make(chan struct{}, 8)
	go func() {
		done <- rq.drain(func(bs [][]byte) error {
			batches = append(batches, len(bs))
			for _, b := range bs {
				got = append(got, b...)
			}
			wrote <- struct{}{}
			return nil
		})
	}()
	<-wrote // the three that waited are out: room again
	if !rq.put([]byte{3}) {
		t.Fatal("a put refused after the writer took what waited")
	}
	rq.close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("written %v, want [0 1 2 3] (batches %v)", got, batches)
	}
	if batches[0] != 3 {
		t.Fatalf("first batch of %d replies, want the 3 that waited (batches %v)", batches[0], batches)
	}

	rq = newReplyQueue(10)
	rq.put([]byte{1})
	broken := errors.New("broken pipe")
	calls := 0
	err := rq.drain(func([][]byte) error { calls++; return broken })
	if !errors.Is(err, broken) || calls != 1 {
		t.Fatalf("drain returned %v after %d writes, want the write's error after 1", err, calls)
	}
	if !rq.put([]byte{2}) || len(rq.q) != 0 {
		t.Fatalf("a put after the writer failed was kept (%d waiting): it must be dropped", len(rq.q))
	}
}

package sim

import "testing"

// BenchmarkSim reports the simulator's speed in simulated frames per second
// (every broadcast counts once) on the default faulty 5-host run.
func BenchmarkSim(b *testing.B) {
	var frames uint64
	for i := 0; i < b.N; i++ {
		s, err := New(DefaultOptions(5, uint64(i)+1))
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run(); err != nil {
			b.Fatal(err)
		}
		frames += s.Stats.Frames
	}
	b.ReportMetric(float64(frames)/b.Elapsed().Seconds(), "frames/s")
}

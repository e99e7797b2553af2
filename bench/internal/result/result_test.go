package result

import (
	"os"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
		ok   bool
	}{
		{nil, 0, false},
		{[]float64{3}, 3, true},
		{[]float64{5, 1, 3}, 3, true},
		{[]float64{4, 1, 3, 2}, 2.5, true},
	} {
		got, ok := Median(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Median(%v) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestReadSkipsNoise(t *testing.T) {
	in := "panic: boom\n{\"phase\":\"idle\",\"proxy\":\"nginx\",\"conns\":5,\"failed\":0}\n\n"
	recs, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Proxy != "nginx" || recs[0].Conns != 5 {
		t.Fatalf("Read = %+v", recs)
	}
	if _, err := Read(strings.NewReader("{not json\n")); err == nil {
		t.Error("Read accepted a broken JSON line")
	}
}

func TestProcReadings(t *testing.T) {
	// Burn a little CPU so utime is not necessarily zero; only check sanity.
	cpu, err := ProcStatCPU(os.Getpid(), 100)
	if err != nil || cpu < 0 {
		t.Fatalf("ProcStatCPU = %v, %v", cpu, err)
	}
	rss, err := RSSKiB(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("RSSKiB = %v, %v", rss, err)
	}
	if _, err := ProcStatCPU(-1, 100); err == nil {
		t.Error("ProcStatCPU of pid -1 succeeded")
	}
}

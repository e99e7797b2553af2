package main

import (
	"testing"
	"time"
)

func TestSettled(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(sec int, kib int64) sample { return sample{t0.Add(time.Duration(sec) * time.Second), kib} }
	tests := []struct {
		name    string
		samples []sample
		want    bool
	}{
		{"none", nil, false},
		{"shorter than quiet", []sample{at(0, 100), at(5, 100)}, false},
		{"flat for quiet", []sample{at(0, 100), at(10, 100)}, true},
		{"falling", []sample{at(0, 5000), at(10, 100)}, false},
		{"fell within slack", []sample{at(0, 356), at(10, 100)}, true},
		{"rising counts as settled", []sample{at(0, 100), at(10, 900)}, true},
		{"latest old enough sample decides", []sample{at(0, 9000), at(3, 100), at(13, 100)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := settled(tc.samples, 10*time.Second, 256); got != tc.want {
				t.Errorf("settled = %v, want %v", got, tc.want)
			}
		})
	}
}

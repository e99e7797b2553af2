package main

import (
	"testing"

	"sluice.dev/sluice/bench/internal/result"
)

// TestMeasureDNS: the first sync plans every host (an A record and its
// ownership TXT record each) and the steady sync nothing (measureDNS
// fails otherwise).
func TestMeasureDNS(t *testing.T) {
	var rec result.Record
	if err := measureDNS(&rec, 200, 2); err != nil {
		t.Fatal(err)
	}
	if rec.Changes != 400 || rec.SyncMs <= 0 || rec.SteadyMs <= 0 || rec.HeapKiB <= 0 {
		t.Errorf("record = %+v, want 400 changes and positive times and heap", rec)
	}
}

// TestMeasureController: every pod becomes a target of its own binding's
// group, and a steady pass registers or deregisters nothing
// (measureController fails otherwise).
func TestMeasureController(t *testing.T) {
	var rec result.Record
	if err := measureController(&rec, 40, 4, 2); err != nil {
		t.Fatal(err)
	}
	if rec.Changes != 40 || rec.SyncCPUMs <= 0 || rec.HeapKiB <= 0 {
		t.Errorf("record = %+v, want 40 targets registered and positive CPU and heap", rec)
	}
}

func TestMeasureRefusesEmptySizes(t *testing.T) {
	var rec result.Record
	if err := measureDNS(&rec, 0, 1); err == nil {
		t.Error("measureDNS with 0 records: no error")
	}
	if err := measureController(&rec, 10, 0, 1); err == nil {
		t.Error("measureController with 0 bindings: no error")
	}
}

package problem

import (
	"reflect"
	"testing"
)

func TestAnnounce(t *testing.T) {
	a, b := Problem{Kind: "Ingress", Namespace: "ns", Name: "a", Reason: "Conflict", Message: "m"},
		Problem{Kind: "Ingress", Namespace: "ns", Name: "b", Reason: "ServiceNotFound", Message: "m"}
	var an Announcer
	for i, step := range []struct{ current, want []Problem }{
		{[]Problem{b, a, a}, []Problem{a, b}}, // sorted, once
		{[]Problem{a, b}, nil},                // a resync: nothing new
		{[]Problem{a}, nil},                   // b resolved
		{[]Problem{a, b}, []Problem{b}},       // b is back: announced again
		{nil, nil},
		{[]Problem{a}, []Problem{a}},
	} {
		if got := an.Announce(step.current); !reflect.DeepEqual(got, step.want) {
			t.Errorf("step %d: Announce = %v, want %v", i, got, step.want)
		}
	}
}

func TestString(t *testing.T) {
	for p, want := range map[Problem]string{
		{Kind: "Pod", Namespace: "ns", Name: "p", Message: "no IP"}:                     "Pod ns/p: no IP",
		{Kind: "Node", Name: "n", Message: "gone"}:                                      "Node n: gone",
		{Kind: "Spec", Message: "bad"}:                                                  "Spec: bad",
		{Kind: "Ingress", Namespace: "ns", Name: "i", Reason: "Conflict", Message: "x"}: "Ingress ns/i: Conflict: x",
	} {
		if got := p.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", p, got, want)
		}
	}
}

func TestLatest(t *testing.T) {
	var l Latest[string]
	for i, step := range []struct {
		key, msg string
		forget   bool
		want     bool
	}{
		{key: "a", msg: "x", want: true},
		{key: "a", msg: "x", want: false}, // a resync
		{key: "b", msg: "x", want: true},  // per key
		{key: "a", msg: "y", want: true},  // a new cause
		{key: "a", msg: "x", want: true},  // the old cause is new again
		{key: "a", forget: true},
		{key: "a", msg: "x", want: true}, // forgotten
	} {
		if step.forget {
			l.Forget(step.key)
			continue
		}
		if got := l.Changed(step.key, step.msg); got != step.want {
			t.Errorf("step %d: Changed(%q, %q) = %v, want %v", i, step.key, step.msg, got, step.want)
		}
	}
}

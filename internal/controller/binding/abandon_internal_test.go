package binding

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/api/v1alpha1"
	"sluice.dev/sluice/internal/lb"
)

func deletedBinding(gen int64, deletedAt time.Time, ann map[string]string) *v1alpha1.LoadBalancerBinding {
	b := &v1alpha1.LoadBalancerBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", Generation: gen, Annotations: ann}}
	if !deletedAt.IsZero() {
		b.DeletionTimestamp = &metav1.Time{Time: deletedAt}
	}
	return b
}

func TestDecideAbandon(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ann := func(v string) map[string]string { return map[string]string{v1alpha1.AnnotationAbandonTargets: v} }
	cases := []struct {
		name    string
		b       *v1alpha1.LoadBalancerBinding
		abandon bool
		ignored bool
	}{
		{"no annotation", deletedBinding(3, at, nil), false, false},
		{"live binding: does nothing, not even an Event", deletedBinding(3, time.Time{}, ann("3")), false, false},
		{"current generation", deletedBinding(3, at, ann("3")), true, false},
		{"current generation, spaces", deletedBinding(3, at, ann(" 3\n")), true, false},
		{"generation before the deletion", deletedBinding(3, at, ann("2")), false, true},
		{"copied from another object", deletedBinding(3, at, ann("17")), false, true},
		{"empty", deletedBinding(3, at, ann("")), false, true},
		{"true", deletedBinding(3, at, ann("true")), false, true},
		{"long junk", deletedBinding(3, at, ann(strings.Repeat("x", 5000))), false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decideAbandon(tc.b)
			if d.Abandon != tc.abandon || (d.Ignored != "") != tc.ignored {
				t.Fatalf("decideAbandon = %+v, want abandon %v ignored %v", d, tc.abandon, tc.ignored)
			}
			if tc.ignored && (!strings.Contains(d.Ignored, `"3"`) || len(d.Ignored) > 600) {
				t.Errorf("message %q should name the generation to set, and stay short", d.Ignored)
			}
		})
	}
}

func TestDeletionBlocked(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	unreachable := fmt.Errorf("listing targets: %w", lb.ErrUnreachable)
	withTimeout := func(b *v1alpha1.LoadBalancerBinding, d time.Duration) *v1alpha1.LoadBalancerBinding {
		b.Spec.Drain.Timeout = &metav1.Duration{Duration: d}
		return b
	}
	cases := []struct {
		name    string
		b       *v1alpha1.LoadBalancerBinding
		now     time.Time
		cause   error
		blocked bool
		reason  string
	}{
		{"not deleted", deletedBinding(1, time.Time{}, nil), at.Add(time.Hour), unreachable, false, ""},
		{"no error", deletedBinding(1, at, nil), at.Add(time.Hour), nil, false, ""},
		{"within the default drain timeout", deletedBinding(1, at, nil), at.Add(DefaultDrainTimeout - time.Second), unreachable, false, ""},
		{"at the default drain timeout", deletedBinding(1, at, nil), at.Add(DefaultDrainTimeout), unreachable, true, "ProviderUnreachable"},
		{"past the binding's drain timeout", withTimeout(deletedBinding(2, at, nil), 10*time.Second), at.Add(11 * time.Second), unreachable, true, "ProviderUnreachable"},
		{"within the binding's drain timeout", withTimeout(deletedBinding(2, at, nil), 10*time.Second), at.Add(9 * time.Second), unreachable, false, ""},
		{"another error", withTimeout(deletedBinding(2, at, nil), 0), at, errors.New("boom"), true, "ProviderError"},
		{"clock behind the deletion", deletedBinding(2, at, nil), at.Add(-time.Hour), unreachable, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			blocked, reason, msg := deletionBlocked(tc.b, tc.now, tc.cause)
			if blocked != tc.blocked || reason != tc.reason {
				t.Fatalf("deletionBlocked = %v %q, want %v %q", blocked, reason, tc.blocked, tc.reason)
			}
			gen := fmt.Sprintf("%s=%q", v1alpha1.AnnotationAbandonTargets, fmt.Sprint(tc.b.Generation))
			if blocked && (!strings.Contains(msg, gen) || !strings.Contains(msg, tc.cause.Error())) {
				t.Errorf("message %q should give the cause and the annotation %s", msg, gen)
			}
		})
	}
}

// A blocked deletion's provider calls get a deadline; others do not.
func TestBlockedProbe(t *testing.T) {
	b := deletedBinding(1, time.Now(), nil)
	ctx, cancel := blockedProbe(context.Background(), b)
	cancel()
	if _, ok := ctx.Deadline(); ok {
		t.Error("deadline before the deletion is blocked")
	}
	b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionDeletionBlocked, Status: metav1.ConditionTrue}}
	ctx, cancel = blockedProbe(context.Background(), b)
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > BlockedProbeTimeout {
		t.Errorf("deadline %v %v, want within %s", d, ok, BlockedProbeTimeout)
	}
}

// FuzzDecideAbandon: any annotation value (whoever may write bindings
// writes it) abandons only when it is the generation, gives a short
// message otherwise, and never panics.
func FuzzDecideAbandon(f *testing.F) {
	for _, v := range []string{"3", " 3 ", "2", "", "true", "-1", "03", "3\x00", strings.Repeat("9", 100), "\xff\xfe"} {
		f.Add(v, int64(3))
	}
	f.Fuzz(func(t *testing.T, v string, gen int64) {
		b := deletedBinding(gen, time.Unix(1, 0), map[string]string{v1alpha1.AnnotationAbandonTargets: v})
		d := decideAbandon(b)
		if d.Abandon != (strings.TrimSpace(v) == fmt.Sprint(gen)) {
			t.Fatalf("decideAbandon(%q, generation %d) = %+v", v, gen, d)
		}
		if d.Abandon == (d.Ignored != "") || len(d.Ignored) > 700 {
			t.Fatalf("decideAbandon(%q) = %+v: exactly one of abandon and a short message", v, d)
		}
		other := decideAbandon(deletedBinding(gen, time.Unix(1, 0), map[string]string{v1alpha1.AnnotationAbandonTargets: "x"}))
		if d.Ignored != "" && d.Ignored != other.Ignored {
			t.Fatalf("message %q depends on the value %q (it must not quote it)", d.Ignored, v)
		}
	})
}

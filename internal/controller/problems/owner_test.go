package problems

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ct "sluice.dev/sluice/internal/controller/controllertest"
	"sluice.dev/sluice/internal/translate"
)

// TestTenancyEvents: a newer Ingress of another namespace under an owned
// host gets HostOwnedElsewhere (not naming the owner) and NotServed; with
// --host-ownership=none, a path Conflict as before.
func TestTenancyEvents(t *testing.T) {
	squat := ingress("squat", "web", nil, 2)
	squat.Namespace = "team-b"
	for _, tc := range []struct {
		mode   string
		reason string
	}{
		{"", translate.ReasonHostOwnedElsewhere},
		{translate.HostOwnershipNone, "Conflict"},
	} {
		c := ct.NewClient(interceptor.Funcs{}, ingress("owner", "web", nil, 1), squat, service("web"))
		rec := &ct.Recorder{}
		r, err := New(Options{Client: c, Notices: &ct.Notices{Recorder: rec}, HostOwnership: tc.mode, DefaultBackendNamespaces: []string{"platform"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(context.Background(), reconcile.Request{}); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range rec.Events() {
			if strings.HasSuffix(e.Object, "team-b/squat") {
				got[e.Reason] = e.Note
			}
		}
		if got[tc.reason] == "" || got["NotServed"] == "" {
			t.Errorf("mode %q: events on team-b/squat %v; want %s and NotServed", tc.mode, got, tc.reason)
		}
		if note := got[translate.ReasonHostOwnedElsewhere]; strings.Contains(note, "default") {
			t.Errorf("the Event names the owner's namespace: %s", note)
		}
	}
}

package dns_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sluice.dev/sluice/internal/translate"
)

// TestRecordFromHostOwnerOnly: a newer Ingress of another namespace naming
// the same host publishes nothing for it (before issue 23 the owner record
// named the first Ingress by namespace/name, here the squatter's); with
// --host-ownership=none it counts as before.
func TestRecordFromHostOwnerOnly(t *testing.T) {
	owner := ingress("shop", "shop.example.com")
	owner.Namespace, owner.CreationTimestamp = "team-z", metav1.Unix(1, 0)
	squat := ingress("squat", "shop.example.com", "b.example.com")
	squat.Namespace, squat.CreationTimestamp = "team-a", metav1.Unix(2, 0)

	e := newEnv(t, owner, squat, lbBinding("192.0.2.10"))
	e.mustReconcile()
	if o := e.owner("shop.example.com"); o == nil || o.Ingress.String() != "team-z/shop" {
		t.Fatalf("ownership record of shop.example.com = %+v, want team-z/shop", o)
	}
	if got := e.a("b.example.com"); len(got) != 1 {
		t.Errorf("A b.example.com = %v: the squatter's own host must still be published", got)
	}

	e2 := newEnv(t, owner, squat, lbBinding("192.0.2.10"))
	e2.opts.Serving.HostOwnership = translate.HostOwnershipNone
	e2.restart()
	e2.mustReconcile()
	if o := e2.owner("shop.example.com"); o == nil || o.Ingress.String() != "team-a/squat" {
		t.Fatalf("--host-ownership=none: ownership record of shop.example.com = %+v, want team-a/squat (first by namespace/name)", o)
	}
}

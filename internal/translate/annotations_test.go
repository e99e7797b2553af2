package translate

import (
	"reflect"
	"testing"
	"time"

	"sluice.dev/sluice/internal/route"
)

func TestParsePolicy(t *testing.T) {
	def := route.Policy{Retries: -1}
	cases := []struct {
		name string
		ann  map[string]string
		want route.Policy
		errs []string // keys reported
	}{
		{"none", nil, def, nil},
		{"unrelated", map[string]string{"nginx.ingress.kubernetes.io/configuration-snippet": "x"}, def, nil},
		{"round robin", map[string]string{AnnotationLoadBalance: "round-robin"},
			route.Policy{Algorithm: route.RoundRobin, Retries: -1}, nil},
		{"least request", map[string]string{AnnotationLoadBalance: "least-request"}, def, nil},
		{"bad algorithm", map[string]string{AnnotationLoadBalance: "Round-Robin"}, def, []string{AnnotationLoadBalance}},
		{"hash header canonical", map[string]string{AnnotationHashByHeader: "x-tenant"},
			route.Policy{Algorithm: route.HeaderHash, HashHeader: "X-Tenant", Retries: -1}, nil},
		{"hash header invalid", map[string]string{AnnotationHashByHeader: "x:y"}, def, []string{AnnotationHashByHeader}},
		{"affinity", map[string]string{AnnotationAffinity: "cookie"},
			route.Policy{Affinity: &route.CookieAffinity{Name: DefaultAffinityCookieName}, Retries: -1}, nil},
		{"affinity seconds", map[string]string{AnnotationAffinity: "cookie", AnnotationAffinityCookieMaxAge: "3600"},
			route.Policy{Affinity: &route.CookieAffinity{Name: DefaultAffinityCookieName, MaxAge: time.Hour}, Retries: -1}, nil},
		{"affinity max-age too long", map[string]string{AnnotationAffinity: "cookie", AnnotationAffinityCookieMaxAge: "8761h"},
			route.Policy{Affinity: &route.CookieAffinity{Name: DefaultAffinityCookieName}, Retries: -1}, []string{AnnotationAffinityCookieMaxAge}},
		{"affinity max-age huge seconds", map[string]string{AnnotationAffinity: "cookie", AnnotationAffinityCookieMaxAge: "4294967295"},
			route.Policy{Affinity: &route.CookieAffinity{Name: DefaultAffinityCookieName}, Retries: -1}, []string{AnnotationAffinityCookieMaxAge}},
		{"cookie name without affinity", map[string]string{AnnotationAffinityCookieName: "sid"}, def, []string{AnnotationAffinityCookieName}},
		{"retries bounds", map[string]string{AnnotationRetries: "5"}, route.Policy{Retries: 5}, nil},
		{"retries too many", map[string]string{AnnotationRetries: "6"}, def, []string{AnnotationRetries}},
		{"retries negative", map[string]string{AnnotationRetries: "-1"}, def, []string{AnnotationRetries}},
		{"timeouts", map[string]string{AnnotationConnectTimeout: "1h", AnnotationResponseTimeout: "1m30s"},
			route.Policy{Retries: -1, ConnectTimeout: time.Hour, ResponseTimeout: 90 * time.Second}, nil},
		{"read and send timeouts", map[string]string{AnnotationProxyReadTimeout: "300", AnnotationProxySendTimeout: "2s"},
			route.Policy{Retries: -1, ReadTimeout: 300 * time.Second, SendTimeout: 2 * time.Second}, nil},
		{"read timeout invalid", map[string]string{AnnotationProxyReadTimeout: "soon"}, def, []string{AnnotationProxyReadTimeout}},
		{"send timeout too long", map[string]string{AnnotationProxySendTimeout: "2h"}, def, []string{AnnotationProxySendTimeout}},
		{"timeout too long", map[string]string{AnnotationConnectTimeout: "3601"}, def, []string{AnnotationConnectTimeout}},
		{"timeout overflow", map[string]string{AnnotationResponseTimeout: "99999999999999999999h"}, def, []string{AnnotationResponseTimeout}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := parsePolicy(tc.ann)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("policy = %+v, want %+v", got, tc.want)
			}
			var keys []string
			for _, e := range errs {
				keys = append(keys, e.key)
			}
			if !reflect.DeepEqual(keys, tc.errs) {
				t.Errorf("problems for %v, want %v", keys, tc.errs)
			}
		})
	}
}

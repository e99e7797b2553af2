package translate

import (
	"strings"
	"testing"

	"sluice.dev/sluice/internal/route"
)

func TestProtocolOf(t *testing.T) {
	for app, want := range map[string]route.Protocol{
		"": route.ProtocolHTTP, "http": route.ProtocolHTTP, "tcp": route.ProtocolHTTP, "kubernetes.io/ws": route.ProtocolHTTP,
		"kubernetes.io/h2c": route.ProtocolH2C, "grpc": route.ProtocolGRPC, "https": route.ProtocolHTTPS,
		"kubernetes.io/wss": route.ProtocolHTTPS, "grpcs": route.ProtocolGRPCS, "example.com/custom": route.ProtocolHTTP,
	} {
		if got := protocolOf(app); got != want {
			t.Errorf("protocolOf(%q) = %s, want %s", app, got, want)
		}
	}
}

// FuzzUpstreamAnnotations: any values give a known protocol, a DNS name or
// nothing as SNI, and problems that never quote a value.
func FuzzUpstreamAnnotations(f *testing.F) {
	f.Add("grpc", "pod-ca", "api.example.com", "true")
	f.Add("GRPCS ", "", "UPPER.example.com", "false")
	f.Add("quic", "a/b", "not a name", "yes")
	f.Add("\x00", "\x00", "\xff", "")
	f.Fuzz(func(t *testing.T, proto, ca, sni, skip string) {
		ann := map[string]string{
			AnnotationBackendProtocol: proto, AnnotationBackendCASecret: ca,
			AnnotationBackendSNI: sni, AnnotationBackendInsecureSkipVerify: skip,
		}
		u, errs := parseUpstream(ann)
		if u.protocol.String() == "unknown" {
			t.Fatalf("protocol %d", u.protocol)
		}
		if u.sni != "" && (strings.ContainsAny(u.sni, " \t\r\n/:") || len(u.sni) > 253) {
			t.Fatalf("sni %q", u.sni)
		}
		for _, e := range errs {
			for _, v := range ann {
				if quotable(v) && strings.Contains(e.msg, v) {
					t.Errorf("problem %q quotes %q", e.msg, v)
				}
			}
		}
	})
}

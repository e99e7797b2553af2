package manifests

import "testing"

// FuzzDecode feeds arbitrary bytes as a manifest file. Decode must not
// panic, and whatever it returns must be usable by translate: every object
// named, namespaced objects with a namespace, IngressClasses without one,
// and a UID everywhere.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(multiDoc))
	f.Add([]byte(svcDoc("a", 1)))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata: {name: s}\n  stringData: {a: b}\n"))
	f.Add([]byte("apiVersion: v1\nkind: ServiceList\nitems:\n- metadata: {name: b}\n"))
	f.Add([]byte("apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: c, namespace: x}\n"))
	f.Add([]byte("--- {apiVersion: v1, kind: Service, metadata: {name: x}}\n...\n---\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"j\"}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, _ := Decode("fuzz.yaml", data)
		check := func(kind, ns, name, uid string, namespaced bool) {
			if name == "" || uid == "" {
				t.Fatalf("%s without name or uid: %q %q", kind, name, uid)
			}
			if namespaced == (ns == "") {
				t.Fatalf("%s %s: namespace %q", kind, name, ns)
			}
		}
		for _, o := range in.Ingresses {
			check("Ingress", o.Namespace, o.Name, string(o.UID), true)
		}
		for _, o := range in.IngressClasses {
			check("IngressClass", o.Namespace, o.Name, string(o.UID), false)
		}
		for _, o := range in.Services {
			check("Service", o.Namespace, o.Name, string(o.UID), true)
		}
		for _, o := range in.EndpointSlices {
			check("EndpointSlice", o.Namespace, o.Name, string(o.UID), true)
		}
		for _, o := range in.Secrets {
			check("Secret", o.Namespace, o.Name, string(o.UID), true)
			if o.StringData != nil {
				t.Fatalf("Secret %s kept stringData", o.Name)
			}
		}
	})
}

package migrate

import (
	"encoding/json"
	"os"
	"testing"
)

// FuzzRead feeds arbitrary bytes as a manifest file to `sluice migrate`'s
// reader and the report. Nothing may panic; every Ingress read has a name
// and a namespace; the report renders and marshals.
func FuzzRead(f *testing.F) {
	for _, name := range []string{"testdata/manifests/shop.yaml", "testdata/manifests/api.json", "testdata/manifests/team-b/ingresses.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: a, annotations: {nginx.ingress.kubernetes.io/x-snippet: \"\\e[2J\"}}\nspec: {ingressClassName: nginx}\n"))
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"networking.k8s.io/v1","kind":"IngressList","items":[]}]}`))
	f.Add([]byte("--- !!binary\n...\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ings, classes, problems := Read("fuzz.yaml", data)
		for _, ing := range ings {
			if ing.Name == "" || ing.Namespace == "" {
				t.Fatalf("Ingress without name or namespace: %q/%q", ing.Namespace, ing.Name)
			}
		}
		rep := Analyze(Input{Ingresses: ings, Classes: classes, ReadErrors: problems})
		_ = rep.String()
		if _, err := json.Marshal(rep); err != nil {
			t.Fatal(err)
		}
		if rep.Totals.Ingresses+rep.Totals.Skipped > len(ings) {
			t.Fatalf("totals %+v for %d Ingresses", rep.Totals, len(ings))
		}
	})
}

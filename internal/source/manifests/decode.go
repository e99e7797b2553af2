package manifests

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// DocumentError is a problem with one document of a manifest file. An
// invalid document is skipped; the rest of its file still loads.
type DocumentError struct {
	File  string // as given to Decode or found in Dir
	Index int    // 1-based number of the document in the file
	Line  int    // 1-based line where the document starts
	Item  int    // 1-based index in a List's items; 0 outside a List
	Err   error
}

func (e *DocumentError) Error() string {
	where := fmt.Sprintf("%s: document %d (line %d)", e.File, e.Index, e.Line)
	if e.Item > 0 {
		where += fmt.Sprintf(" item %d", e.Item)
	}
	return where + ": " + e.Err.Error()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// decoded is the result of decoding one file.
type decoded struct {
	objects []runtime.Object
	// invalid are documents that were skipped.
	invalid []error
	// warnings are about documents that loaded anyway (unknown fields).
	warnings []error
	// skipped are documents of kinds sluice does not read.
	skipped []string
}

// gvk names a type the way manifests spell it.
type gvk struct{ apiVersion, kind string }

// kinds are the types sluice reads, keyed by apiVersion and kind.
var kinds = map[gvk]func() runtime.Object{
	{"networking.k8s.io/v1", "Ingress"}:      func() runtime.Object { return &networkingv1.Ingress{} },
	{"networking.k8s.io/v1", "IngressClass"}: func() runtime.Object { return &networkingv1.IngressClass{} },
	{"v1", "Service"}:                        func() runtime.Object { return &corev1.Service{} },
	{"v1", "Secret"}:                         func() runtime.Object { return &corev1.Secret{} },
	{"discovery.k8s.io/v1", "EndpointSlice"}: func() runtime.Object { return &discoveryv1.EndpointSlice{} },
}

// supported gives the apiVersion sluice reads for a kind, to name it when a
// manifest uses another version.
func supported(kind string) (string, bool) {
	for k := range kinds {
		if k.kind == kind {
			return k.apiVersion, true
		}
	}
	return "", false
}

// decode parses one manifest file: YAML documents separated by "---" lines,
// each one object or a List of objects. It never fails as a whole.
func decode(file string, data []byte) decoded {
	var d decoded
	for i, doc := range splitDocuments(data) {
		d.document(file, i+1, doc)
	}
	return d
}

func (d *decoded) document(file string, index int, doc document) {
	at := func(item int, err error) error {
		return &DocumentError{File: file, Index: index, Line: doc.line, Item: item, Err: err}
	}
	problem := func(item int, err error) { d.invalid = append(d.invalid, at(item, err)) }
	warn := func(item int, err error) { d.warnings = append(d.warnings, at(item, err)) }
	js, err := yaml.YAMLToJSON(doc.data)
	if err != nil {
		problem(0, fmt.Errorf("parsing YAML: %w", err))
		return
	}
	js = bytes.TrimSpace(js)
	if bytes.Equal(js, []byte("null")) {
		return // empty, or only comments
	}
	var tm metav1.TypeMeta
	if js[0] != '{' {
		problem(0, errors.New("document is not a mapping"))
		return
	}
	if err := json.Unmarshal(js, &tm); err != nil {
		problem(0, fmt.Errorf("reading apiVersion and kind: %w", err))
		return
	}
	if tm.Kind == "List" || strings.HasSuffix(tm.Kind, "List") && tm.APIVersion != "" {
		d.list(tm, js, problem, warn)
		return
	}
	obj, warnings, err := d.object(tm, js)
	if err != nil {
		problem(0, err)
		return
	}
	for _, w := range warnings {
		warn(0, w)
	}
	if obj != nil {
		d.objects = append(d.objects, obj)
	}
}

// list decodes the items of a List (kind List, as kubectl writes, or a
// typed list such as ServiceList). Items of a typed list may leave out
// apiVersion and kind; they default to the list's.
func (d *decoded) list(tm metav1.TypeMeta, js []byte, problem, warn func(int, error)) {
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &l); err != nil {
		problem(0, fmt.Errorf("reading %s items: %w", tm.Kind, err))
		return
	}
	for i, raw := range l.Items {
		var itm metav1.TypeMeta
		if err := json.Unmarshal(raw, &itm); err != nil {
			problem(i+1, fmt.Errorf("reading apiVersion and kind: %w", err))
			continue
		}
		if tm.Kind != "List" {
			if itm.Kind == "" {
				itm.Kind = strings.TrimSuffix(tm.Kind, "List")
			}
			if itm.APIVersion == "" {
				itm.APIVersion = tm.APIVersion
			}
		}
		if itm.Kind == "List" || strings.HasSuffix(itm.Kind, "List") {
			problem(i+1, fmt.Errorf("a %s inside a %s is not supported", itm.Kind, tm.Kind))
			continue
		}
		obj, warnings, err := d.object(itm, raw)
		if err != nil {
			problem(i+1, err)
			continue
		}
		for _, w := range warnings {
			warn(i+1, w)
		}
		if obj != nil {
			d.objects = append(d.objects, obj)
		}
	}
}

// object decodes one object of a kind sluice reads. It returns nil, nil, nil
// for kinds sluice does not read (recorded in skipped).
func (d *decoded) object(tm metav1.TypeMeta, js []byte) (runtime.Object, []error, error) {
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, nil, errors.New("apiVersion and kind are required")
	}
	newObj, ok := kinds[gvk{tm.APIVersion, tm.Kind}]
	if !ok {
		if v, known := supported(tm.Kind); known {
			return nil, nil, fmt.Errorf("%s %s is not supported; use apiVersion %s", tm.Kind, tm.APIVersion, v)
		}
		d.skipped = append(d.skipped, tm.APIVersion+" "+tm.Kind)
		return nil, nil, nil
	}
	obj := newObj()
	// The API server's decoder: case-sensitive field names, with unknown
	// and duplicate fields reported separately (it warns about those too).
	strict, err := kjson.UnmarshalStrict(js, obj, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding %s: %w", tm.Kind, err)
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil, fmt.Errorf("decoding %s: no object metadata", tm.Kind)
	}
	if m.GetName() == "" {
		if m.GetGenerateName() != "" {
			return nil, nil, fmt.Errorf("%s: metadata.generateName is not supported; set metadata.name", tm.Kind)
		}
		return nil, nil, fmt.Errorf("%s: metadata.name is required", tm.Kind)
	}
	var warnings []error
	for _, e := range strict {
		warnings = append(warnings, fmt.Errorf("%s %s: %w (ignored)", tm.Kind, m.GetName(), e))
	}
	setDefaults(obj)
	return obj, warnings, nil
}

// setDefaults does what the API server does on create for the fields
// translate reads, so that a manifest means the same as a kubectl apply.
func setDefaults(obj runtime.Object) {
	m := obj.(metav1.Object)
	kind := ""
	switch o := obj.(type) {
	case *networkingv1.IngressClass:
		kind = "IngressClass"
		m.SetNamespace("") // cluster-scoped
	case *networkingv1.Ingress:
		kind = "Ingress"
	case *corev1.Service:
		kind = "Service"
		if o.Spec.Type == "" {
			o.Spec.Type = corev1.ServiceTypeClusterIP
		}
		for i := range o.Spec.Ports {
			p := &o.Spec.Ports[i]
			if p.Protocol == "" {
				p.Protocol = corev1.ProtocolTCP
			}
			if p.TargetPort.Type == intstr.Int && p.TargetPort.IntVal == 0 {
				p.TargetPort = intstr.FromInt32(p.Port)
			}
		}
	case *corev1.Secret:
		kind = "Secret"
		if o.Type == "" {
			o.Type = corev1.SecretTypeOpaque
		}
		if len(o.StringData) > 0 && o.Data == nil {
			o.Data = make(map[string][]byte, len(o.StringData))
		}
		for k, v := range o.StringData { // stringData wins, as on the server
			o.Data[k] = []byte(v)
		}
		o.StringData = nil
	case *discoveryv1.EndpointSlice:
		kind = "EndpointSlice"
		for i := range o.Ports {
			p := &o.Ports[i]
			if p.Protocol == nil {
				tcp := corev1.ProtocolTCP
				p.Protocol = &tcp
			}
			if p.Name == nil {
				empty := ""
				p.Name = &empty
			}
		}
	}
	if kind != "IngressClass" && m.GetNamespace() == "" {
		m.SetNamespace(metav1.NamespaceDefault)
	}
	if m.GetUID() == "" {
		m.SetUID(uid(kind, m.GetNamespace(), m.GetName()))
	}
	// creationTimestamp stays as written (zero if absent): deterministic, so
	// translate's conflict resolution falls back to namespace/name.
}

// uid derives a stable UID from the object's identity, so the same manifest
// gets the same UID on every load and every machine.
func uid(kind, namespace, name string) types.UID {
	h := sha256.Sum256([]byte("sluice.dev/manifests\x00" + kind + "\x00" + namespace + "\x00" + name))
	h[6] = h[6]&0x0f | 0x50 // shaped like a name-based UUID
	h[8] = h[8]&0x3f | 0x80
	return types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16]))
}

// document is one YAML document of a file and the line it starts on.
type document struct {
	data []byte
	line int
}

// splitDocuments splits a YAML stream on document markers: a line that is
// "---" (optionally followed by a space and more, such as a comment or the
// document's first node) or "..." (document end). Lines that merely start
// with dashes, such as PEM armour in an unindented block, are content.
// Documents holding only blank lines and comments are dropped, so document
// numbers count what a reader sees as documents.
func splitDocuments(data []byte) []document {
	var docs []document
	add := func(d document) {
		if !blank(d.data) {
			docs = append(docs, d)
		}
	}
	cur := document{line: 1}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i+1], data[i+1:]
		} else {
			data = nil
		}
		text := strings.TrimRight(string(line), " \t\r\n")
		switch {
		case text == "---" || text == "...":
			add(cur)
			cur = document{line: lineNo + 1}
		case strings.HasPrefix(text, "--- ") || strings.HasPrefix(text, "---\t"):
			add(cur)
			cur = document{line: lineNo, data: append([]byte(nil), line[4:]...)}
		default:
			cur.data = append(cur.data, line...)
		}
	}
	add(cur)
	return docs
}

// blank reports whether data holds only whitespace and comment lines.
func blank(data []byte) bool {
	for line := range strings.Lines(string(data)) {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}

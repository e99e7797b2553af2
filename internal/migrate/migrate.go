// Package migrate is what `sluice migrate` reports before a platform team
// moves its Ingresses from ingress-nginx to sluice: per Ingress of an
// ingress-nginx class and per nginx.ingress.kubernetes.io annotation,
// whether sluice serves it as is, with a difference, not at all, or
// refuses it (snippets and Lua).
//
// Data flow: the CLI reads Ingresses and IngressClasses (a cluster, or a
// directory of manifests through Read/ReadDir) → Analyze (pure) → Report
// → text or JSON. Every status comes from translate's compatibility
// tables (translate.NginxLookup), the ones the proxy translates with, so
// the report cannot disagree with what the proxy does.
package migrate

import (
	"cmp"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/translate"
)

// Status is what sluice does with one annotation.
type Status string

const (
	// Supported: served with ingress-nginx's semantics.
	Supported Status = "supported"
	// Different: served, with a difference (Note).
	Different Status = "supported-with-difference"
	// Unsupported: ignored; the Ingress gets an UnsupportedAnnotations Event.
	Unsupported Status = "unsupported"
	// Refused: a snippet or Lua; ignored with a SnippetRefused Warning.
	Refused Status = "refused"
	// Invalid: supported, but sluice refuses this value and ignores the
	// annotation.
	Invalid Status = "invalid"
)

// Finding reports whether s is something to fix before switching.
func (s Status) Finding() bool { return s == Unsupported || s == Refused || s == Invalid }

// Input is what the CLI read.
type Input struct {
	Ingresses []*networkingv1.Ingress
	Classes   []*networkingv1.IngressClass
	// NginxClass is the class served as ingress-nginx's without an
	// IngressClass object (the proxy's --ingress-nginx-class); default
	// translate.DefaultIngressNginxClass.
	NginxClass string
	// ReadErrors are problems reading the input (documents skipped); they
	// are reported, and make the report a finding.
	ReadErrors []string
}

// Report is the result of Analyze.
type Report struct {
	// Ingresses of ingress-nginx classes, by namespace and name.
	Ingresses []IngressReport `json:"ingresses"`
	// Skipped are the Ingresses of other classes (namespace/name), which
	// --ingress-nginx-compat does not serve.
	Skipped []string `json:"skipped,omitempty"`
	// Annotations summarises by annotation, by name.
	Annotations []AnnotationSummary `json:"annotations"`
	Totals      Totals              `json:"totals"`
	ReadErrors  []string            `json:"readErrors,omitempty"`
}

// IngressReport is one Ingress's annotations.
type IngressReport struct {
	Namespace   string             `json:"namespace"`
	Name        string             `json:"name"`
	Class       string             `json:"class"`
	Annotations []AnnotationReport `json:"annotations"`
}

// AnnotationReport is one annotation of an Ingress.
type AnnotationReport struct {
	// Name is the full annotation key.
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Native is the sluice.dev annotation that serves it ("" for none).
	Native string `json:"native,omitempty"`
	// Note says the difference, or why it is not served.
	Note string `json:"note,omitempty"`
}

// AnnotationSummary counts the Ingresses using one annotation.
type AnnotationSummary struct {
	Name      string `json:"name"`
	Status    Status `json:"status"`
	Native    string `json:"native,omitempty"`
	Ingresses int    `json:"ingresses"`
	// Invalid counts the Ingresses whose value sluice refuses.
	Invalid int `json:"invalid,omitempty"`
}

// Totals counts annotation uses by status, over all Ingresses.
type Totals struct {
	Ingresses   int `json:"ingresses"`
	Skipped     int `json:"skipped"`
	Annotations int `json:"annotations"`
	Supported   int `json:"supported"`
	Different   int `json:"supportedWithDifference"`
	Unsupported int `json:"unsupported"`
	Refused     int `json:"refused"`
	Invalid     int `json:"invalid"`
	ReadErrors  int `json:"readErrors"`
}

// Findings counts what must be fixed before switching: annotations
// unsupported, refused or with an invalid value, and unreadable documents.
func (t Totals) Findings() int { return t.Unsupported + t.Refused + t.Invalid + t.ReadErrors }

// Lookup returns the report of one annotation (key with its prefix), from
// translate's tables.
func Lookup(key string) AnnotationReport {
	e := translate.NginxLookup(strings.TrimPrefix(key, translate.NginxAnnotationPrefix))
	r := AnnotationReport{Name: key, Status: statusOf(e.Support), Native: e.Native, Note: e.Note}
	if r.Status == Unsupported && r.Note == "" {
		r.Note = "not served by sluice; the Ingress gets an UnsupportedAnnotations Event"
	}
	return r
}

func statusOf(s translate.NginxSupport) Status {
	switch s {
	case translate.NginxPolicySame:
		return Supported
	case translate.NginxPolicyDifferent:
		return Different
	case translate.NginxSnippetRefused:
		return Refused
	default:
		return Unsupported
	}
}

// Analyze reports on in (pure). An Ingress is reported when the proxy
// with --ingress-nginx-compat would serve it as ingress-nginx's: its class
// is NginxClass or one of ingress-nginx's IngressClasses, or it has none
// and one of those is the default class.
func Analyze(in Input) Report {
	filter := translate.NewClassFilter(in.Classes, translate.Options{
		IngressNginx: &translate.IngressNginx{Class: cmp.Or(in.NginxClass, translate.DefaultIngressNginxClass)},
	})
	rep := Report{ReadErrors: slices.Clone(in.ReadErrors)}
	byName := map[string]*AnnotationSummary{}
	for _, ing := range in.Ingresses {
		if ing == nil {
			continue
		}
		if !filter.Nginx(ing) {
			rep.Skipped = append(rep.Skipped, ing.Namespace+"/"+ing.Name)
			continue
		}
		ir := IngressReport{Namespace: ing.Namespace, Name: ing.Name, Class: className(ing), Annotations: []AnnotationReport{}}
		invalid := translate.NginxInvalid(ing.Annotations)
		for k := range ing.Annotations {
			if !strings.HasPrefix(k, translate.NginxAnnotationPrefix) {
				continue
			}
			a := Lookup(k)
			if (a.Status == Supported || a.Status == Different) && slices.Contains(invalid, k) {
				a.Status, a.Note = Invalid, "sluice refuses this value and ignores the annotation (the Ingress gets an InvalidAnnotation Event); "+
					"see the "+a.Native+" annotation for the values it takes"
			}
			ir.Annotations = append(ir.Annotations, a)
			s := byName[k]
			if s == nil {
				s = &AnnotationSummary{Name: k, Status: Lookup(k).Status, Native: a.Native}
				byName[k] = s
			}
			s.Ingresses++
			if a.Status == Invalid {
				s.Invalid++
			}
			rep.Totals.count(a.Status)
		}
		slices.SortFunc(ir.Annotations, func(a, b AnnotationReport) int { return strings.Compare(a.Name, b.Name) })
		rep.Ingresses = append(rep.Ingresses, ir)
	}
	slices.SortFunc(rep.Ingresses, func(a, b IngressReport) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	slices.Sort(rep.Skipped)
	rep.Skipped = slices.Compact(rep.Skipped)
	rep.Annotations = []AnnotationSummary{}
	for _, s := range byName {
		rep.Annotations = append(rep.Annotations, *s)
	}
	slices.SortFunc(rep.Annotations, func(a, b AnnotationSummary) int { return strings.Compare(a.Name, b.Name) })
	rep.Totals.Ingresses = len(rep.Ingresses)
	rep.Totals.Skipped = len(rep.Skipped)
	rep.Totals.ReadErrors = len(rep.ReadErrors)
	if rep.Ingresses == nil {
		rep.Ingresses = []IngressReport{}
	}
	return rep
}

func (t *Totals) count(s Status) {
	t.Annotations++
	switch s {
	case Supported:
		t.Supported++
	case Different:
		t.Different++
	case Unsupported:
		t.Unsupported++
	case Refused:
		t.Refused++
	case Invalid:
		t.Invalid++
	}
}

// className is the class an Ingress names, "" for none.
func className(ing *networkingv1.Ingress) string {
	if ing.Spec.IngressClassName != nil {
		return *ing.Spec.IngressClassName
	}
	return ing.Annotations["kubernetes.io/ingress.class"]
}

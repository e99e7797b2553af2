package translate

import (
	"slices"
	"strings"
)

// The one view of ingress-nginx compatibility that `sluice migrate` and
// the migration guide read: the two tables the translation uses
// (nginxAnnotations for the routing features, NginxPolicyTable for the
// request policies) merged row by row, so that what migrate reports is
// what the proxy does. Nothing here is a third list.

// NginxSnippetRefused: a snippet or Lua annotation, refused with a
// Warning Event (the NginxSupport of NginxRefused rows).
const NginxSnippetRefused NginxSupport = "refused"

// NginxEntry is one ingress-nginx annotation as sluice serves it.
type NginxEntry struct {
	// Name is the annotation without NginxAnnotationPrefix.
	Name string
	// Support is NginxPolicySame, NginxPolicyDifferent (Note says how),
	// NginxPolicyUnsupported or NginxSnippetRefused.
	Support NginxSupport
	// Native is the sluice.dev annotation that serves it ("" for none).
	Native string
	// Note is the difference from ingress-nginx, or why it is
	// unsupported; "" when it behaves as ingress-nginx does.
	Note string
}

// NginxEntries returns every ingress-nginx annotation sluice has a row for,
// from both translation tables, sorted by Name. The newer name
// allowlist-source-range of whitelist-source-range has its own entry.
func NginxEntries() []NginxEntry {
	out := make([]NginxEntry, 0, len(nginxAnnotations)+len(NginxPolicyTable)+1)
	for _, r := range nginxAnnotations {
		out = append(out, fromNginxRow(r))
	}
	for _, m := range NginxPolicyTable {
		out = append(out, fromPolicyRow(m.Nginx, m))
	}
	if m, ok := nginxPolicyRow("allowlist-source-range"); ok {
		out = append(out, fromPolicyRow("allowlist-source-range", m))
	}
	slices.SortFunc(out, func(a, b NginxEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// NginxLookup returns how sluice serves the ingress-nginx annotation name
// (without NginxAnnotationPrefix), by the rules the translation applies
// (nginxToNative): a policy row first, then a routing row, any *-snippet
// or Lua annotation refused, anything else unsupported.
func NginxLookup(name string) NginxEntry {
	if m, ok := nginxPolicyRow(name); ok {
		return fromPolicyRow(name, m)
	}
	if r, ok := nginxRow(name); ok {
		return fromNginxRow(r)
	}
	return NginxEntry{Name: name, Support: NginxPolicyUnsupported}
}

func fromNginxRow(r NginxAnnotation) NginxEntry {
	e := NginxEntry{Name: r.Name, Native: r.Native, Note: r.Note}
	switch {
	case r.Status == NginxRefused:
		e.Support = NginxSnippetRefused
		e.Note = "configuration snippets and Lua are refused: sluice runs no nginx"
	case r.Status == NginxUnsupported:
		e.Support = NginxPolicyUnsupported
	case r.Note != "":
		e.Support = NginxPolicyDifferent
	default:
		e.Support = NginxPolicySame
	}
	return e
}

func fromPolicyRow(name string, m NginxMapping) NginxEntry {
	return NginxEntry{Name: name, Support: m.Support, Native: m.Sluice, Note: m.Note}
}

// NginxInvalid returns the ingress-nginx annotations of ann (full keys,
// sorted) whose value the translation would refuse: its conversion fails,
// or the sluice.dev annotation it becomes is rejected by that
// annotation's own parser (an InvalidAnnotation problem). The checks that
// need other objects (the auth Secret, the auth and error Services) are
// not made. Pure; for `sluice migrate`.
func NginxInvalid(ann map[string]string) []string {
	native, res := nginxToNative(ann)
	bad := map[string]bool{}
	for _, k := range res.invalid {
		bad[k] = true
	}
	_, errs := parsePolicy(native)
	_, l7 := parseL7(native, true)
	_, canary := parseCanary(native)
	errs = append(append(errs, l7...), canary...)
	_, errs = parseSourceAccess(native, errs)
	_, errs = parseBodyLimit(native, errs)
	_, errs = parseCORS(native, errs)
	_, errs = parseRateLimit(native, errs)
	rejected := map[string]bool{}
	for _, e := range errs {
		rejected[e.key] = true
	}
	for k := range ann {
		name, ok := strings.CutPrefix(k, NginxAnnotationPrefix)
		if !ok {
			continue
		}
		if e := NginxLookup(name); e.Native != "" && rejected[e.Native] {
			// Only when the native value is this one's: a sluice.dev
			// annotation set beside a policy one wins, and the newer of
			// two names of one feature.
			if native[e.Native] == ann[k] {
				bad[k] = true
			}
		}
	}
	out := make([]string, 0, len(bad))
	for k := range bad {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

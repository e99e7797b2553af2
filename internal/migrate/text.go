package migrate

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
)

// String renders the report for a terminal: per Ingress, one line per
// annotation; then the summary table by annotation and the totals.
func (r Report) String() string {
	var b strings.Builder
	for _, ir := range r.Ingresses {
		class := ir.Class
		if class == "" {
			class = "(default class)"
		}
		fmt.Fprintf(&b, "Ingress %s/%s (class %s)\n", safe(ir.Namespace), safe(ir.Name), safe(class))
		if len(ir.Annotations) == 0 {
			b.WriteString("  no nginx.ingress.kubernetes.io annotations\n")
		}
		for _, a := range ir.Annotations {
			fmt.Fprintf(&b, "  %-26s %s", a.Status, safe(a.Name))
			if a.Native != "" {
				fmt.Fprintf(&b, " -> %s", a.Native)
			}
			b.WriteString("\n")
			if a.Note != "" {
				fmt.Fprintf(&b, "  %-26s   %s\n", "", a.Note)
			}
		}
	}
	if len(r.Skipped) > 0 {
		fmt.Fprintf(&b, "Not of an ingress-nginx class (not reported): %s\n", safe(strings.Join(r.Skipped, ", ")))
	}
	for _, e := range r.ReadErrors {
		fmt.Fprintf(&b, "read error: %s\n", safe(e))
	}
	b.WriteString("\nSummary by annotation\n")
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  ANNOTATION\tSTATUS\tINGRESSES\tSLUICE")
	for _, s := range r.Annotations {
		st := string(s.Status)
		if s.Invalid > 0 {
			st += fmt.Sprintf(" (%d invalid)", s.Invalid)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", safe(s.Name), st, s.Ingresses, s.Native)
	}
	tw.Flush()
	t := r.Totals
	fmt.Fprintf(&b, "\ningresses=%d skipped=%d annotations=%d supported=%d supported-with-difference=%d unsupported=%d refused=%d invalid=%d read-errors=%d\n",
		t.Ingresses, t.Skipped, t.Annotations, t.Supported, t.Different, t.Unsupported, t.Refused, t.Invalid, t.ReadErrors)
	if t.Findings() == 0 {
		b.WriteString("result: every annotation in use is served by sluice\n")
	} else {
		fmt.Fprintf(&b, "result: %d finding(s) to resolve before switching to sluice\n", t.Findings())
	}
	return b.String()
}

// safe quotes s when it holds anything a terminal could interpret (names
// from a manifest directory are not validated by an API server).
func safe(s string) string {
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c >= 0x80 && c < 0xa0 {
			return strconv.Quote(s)
		}
	}
	return s
}

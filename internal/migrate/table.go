package migrate

import (
	"fmt"
	"strings"

	"sluice.dev/sluice/internal/translate"
)

// Table markers delimit the generated annotation table in the migration
// guide (docs/migrating-from-ingress-nginx.md); TestGuideTable keeps it
// equal to GuideTable.
const (
	TableBegin = "<!-- BEGIN annotation table: generated from internal/translate's tables by `go test ./internal/migrate -run TestGuideTable -update`; do not edit -->"
	TableEnd   = "<!-- END annotation table -->"
)

// GuideTable renders translate's compatibility tables as the Markdown
// table of the migration guide: every ingress-nginx annotation sluice has
// a row for, its sluice.dev annotation, the status `sluice migrate`
// reports, and the difference. Annotations without a row are unsupported.
func GuideTable() string {
	var b strings.Builder
	b.WriteString("| ingress-nginx annotation | sluice annotation | status | difference |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	for _, e := range translate.NginxEntries() {
		native := "—"
		if e.Native != "" {
			native = "`" + e.Native + "`"
		}
		fmt.Fprintf(&b, "| `%s%s` | %s | %s | %s |\n", translate.NginxAnnotationPrefix, e.Name, native, statusOf(e.Support), cell(e.Note))
	}
	b.WriteString("| any other `*-snippet`, `lua-*` | — | refused | configuration snippets and Lua are refused: sluice runs no nginx |\n")
	b.WriteString("| any other `" + translate.NginxAnnotationPrefix + "*` | — | unsupported | ignored; the Ingress gets an UnsupportedAnnotations Event |\n")
	return b.String()
}

// cell escapes a note for a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

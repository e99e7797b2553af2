package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFiles are the Markdown files whose links are checked: the README,
// the CHANGELOG, everything under docs/, and the chart's and the
// benchmarks' READMEs.
func docFiles(t *testing.T, r string) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md", "bench/README.md", "deploy/helm/sluice/README.md"}
	err := filepath.WalkDir(filepath.Join(r, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, _ := filepath.Rel(r, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE   = regexp.MustCompile("`[^`]*`")
	headingRE    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose returns the lines of a Markdown text outside fenced code blocks.
func prose(text string) []string {
	var out []string
	fence := ""
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			fence = t[:3]
			out = append(out, "")
			continue
		}
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			out = append(out, "")
			continue
		}
		out = append(out, l)
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text (a repeated heading gets -1, -2, ...).
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	count := map[string]int{}
	for _, l := range prose(text) {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := anchor(inlineLinkRE.ReplaceAllString(m[2], "$1"))
		if n := count[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		count[a]++
	}
	return anchors
}

// TestLinks: every relative link of the docs points at a file of the
// repository, and every #anchor at a heading of its file.
func TestLinks(t *testing.T) {
	r := root(t)
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(r, path))
		if err != nil {
			return nil, err
		}
		a := headingAnchors(string(b))
		anchorsOf[path] = a
		return a, nil
	}
	checked := 0
	for _, f := range docFiles(t, r) {
		b, err := os.ReadFile(filepath.Join(r, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range prose(string(b)) {
			l = codeSpanRE.ReplaceAllString(l, "")
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target) {
					continue // http:, https:, mailto:
				}
				checked++
				path, frag, _ := strings.Cut(target, "#")
				dest := f
				if path != "" {
					dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), path)))
					st, err := os.Stat(filepath.Join(r, dest))
					if err != nil {
						t.Errorf("%s:%d: link %s: %s does not exist", f, i+1, target, dest)
						continue
					}
					if st.IsDir() || !strings.HasSuffix(dest, ".md") {
						if frag != "" {
							t.Errorf("%s:%d: link %s: an anchor into a file that is not Markdown", f, i+1, target)
						}
						continue
					}
				}
				if frag == "" {
					continue
				}
				a, err := anchors(dest)
				if err != nil {
					t.Errorf("%s:%d: %v", f, i+1, err)
					continue
				}
				if !a[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", f, i+1, target, dest, frag)
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d links checked: the link scan is broken", checked)
	}
}

// TestReadmeCommands: the README's first two commands are `make run` and
// `make test`, and each guide is one click from it.
func TestReadmeCommands(t *testing.T) {
	r := root(t)
	b, err := os.ReadFile(filepath.Join(r, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	var cmds []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			in = !in
			continue
		}
		if in && t != "" && !strings.HasPrefix(t, "#") {
			cmds = append(cmds, strings.TrimSpace(strings.SplitN(t, "#", 2)[0]))
		}
	}
	if len(cmds) < 2 || cmds[0] != "make run" || cmds[1] != "make test" {
		t.Errorf("the README's first commands are %q, want \"make run\" then \"make test\"", cmds[:min(2, len(cmds))])
	}
	guides, err := filepath.Glob(filepath.Join(r, "docs", "guides", "*.md"))
	if err != nil || len(guides) < 7 {
		t.Fatalf("docs/guides: %d guides, %v", len(guides), err)
	}
	for _, g := range append(guides, filepath.Join(r, "docs", "gateway-api.md"), filepath.Join(r, "docs", "migrating-from-ingress-nginx.md"),
		filepath.Join(r, "docs", "quickstart.md"), filepath.Join(r, "docs", "troubleshooting.md"), filepath.Join(r, "docs", "reference", "README.md")) {
		rel, _ := filepath.Rel(r, g)
		if !strings.Contains(text, "]("+filepath.ToSlash(rel)+")") {
			t.Errorf("README.md does not link %s", rel)
		}
	}
}

// cellSepRE is a column separator of a table row (an unescaped |; GitHub
// splits cells on it inside code spans too).
var cellSepRE = regexp.MustCompile(`(^|[^\\])\|`)

// TestTablesNotSplit: no Markdown table is cut by a blank line (the rows
// after it would render as text), and every row has its header's number
// of cells (an unescaped | in a cell shifts the rest of the row).
func TestTablesNotSplit(t *testing.T) {
	r := root(t)
	for _, f := range docFiles(t, r) {
		b, err := os.ReadFile(filepath.Join(r, f))
		if err != nil {
			t.Fatal(err)
		}
		lines := prose(string(b))
		header := 0
		for i, l := range lines {
			l = strings.TrimSpace(l)
			if !strings.HasPrefix(l, "|") {
				header = 0
				continue
			}
			n := len(cellSepRE.FindAllString(strings.ReplaceAll(l, "||", "| |"), -1))
			if header == 0 {
				header = n
			} else if n != header {
				t.Errorf("%s:%d: a table row of %d cells under a header of %d", f, i+1, n-1, header-1)
			}
		}
		for i := 2; i < len(lines); i++ {
			row := strings.HasPrefix(strings.TrimSpace(lines[i]), "|")
			if !row || strings.TrimSpace(lines[i-1]) != "" || !strings.HasPrefix(strings.TrimSpace(lines[i-2]), "|") {
				continue
			}
			sep := i+1 < len(lines) && regexp.MustCompile(`^\|?\s*:?-{3,}`).MatchString(strings.TrimSpace(lines[i+1]))
			if !sep {
				t.Errorf("%s:%d: a table row after a blank line that ends the table above: the rows from here render as text", f, i+1)
			}
		}
	}
}

// TestEveryDocLinked: every page under docs/ is linked from another page,
// so none is reachable only by listing the folder.
func TestEveryDocLinked(t *testing.T) {
	r := root(t)
	files := docFiles(t, r)
	linked := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(r, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range prose(string(b)) {
			for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(l, ""), -1) {
				path, _, _ := strings.Cut(m[1], "#")
				if path == "" || strings.Contains(path, ":") {
					continue
				}
				dest := filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(f), path)))
				if dest != f {
					linked[dest] = true
				}
			}
		}
	}
	for _, f := range files {
		if strings.HasPrefix(f, "docs/") && !linked[f] {
			t.Errorf("%s is linked from no other page: add it to docs/README.md", f)
		}
	}
}

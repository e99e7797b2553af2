package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// source is the parsed non-test Go code of the packages the reference
// describes, with every string constant by name.
type source struct {
	root   string
	fset   *token.FileSet
	files  []*ast.File
	paths  map[*ast.File]string // file → path relative to root
	consts map[string]string    // constant name → value (string constants only)
	// reasonParams maps a package directory and function name to the
	// positions of its parameters named reason.
	reasonParams map[string][]int
}

// scanDirs are the trees whose code the reference is generated from.
var scanDirs = []string{"api", "cmd", "internal"}

// skipDir tells the trees that only tests and fakes use: their Events and
// metrics are not sluice's.
func skipDir(rel string) bool {
	base := filepath.Base(rel)
	return base == "testdata" || strings.HasSuffix(base, "test") || strings.HasSuffix(base, "fake")
}

func parseSource(root string) (*source, error) {
	s := &source{root: root, fset: token.NewFileSet(), paths: map[*ast.File]string{}, consts: map[string]string{}, reasonParams: map[string][]int{}}
	for _, d := range scanDirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if e.IsDir() {
				if skipDir(rel) {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(s.fset, p, nil, parser.ParseComments)
			if err != nil {
				return fmt.Errorf("parsing %s: %w", rel, err)
			}
			s.files = append(s.files, f)
			s.paths[f] = filepath.ToSlash(rel)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// Constants defined by other constants (ReasonX = v1alpha1.ConditionX)
	// resolve once those are known: a few passes settle every chain.
	for range 4 {
		for _, f := range s.files {
			for _, c := range s.constSpecs(f) {
				s.consts[c.name] = c.value
			}
		}
	}
	for _, f := range s.files {
		dir := filepath.Dir(s.paths[f])
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			i := 0
			for _, field := range fn.Type.Params.List {
				names := field.Names
				if len(names) == 0 {
					i++
					continue
				}
				for _, n := range names {
					if n.Name == "reason" {
						key := dir + "." + fn.Name.Name
						s.reasonParams[key] = append(s.reasonParams[key], i)
					}
					i++
				}
			}
		}
	}
	return s, nil
}

// constant is one string constant with its doc comment.
type constant struct {
	name, value, doc, file string
}

// constSpecs returns the string constants of f; a constant without a
// comment of its own takes its group's.
func (s *source) constSpecs(f *ast.File) []constant {
	var out []constant
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			doc := commentText(vs.Doc)
			if doc == "" {
				doc = commentText(vs.Comment)
			}
			if doc == "" && len(g.Specs) == 1 {
				doc = commentText(g.Doc)
			}
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if v, ok := s.resolve(vs.Values[i]); ok {
					out = append(out, constant{name: n.Name, value: v, doc: doc, file: s.paths[f]})
				}
			}
		}
	}
	return out
}

func commentText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

// stringLit is the value of a string literal, or of a sum of them.
func stringLit(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(e.Value)
		return v, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringLit(e.X)
		b, ok2 := stringLit(e.Y)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return stringLit(e.X)
	}
	return "", false
}

// resolve is the value of a string literal or of a named string constant
// (by its name alone: sluice's reason constants of one name agree).
func (s *source) resolve(e ast.Expr) (string, bool) {
	if v, ok := stringLit(e); ok {
		return v, true
	}
	switch e := e.(type) {
	case *ast.Ident:
		v, ok := s.consts[e.Name]
		return v, ok
	case *ast.SelectorExpr:
		v, ok := s.consts[e.Sel.Name]
		return v, ok
	case *ast.CallExpr: // string(x)
		if id, ok := e.Fun.(*ast.Ident); ok && id.Name == "string" && len(e.Args) == 1 {
			return s.resolve(e.Args[0])
		}
	}
	return "", false
}

// reasonRE is what an Event or condition reason looks like.
var reasonRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]+$`)

// reason is one Event reason found in the code.
type reason struct {
	Name  string
	Types []string // Normal, Warning (when the code says)
	Files []string
}

// eventReasons collects the Event reasons the code emits: the argument
// after corev1.EventTypeNormal/Warning in a call, reason fields and
// variables set from literals (translation problems, which the controller
// turns into Events), and Reason*/Problem* constants outside api/.
// Condition reasons (composite literals of a *Condition type) are not
// Events and are left out.
func (s *source) eventReasons() []reason {
	found := map[string]*reason{}
	add := func(name, typ, file string) {
		if !reasonRE.MatchString(name) {
			return
		}
		r := found[name]
		if r == nil {
			r = &reason{Name: name}
			found[name] = r
		}
		if typ != "" && !slices.Contains(r.Types, typ) {
			r.Types = append(r.Types, typ)
		}
		if !slices.Contains(r.Files, file) {
			r.Files = append(r.Files, file)
		}
	}
	for _, f := range s.files {
		file := s.paths[f]
		if strings.HasPrefix(file, "api/") || gatewayOnly(file) {
			continue
		}
		for _, c := range s.constSpecs(f) {
			if strings.HasPrefix(c.name, "Reason") || (strings.HasPrefix(c.name, "Problem") && strings.HasPrefix(file, "internal/dns/")) {
				add(c.value, "", file)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if isConditionType(n.Type) {
					return false
				}
				for _, el := range n.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "reason" || k.Name == "Reason") {
						if v, ok := s.resolve(kv.Value); ok {
							add(v, "", file)
						}
					}
				}
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Name == "reason" && i < len(n.Rhs) {
						if v, ok := stringLit(n.Rhs[i]); ok {
							add(v, "", file)
						}
					}
				}
			case *ast.CallExpr:
				for i, a := range n.Args {
					sel, ok := a.(*ast.SelectorExpr)
					if !ok || i+1 >= len(n.Args) {
						continue
					}
					typ := strings.TrimPrefix(sel.Sel.Name, "EventType")
					if typ != "Normal" && typ != "Warning" || typ == sel.Sel.Name {
						continue
					}
					if v, ok := s.resolve(n.Args[i+1]); ok {
						add(v, typ, file)
					}
				}
				callee := calleeName(n.Fun)
				if strings.Contains(callee, "Status") || strings.Contains(callee, "ondition") {
					break // a condition's reason, not an Event's
				}
				for _, i := range s.reasonParams[filepath.Dir(file)+"."+callee] {
					if i < len(n.Args) {
						if v, ok := stringLit(n.Args[i]); ok {
							add(v, "", file)
						}
					}
				}
			}
			return true
		})
	}
	out := make([]reason, 0, len(found))
	for _, r := range found {
		slices.Sort(r.Types)
		slices.Sort(r.Files)
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b reason) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// gatewayOnly tells the code of Gateway API translation, whose problems
// become Gateway and HTTPRoute status conditions (docs/gateway-api.md),
// not Events.
func gatewayOnly(file string) bool {
	return strings.HasPrefix(file, "internal/gateway/") || file == "internal/translate/gateway.go"
}

func isConditionType(t ast.Expr) bool {
	switch t := t.(type) {
	case *ast.SelectorExpr:
		return strings.HasSuffix(t.Sel.Name, "Condition")
	case *ast.Ident:
		return strings.HasSuffix(t.Name, "Condition")
	}
	return false
}

func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// metric is one Prometheus metric declared in the code.
type metric struct {
	Name, Type, Help string
	Labels           []string
	File             string
}

// metrics collects every prometheus.*Opts literal: its full name
// (Namespace_Subsystem_Name), type and help, and the label names of the
// New*Vec call it is passed to (or its ConstLabels).
func (s *source) metrics() []metric {
	var out []metric
	seen := map[*ast.CompositeLit]bool{}
	for _, f := range s.files {
		file := s.paths[f]
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			lit := optsLit(call.Args[0])
			if lit == nil {
				return true
			}
			m, ok := s.metricOf(lit, file)
			if !ok {
				return true
			}
			seen[lit] = true
			if len(call.Args) > 1 {
				if l, ok := call.Args[1].(*ast.CompositeLit); ok {
					for _, e := range l.Elts {
						if v, ok := s.resolve(e); ok {
							m.Labels = append(m.Labels, v)
						}
					}
				}
			}
			out = append(out, m)
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok && !seen[lit] && optsLit(lit) != nil {
				if m, ok := s.metricOf(lit, file); ok {
					out = append(out, m)
				}
			}
			return true
		})
	}
	slices.SortFunc(out, func(a, b metric) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b metric) bool { return a.Name == b.Name })
}

// optsLit is e as a prometheus.{Counter,Gauge,Histogram,Summary}Opts
// literal (or its address), else nil.
func optsLit(e ast.Expr) *ast.CompositeLit {
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.AND {
		e = u.X
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	sel, ok := lit.Type.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "prometheus" {
		return nil
	}
	switch sel.Sel.Name {
	case "CounterOpts", "GaugeOpts", "HistogramOpts", "SummaryOpts":
		return lit
	}
	return nil
}

func (s *source) metricOf(lit *ast.CompositeLit, file string) (metric, bool) {
	typ := strings.ToLower(strings.TrimSuffix(lit.Type.(*ast.SelectorExpr).Sel.Name, "Opts"))
	fields := map[string]string{}
	var constLabels []string
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		k, _ := kv.Key.(*ast.Ident)
		if k == nil {
			continue
		}
		if k.Name == "ConstLabels" {
			if cl, ok := kv.Value.(*ast.CompositeLit); ok {
				for _, e := range cl.Elts {
					if ckv, ok := e.(*ast.KeyValueExpr); ok {
						if v, ok := s.resolve(ckv.Key); ok {
							constLabels = append(constLabels, v)
						}
					}
				}
			}
			continue
		}
		if v, ok := s.resolve(kv.Value); ok {
			fields[k.Name] = v
		}
	}
	if fields["Name"] == "" {
		return metric{}, false
	}
	var parts []string
	for _, k := range []string{"Namespace", "Subsystem", "Name"} {
		if fields[k] != "" {
			parts = append(parts, fields[k])
		}
	}
	return metric{Name: strings.Join(parts, "_"), Type: typ, Help: fields["Help"], Labels: constLabels, File: file}, true
}

// conditionReasons collects the reasons sluice writes into the conditions
// of its own objects and pods (Gateway API statuses aside): Reason fields
// of *Condition literals and assignments to a Reason field, the literal
// after a metav1.ConditionTrue/False/Unknown argument, literals passed as
// the reason of a function whose name says it writes a status or
// condition, and the literals returned by functions named *Reason. By
// file.
func (s *source) conditionReasons() map[string][]string {
	out := map[string][]string{}
	add := func(file, v string) {
		if reasonRE.MatchString(v) && !slices.Contains(out[file], v) {
			out[file] = append(out[file], v)
		}
	}
	for _, f := range s.files {
		file := s.paths[f]
		if strings.HasPrefix(file, "api/") || gatewayOnly(file) {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if !isConditionType(n.Type) {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Reason" {
							if v, ok := s.resolve(kv.Value); ok {
								add(file, v)
							}
						}
					}
				}
			case *ast.AssignStmt: // c.Status, c.Reason = ..., "Reason"
				for i, l := range n.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "Reason" && i < len(n.Rhs) {
						if v, ok := s.resolve(n.Rhs[i]); ok {
							add(file, v)
						}
					}
				}
			case *ast.CallExpr:
				for i, a := range n.Args { // set(type, metav1.ConditionTrue, "Reason", ...)
					if sel, ok := a.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Condition") && i+1 < len(n.Args) {
						switch strings.TrimPrefix(sel.Sel.Name, "Condition") {
						case "True", "False", "Unknown":
							if v, ok := stringLit(n.Args[i+1]); ok {
								add(file, v)
							}
						}
					}
				}
				callee := calleeName(n.Fun)
				if !strings.Contains(callee, "Status") && !strings.Contains(callee, "ondition") {
					return true
				}
				for _, i := range s.reasonParams[filepath.Dir(file)+"."+callee] {
					if i < len(n.Args) {
						if v, ok := stringLit(n.Args[i]); ok {
							add(file, v)
						}
					}
				}
			case *ast.FuncDecl:
				if !strings.HasSuffix(n.Name.Name, "Reason") || n.Body == nil {
					return true
				}
				ast.Inspect(n.Body, func(m ast.Node) bool {
					if r, ok := m.(*ast.ReturnStmt); ok && len(r.Results) == 1 {
						if v, ok := stringLit(r.Results[0]); ok {
							add(file, v)
						}
					}
					return true
				})
			}
			return true
		})
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

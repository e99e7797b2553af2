// Package golden runs golden-file tests, the way the pure translation and
// planning packages are tested: one subtest per input file, its rendered
// output compared with a golden file beside it (rewritten when the test
// binary runs with the package's -update flag); and it decodes the
// multi-document YAML those inputs are written in. It is for tests only
// (it imports testing).
package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Case is one golden case.
type Case struct {
	// Name is the subtest's: the input's directory for an input named
	// input.yaml, else the input's file name without its extension.
	Name string
	// Input is the input file's path. Golden is the golden file's:
	// golden.txt beside an input.yaml, else the input's path with the
	// extension .golden.
	Input, Golden string
}

// caseOf is the Case of input file in.
func caseOf(in string) Case {
	dir, base := filepath.Split(in)
	if base == "input.yaml" {
		return Case{Name: filepath.Base(dir), Input: in, Golden: filepath.Join(dir, "golden.txt")}
	}
	stem := strings.TrimSuffix(in, filepath.Ext(in))
	return Case{Name: filepath.Base(stem), Input: in, Golden: stem + ".golden"}
}

// Run runs one subtest per file matching pattern (filepath.Glob; none
// matching fails t): got renders the case, and the text is compared with
// the case's golden file, or written to it when update is set.
func Run(t *testing.T, pattern string, update bool, got func(t *testing.T, c Case) string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden cases %s: %v", pattern, err)
	}
	for _, f := range files {
		c := caseOf(f)
		t.Run(c.Name, func(t *testing.T) {
			out := got(t, c)
			if update {
				if err := os.WriteFile(c.Golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(c.Golden)
			if err != nil {
				t.Fatalf("reading golden file (run with -update to create it): %v", err)
			}
			if out != string(want) {
				t.Errorf("output of %s differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", c.Input, c.Golden, out, want)
			}
		})
	}
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Documents calls each for every document of a multi-document YAML stream
// (documents separated by "---" lines) that holds more than comments,
// with its kind. It returns the first error, with the document's index
// and kind.
func Documents(data []byte, each func(kind string, doc []byte) error) error {
	for i, doc := range separator.Split(string(data), -1) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if string(j) == "null" {
			continue // empty or only comments
		}
		var tm struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if err := each(tm.Kind, []byte(doc)); err != nil {
			return fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
	}
	return nil
}

// Append decodes doc strictly (no unknown field) into a new T and appends
// it to list.
func Append[T any](list *[]*T, doc []byte) error {
	o := new(T)
	err := yaml.UnmarshalStrict(doc, o)
	*list = append(*list, o)
	return err
}

package golden

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestCaseOf: an input.yaml's case is named by its directory, with
// golden.txt beside it; any other input by its file name, with .golden.
func TestCaseOf(t *testing.T) {
	for in, want := range map[string]Case{
		"testdata/basic/input.yaml": {Name: "basic", Input: "testdata/basic/input.yaml", Golden: filepath.Join("testdata", "basic", "golden.txt")},
		"testdata/plan/a.b.json":    {Name: "a.b", Input: "testdata/plan/a.b.json", Golden: "testdata/plan/a.b.golden"},
		"testdata/x.yaml":           {Name: "x", Input: "testdata/x.yaml", Golden: "testdata/x.golden"},
	} {
		if got := caseOf(in); got != want {
			t.Errorf("caseOf(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// TestDocuments: documents split on "---" lines only, those holding only
// comments skipped, each given its kind; an error names the document.
func TestDocuments(t *testing.T) {
	data := "# comment only\n---\nkind: A\nv: 1\n--- \nkind: B\ntext: \"a\\n--- b\"\n---\n# nothing\n---\nv: 2\n"
	type item struct {
		Kind string `json:"kind"`
		V    int    `json:"v"`
		Text string `json:"text"`
	}
	var kinds []string
	var items []*item
	err := Documents([]byte(data), func(kind string, doc []byte) error {
		kinds = append(kinds, kind)
		return Append(&items, doc)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 3 || kinds[0] != "A" || kinds[1] != "B" || kinds[2] != "" || items[0].V != 1 || items[1].Text != "a\n--- b" || items[2].V != 2 {
		t.Fatalf("kinds %q, items %+v %+v %+v", kinds, *items[0], *items[1], *items[2])
	}
	err = Documents([]byte("kind: A\n---\nkind: B\n"), func(kind string, _ []byte) error {
		if kind == "B" {
			return errors.New("refused")
		}
		return nil
	})
	if err == nil || err.Error() != "document 1 (B): refused" {
		t.Errorf("error = %v", err)
	}
	if err := Append(&items, []byte("kind: A\nunknown: 1\n")); err == nil {
		t.Error("an unknown field decoded")
	}
}

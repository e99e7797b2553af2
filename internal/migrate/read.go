package migrate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"sluice.dev/sluice/internal/source/manifests"
)

// Read decodes one manifest file (YAML documents separated by "---", or
// JSON; single objects or Lists) with the proxy's manifest decoder and
// returns its Ingresses and IngressClasses. Problems (invalid documents,
// unknown fields) are returned as messages; what could be read is
// returned either way.
func Read(name string, data []byte) (ings []*networkingv1.Ingress, classes []*networkingv1.IngressClass, problems []string) {
	in, err := manifests.Decode(name, data)
	if err != nil {
		problems = splitJoined(err)
	}
	return in.Ingresses, in.IngressClasses, problems
}

// splitJoined returns the messages of an errors.Join.
func splitJoined(err error) []string {
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, splitJoined(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// isManifest reports a file name ReadDir reads.
func isManifest(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") || strings.HasSuffix(n, ".json")
}

// ReadDir reads every *.yaml, *.yml and *.json file under path (a
// directory, walked recursively without hidden entries, or one file) into
// an Input. An Ingress or IngressClass defined twice counts once (the
// first in path order) and is reported. The error is for path itself
// being unreadable; problems with single files and documents are in
// Input.ReadErrors.
func ReadDir(path string) (Input, error) {
	var in Input
	st, err := os.Stat(path)
	if err != nil {
		return in, fmt.Errorf("reading manifests: %w", err)
	}
	var files []string
	if !st.IsDir() {
		files = []string{path}
	} else {
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == path {
					return err
				}
				in.ReadErrors = append(in.ReadErrors, err.Error())
				return nil
			}
			if p != path && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.IsDir() && isManifest(d.Name()) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return in, fmt.Errorf("reading manifests: %w", err)
		}
	}
	seen := map[string]bool{}
	for _, f := range files { // WalkDir walks in lexical order
		data, err := readLimited(f)
		if err != nil {
			in.ReadErrors = append(in.ReadErrors, err.Error())
			continue
		}
		ings, classes, problems := Read(f, data)
		in.ReadErrors = append(in.ReadErrors, problems...)
		for _, ing := range ings {
			key := "Ingress " + ing.Namespace + "/" + ing.Name
			if seen[key] {
				in.ReadErrors = append(in.ReadErrors, fmt.Sprintf("%s: %s defined again; the first counts", f, key))
				continue
			}
			seen[key] = true
			in.Ingresses = append(in.Ingresses, ing)
		}
		for _, c := range classes {
			key := "IngressClass " + c.Name
			if seen[key] {
				in.ReadErrors = append(in.ReadErrors, fmt.Sprintf("%s: %s defined again; the first counts", f, key))
				continue
			}
			seen[key] = true
			in.Classes = append(in.Classes, c)
		}
	}
	return in, nil
}

// readLimited reads a file of at most manifests.MaxFileSize bytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, manifests.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > manifests.MaxFileSize {
		return nil, errors.New(path + ": larger than the limit of " + fmt.Sprint(manifests.MaxFileSize) + " bytes; skipped")
	}
	return data, nil
}

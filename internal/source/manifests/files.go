package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"sluice.dev/sluice/internal/translate"
)

// Decode parses the content of one manifest file the way Source does and
// returns its objects. The error joins a *DocumentError for every invalid
// document and every document with unknown or duplicate fields; the
// objects of the other documents are returned either way. name only labels
// errors. For tests (translation goldens) and tools.
func Decode(name string, data []byte) (translate.Input, error) {
	d := decode(name, data)
	in, dupes := assemble(d.objects)
	errs := append(d.invalid, d.warnings...)
	for _, dup := range dupes {
		errs = append(errs, fmt.Errorf("%s: %s defined more than once; the first wins", name, dup))
	}
	return in, errors.Join(errs...)
}

// Load reads a directory once, the way Source's first load does, and
// returns its objects. The error joins read errors, invalid documents,
// documents with unknown fields and duplicate objects; everything that
// could be read is returned either way. For tests and tools.
func Load(dir string) (translate.Input, error) {
	s, err := New(Options{Dir: dir})
	if err != nil {
		return translate.Input{}, err
	}
	seen, subErrs, err := s.scan()
	if err != nil {
		return translate.Input{}, fmt.Errorf("reading manifests: %w", err)
	}
	var errs []error
	for _, err := range subErrs {
		errs = append(errs, fmt.Errorf("reading manifests: %w", err))
	}
	var objs []runtime.Object
	for _, path := range slices.Sorted(maps.Keys(seen)) {
		data, err := readFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", path, err))
			continue
		}
		d := decode(path, data)
		errs = append(errs, d.invalid...)
		errs = append(errs, d.warnings...)
		objs = append(objs, d.objects...)
	}
	in, dupes := assemble(objs)
	for _, dup := range dupes {
		errs = append(errs, fmt.Errorf("%s defined more than once; the first in path order wins", dup))
	}
	return in, errors.Join(errs...)
}

// Encode writes objects as one multi-document YAML manifest with apiVersion
// and kind set, ready for a Source to read. It accepts the kinds Source
// reads and does not modify objs.
func Encode(objs ...runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range objs {
		obj = obj.DeepCopyObject()
		var tm metav1.TypeMeta
		switch obj.(type) {
		case *networkingv1.Ingress:
			tm = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
		case *networkingv1.IngressClass:
			tm = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"}
		case *corev1.Service:
			tm = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		case *corev1.Secret:
			tm = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
		case *discoveryv1.EndpointSlice:
			tm = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
		default:
			return nil, fmt.Errorf("encoding object %d: unsupported type %T", i+1, obj)
		}
		obj.GetObjectKind().SetGroupVersionKind(tm.GroupVersionKind())
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %w", tm.Kind, err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

// WriteFile encodes objs (see Encode) into path, replacing the file
// atomically (write to a temporary file in the same directory, then
// rename) so a polling Source never reads half of it.
func WriteFile(path string, objs ...runtime.Object) error {
	data, err := Encode(objs...)
	if err != nil {
		return err
	}
	// The temporary name is hidden so a Source never reads it.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename: no such file
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing manifest %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing manifest %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("writing manifest %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing manifest %s: %w", path, err)
	}
	return nil
}

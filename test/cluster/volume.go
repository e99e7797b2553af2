package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// secretVolumes writes each Secret volume of the pod into a folder of the
// pod's own (every key a file, or only the volume's items at their
// paths), once, when the pod is set up: a later change of the Secret is
// not followed. A missing Secret fails the setup (retried) unless the
// volume is optional.
func (w *podWorker) secretVolumes(ctx context.Context, pod *corev1.Pod) error {
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		s, err := w.k.client.CoreV1().Secrets(pod.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && v.Secret.Optional != nil && *v.Secret.Optional {
			s, err = &corev1.Secret{}, nil
		}
		if err != nil {
			return fmt.Errorf("reading secret %s of volume %s: %w", v.Secret.SecretName, v.Name, err)
		}
		dir := filepath.Join(w.dir, "volumes", v.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating the folder of volume %s: %w", v.Name, err)
		}
		files := map[string]string{}
		for k := range s.Data {
			files[k] = k
		}
		if len(v.Secret.Items) > 0 {
			files = map[string]string{}
			for _, it := range v.Secret.Items {
				if _, ok := s.Data[it.Key]; !ok && (v.Secret.Optional == nil || !*v.Secret.Optional) {
					return fmt.Errorf("secret %s has no key %s (volume %s)", s.Name, it.Key, v.Name)
				}
				files[it.Key] = it.Path
			}
		}
		for key, rel := range files {
			data, ok := s.Data[key]
			if !ok {
				continue
			}
			if rel == "" || strings.Contains(rel, "..") || filepath.IsAbs(rel) {
				return fmt.Errorf("volume %s: invalid path %q", v.Name, rel)
			}
			path := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return fmt.Errorf("creating the folder of %s: %w", path, err)
			}
			if err := writeFileAtomic(path, data); err != nil {
				return err
			}
		}
		if w.secretDirs == nil {
			w.secretDirs = map[string]string{}
		}
		w.secretDirs[v.Name] = dir
	}
	return nil
}

// secretMounts are the (folder, mount path) pairs of c's mounts of Secret
// volumes, flat, for mountScript.
func (w *podWorker) secretMounts(c corev1.Container) []string {
	var out []string
	for _, m := range c.VolumeMounts {
		if dir, ok := w.secretDirs[m.Name]; ok && filepath.IsAbs(m.MountPath) {
			out = append(out, dir, m.MountPath)
		}
	}
	return out
}

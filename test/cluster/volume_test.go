package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestSecretVolumes: a Secret volume is written into the pod's folder,
// whole or by items, and bound only where a container mounts it; a
// missing Secret fails unless the volume is optional.
func TestSecretVolumes(t *testing.T) {
	yes := true
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "keys"}, Data: map[string][]byte{"a": []byte("A"), "b": []byte("B")}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "whole", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "keys"}}},
		{Name: "items", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "keys", Items: []corev1.KeyToPath{{Key: "b", Path: "sub/bee"}}}}},
		{Name: "optional", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: &yes}}},
		{Name: "other", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}}}
	w := &podWorker{k: &kubelet{kubeletOptions: kubeletOptions{client: fake.NewSimpleClientset(secret)}}, dir: t.TempDir()}
	if err := w.secretVolumes(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"whole/a": "A", "whole/b": "B", "items/sub/bee": "B"} {
		got, err := os.ReadFile(filepath.Join(w.dir, "volumes", path))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(w.dir, "volumes", "items", "a")); err == nil {
		t.Error("a key outside the volume's items was written")
	}
	c := corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "whole", MountPath: "/etc/x"}, {Name: "other", MountPath: "/tmp/y"}}}
	if got, want := w.secretMounts(c), []string{filepath.Join(w.dir, "volumes", "whole"), "/etc/x"}; !slices.Equal(got, want) {
		t.Errorf("mounts %q, want %q", got, want)
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "missing", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent"}}}}
	if err := w.secretVolumes(context.Background(), pod); err == nil {
		t.Error("a missing Secret of a volume that is not optional did not fail the setup")
	}
}

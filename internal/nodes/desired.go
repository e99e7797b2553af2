// Package nodes plans the per-node ingress replicas of an IngressDaemonSet:
// which Deployment each matching node runs (<name>-<node>, nodeName set),
// the health-checker DaemonSet (<name>-<port>, `sluice node-health` on the
// host network), the PodDisruptionBudget that keeps evictions away from
// attached nodes, and the next step of the node-by-node rollout (which
// nodes to detach, update, reattach or release).
//
//	IngressDaemonSet + Nodes + its Deployments + load-balancer view ─► Plan (pure) ─► reconciler applies
//
// Nothing here does I/O, reads a clock or logs: the caller passes the
// instant and the load balancer's view of each node, and turns the Plan's
// problems into Events and status.
package nodes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"sluice.dev/sluice/api/v1alpha1"
)

// Defaults of the spec.
const (
	DefaultPodsPerNode             = 1
	DefaultProgressDeadlineSeconds = 300
	DefaultMaxDegradedNodes        = 1
	// DefaultHealthCheckerImage is the health checker's image when neither
	// the spec nor the controller names one.
	DefaultHealthCheckerImage = "sluice"
)

// DeploymentName is the per-node Deployment's name: <name>-<node>.
func DeploymentName(ids *v1alpha1.IngressDaemonSet, node string) string {
	return ids.Name + "-" + node
}

// HealthCheckerName is the health-checker DaemonSet's name: <name>-<port>.
func HealthCheckerName(ids *v1alpha1.IngressDaemonSet) string {
	return ids.Name + "-" + strconv.Itoa(int(ids.Spec.HealthCheckNodePort))
}

// PodsPerNode returns spec.podsPerNode with its default.
func PodsPerNode(ids *v1alpha1.IngressDaemonSet) int32 {
	if p := ids.Spec.PodsPerNode; p != nil && *p > 0 {
		return *p
	}
	return DefaultPodsPerNode
}

// DetachMode reports whether maxUnavailableNodes (above 0) selects detach
// mode, and the number of nodes that may roll at once.
func DetachMode(ids *v1alpha1.IngressDaemonSet) (detach bool, budget int) {
	ru := ids.Spec.UpdateStrategy.RollingUpdate
	if n := ru.MaxUnavailableNodes; n != nil && *n > 0 {
		return true, int(*n)
	}
	if n := ru.MaxDegradedNodes; n != nil && *n > 0 {
		return false, int(*n)
	}
	return false, DefaultMaxDegradedNodes
}

// DetachAnnotation returns the node annotation (key, value) that detaches
// a node.
func DetachAnnotation(ids *v1alpha1.IngressDaemonSet) (key, value string) {
	key, value = v1alpha1.DefaultDetachAnnotation, v1alpha1.DefaultDetachValue
	if a := ids.Spec.UpdateStrategy.RollingUpdate.AnnotateNodeToDetach; a != nil && a.Key != "" {
		key = a.Key
		if a.Value != nil {
			value = *a.Value
		}
	}
	return key, value
}

// Detached reports whether node carries ids' detach annotation.
func Detached(ids *v1alpha1.IngressDaemonSet, node *corev1.Node) bool {
	key, value := DetachAnnotation(ids)
	v, ok := node.Annotations[key]
	return ok && v == value
}

func ownerRef(ids *v1alpha1.IngressDaemonSet) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "IngressDaemonSet",
		Name: ids.Name, UID: ids.UID, Controller: &yes, BlockOwnerDeletion: &yes,
	}
}

// PodLabels are the labels the controller puts on every per-node pod (and
// selects them by).
func PodLabels(ids *v1alpha1.IngressDaemonSet, node string) map[string]string {
	return map[string]string{v1alpha1.LabelIngressDaemonSet: ids.Name, v1alpha1.LabelIngressDaemonForNode: node}
}

// checkNodeName returns why node cannot get a Deployment ("" if it can):
// its name goes into a label value and the Deployment's name.
func checkNodeName(ids *v1alpha1.IngressDaemonSet, node string) string {
	if errs := validation.IsValidLabelValue(node); len(errs) > 0 {
		return fmt.Sprintf("node name %q cannot be a label value: %s", node, errs[0])
	}
	if errs := validation.IsDNS1123Subdomain(DeploymentName(ids, node)); len(errs) > 0 {
		return fmt.Sprintf("Deployment name %q is invalid: %s", DeploymentName(ids, node), errs[0])
	}
	return ""
}

// Deployment returns the desired per-node Deployment of node, with the hash
// of its spec (replicas aside: scaling needs no detachment) in the
// object-hash annotation.
func Deployment(ids *v1alpha1.IngressDaemonSet, node string) *appsv1.Deployment {
	detach, _ := DetachMode(ids)
	ru := ids.Spec.UpdateStrategy.RollingUpdate
	maxUnavailable, maxSurge := ru.MaxUnavailablePodsPerNode, ru.MaxSurgedPodsPerNode
	if detach {
		if maxUnavailable == nil {
			all := intstr.FromString("100%")
			maxUnavailable = &all
		}
		if maxSurge == nil {
			none := intstr.FromInt32(0)
			maxSurge = &none
		}
	}
	deadline := int32(DefaultProgressDeadlineSeconds)
	if d := ids.Spec.ProgressDeadlineSeconds; d != nil && *d > 0 {
		deadline = *d
	}
	sel := PodLabels(ids, node)
	tmpl := *ids.Spec.Template.DeepCopy()
	tmpl.Labels = maps.Clone(tmpl.Labels)
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	maps.Copy(tmpl.Labels, sel)
	tmpl.Spec.NodeName = node
	replicas := PodsPerNode(ids)
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: DeploymentName(ids, node), Namespace: ids.Namespace,
			Labels:          maps.Clone(sel),
			OwnerReferences: []metav1.OwnerReference{ownerRef(ids)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(sel)},
			Template: tmpl,
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: maxUnavailable, MaxSurge: maxSurge},
			},
			ProgressDeadlineSeconds: &deadline,
		},
	}
	hashed := d.Spec
	hashed.Replicas = nil
	d.Annotations = map[string]string{v1alpha1.AnnotationObjectHash: hash(hashed)}
	return d
}

// HealthChecker returns the desired health-checker DaemonSet, or nil when
// spec.healthCheckNodePort is 0. image is the controller's default image.
func HealthChecker(ids *v1alpha1.IngressDaemonSet, image string) *appsv1.DaemonSet {
	port := ids.Spec.HealthCheckNodePort
	if port <= 0 {
		return nil
	}
	hc := ids.Spec.HealthChecker
	if hc.Image != "" {
		image = hc.Image
	}
	if image == "" {
		image = DefaultHealthCheckerImage
	}
	pull := hc.ImagePullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	name := HealthCheckerName(ids)
	sel := map[string]string{v1alpha1.LabelHealthChecker: name, v1alpha1.LabelIngressDaemonSet: ids.Name}
	key, value := DetachAnnotation(ids)
	one := intstr.FromInt32(1)
	ds := &appsv1.DaemonSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ids.Namespace, Labels: maps.Clone(sel),
			OwnerReferences: []metav1.OwnerReference{ownerRef(ids)},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(sel)},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &one},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(sel)},
				Spec: corev1.PodSpec{
					// The host network is the one thing beyond the restricted
					// Pod Security profile: the load balancer checks the node's
					// own address (baseline allows neither it nor hostPort).
					HostNetwork:        true,
					SecurityContext:    podSecurity(),
					DNSPolicy:          corev1.DNSClusterFirstWithHostNet,
					NodeSelector:       maps.Clone(ids.Spec.NodeSelector),
					Tolerations:        ids.Spec.Template.Spec.Tolerations,
					ServiceAccountName: hc.ServiceAccountName,
					Containers: []corev1.Container{{
						Name:            "node-health",
						Image:           image,
						ImagePullPolicy: pull,
						Args:            NodeHealthArgs(ids, key, value),
						Env: []corev1.EnvVar{
							{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
						},
						Ports:           []corev1.ContainerPort{{Name: "health", ContainerPort: port, HostPort: port}},
						SecurityContext: containerSecurity(port),
					}},
				},
			},
		},
	}
	ds.Annotations = map[string]string{v1alpha1.AnnotationObjectHash: hash(ds.Spec)}
	return ds
}

// podSecurity is the pod part of the restricted Pod Security profile: a
// non-root user and the runtime's default seccomp profile.
func podSecurity() *corev1.PodSecurityContext {
	yes := true
	return &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
}

// containerSecurity is the container part of the restricted profile: no
// privilege escalation, no capabilities, a read-only root filesystem. A
// port below 1024 on the host network keeps NET_BIND_SERVICE, the one
// capability the profile allows adding.
func containerSecurity(port int32) *corev1.SecurityContext {
	no, yes := false, true
	caps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	if port < 1024 {
		caps.Add = []corev1.Capability{"NET_BIND_SERVICE"}
	}
	return &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes, Capabilities: caps}
}

// NodeHealthArgs are the arguments of `sluice node-health` for ids (see
// package nodehealth for the contract): the port, the replicas' selector,
// the detach annotation and the update-pending annotation the controller
// sets while it replaces a node's pods. The node comes from $NODE_NAME.
func NodeHealthArgs(ids *v1alpha1.IngressDaemonSet, key, value string) []string {
	return []string{
		"node-health",
		"--health-address=:" + strconv.Itoa(int(ids.Spec.HealthCheckNodePort)),
		"--namespace=" + ids.Namespace,
		"--selector=" + v1alpha1.LabelIngressDaemonSet + "=" + ids.Name,
		"--detach-annotation=" + key,
		"--detach-value=" + value,
		"--update-pending-annotation=" + v1alpha1.AnnotationUpdatePending,
	}
}

// DisruptionBudget returns the PodDisruptionBudget that refuses every
// eviction of ids' pods (kubectl drain retries): the controller detaches a
// leaving node, waits for the load balancer, then removes the node's
// Deployment itself. Unhealthy pods may always be evicted.
func DisruptionBudget(ids *v1alpha1.IngressDaemonSet) *policyv1.PodDisruptionBudget {
	zero := intstr.FromInt32(0)
	always := policyv1.AlwaysAllow
	return &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ids.Name, Namespace: ids.Namespace,
			Labels:          map[string]string{v1alpha1.LabelIngressDaemonSet: ids.Name},
			OwnerReferences: []metav1.OwnerReference{ownerRef(ids)},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable:             &zero,
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelIngressDaemonSet: ids.Name}},
			UnhealthyPodEvictionPolicy: &always,
		},
	}
}

// hash is a short digest of v's JSON (map keys sorted by encoding/json).
func hash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// API types always marshal; a failure here is a programming error
		// and must not look like "unchanged".
		return "unhashable"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

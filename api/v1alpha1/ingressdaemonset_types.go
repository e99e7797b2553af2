package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// IngressDaemonSet names, labels, annotations and conditions. The node
// annotation keys are those of the seed (mumoshu/ingress-daemonset-
// controller and node-detacher), so that setups built around it keep
// working.
const (
	// LabelIngressDaemonSet is on every per-node Deployment, its pods and
	// the health checker: the IngressDaemonSet's name.
	LabelIngressDaemonSet = "sluice.dev/ingress-daemonset"
	// LabelIngressDaemonForNode is on every per-node Deployment and its
	// pods: the node's name (the seed's label).
	LabelIngressDaemonForNode = "ingress-daemon-for-node"
	// LabelHealthChecker is on the health-checker DaemonSet and its pods:
	// the DaemonSet's name.
	LabelHealthChecker = "sluice.dev/ingress-daemonset-health-checker"

	// AnnotationObjectHash, on a per-node Deployment, is the hash of the
	// Deployment spec the controller last wrote (the seed's key). A
	// Deployment whose hash differs from the desired one is outdated.
	AnnotationObjectHash = "object-hash"
	// AnnotationDetachStarted, on a node, is the RFC 3339 instant the
	// controller annotated the node to detach it; the grace periods and
	// the drain timeout count from it.
	AnnotationDetachStarted = "sluice.dev/detach-started"
	// AnnotationUpdatePending, on a node, is set (to "true") while the
	// controller replaces the node's pods: `sluice node-health` fails
	// (package nodehealth's --update-pending-annotation).
	AnnotationUpdatePending = "sluice.dev/update-pending"
	// AnnotationExcludedBy, on a node, says the controller added the
	// label node.kubernetes.io/exclude-from-external-load-balancers to
	// detach it (Instance bindings deregister the node's target at once),
	// so it removes the label when it reattaches the node.
	AnnotationExcludedBy = "sluice.dev/excluded-by"
	// AnnotationDetachedBy, on a node, names the IngressDaemonSet
	// (namespace/name) that detached it: only that one reattaches it.
	AnnotationDetachedBy = "sluice.dev/detached-by"

	// DefaultDetachAnnotation is annotateNodeToDetach.key's default: the
	// node annotation that fails `sluice node-health` and takes the node's
	// instance targets out of the load balancer (node-detacher's key).
	DefaultDetachAnnotation = "node-detacher.variant.run/detached"
	// DefaultDetachValue is annotateNodeToDetach.value's default.
	DefaultDetachValue = "true"
	// DefaultDetachTimestampAnnotation is the seed's key for the instant
	// node-detacher finished detaching a node (RFC 3339).
	DefaultDetachTimestampAnnotation = "node-detacher.variant.run/detachment-timestamp"

	// ConditionProgressing is True while nodes are being rolled, False
	// with reason NodeFailed when a node's pods did not become ready
	// (its Deployment exceeded its progress deadline): the rollout stops.
	ConditionProgressing = "Progressing"
	// ReasonNodeFailed is ConditionProgressing's reason when a node failed.
	ReasonNodeFailed = "NodeFailed"
)

// IngressDaemonSet runs podsPerNode ingress replicas on every matching node
// (one Deployment per node) plus a health checker on each node's
// healthCheckNodePort, and rolls updates node by node, detaching each node
// from the load balancer first.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ids,categories=sluice
// +kubebuilder:printcolumn:name="Per node",type=integer,JSONPath=`.spec.podsPerNode`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.nodes.desired`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.nodes.ready`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.nodes.updated`
// +kubebuilder:printcolumn:name="Detached",type=integer,JSONPath=`.status.nodes.detached`
// +kubebuilder:printcolumn:name="Progressing",type=string,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IngressDaemonSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IngressDaemonSetSpec   `json:"spec"`
	Status IngressDaemonSetStatus `json:"status,omitempty"`
}

// IngressDaemonSetSpec is what the user asks for.
type IngressDaemonSetSpec struct {
	// PodsPerNode is the number of replicas on each matching node (the
	// per-node Deployment's replicas). Default 1.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	PodsPerNode *int32 `json:"podsPerNode,omitempty"`

	// NodeSelector picks the nodes (labels, exact values); empty: every
	// node.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Template is the pod template of every per-node Deployment. The
	// controller adds the labels sluice.dev/ingress-daemonset and
	// ingress-daemon-for-node and sets spec.nodeName.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Template corev1.PodTemplateSpec `json:"template"`

	// HealthCheckNodePort is the host port the health checker (`sluice
	// node-health`, a DaemonSet named <name>-<port> on the host network)
	// listens on: 200 while every replica on the node is ready, the node is
	// not being detached and no update is pending for it. 0 (the default):
	// no health checker.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	HealthCheckNodePort int32 `json:"healthCheckNodePort,omitempty"`

	// HealthChecker configures the health checker's pods.
	// +optional
	HealthChecker HealthCheckerSpec `json:"healthChecker,omitempty"`

	// UpdateStrategy says how a template change reaches the nodes.
	// +optional
	UpdateStrategy IngressDaemonSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// ProgressDeadlineSeconds is the per-node Deployment's progress
	// deadline: a node whose pods are not ready by then fails, and the
	// rollout stops. Default 300.
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`
}

// HealthCheckerSpec configures the health-checker DaemonSet's pods.
type HealthCheckerSpec struct {
	// Image runs `sluice node-health`. Default: the controller's
	// --node-health-image.
	// +optional
	Image string `json:"image,omitempty"`
	// ImagePullPolicy of the health checker. Default IfNotPresent.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ServiceAccountName of the health checker: it reads its node, the
	// node's Deployment and its pods. Default "default".
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// IngressDaemonSetUpdateStrategy is the seed's updateStrategy.
type IngressDaemonSetUpdateStrategy struct {
	// Type is RollingUpdate, the only strategy.
	// +kubebuilder:validation:Enum=RollingUpdate
	// +kubebuilder:default=RollingUpdate
	// +optional
	Type string `json:"type,omitempty"`
	// RollingUpdate tunes the node-by-node rollout.
	// +optional
	RollingUpdate RollingUpdateIngressDaemonSet `json:"rollingUpdate,omitempty"`
}

// RollingUpdateIngressDaemonSet tunes the node-by-node rollout. Every node
// is detached from the load balancer before its pods are replaced, and
// reattached once they are ready (and its target healthy).
//
// +kubebuilder:validation:XValidation:rule="!(has(self.maxUnavailableNodes) && self.maxUnavailableNodes > 0 && has(self.maxDegradedNodes) && self.maxDegradedNodes > 0)",message="maxUnavailableNodes and maxDegradedNodes are exclusive: set only one of them above 0"
// +kubebuilder:validation:XValidation:rule="!has(self.waitForDetachmentByAnnotatedTimestamp) || has(self.annotateNodeToDetach)",message="waitForDetachmentByAnnotatedTimestamp needs annotateNodeToDetach"
type RollingUpdateIngressDaemonSet struct {
	// MaxUnavailableNodes, above 0, selects detach mode: up to this many
	// nodes are detached at once and all of a node's pods are replaced
	// together (maxUnavailablePodsPerNode defaults to 100%).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxUnavailableNodes *int32 `json:"maxUnavailableNodes,omitempty"`

	// MaxDegradedNodes is how many nodes roll at once when
	// maxUnavailableNodes is not set; each node's pods are replaced with
	// its Deployment's rolling update (maxUnavailablePodsPerNode,
	// maxSurgedPodsPerNode). Default 1.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxDegradedNodes *int32 `json:"maxDegradedNodes,omitempty"`

	// MaxUnavailablePodsPerNode is the per-node Deployment's
	// maxUnavailable. Default: the Deployment's (25%); 100% in detach
	// mode.
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxUnavailablePodsPerNode *intstr.IntOrString `json:"maxUnavailablePodsPerNode,omitempty"`

	// MaxSurgedPodsPerNode is the per-node Deployment's maxSurge. Default:
	// the Deployment's (25%); 0 in detach mode. Surge pods on the host
	// network need SO_REUSEPORT (`sluice proxy --reuse-port`).
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxSurgedPodsPerNode *intstr.IntOrString `json:"maxSurgedPodsPerNode,omitempty"`

	// AnnotateNodeToDetach is the node annotation that detaches a node.
	// Default: node-detacher.variant.run/detached=true, no grace period.
	// +optional
	AnnotateNodeToDetach *AnnotateToDetach `json:"annotateNodeToDetach,omitempty"`

	// WaitForDetachmentByAnnotatedTimestamp waits, for nodes no Instance
	// binding serves, until the node carries a detachment timestamp (set
	// by node-detacher or another agent) and its grace period has passed.
	// +optional
	WaitForDetachmentByAnnotatedTimestamp *WaitForDetachmentByAnnotatedTimestamp `json:"waitForDetachmentByAnnotatedTimestamp,omitempty"`
}

// AnnotateToDetach is the node annotation that detaches a node.
type AnnotateToDetach struct {
	// Key is the annotation key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// Value is the annotation value. Default "true".
	// +optional
	Value *string `json:"value,omitempty"`
	// GracePeriodSeconds is how long the controller waits after
	// annotating the node before it replaces pods, when no Instance
	// binding confirms the drain (then the binding's confirmation is
	// waited for instead).
	// +kubebuilder:validation:Minimum=0
	// +optional
	GracePeriodSeconds int32 `json:"gracePeriodSeconds,omitempty"`
}

// WaitForDetachmentByAnnotatedTimestamp waits for a node annotation
// holding the instant the node was detached.
type WaitForDetachmentByAnnotatedTimestamp struct {
	// Key is the annotation holding the timestamp.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// Format of the timestamp: RFC3339, the only one.
	// +kubebuilder:validation:Enum=RFC3339
	// +optional
	Format *string `json:"format,omitempty"`
	// GracePeriodSeconds counts from the annotated instant.
	// +kubebuilder:validation:Minimum=0
	// +optional
	GracePeriodSeconds int32 `json:"gracePeriodSeconds,omitempty"`
}

// IngressDaemonSetStatus is what the controller observed.
type IngressDaemonSetStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Nodes counts the matching nodes by rollout state.
	// +optional
	Nodes NodeCounts `json:"nodes,omitempty"`
	// Conditions: Progressing.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeCounts counts nodes by rollout state.
type NodeCounts struct {
	// Desired: matching nodes that should run the replicas.
	Desired int32 `json:"desired"`
	// Ready: nodes whose replicas are all ready and that are attached.
	Ready int32 `json:"ready"`
	// Updated: nodes whose Deployment has the current template.
	Updated int32 `json:"updated"`
	// Detached: nodes annotated to detach.
	Detached int32 `json:"detached"`
}

// IngressDaemonSetList is a list of IngressDaemonSet.
// +kubebuilder:object:root=true
type IngressDaemonSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IngressDaemonSet `json:"items"`
}

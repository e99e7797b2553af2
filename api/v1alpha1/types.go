package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// GroupVersion is the API group and version of this package.
var GroupVersion = schema.GroupVersion{Group: "sluice.dev", Version: "v1alpha1"}

// AddToScheme adds this package's types to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &LoadBalancerBinding{}, &LoadBalancerBindingList{}, &IngressDaemonSet{}, &IngressDaemonSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Condition types, readiness gates and pod conditions sluice uses.
const (
	// ConditionReady is True when every desired target is registered and
	// the provider answered the last reconcile without error.
	ConditionReady = "Ready"
	// ConditionProviderReachable is False while the provider cannot be
	// reached or answers with errors; its message carries the last error.
	ConditionProviderReachable = "ProviderReachable"

	// ReadinessGateHealthy is the readiness gate (and pod condition type) the
	// controller sets True once every binding selecting a pod reports its
	// target healthy.
	ReadinessGateHealthy = "sluice.dev/load-balancer-healthy"
	// PodConditionDrained is the pod condition the controller sets True once
	// the load balancer sends a deleted pod no new traffic and holds no
	// connection to it. The proxy ends its drain on it.
	PodConditionDrained = "sluice.dev/drained"
)

// TargetType says what is registered in the load balancer.
// +kubebuilder:validation:Enum=IP;Instance
type TargetType string

const (
	// TargetIP registers each selected pod's IP and container port.
	TargetIP TargetType = "IP"
	// TargetInstance registers each node that runs a ready selected pod,
	// at the node's address and a host or node port.
	TargetInstance TargetType = "Instance"
)

// LoadBalancerBinding binds a set of ingress pods to a load-balancer target
// group.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=lbb,categories=sluice
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.targetType`
// +kubebuilder:printcolumn:name="Healthy",type=integer,JSONPath=`.status.targets.healthy`
// +kubebuilder:printcolumn:name="Initial",type=integer,JSONPath=`.status.targets.initial`
// +kubebuilder:printcolumn:name="Draining",type=integer,JSONPath=`.status.targets.draining`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LoadBalancerBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LoadBalancerBindingSpec   `json:"spec"`
	Status LoadBalancerBindingStatus `json:"status,omitempty"`
}

// LoadBalancerBindingSpec is what the user asks for.
// +kubebuilder:validation:XValidation:rule="!has(self.healthCheckPort) || (has(self.targetType) && self.targetType == 'Instance')",message="healthCheckPort is for Instance targets only"
type LoadBalancerBindingSpec struct {
	// Selector picks the ingress pods, in the binding's namespace.
	Selector metav1.LabelSelector `json:"selector"`

	// Port is the pods' container port (number or name) for IP targets, or
	// the host or node port (a number) for Instance targets.
	// +kubebuilder:validation:XIntOrString
	Port intstr.IntOrString `json:"port"`

	// TargetType is IP (pod IPs, the default) or Instance (node addresses).
	// +kubebuilder:default=IP
	// +optional
	TargetType TargetType `json:"targetType,omitempty"`

	// HealthCheckPort, for Instance targets, is the node port the load
	// balancer health-checks instead of the traffic port: typically the
	// port of `sluice node-health`, which answers for every ingress
	// replica on the node. HAProxy: servers are added with "port N"
	// (servers added before a change keep their check port until they are
	// registered again). AWS: the target group's HealthCheckPort is set
	// outside sluice; the controller compares it with this value and warns
	// (Event HealthCheckPortMismatch) when they differ. Unset: the traffic
	// port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	HealthCheckPort *int32 `json:"healthCheckPort,omitempty"`

	// Provider names the load balancer and target group.
	Provider ProviderSpec `json:"provider"`

	// ReadinessGate, when true (the default), makes the controller set the
	// pod condition sluice.dev/load-balancer-healthy from target health.
	// Pods opt in by listing that type in spec.readinessGates.
	// +kubebuilder:default=true
	// +optional
	ReadinessGate *bool `json:"readinessGate,omitempty"`

	// Drain configures the drain handshake with deleted pods.
	// +optional
	Drain DrainSpec `json:"drain,omitempty"`

	// ZoneFloor is the least number of healthy targets each zone keeps
	// while targets leave: pod-deletion-cost steers ReplicaSet scale-down
	// away from a zone at its floor, and the eviction webhook refuses an
	// eviction that would take a zone below it. Default 1; 0 turns the
	// floor off.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	ZoneFloor *int32 `json:"zoneFloor,omitempty"`

	// MaxDeregisterFraction bounds how many of a group's healthy targets
	// one reconcile may deregister while their pods still exist (a
	// selector edit, a wrong port): a count or a percentage of the healthy
	// targets. A reconcile that would deregister more, or all of them, is
	// held (condition Held) until the binding carries the annotation
	// sluice.dev/confirm-deregister with its current generation. Default
	// "50%".
	// +kubebuilder:default="50%"
	// +kubebuilder:validation:XIntOrString
	// +optional
	MaxDeregisterFraction *intstr.IntOrString `json:"maxDeregisterFraction,omitempty"`

	// Publish lists the addresses written to status.loadBalancer of the
	// Ingresses sluice serves (the load balancer's public name or IPs).
	// +optional
	Publish []PublishAddress `json:"publish,omitempty"`

	// GatewayAddresses are IP addresses the load balancer also listens on,
	// forwarding to these targets, that Gateways of the classes naming this
	// binding hold one each: each Gateway gets one as its status.addresses
	// (the oldest first; kept while the Gateway exists) and is served from
	// a routing table of its own, to requests that reached its address, so
	// two Gateways never share routes. The proxies learn the address from
	// the load balancer's PROXY protocol header (HAProxy:
	// provider.haproxy.proxyProtocol; the proxies run with
	// --proxy-protocol and --gateway-addresses set to this list). A
	// Gateway left without one (all in use) is not programmed
	// (AddressNotAssigned). Unset: every Gateway of the class shares the
	// binding's addresses and one routing table.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:Pattern=`^[0-9A-Fa-f.:]+$`
	// +listType=set
	// +optional
	GatewayAddresses []string `json:"gatewayAddresses,omitempty"`
}

// ProviderSpec selects exactly one provider.
// +kubebuilder:validation:XValidation:rule="has(self.haproxy) != has(self.aws)",message="exactly one of haproxy or aws must be set"
type ProviderSpec struct {
	// HAProxy registers targets as dynamic servers through the runtime API.
	// +optional
	HAProxy *HAProxyProvider `json:"haproxy,omitempty"`
	// AWS registers targets in an ELBv2 target group.
	// +optional
	AWS *AWSProvider `json:"aws,omitempty"`
}

// HAProxyProvider addresses one HAProxy backend.
type HAProxyProvider struct {
	// RuntimeAPI is the runtime API address: "unix:///path/to/socket" or
	// "tcp://host:port".
	// +kubebuilder:validation:Pattern=`^(unix://.+|tcp://[^/]+)$`
	RuntimeAPI string `json:"runtimeAPI"`
	// Backend is the HAProxy backend holding the targets. It must use a
	// dynamic balancing algorithm (roundrobin, leastconn, random, ...).
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.:-]+$`
	// +kubebuilder:validation:MaxLength=128
	Backend string `json:"backend"`
	// ProxyProtocol adds the servers with "send-proxy-v2": HAProxy then
	// starts every connection to a target with a PROXY protocol v2 header
	// carrying the client's address and the address it reached (the
	// proxies need --proxy-protocol and --trusted-proxies naming HAProxy).
	// Needed for spec.gatewayAddresses. Servers added before a change keep
	// theirs until registered again.
	// +optional
	ProxyProtocol bool `json:"proxyProtocol,omitempty"`
}

// AWSProvider addresses ELBv2 target groups.
// +kubebuilder:validation:XValidation:rule="!has(self.managed) || !has(self.targetGroupARNs) || size(self.targetGroupARNs) == 0",message="a managed load balancer has its own target group: targetGroupARNs must be empty"
type AWSProvider struct {
	// TargetGroupARNs lists target groups by ARN.
	// +optional
	TargetGroupARNs []string `json:"targetGroupARNs,omitempty"`
	// Region overrides the region from the environment.
	// +optional
	Region string `json:"region,omitempty"`
	// Managed makes sluice create and own the load balancer, its
	// listeners and the target group (tagged with the cluster and the
	// binding), find ACM certificates for TLS/HTTPS listeners, and delete
	// them with the binding. Needs the controller's --aws-cluster.
	// +optional
	Managed *ManagedLoadBalancer `json:"managed,omitempty"`
}

// DrainSpec configures the drain handshake.
type DrainSpec struct {
	// Handshake, when true (the default), makes the controller set the pod
	// condition sluice.dev/drained once the load balancer has let go.
	// +kubebuilder:default=true
	// +optional
	Handshake *bool `json:"handshake,omitempty"`
	// Timeout bounds how long the controller waits for the provider before
	// it marks a pod drained anyway. Default 5m.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// PublishAddress is one address of the load balancer.
type PublishAddress struct {
	// +optional
	IP string `json:"ip,omitempty"`
	// +optional
	Hostname string `json:"hostname,omitempty"`
}

// LoadBalancerBindingStatus is what the controller observed.
type LoadBalancerBindingStatus struct {
	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready and ProviderReachable.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Targets counts the binding's targets by state.
	// +optional
	Targets TargetCounts `json:"targets,omitempty"`
	// Zones counts the binding's targets by zone and state, sorted by
	// zone ("" for targets whose zone is unknown).
	// +optional
	Zones []ZoneTargetCounts `json:"zones,omitempty"`
	// LastError is the last provider error, empty once a reconcile succeeds.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// Addresses are the load balancer's addresses in use for the Ingresses
	// of the IngressClasses that name this binding (their status and DNS
	// records): spec.publish when it is set, otherwise what the controller
	// discovered from the provider (AWS: the load balancers of the target
	// groups). Kept while discovery fails.
	// +optional
	Addresses []LoadBalancerAddress `json:"addresses,omitempty"`
	// Managed is what sluice created or adopted for
	// spec.provider.aws.managed.
	// +optional
	Managed *ManagedStatus `json:"managed,omitempty"`
}

// LoadBalancerAddress is one address of the load balancer in front of a
// binding's targets.
type LoadBalancerAddress struct {
	// IP is an IPv4 or IPv6 address.
	// +optional
	IP string `json:"ip,omitempty"`
	// Hostname is a DNS name (an AWS load balancer's DNS name).
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// CanonicalHostedZoneID is the Route53 hosted zone of an AWS load
	// balancer's DNS name: the target of ALIAS records.
	// +optional
	CanonicalHostedZoneID string `json:"canonicalHostedZoneID,omitempty"`
	// LoadBalancerARN is the AWS load balancer the address was found on.
	// +optional
	LoadBalancerARN string `json:"loadBalancerARN,omitempty"`
}

// TargetCounts counts targets by load-balancer state.
type TargetCounts struct {
	Initial     int32 `json:"initial"`
	Healthy     int32 `json:"healthy"`
	Unhealthy   int32 `json:"unhealthy"`
	Draining    int32 `json:"draining"`
	Unavailable int32 `json:"unavailable"`
}

// LoadBalancerBindingList is a list of LoadBalancerBinding.
// +kubebuilder:object:root=true
type LoadBalancerBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LoadBalancerBinding `json:"items"`
}

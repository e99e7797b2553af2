package v1alpha1

// Managed AWS load balancers (spec.provider.aws.managed): sluice creates
// and owns the load balancer, its listeners and target group.
const (
	// ConditionLoadBalancerManaged is True once the managed load balancer,
	// listeners and target group match the spec; False with the reason
	// (an AWS error, a change AWS cannot make in place waiting for
	// confirmation, certificates missing) otherwise.
	ConditionLoadBalancerManaged = "LoadBalancerManaged"

	// AnnotationConfirmReplace, set on a binding to its current
	// metadata.generation, lets sluice replace a managed load balancer or
	// target group whose immutable settings (type, scheme, target type,
	// protocol, port) changed: the new resources are created first, the
	// targets registered in the new group, and only then the old ones
	// deleted.
	AnnotationConfirmReplace = "sluice.dev/confirm-replace"
)

// ManagedLoadBalancer asks sluice to create and own an ELBv2 load balancer
// for the binding.
// +kubebuilder:validation:XValidation:rule="self.type == 'network' ? self.listeners.all(l, l.protocol == 'TCP' || l.protocol == 'TLS') : self.listeners.all(l, l.protocol == 'HTTP' || l.protocol == 'HTTPS')",message="network load balancers take TCP and TLS listeners, application load balancers HTTP and HTTPS"
// +kubebuilder:validation:XValidation:rule="has(self.subnets) != has(self.subnetTags)",message="exactly one of subnets or subnetTags must be set"
// +kubebuilder:validation:XValidation:rule="self.type == 'network' || !has(self.targetGroupAttributes) || (!has(self.targetGroupAttributes.preserveClientIP) && !has(self.targetGroupAttributes.proxyProtocolV2))",message="preserveClientIP and proxyProtocolV2 apply to network load balancers only"
type ManagedLoadBalancer struct {
	// Type is network (default) or application.
	// +kubebuilder:validation:Enum=network;application
	// +kubebuilder:default=network
	// +optional
	Type string `json:"type,omitempty"`
	// Scheme is internet-facing (default) or internal.
	// +kubebuilder:validation:Enum=internet-facing;internal
	// +kubebuilder:default=internet-facing
	// +optional
	Scheme string `json:"scheme,omitempty"`
	// Subnets are the subnet IDs of the load balancer (an application
	// load balancer needs two zones).
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Subnets []string `json:"subnets,omitempty"`
	// SubnetTags discovers the subnets instead: every subnet carrying all
	// these tags (ec2:DescribeSubnets), one per zone.
	// +kubebuilder:validation:MaxProperties=8
	// +optional
	SubnetTags map[string]string `json:"subnetTags,omitempty"`
	// VPCID is the VPC of the target group (AWS requires it for ip and
	// instance target groups).
	// +optional
	VPCID string `json:"vpcID,omitempty"`
	// Listeners are the ports the load balancer listens on, all
	// forwarding to the binding's target group.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=port
	Listeners []ManagedListener `json:"listeners"`
	// HealthCheck configures the target group's health check. Zero
	// fields take AWS's defaults.
	// +optional
	HealthCheck ManagedHealthCheck `json:"healthCheck,omitempty"`
	// TargetGroupAttributes are the target group's attributes sluice sets.
	// +optional
	TargetGroupAttributes *TargetGroupAttributes `json:"targetGroupAttributes,omitempty"`
	// Tags are added to everything sluice creates (besides its own
	// sluice.dev/* ownership tags, which they may not override).
	// +kubebuilder:validation:MaxProperties=40
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('sluice.dev/'))",message="tags under sluice.dev/ are sluice's own"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
}

// ManagedListener is one listener of a managed load balancer.
type ManagedListener struct {
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// Protocol is TCP or TLS (network), HTTP or HTTPS (application).
	// TLS and HTTPS listeners get the ACM certificates covering the hosts
	// of the Ingresses of the binding's IngressClasses.
	// +kubebuilder:validation:Enum=TCP;TLS;HTTP;HTTPS
	Protocol string `json:"protocol"`
	// SSLPolicy for TLS and HTTPS listeners. Default: AWS's.
	// +optional
	SSLPolicy string `json:"sslPolicy,omitempty"`
}

// ManagedHealthCheck is the target group's health check.
type ManagedHealthCheck struct {
	// Path of the HTTP health check. Default "/".
	// +kubebuilder:validation:Pattern=`^/.*$`
	// +optional
	Path string `json:"path,omitempty"`
	// Port is "traffic-port" (default) or a port number.
	// +kubebuilder:validation:Pattern=`^(traffic-port|[0-9]{1,5})$`
	// +optional
	Port string `json:"port,omitempty"`
	// IntervalSeconds: 5 to 300.
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=300
	// +optional
	IntervalSeconds int32 `json:"intervalSeconds,omitempty"`
	// TimeoutSeconds: 2 to 120.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=120
	// +optional
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`
	// HealthyThreshold: 2 to 10.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=10
	// +optional
	HealthyThreshold int32 `json:"healthyThreshold,omitempty"`
	// UnhealthyThreshold: 2 to 10.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=10
	// +optional
	UnhealthyThreshold int32 `json:"unhealthyThreshold,omitempty"`
}

// TargetGroupAttributes are the target group attributes sluice manages;
// nil fields are left as AWS has them.
type TargetGroupAttributes struct {
	// DeregistrationDelaySeconds: 0 to 3600 (AWS's default 300).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	DeregistrationDelaySeconds *int32 `json:"deregistrationDelaySeconds,omitempty"`
	// PreserveClientIP (network load balancers).
	// +optional
	PreserveClientIP *bool `json:"preserveClientIP,omitempty"`
	// ProxyProtocolV2 (network load balancers).
	// +optional
	ProxyProtocolV2 *bool `json:"proxyProtocolV2,omitempty"`
}

// ManagedStatus is what sluice created or adopted for a managed binding.
type ManagedStatus struct {
	// LoadBalancerARN of the managed load balancer.
	// +optional
	LoadBalancerARN string `json:"loadBalancerARN,omitempty"`
	// TargetGroupARN of the managed target group.
	// +optional
	TargetGroupARN string `json:"targetGroupARN,omitempty"`
	// ListenerARNs of the managed listeners, by port order.
	// +optional
	ListenerARNs []string `json:"listenerARNs,omitempty"`
	// Certificates are the ACM certificate ARNs on the TLS/HTTPS
	// listeners, the default one first.
	// +optional
	Certificates []string `json:"certificates,omitempty"`
	// HostsWithoutCertificate are Ingress hosts no usable certificate
	// covers (or that did not fit the listener's limit).
	// +optional
	HostsWithoutCertificate []string `json:"hostsWithoutCertificate,omitempty"`
}

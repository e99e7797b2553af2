package chart

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// podSpec returns the pod spec of a workload (an IngressDaemonSet's
// template included).
func podSpec(o map[string]any) map[string]any {
	s, _ := path(o, "spec", "template", "spec").(map[string]any)
	return s
}

func container(o map[string]any) map[string]any {
	cs, _ := path(podSpec(o), "containers").([]any)
	if len(cs) == 0 {
		return nil
	}
	return cs[0].(map[string]any)
}

// subjects lists the ServiceAccounts a (Cluster)RoleBinding binds.
func subjects(o map[string]any) []string {
	var out []string
	l, _ := o["subjects"].([]any)
	for _, s := range l {
		out = append(out, fmt.Sprint(path(s, "name")))
	}
	return out
}

// Every value of conventions.values.yaml reaches the objects it is for:
// the controller and each proxy fleet.
func TestConventions(t *testing.T) {
	objs := objects(t, "-f", "testdata/conventions.values.yaml")
	ctl := find(objs, "Deployment", "sluice-controller")
	main := find(objs, "Deployment", "sluice-proxy")
	edge := find(objs, "DaemonSet", "sluice-proxy-edge")
	if ctl == nil || main == nil || edge == nil {
		t.Fatalf("workloads missing: controller %v, main %v, edge %v", ctl != nil, main != nil, edge != nil)
	}
	for _, tc := range []struct {
		name     string
		w        map[string]any
		sa, prio string
		hostNet  bool
	}{
		{"controller", ctl, "platform-sluice", "system-cluster-critical", true},
		{"main fleet", main, "sluice-proxy", "ingress-critical", false},
		{"edge fleet", edge, "sluice-edge-proxy", "system-node-critical", true},
	} {
		spec := podSpec(tc.w)
		if got := spec["serviceAccountName"]; got != tc.sa {
			t.Errorf("%s: serviceAccountName %v, want %s", tc.name, got, tc.sa)
		}
		if got := spec["priorityClassName"]; got != tc.prio {
			t.Errorf("%s: priorityClassName %v, want %s", tc.name, got, tc.prio)
		}
		if got := fmt.Sprint(spec["imagePullSecrets"]); got != "[map[name:regcred]]" {
			t.Errorf("%s: imagePullSecrets %s", tc.name, got)
		}
		if got := path(tc.w, "spec", "template", "metadata", "labels", "team"); got != "platform" {
			t.Errorf("%s: pod label team=%v", tc.name, got)
		}
		// The chart's selector label wins over a podLabels entry.
		if got, want := path(tc.w, "spec", "template", "metadata", "labels", "app.kubernetes.io/name"), path(tc.w, "spec", "selector", "matchLabels", "app.kubernetes.io/name"); got != want {
			t.Errorf("%s: pod label app.kubernetes.io/name=%v, selector %v", tc.name, got, want)
		}
		if got := spec["hostNetwork"] == true; got != tc.hostNet {
			t.Errorf("%s: hostNetwork %v, want %v", tc.name, got, tc.hostNet)
		}
		if tc.hostNet != (spec["dnsPolicy"] == "ClusterFirstWithHostNet") {
			t.Errorf("%s: dnsPolicy %v with hostNetwork %v", tc.name, spec["dnsPolicy"], tc.hostNet)
		}
		// Overrides are merged over the hardened defaults.
		sc := path(container(tc.w), "securityContext")
		if path(sc, "allowPrivilegeEscalation") != false || !slices.Equal(strs(path(sc, "capabilities", "drop")), []string{"ALL"}) || path(sc, "runAsNonRoot") != true {
			t.Errorf("%s: container securityContext %v lost a hardened default", tc.name, sc)
		}
		if path(spec, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
			t.Errorf("%s: pod securityContext %v lost seccompProfile", tc.name, spec["securityContext"])
		}
	}
	if got := path(container(ctl), "securityContext", "runAsUser"); got != float64(65532) {
		t.Errorf("controller runAsUser %v", got)
	}
	if got := path(podSpec(ctl), "securityContext", "fsGroup"); got != float64(65532) {
		t.Errorf("controller fsGroup %v", got)
	}
	if sc := path(container(main), "securityContext").(map[string]any); sc["runAsUser"] != float64(65532) || sc["readOnlyRootFilesystem"] != nil {
		t.Errorf("main fleet securityContext %v: want runAsUser 65532 and readOnlyRootFilesystem removed (null)", sc)
	}
	if got := path(ctl, "spec", "template", "metadata", "annotations", "example.com/scrape"); got != "true" {
		t.Errorf("controller pod annotation %v", got)
	}

	// Extra volumes beside the chart's own (the DNS ownership key).
	if got := fmt.Sprint(podSpec(ctl)["volumes"]); !strings.Contains(got, "name:dns-ownership") || !strings.Contains(got, "name:corp-ca") {
		t.Errorf("controller volumes %s", got)
	}
	if got := fmt.Sprint(container(ctl)["volumeMounts"]); !strings.Contains(got, "/etc/sluice/dns-ownership") || !strings.Contains(got, "/etc/ssl/corp") {
		t.Errorf("controller volumeMounts %s", got)
	}
	if got := fmt.Sprint(podSpec(main)["volumes"]); got != "[map[emptyDir:map[] name:tmp]]" {
		t.Errorf("proxy volumes %s", got)
	}
	if got := fmt.Sprint(container(main)["volumeMounts"]); got != "[map[mountPath:/tmp name:tmp]]" {
		t.Errorf("proxy volumeMounts %s", got)
	}

	// Topology spread: the chart's own two, then the extra one.
	spread, _ := podSpec(main)["topologySpreadConstraints"].([]any)
	var keys []string
	for _, c := range spread {
		keys = append(keys, fmt.Sprint(path(c, "topologyKey")))
	}
	if want := []string{"topology.kubernetes.io/zone", "kubernetes.io/hostname", "example.com/rack"}; !slices.Equal(keys, want) {
		t.Errorf("proxy topology spread keys %v, want %v", keys, want)
	}
	if got := fmt.Sprint(podSpec(ctl)["topologySpreadConstraints"]); !strings.Contains(got, "DoNotSchedule") {
		t.Errorf("controller topology spread %s", got)
	}

	// Host network: the proxies share the node's ports and declare none.
	if args := proxyArgs(edge); !slices.Contains(args, any("--reuse-port")) || container(edge)["ports"] != nil {
		t.Errorf("edge fleet on the host network: args %v, ports %v", args, container(edge)["ports"])
	}
	if args := proxyArgs(main); slices.Contains(args, any("--reuse-port")) || container(main)["ports"] == nil {
		t.Errorf("main fleet off the host network: args %v, ports %v", args, container(main)["ports"])
	}

	// Autoscaling: the Deployment fleet gets an HPA and no replicas field;
	// the DaemonSet fleet none.
	if r, ok := main["spec"].(map[string]any)["replicas"]; ok {
		t.Errorf("autoscaled Deployment renders replicas %v", r)
	}
	hpa := find(objs, "HorizontalPodAutoscaler", "sluice-proxy")
	if path(hpa, "spec", "scaleTargetRef", "name") != "sluice-proxy" || path(hpa, "spec", "minReplicas") != float64(3) || path(hpa, "spec", "maxReplicas") != float64(12) ||
		fmt.Sprint(path(hpa, "spec", "metrics")) != "[map[resource:map[name:cpu target:map[averageUtilization:60 type:Utilization]] type:Resource]]" {
		t.Errorf("HPA %v", path(hpa, "spec"))
	}
	if find(objs, "HorizontalPodAutoscaler", "sluice-proxy-edge") != nil {
		t.Error("HPA for the DaemonSet fleet")
	}

	// The default TLS certificate comes from a Secret of the release namespace.
	if !slices.Contains(proxyArgs(main), any("--default-certificate=sluice-system/wildcard-tls")) {
		t.Errorf("proxy args %v lack the default certificate", proxyArgs(main))
	}
	// DNS values the controller takes.
	for _, want := range []string{"--dns-provider=route53", "--dns-zone=Z0123456789", "--dns-interval=30s", "--dns-dry-run"} {
		if !slices.Contains(proxyArgs(ctl), any(want)) {
			t.Errorf("controller args %v lack %s", proxyArgs(ctl), want)
		}
	}
	// The uninstall Job pulls from the registry too.
	if got := fmt.Sprint(podSpec(find(objs, "Job", "sluice-remove-bindings"))["imagePullSecrets"]); got != "[map[name:regcred]]" {
		t.Errorf("uninstall Job imagePullSecrets %s", got)
	}
}

// ServiceAccounts: created unless create=false, named by name, annotated
// (IRSA); the chart's RBAC binds whichever account each component runs
// under, never one it does not use.
func TestServiceAccounts(t *testing.T) {
	objs := objects(t, "-f", "testdata/conventions.values.yaml")
	if find(objs, "ServiceAccount", "platform-sluice") != nil || find(objs, "ServiceAccount", "sluice-controller") != nil {
		t.Error("controller.serviceAccount.create=false, yet a controller ServiceAccount is rendered")
	}
	if sa := find(objs, "ServiceAccount", "sluice-proxy"); path(sa, "metadata", "annotations", "example.com/owner") != "platform" {
		t.Errorf("proxy ServiceAccount %v", sa)
	}
	if sa := find(objs, "ServiceAccount", "sluice-edge-proxy"); sa == nil || path(sa, "metadata", "annotations") != nil {
		t.Errorf("edge fleet ServiceAccount %v, want one without annotations", sa)
	}
	for _, o := range objs {
		kind := o["kind"]
		if kind != "RoleBinding" && kind != "ClusterRoleBinding" {
			continue
		}
		name := fmt.Sprint(path(o, "metadata", "name"))
		got := subjects(o)
		var want []string
		switch {
		case strings.HasPrefix(name, "sluice-controller"):
			want = []string{"platform-sluice"}
		case strings.HasPrefix(name, "sluice-proxy"):
			want = []string{"sluice-edge-proxy", "sluice-proxy"}
		default:
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s %s binds %v, want %v", kind, name, got, want)
		}
	}

	// IRSA: the annotation on the controller's account; the deprecated
	// serviceAccountAnnotations still read, the new value winning.
	objs = objects(t, "--set", "controller.serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=new,controller.serviceAccountAnnotations.eks\\.amazonaws\\.com/role-arn=old,controller.serviceAccountAnnotations.other=kept")
	sa := find(objs, "ServiceAccount", "sluice-controller")
	if got := fmt.Sprint(path(sa, "metadata", "annotations")); got != "map[eks.amazonaws.com/role-arn:new other:kept]" {
		t.Errorf("controller ServiceAccount annotations %s", got)
	}

	// Without create and name: the namespace's default account, bound.
	objs = objects(t, "--set", "controller.serviceAccount.create=false,proxy.serviceAccount.create=false")
	if find(objs, "ServiceAccount", "sluice-controller") != nil || find(objs, "ServiceAccount", "sluice-proxy") != nil {
		t.Error("ServiceAccounts rendered with create=false")
	}
	if got := podSpec(find(objs, "Deployment", "sluice-controller"))["serviceAccountName"]; got != "default" {
		t.Errorf("controller runs under %v, want default", got)
	}
	if got := subjects(find(objs, "ClusterRoleBinding", "sluice-proxy")); !slices.Equal(got, []string{"default"}) {
		t.Errorf("proxy ClusterRoleBinding binds %v", got)
	}

	// Two fleets naming one account must agree on it.
	out, err := template(t, "-f", "testdata/fleets.values.yaml", "--set", "bindings[0].proxy.serviceAccount.name=shared,bindings[1].proxy.serviceAccount.name=shared,bindings[1].proxy.serviceAccount.annotations.a=b")
	if err == nil || !strings.Contains(out, "share the ServiceAccount shared") {
		t.Errorf("fleets disagreeing on a ServiceAccount: err %v\n%.2000s", err, out)
	}
}

// proxy.kind IngressDaemonSet renders the sluice.dev object with the
// proxy pod template on the host network; bindings of its fleet default
// to node targets checked on node-health; the controller runs
// IngressDaemonSets; no PDB of the chart competes with the controller's.
func TestIngressDaemonSetKind(t *testing.T) {
	objs := objects(t, "-f", "testdata/ingressdaemonset.values.yaml")
	ids := find(objs, "IngressDaemonSet", "sluice-proxy")
	if ids == nil || ids["apiVersion"] != "sluice.dev/v1alpha1" {
		t.Fatalf("no sluice.dev/v1alpha1 IngressDaemonSet sluice-proxy: %v", ids)
	}
	want := map[string]any{"podsPerNode": float64(2), "healthCheckNodePort": float64(10080), "progressDeadlineSeconds": float64(300)}
	for k, v := range want {
		if got := path(ids, "spec", k); got != v {
			t.Errorf("spec.%s = %v, want %v", k, got, v)
		}
	}
	if got := fmt.Sprint(path(ids, "spec", "nodeSelector")); got != "map[node-role.kubernetes.io/ingress:]" {
		t.Errorf("spec.nodeSelector %s", got)
	}
	if got := fmt.Sprint(path(ids, "spec", "updateStrategy")); got != "map[rollingUpdate:map[maxUnavailableNodes:1] type:RollingUpdate]" {
		t.Errorf("spec.updateStrategy %s", got)
	}
	if hc := path(ids, "spec", "healthChecker"); path(hc, "serviceAccountName") != "sluice-node-health" || path(hc, "image") != "ghcr.io/sluice-dev/sluice:0.1.0" {
		t.Errorf("spec.healthChecker %v", hc)
	}
	spec := podSpec(ids)
	if spec["hostNetwork"] != true || spec["dnsPolicy"] != "ClusterFirstWithHostNet" || spec["readinessGates"] != nil || spec["nodeSelector"] != nil || spec["tolerations"] == nil {
		t.Errorf("template spec: hostNetwork %v dnsPolicy %v readinessGates %v nodeSelector %v tolerations %v",
			spec["hostNetwork"], spec["dnsPolicy"], spec["readinessGates"], spec["nodeSelector"], spec["tolerations"])
	}
	if c := container(ids); c["ports"] != nil || !slices.Contains(proxyArgs(ids), any("--reuse-port")) || path(c, "readinessProbe", "httpGet", "port") != float64(9090) {
		t.Errorf("template container: ports %v, args %v, readiness probe %v", c["ports"], proxyArgs(ids), path(c, "readinessProbe"))
	}
	if path(ids, "spec", "template", "metadata", "labels", "app.kubernetes.io/name") != "sluice-proxy" {
		t.Errorf("template labels %v: the binding selects app.kubernetes.io/name", path(ids, "spec", "template", "metadata", "labels"))
	}
	b := find(objs, "LoadBalancerBinding", "haproxy")
	if path(b, "spec", "targetType") != "Instance" || path(b, "spec", "port") != float64(8080) || path(b, "spec", "healthCheckPort") != float64(10080) {
		t.Errorf("binding spec %v: want Instance targets on 8080 checked on 10080", path(b, "spec"))
	}
	for _, kind := range []string{"Deployment", "DaemonSet", "PodDisruptionBudget"} {
		if find(objs, kind, "sluice-proxy") != nil {
			t.Errorf("%s sluice-proxy rendered beside the IngressDaemonSet", kind)
		}
	}
	if args := proxyArgs(find(objs, "Deployment", "sluice-controller")); !slices.Contains(args, any("--ingress-daemonsets=true")) || !slices.Contains(args, any("--node-health-image=ghcr.io/sluice-dev/sluice:0.1.0")) {
		t.Errorf("controller args %v: IngressDaemonSets off", args)
	}
	sa := find(objs, "ServiceAccount", "sluice-node-health")
	if fmt.Sprint(sa["imagePullSecrets"]) != "[map[name:regcred]]" || path(sa, "metadata", "annotations", "example.com/owner") != "platform" {
		t.Errorf("node-health ServiceAccount %v", sa)
	}

	// A fleet of a binding may be one too; the default fleet stays a Deployment.
	objs = objects(t, "-f", "testdata/fleets.values.yaml", "--set", "bindings[1].proxy.kind=IngressDaemonSet")
	if find(objs, "IngressDaemonSet", "sluice-proxy-internal") == nil || find(objs, "Deployment", "sluice-proxy") == nil || find(objs, "PodDisruptionBudget", "sluice-proxy-internal") != nil {
		t.Error("fleet internal as an IngressDaemonSet: object missing, default fleet gone, or a chart PDB for it")
	}
	if b := find(objs, "LoadBalancerBinding", "internal"); path(b, "spec", "targetType") != "Instance" {
		t.Errorf("binding internal %v", path(b, "spec"))
	}
	if b := find(objs, "LoadBalancerBinding", "internet"); path(b, "spec", "targetType") != nil || path(b, "spec", "port") != "http" {
		t.Errorf("binding internet %v: an IP binding", path(b, "spec"))
	}

	// The controller would refuse the chart's own object.
	out, err := template(t, "--set", "proxy.kind=IngressDaemonSet,controller.ingressDaemonSets.namespaces={edge}")
	if err == nil || !strings.Contains(out, "not in controller.ingressDaemonSets.namespaces") {
		t.Errorf("IngressDaemonSet outside its namespaces: err %v\n%.1000s", err, out)
	}
}

// The schema stays strict: a misspelt new value is refused by name, a
// wrong type by path.
func TestSchemaRejectsTypos(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"controller.serviceAcount.create=false", "serviceAcount"},
		{"controller.serviceAccount.annotation.a=b", "annotation"},
		{"proxy.serviceAccount.nmae=x", "nmae"},
		{"nodeHealth.serviceAccount.crate=false", "crate"},
		{"nodeHealth.podLabels.a=b", "podLabels"},
		{"imagePullSecrets[0].nmae=x", "nmae"},
		{"imagePullSecret[0].name=x", "imagePullSecret"},
		{"controller.priorityClass=x", "priorityClass"},
		{"proxy.podLabel.a=b", "podLabel"},
		{"proxy.extraVolume[0].name=x", "extraVolume"},
		{"proxy.hostNetwork=yes", "/proxy/hostNetwork"},
		{"proxy.autoscaling.minReplica=1", "minReplica"},
		{"proxy.autoscaling.maxReplicas=0", "/proxy/autoscaling/maxReplicas"},
		{"proxy.ingressDaemonSet.podsPerNod=2", "podsPerNod"},
		{"proxy.ingressDaemonSet.rollingUpdate.maxUnavailableNode=1", "maxUnavailableNode"},
		{"bindings[0].name=a,bindings[0].provider.haproxy.backend=b,bindings[0].proxy.autoscaling.enable=true", "enable"},
		{"bindings[0].name=a,bindings[0].provider.haproxy.backend=b,bindings[0].healthCheckPrt=1", "healthCheckPrt"},
		{"controller.dns.intervall=1m", "intervall"},
		{"controller.dns.interval=soon", "/controller/dns/interval"},
		{"controller.topologySpreadConstraint[0].maxSkew=1", "topologySpreadConstraint"},
	} {
		out, err := template(t, "--set", tc.set)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("--set %s: err %v, output lacks %q:\n%.1500s", tc.set, err, tc.want, out)
		}
	}
	// The same values spelt right pass (so the refusals above are about the
	// spelling).
	for _, set := range []string{"controller.serviceAccount.create=false", "nodeHealth.serviceAccount.create=false", "imagePullSecrets[0].name=x",
		"controller.priorityClassName=x", "proxy.autoscaling.minReplicas=1", "proxy.ingressDaemonSet.rollingUpdate.maxUnavailableNodes=1", "controller.dns.interval=1m"} {
		if out, err := template(t, "--set", set); err != nil {
			t.Errorf("--set %s: %v\n%.1500s", set, err, out)
		}
	}
}

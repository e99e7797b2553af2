package cluster

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mountScript runs inside the pod's private mount namespace: it bind-mounts
// the service-account folder ($1, if any) where client-go looks for it,
// then $2 pairs of (folder, mount path) of Secret volumes, then becomes
// the container's process. A mount path missing on the host is created
// there (empty), as the service-account path is.
const mountScript = `if [ -n "$1" ]; then mkdir -p ` + saMountPath + ` && mount --bind "$1" ` + saMountPath + ` || exit 126; fi; ` +
	`n=$2; shift 2; while [ "$n" -gt 0 ]; do mkdir -p "$2" && mount --bind "$1" "$2" || exit 126; shift 2; n=$((n-1)); done; exec "$@"`

// configError is a container start failure the kubelet reports as a
// Waiting reason (ErrImagePull, CreateContainerConfigError).
type configError struct {
	reason string
	err    error
}

func (e *configError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// startContainer starts c's process in the node's network namespace with
// the pod's environment, and its probes.
func (w *podWorker) startContainer(ctx context.Context, pod *corev1.Pod, c *container) error {
	err := w.spawn(ctx, pod, c)
	if err != nil {
		reason := "CreateContainerError"
		if ce, ok := err.(*configError); ok {
			reason = ce.reason
		}
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}}
	}
	return err
}

func (w *podWorker) spawn(ctx context.Context, pod *corev1.Pod, c *container) error {
	bin, ok := w.k.resolveImage(c.spec.Image)
	if !ok {
		return &configError{"ErrImagePull", fmt.Errorf("image %q is not in the local cluster's image table", c.spec.Image)}
	}
	if err := checkHostPorts(pod, c.spec); err != nil {
		return &configError{"CreateContainerConfigError", err}
	}
	env, err := w.containerEnv(ctx, pod, c)
	if err != nil {
		return &configError{"CreateContainerConfigError", err}
	}
	argv := w.k.argv(c.spec, bin, env)
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("finding ip: %w", err)
	}
	mounts := w.secretMounts(c.spec)
	args := []string{"netns", "exec", w.nn.netns, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", mountScript, "sh", w.saDir, strconv.Itoa(len(mounts) / 2)}
	args = append(append(args, mounts...), argv...)
	dir := c.spec.WorkingDir
	if dir == "" {
		dir = w.dir
	}
	name := fmt.Sprintf("pod %s/%s/%s", w.ns, w.nm, c.spec.Name)
	p, err := startProcess(procSpec{
		name:    name,
		path:    ipPath,
		args:    args,
		env:     env,
		dir:     dir,
		logPath: filepath.Join(w.dir, c.spec.Name+".log"),
		pidDir:  w.k.pidDir,
		stamp:   true,
	})
	if err != nil {
		return err
	}
	w.k.recordPID(Process{Name: name, PID: p.pid, start: p.start})
	if c.ran {
		c.restarts++
	}
	c.ran = true
	c.gen++
	c.proc = p
	w.mu.Lock()
	if w.procs == nil {
		w.procs = map[string]*process{}
	}
	w.procs[c.spec.Name] = p
	w.mu.Unlock()
	c.binary = bin
	c.startAt = time.Now()
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(c.startAt.Truncate(time.Second))}}
	c.ready = c.spec.ReadinessProbe == nil
	c.started = c.spec.StartupProbe == nil
	rctx, cancel := context.WithCancel(ctx)
	c.cancel = cancel
	c.runCtx = rctx
	gen := c.gen
	go func() {
		<-p.done
		w.send(event{kind: evExited, c: c, gen: gen})
	}()
	w.log.Info("container started", "container", c.spec.Name, "pid", p.pid, "argv", argv, "restarts", c.restarts)
	w.startProbes(ctx, c, true)
	return nil
}

// resolveImage maps an image to a local binary: by full name, by name
// without tag or digest, then by last path element.
func (k *kubelet) resolveImage(image string) (string, bool) {
	name := image
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	for _, key := range []string{image, name, path.Base(name)} {
		if p, ok := k.images[key]; ok {
			return p, true
		}
	}
	return "", false
}

// argv builds the process's argument vector as a container runtime does:
// command replaces the image's entrypoint (here: the mapped binary), args
// follow, both with $(VAR) references expanded. A command naming the image
// or its binary runs the mapped binary; one naming another image of the
// table runs that; anything else runs as given (PATH lookup).
func (k *kubelet) argv(spec corev1.Container, bin string, env []string) []string {
	lookup := envLookup(env)
	var argv []string
	for _, s := range spec.Command {
		argv = append(argv, expand(s, lookup))
	}
	if len(argv) == 0 {
		argv = []string{bin}
	} else {
		argv[0] = k.resolveCommand(argv[0], spec.Image, bin)
	}
	for _, s := range spec.Args {
		argv = append(argv, expand(s, lookup))
	}
	return argv
}

func (k *kubelet) resolveCommand(cmd, image, bin string) string {
	base := path.Base(cmd)
	short, _, _ := strings.Cut(path.Base(image), ":")
	if base == path.Base(bin) || base == short {
		return bin
	}
	if p, ok := k.resolveImage(cmd); ok {
		return p
	}
	return cmd
}

// containerEnv returns the container's environment: a base PATH and HOME,
// the kubernetes Service variables pointing at the API server on the
// bridge, envFrom, then env with $(VAR) expansion and downward-API,
// ConfigMap and Secret references resolved.
func (w *podWorker) containerEnv(ctx context.Context, pod *corev1.Pod, c *container) ([]string, error) {
	host, port := w.k.apiHost, strconv.Itoa(w.k.apiPort)
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root",
		"HOSTNAME=" + pod.Name,
		"KUBERNETES_SERVICE_HOST=" + host,
		"KUBERNETES_SERVICE_PORT=" + port,
		"KUBERNETES_SERVICE_PORT_HTTPS=" + port,
		"KUBERNETES_PORT=tcp://" + host + ":" + port,
	}
	for _, from := range c.spec.EnvFrom {
		data, err := w.envSource(ctx, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			env = append(env, from.Prefix+k+"="+v)
		}
	}
	for _, e := range c.spec.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+expand(e.Value, envLookup(env)))
			continue
		}
		v, skip, err := w.envValueFrom(ctx, pod, c, e.ValueFrom)
		if err != nil {
			return nil, fmt.Errorf("resolving env %s: %w", e.Name, err)
		}
		if !skip {
			env = append(env, e.Name+"="+v)
		}
	}
	return dedupEnv(env), nil
}

// dedupEnv keeps the last value of every name, in first-seen order.
func dedupEnv(env []string) []string {
	idx := map[string]int{}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func (w *podWorker) envSource(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := w.k.client.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if err != nil {
			if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
				return nil, nil
			}
			return nil, fmt.Errorf("reading configmap %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := w.k.client.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if err != nil {
			if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
				return nil, nil
			}
			return nil, fmt.Errorf("reading secret %s: %w", from.SecretRef.Name, err)
		}
		out := map[string]string{}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

// envValueFrom resolves one valueFrom; skip is true for a missing optional
// key.
func (w *podWorker) envValueFrom(ctx context.Context, pod *corev1.Pod, c *container, from *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := w.fieldRef(pod, from.FieldRef.FieldPath)
		return v, false, err
	case from.ResourceFieldRef != nil:
		v, err := w.resourceFieldRef(c, from.ResourceFieldRef)
		return v, false, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := w.k.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional {
				return "", true, nil
			}
			return "", false, fmt.Errorf("reading configmap %s: %w", ref.Name, err)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("configmap %s has no key %s", ref.Name, ref.Key)
		}
		return v, !ok, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := w.k.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional {
				return "", true, nil
			}
			return "", false, fmt.Errorf("reading secret %s: %w", ref.Name, err)
		}
		v, ok := s.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("secret %s has no key %s", ref.Name, ref.Key)
		}
		return string(v), !ok, nil
	}
	return "", true, nil
}

// fieldRef resolves a downward-API field path.
func (w *podWorker) fieldRef(pod *corev1.Pod, fp string) (string, error) {
	switch fp {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return w.nn.ip.String(), nil
	case "status.podIP", "status.podIPs":
		return w.ip.String(), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if rest, ok := strings.CutPrefix(fp, prefix+"['"); ok {
			if key, ok := strings.CutSuffix(rest, "']"); ok {
				return m[key], nil
			}
		}
	}
	return "", fmt.Errorf("unsupported fieldPath %q", fp)
}

// resourceFieldRef resolves limits.* and requests.* from the container's
// resources, defaulting limits to the node's capacity as the kubelet does.
func (w *podWorker) resourceFieldRef(c *container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	list := c.spec.Resources.Limits
	if kind == "requests" {
		list = c.spec.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		capacity := map[string]string{"cpu": "8", "memory": "16Gi", "ephemeral-storage": "100Gi"}
		if kind == "requests" {
			capacity = map[string]string{}
		}
		q = resource.MustParse(valueOr(capacity[name], "0"))
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	if name == "cpu" {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(div.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(div.Value()))), 10), nil
}

func valueOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// hookEnv is the environment lifecycle hooks and exec probes run with.
func (w *podWorker) hookEnv(c *container) []string {
	if c.proc != nil && c.proc.cmd != nil {
		return c.proc.cmd.Env
	}
	return nil
}

// runInPod runs argv in the pod's node namespace with env until ctx ends;
// it returns nil on exit status 0.
func (w *podWorker) runInPod(ctx context.Context, spec *corev1.Container, bin string, argv []string, env []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("empty command")
	}
	argv = append([]string(nil), argv...)
	argv[0] = w.k.resolveCommand(argv[0], spec.Image, bin)
	args := append([]string{"netns", "exec", w.nn.netns}, argv...)
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Env = env
	cmd.Dir = w.dir
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("running %v: %w: %s", argv, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// checkHostPorts refuses a hostPort the local cluster cannot honour. A
// hostNetwork pod runs in its node's namespace at the node's address, so
// its ports are host ports already (the API server defaults hostPort to
// containerPort and rejects any other value). A pod with its own address
// would need the node address's port forwarded to it, which the process
// kubelet does not do: the container is refused with a reason instead of
// running unreachable on the port it asked for.
func checkHostPorts(pod *corev1.Pod, c corev1.Container) error {
	if pod.Spec.HostNetwork {
		return nil
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			return fmt.Errorf("container port %d asks for hostPort %d: the local cluster honours host ports only for hostNetwork pods", p.ContainerPort, p.HostPort)
		}
	}
	return nil
}

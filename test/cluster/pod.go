package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// saMountPath is where client-go's in-cluster config looks for the
// service-account token, CA and namespace.
const saMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// Restart back-off as the kubelet does it: the first restart is immediate,
// then 10 s doubling up to 5 min; reset after 10 min of running.
const (
	backoffBase  = 10 * time.Second
	backoffMax   = 5 * time.Minute
	backoffReset = 10 * time.Minute
)

// tokenRefresh is how often a pod's service-account token is renewed.
const tokenRefresh = 30 * time.Minute

type eventKind int

const (
	evExited   eventKind = iota // a container's process exited
	evProbe                     // a probe result changed
	evTimer                     // a back-off or retry elapsed
	evHookDone                  // a container's termination sequence finished
)

type probeKind int

const (
	probeReadiness probeKind = iota
	probeLiveness
	probeStartup
)

type event struct {
	kind  eventKind
	c     *container
	gen   int
	probe probeKind
	ok    bool
}

// container is the runtime state of one container of a pod; only the pod
// worker's goroutine touches it.
type container struct {
	spec     corev1.Container
	init     bool
	gen      int      // bumped at every start; stale events carry an old gen
	proc     *process // nil when not running
	startAt  time.Time
	state    corev1.ContainerState
	lastTerm *corev1.ContainerStateTerminated
	restarts int32
	ran      bool // started at least once
	ready    bool // readiness probe (or no probe) says ready
	started  bool // startup probe passed (or none)
	done     bool // exited for good (no restart, or init container succeeded)
	backoff  time.Duration
	retryAt  time.Time
	binary   string
	cancel   context.CancelFunc // stops the probes of the current run
	runCtx   context.Context    // lives as long as the current run
}

// podWorker runs one pod: its address, service-account files, containers,
// probes, status and termination. One goroutine (run) owns the state.
type podWorker struct {
	k   *kubelet
	nn  *nodeNet
	uid types.UID
	ns  string
	nm  string
	log *slog.Logger

	mu   sync.Mutex
	pod  *corev1.Pod
	gone bool
	// procs is each container's latest process, for the kubelet API's
	// log follower (its done channel says when that run ended).
	procs map[string]*process

	wake   chan struct{}
	events chan event
	done   chan struct{}

	dir         string
	saDir       string            // empty: no token mounted
	secretDirs  map[string]string // Secret volume name → its folder (secretVolumes)
	ip          netip.Addr
	ipOwned     bool
	setupDone   bool
	setupAt     time.Time
	startTime   metav1.Time
	init        []*container
	main        []*container
	terminating bool
	lastStatus  *corev1.PodStatus
	statusRetry bool
}

func newPodWorker(k *kubelet, nn *nodeNet, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		k: k, nn: nn, uid: pod.UID, ns: pod.Namespace, nm: pod.Name, pod: pod,
		log:       k.log.With("pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName),
		wake:      make(chan struct{}, 1),
		events:    make(chan event, 64),
		done:      make(chan struct{}),
		dir:       filepath.Join(k.podsDir, fmt.Sprintf("%s_%s_%.8s", pod.Namespace, pod.Name, pod.UID)),
		startTime: metav1.NewTime(time.Now().Truncate(time.Second)),
	}
	for _, c := range pod.Spec.InitContainers {
		w.init = append(w.init, &container{spec: c, init: true})
	}
	for _, c := range pod.Spec.Containers {
		w.main = append(w.main, &container{spec: c})
	}
	return w
}

// update records a newer version of the pod and wakes the worker.
func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	w.poke()
}

// objectGone records that the API object was deleted.
func (w *podWorker) objectGone() {
	w.mu.Lock()
	w.gone = true
	w.mu.Unlock()
	w.poke()
}

func (w *podWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *podWorker) latest() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.gone
}

// send delivers an event unless the worker has ended.
func (w *podWorker) send(ev event) {
	select {
	case w.events <- ev:
	case <-w.done:
	}
}

// after delivers a timer event after d.
func (w *podWorker) after(d time.Duration) {
	time.AfterFunc(d, func() { w.send(event{kind: evTimer}) })
}

func (w *podWorker) containers() []*container {
	return append(append([]*container(nil), w.init...), w.main...)
}

// run is the worker's loop; it returns when the pod has been removed or
// the cluster stops.
func (w *podWorker) run(ctx context.Context) {
	defer w.cleanup()
	defer close(w.done)
	refresh := time.NewTicker(tokenRefresh)
	defer refresh.Stop()
	for {
		pod, gone := w.latest()
		if gone {
			w.log.Info("pod object deleted; killing containers")
			w.killAll(2 * time.Second)
			return
		}
		if pod.DeletionTimestamp != nil && !w.terminating {
			w.beginTermination(ctx, pod)
		}
		if w.terminating && w.allExited() {
			w.finish(ctx)
			return
		}
		w.reconcile(ctx, pod)
		w.syncStatus(ctx, pod)
		select {
		case <-ctx.Done():
			w.killAll(3 * time.Second)
			return
		case <-w.wake:
		case ev := <-w.events:
			w.handle(ctx, ev)
		case <-refresh.C:
			if w.saDir != "" {
				if err := w.writeToken(ctx, pod); err != nil {
					w.log.Warn("refreshing service-account token", "error", err)
				}
			}
		}
	}
}

// setup gives the pod its address and service-account files.
func (w *podWorker) setup(ctx context.Context, pod *corev1.Pod) error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return fmt.Errorf("creating pod dir: %w", err)
	}
	if !w.ip.IsValid() {
		if pod.Spec.HostNetwork {
			w.ip = w.nn.ip
		} else {
			ip, err := w.nn.allocate()
			if err != nil {
				return err
			}
			w.ip, w.ipOwned = ip, true
		}
	}
	if err := w.secretVolumes(ctx, pod); err != nil {
		return err
	}
	if hasTokenVolume(pod) {
		w.saDir = filepath.Join(w.dir, "serviceaccount")
		if err := os.MkdirAll(w.saDir, 0o755); err != nil {
			return fmt.Errorf("creating service-account dir: %w", err)
		}
		if err := writeFileAtomic(filepath.Join(w.saDir, "ca.crt"), w.k.caPEM); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(w.saDir, "namespace"), []byte(pod.Namespace)); err != nil {
			return err
		}
		if err := w.writeToken(ctx, pod); err != nil {
			return err
		}
	}
	w.log.Info("pod sandbox ready", "ip", w.ip)
	return nil
}

// hasTokenVolume reports whether admission gave the pod a projected
// service-account token volume (it does unless automounting is off).
func hasTokenVolume(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				return true
			}
		}
	}
	return false
}

// writeToken requests a token bound to the pod through the TokenRequest
// API, as the kubelet does for projected token volumes.
func (w *podWorker) writeToken(ctx context.Context, pod *corev1.Pod) error {
	exp := int64(3607) // the kubelet's value; the API server may extend it
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr, err := w.k.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &exp,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	return writeFileAtomic(filepath.Join(w.saDir, "token"), []byte(tr.Status.Token))
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// reconcile starts what should run: the sandbox, then init containers one
// by one, then every main container, honouring restart back-off.
func (w *podWorker) reconcile(ctx context.Context, pod *corev1.Pod) {
	if w.terminating || isTerminal(pod.Status.Phase) && !w.setupDone {
		return
	}
	now := time.Now()
	if !w.setupDone {
		if now.Before(w.setupAt) {
			return
		}
		if err := w.setup(ctx, pod); err != nil {
			w.log.Warn("pod setup failed; retrying", "error", err)
			w.setupAt = now.Add(2 * time.Second)
			w.after(2 * time.Second)
			return
		}
		w.setupDone = true
	}
	for _, c := range w.init {
		if c.done {
			if c.state.Terminated != nil && c.state.Terminated.ExitCode != 0 {
				return // failed for good: the pod fails
			}
			continue
		}
		w.ensure(ctx, pod, c)
		return
	}
	for _, c := range w.main {
		w.ensure(ctx, pod, c)
	}
}

// ensure starts c unless it runs, finished for good, or waits out a
// back-off.
func (w *podWorker) ensure(ctx context.Context, pod *corev1.Pod, c *container) {
	if c.proc != nil || c.done || time.Now().Before(c.retryAt) {
		return
	}
	if err := w.startContainer(ctx, pod, c); err != nil {
		w.log.Warn("starting container failed", "container", c.spec.Name, "error", err)
		c.retryAt = time.Now().Add(backoffBase)
		w.after(backoffBase)
	}
}

// handle applies one event to the worker's state.
func (w *podWorker) handle(ctx context.Context, ev event) {
	c := ev.c
	switch ev.kind {
	case evTimer, evHookDone:
		return // the loop re-evaluates everything
	case evProbe:
		if c == nil || ev.gen != c.gen || c.proc == nil {
			return
		}
		switch ev.probe {
		case probeReadiness:
			c.ready = ev.ok
			w.log.Info("readiness changed", "container", c.spec.Name, "ready", ev.ok)
		case probeStartup:
			if ev.ok {
				c.started = true
				w.startProbes(ctx, c, false)
				return
			}
			fallthrough
		case probeLiveness:
			if !ev.ok && !w.terminating {
				w.log.Info("probe failed; restarting container", "container", c.spec.Name, "probe", ev.probe)
				go c.proc.stop(w.gracePeriod())
			}
		}
	case evExited:
		if c == nil || ev.gen != c.gen || c.proc == nil {
			return
		}
		w.exited(c)
	}
}

// exited records a container's exit and decides about its restart.
func (w *podWorker) exited(c *container) {
	p := c.proc
	c.proc = nil
	c.ready = false
	if c.cancel != nil {
		c.cancel()
	}
	code := p.exitCode()
	now := time.Now()
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	term := &corev1.ContainerStateTerminated{
		ExitCode:    code,
		Reason:      reason,
		StartedAt:   metav1.NewTime(c.startAt.Truncate(time.Second)),
		FinishedAt:  metav1.NewTime(now.Truncate(time.Second)),
		ContainerID: fmt.Sprintf("process://%d", p.pid),
	}
	w.log.Info("container exited", "container", c.spec.Name, "pid", p.pid, "exitCode", code)
	pod, _ := w.latest()
	policy := pod.Spec.RestartPolicy
	if c.init && policy == corev1.RestartPolicyAlways {
		policy = corev1.RestartPolicyOnFailure
	}
	restart := !w.terminating && (policy == corev1.RestartPolicyAlways || policy == corev1.RestartPolicyOnFailure && code != 0)
	if c.init && code == 0 || !restart {
		c.state = corev1.ContainerState{Terminated: term}
		c.done = true
		return
	}
	c.lastTerm = term
	if now.Sub(c.startAt) >= backoffReset {
		c.backoff = 0
	}
	delay := c.backoff
	c.backoff = min(max(2*c.backoff, backoffBase), backoffMax)
	if delay == 0 {
		c.state = corev1.ContainerState{Terminated: term}
		return
	}
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.spec.Name, w.nm, w.ns, w.uid),
	}}
	c.retryAt = now.Add(delay)
	w.after(delay)
}

// gracePeriod is the pod's termination grace period.
func (w *podWorker) gracePeriod() time.Duration {
	pod, _ := w.latest()
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// beginTermination starts the graceful stop of every running container:
// preStop hook, SIGTERM, SIGKILL at the end of the grace period.
func (w *podWorker) beginTermination(ctx context.Context, pod *corev1.Pod) {
	w.terminating = true
	grace := w.gracePeriod()
	deadline := time.Now().Add(grace)
	w.log.Info("pod deleted; terminating", "grace", grace)
	for _, c := range w.containers() {
		if c.proc == nil {
			if !c.done && c.state.Terminated == nil && c.lastTerm != nil {
				c.state = corev1.ContainerState{Terminated: c.lastTerm}
			}
			c.done = true
			continue
		}
		go w.terminate(ctx, c, c.proc, c.binary, deadline, w.hookEnv(c))
	}
}

// terminate runs c's preStop hook, then SIGTERM, then SIGKILL at deadline
// (but no sooner than 2 s after SIGTERM, as the kubelet guarantees).
func (w *podWorker) terminate(ctx context.Context, c *container, p *process, bin string, deadline time.Time, env []string) {
	defer w.send(event{kind: evHookDone})
	if lc := c.spec.Lifecycle; lc != nil && lc.PreStop != nil {
		hctx, cancel := context.WithDeadline(ctx, deadline)
		if err := w.runHook(hctx, c, bin, lc.PreStop, env); err != nil {
			w.log.Warn("preStop hook failed", "container", c.spec.Name, "error", err)
		}
		cancel()
	}
	p.signal(syscall.SIGTERM)
	wait := max(time.Until(deadline), 2*time.Second)
	select {
	case <-p.done:
	case <-time.After(wait):
		w.log.Info("grace period over; killing", "container", c.spec.Name, "pid", p.pid)
		p.kill()
	case <-ctx.Done():
		p.kill()
	}
}

func (w *podWorker) allExited() bool {
	for _, c := range w.containers() {
		if c.proc != nil {
			return false
		}
	}
	return true
}

// killAll stops every running container within grace, without hooks (the
// cluster is stopping or the API object vanished).
func (w *podWorker) killAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, c := range w.containers() {
		if c.proc != nil {
			wg.Add(1)
			go func(p *process) {
				defer wg.Done()
				p.stop(grace)
			}(c.proc)
		}
	}
	wg.Wait()
	for _, c := range w.containers() {
		if c.cancel != nil {
			c.cancel()
		}
		c.proc = nil
	}
}

// finish writes the final status and removes the pod object, as the
// kubelet does once every container of a deleted pod has stopped.
func (w *podWorker) finish(ctx context.Context) {
	pod, _ := w.latest()
	w.syncStatus(ctx, pod)
	zero := int64(0)
	err := w.k.client.CoreV1().Pods(w.ns).Delete(ctx, w.nm, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &w.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.log.Warn("removing pod", "error", err)
		return
	}
	w.log.Info("pod removed")
}

// cleanup releases the pod's address.
func (w *podWorker) cleanup() {
	if w.ipOwned {
		w.nn.release(w.ip)
	}
	w.k.markFinished(w.uid)
}

func isTerminal(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}

package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// kubeletConditions are the pod conditions the kubelet owns. Every other
// condition (PodScheduled, readiness gates set by controllers, DisruptionTarget)
// is left exactly as found.
var kubeletConditions = []corev1.PodConditionType{
	corev1.PodReadyToStartContainers,
	corev1.PodInitialized,
	corev1.PodReady,
	corev1.ContainersReady,
}

// syncStatus writes the pod's status if what the kubelet owns of it changed.
// It reads the pod's conditions to honour readiness gates, and merges its
// own conditions into the current ones with optimistic concurrency, so a
// condition a controller sets at the same moment is never lost.
func (w *podWorker) syncStatus(ctx context.Context, pod *corev1.Pod) {
	desired := w.desiredStatus(pod)
	if w.lastStatus != nil && equality.Semantic.DeepEqual(*w.lastStatus, desired) {
		return
	}
	pods := w.k.client.CoreV1().Pods(w.ns)
	current := pod.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		merged := current.DeepCopy()
		mergeStatus(&merged.Status, desired)
		if merged.UID != w.uid {
			return apierrors.NewNotFound(corev1.Resource("pods"), w.nm)
		}
		_, err := pods.UpdateStatus(ctx, merged, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			fresh, gerr := pods.Get(ctx, w.nm, metav1.GetOptions{})
			if gerr != nil {
				return gerr
			}
			current = fresh
			// Readiness gates may have changed: recompute Ready.
			desired = w.desiredStatus(fresh)
		}
		return err
	})
	switch {
	case err == nil:
		w.lastStatus = &desired
	case apierrors.IsNotFound(err) || ctx.Err() != nil:
	default:
		w.log.Warn("updating pod status", "error", err)
		w.after(time.Second)
	}
}

// mergeStatus copies the kubelet-owned fields of desired into st. A
// condition keeps its transition time unless its status changes.
func mergeStatus(st *corev1.PodStatus, desired corev1.PodStatus) {
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	st.Phase = desired.Phase
	st.HostIP, st.HostIPs = desired.HostIP, desired.HostIPs
	if desired.PodIP != "" {
		st.PodIP, st.PodIPs = desired.PodIP, desired.PodIPs
	}
	if st.StartTime == nil {
		st.StartTime = desired.StartTime
	}
	st.ContainerStatuses = desired.ContainerStatuses
	st.InitContainerStatuses = desired.InitContainerStatuses
	for _, want := range desired.Conditions {
		found := false
		for i := range st.Conditions {
			have := &st.Conditions[i]
			if have.Type != want.Type {
				continue
			}
			found = true
			want.LastTransitionTime = now
			if have.Status == want.Status && !have.LastTransitionTime.IsZero() {
				want.LastTransitionTime = have.LastTransitionTime
			}
			*have = want
		}
		if !found {
			want.LastTransitionTime = now
			st.Conditions = append(st.Conditions, want)
		}
	}
}

// desiredStatus computes the kubelet-owned part of the pod's status from
// the containers' state and the pod's readiness-gate conditions.
func (w *podWorker) desiredStatus(pod *corev1.Pod) corev1.PodStatus {
	st := corev1.PodStatus{
		HostIP:    w.nn.ip.String(),
		HostIPs:   []corev1.HostIP{{IP: w.nn.ip.String()}},
		StartTime: &w.startTime,
	}
	if w.ip.IsValid() {
		st.PodIP = w.ip.String()
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	}
	for _, c := range w.init {
		st.InitContainerStatuses = append(st.InitContainerStatuses, w.containerStatus(c, "PodInitializing"))
	}
	for _, c := range w.main {
		st.ContainerStatuses = append(st.ContainerStatuses, w.containerStatus(c, "ContainerCreating"))
	}
	st.Phase = w.phase(pod)

	cond := func(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s, reason, msg = corev1.ConditionTrue, "", ""
		}
		return corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg}
	}
	terminal := isTerminal(st.Phase)
	initialized, initMsg := true, ""
	for _, c := range w.init {
		if !c.done || c.state.Terminated == nil || c.state.Terminated.ExitCode != 0 {
			initialized = false
			initMsg = fmt.Sprintf("containers with incomplete status: [%s]", c.spec.Name)
			break
		}
	}
	var unready []string
	for _, c := range w.main {
		if !(c.proc != nil && c.ready && c.started) {
			unready = append(unready, c.spec.Name)
		}
	}
	containersReady := len(unready) == 0 && !terminal
	crReason, crMsg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if terminal {
		crReason, crMsg = "PodCompleted", ""
	}
	ready, readyReason, readyMsg := containersReady, crReason, crMsg
	if containersReady {
		var msgs []string
		for _, g := range pod.Spec.ReadinessGates {
			c := findCondition(pod.Status.Conditions, g.ConditionType)
			switch {
			case c == nil:
				msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
			case c.Status != corev1.ConditionTrue:
				msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, c.Status))
			}
		}
		if len(msgs) > 0 {
			sort.Strings(msgs)
			ready, readyReason, readyMsg = false, "ReadinessGatesNotReady", strings.Join(msgs, ", ")
		}
	}
	st.Conditions = []corev1.PodCondition{
		cond(corev1.PodReadyToStartContainers, w.setupDone && !terminal, "", ""),
		cond(corev1.PodInitialized, initialized, "ContainersNotInitialized", initMsg),
		cond(corev1.PodReady, ready, readyReason, readyMsg),
		cond(corev1.ContainersReady, containersReady, crReason, crMsg),
	}
	return st
}

func findCondition(conds []corev1.PodCondition, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func (w *podWorker) containerStatus(c *container, waitReason string) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{
		Name:         c.spec.Name,
		Image:        c.spec.Image,
		State:        c.state,
		RestartCount: c.restarts,
		Ready:        c.proc != nil && c.ready && c.started,
	}
	if c.binary != "" {
		cs.ImageID = "local://" + c.binary
	}
	if c.proc != nil {
		cs.ContainerID = fmt.Sprintf("process://%d", c.proc.pid)
		started := c.started
		cs.Started = &started
	} else if c.state.Terminated != nil {
		cs.ContainerID = c.state.Terminated.ContainerID
		f := false
		cs.Started = &f
	}
	if c.lastTerm != nil {
		cs.LastTerminationState = corev1.ContainerState{Terminated: c.lastTerm}
	}
	if cs.State == (corev1.ContainerState{}) {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: waitReason}
	}
	return cs
}

// phase computes the pod phase the way the kubelet does.
func (w *podWorker) phase(pod *corev1.Pod) corev1.PodPhase {
	if w.terminating && w.allExited() {
		for _, c := range w.main {
			if c.state.Terminated == nil || c.state.Terminated.ExitCode != 0 {
				return corev1.PodFailed
			}
		}
		return corev1.PodSucceeded
	}
	for _, c := range w.init {
		if c.done && c.state.Terminated != nil && c.state.Terminated.ExitCode != 0 {
			return corev1.PodFailed
		}
		if !c.done {
			return corev1.PodPending
		}
	}
	var running, waiting, stopped, succeeded int
	for _, c := range w.main {
		switch {
		case c.proc != nil:
			running++
		case c.state.Terminated != nil:
			stopped++
			if c.state.Terminated.ExitCode == 0 {
				succeeded++
			}
		case c.lastTerm != nil:
			stopped++ // waiting to restart
		default:
			waiting++
		}
	}
	switch {
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch pod.Spec.RestartPolicy {
		case corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case corev1.RestartPolicyOnFailure:
			if succeeded == stopped && w.allDone() {
				return corev1.PodSucceeded
			}
			return corev1.PodRunning
		default:
			if succeeded == stopped {
				return corev1.PodSucceeded
			}
			return corev1.PodFailed
		}
	}
	return corev1.PodPending
}

func (w *podWorker) allDone() bool {
	for _, c := range w.main {
		if !c.done {
			return false
		}
	}
	return true
}

package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
)

// kubeletVersion is what Nodes report; it matches the control plane.
const kubeletVersion = "v1.36.3"

// leaseRenewInterval is how often each node's Lease is renewed (the real
// kubelet's default is a quarter of its 40 s lease).
const leaseRenewInterval = 10 * time.Second

// nodeStatusInterval is how often each node's Ready condition heartbeat is
// refreshed.
const nodeStatusInterval = time.Minute

type kubeletOptions struct {
	client    kubernetes.Interface
	log       *slog.Logger
	nodes     []NodeSpec
	net       *network
	images    map[string]string
	apiHost   string // KUBERNETES_SERVICE_HOST for pods
	apiPort   int
	caPEM     []byte
	pki       *pki // issues each node's serving certificate for the kubelet API
	podsDir   string
	pidDir    string
	recordPID func(Process)
}

// kubelet registers the nodes, keeps them Ready, and runs a podWorker for
// every pod bound to one of them.
type kubelet struct {
	kubeletOptions
	zones map[string]string // node → zone

	mu       sync.Mutex
	workers  map[types.UID]*podWorker
	finished map[types.UID]bool
	stopped  bool
	wg       sync.WaitGroup // heartbeat, informer and workers
}

func newKubelet(o kubeletOptions) *kubelet {
	k := &kubelet{kubeletOptions: o, zones: map[string]string{}, workers: map[types.UID]*podWorker{}, finished: map[types.UID]bool{}}
	for _, n := range o.nodes {
		k.zones[n.Name] = n.Zone
	}
	return k
}

// registerNodes creates (or replaces) the Node objects with Ready status.
func (k *kubelet) registerNodes(ctx context.Context) error {
	for _, spec := range k.nodes {
		node := k.nodeObject(spec)
		err := k.client.CoreV1().Nodes().Delete(ctx, spec.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old node %s: %w", spec.Name, err)
		}
		created, err := k.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("registering node %s: %w", spec.Name, err)
		}
		created.Status = node.Status
		if _, err := k.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("setting status of node %s: %w", spec.Name, err)
		}
		if err := k.renewLease(ctx, spec.Name); err != nil {
			return err
		}
		k.log.Info("registered node", "node", spec.Name, "zone", spec.Zone, "ip", k.net.nodes[spec.Name].ip, "netns", k.net.nodes[spec.Name].netns)
	}
	return nil
}

func (k *kubelet) nodeObject(spec NodeSpec) *corev1.Node {
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("8"),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: spec.Name,
			Labels: map[string]string{
				"kubernetes.io/hostname":        spec.Name,
				"kubernetes.io/os":              "linux",
				"kubernetes.io/arch":            runtime.GOARCH,
				"topology.kubernetes.io/zone":   spec.Zone,
				"topology.kubernetes.io/region": "local",
			},
		},
		Status: corev1.NodeStatus{
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: kubeletPort}},
			Capacity:        capacity,
			Allocatable:     capacity,
			Phase:           corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: k.net.nodes[spec.Name].ip.String()},
				{Type: corev1.NodeHostName, Address: spec.Name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          kubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				ContainerRuntimeVersion: "sluice-process://" + kubeletVersion,
				OSImage:                 "sluice local cluster",
			},
		},
	}
}

// renewLease creates or renews the node's Lease in kube-node-lease, which
// the node lifecycle controller reads as the node's heartbeat.
func (k *kubelet) renewLease(ctx context.Context, node string) error {
	leases := k.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			holder, dur := node, int32(40)
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
			}, metav1.CreateOptions{})
		} else if err == nil {
			l.Spec.RenewTime = &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("renewing lease of node %s: %w", node, err)
		}
		return nil
	})
}

// heartbeat keeps every node's Lease and Ready condition fresh.
func (k *kubelet) heartbeat(ctx context.Context) {
	lease := time.NewTicker(leaseRenewInterval)
	defer lease.Stop()
	status := time.NewTicker(nodeStatusInterval)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.C:
			for _, n := range k.nodes {
				if err := k.renewLease(ctx, n.Name); err != nil && ctx.Err() == nil {
					k.log.Warn("heartbeat failed", "node", n.Name, "error", err)
				}
			}
		case <-status.C:
			for _, n := range k.nodes {
				if err := k.refreshNodeStatus(ctx, n.Name); err != nil && ctx.Err() == nil {
					k.log.Warn("node status update failed", "node", n.Name, "error", err)
				}
			}
		}
	}
}

func (k *kubelet) refreshNodeStatus(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = now
		}
		_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// start runs the heartbeat and the pod informer until ctx ends; wait then
// waits until every pod process has been stopped.
func (k *kubelet) start(ctx context.Context) {
	k.serveAPI(ctx)
	k.wg.Add(2)
	go func() {
		defer k.wg.Done()
		k.heartbeat(ctx)
	}()
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0)
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.podChanged(ctx, obj) },
		UpdateFunc: func(_, obj any) { k.podChanged(ctx, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				k.podDeleted(pod)
			}
		},
	})
	go func() {
		defer k.wg.Done()
		inf.Run(ctx.Done())
		k.mu.Lock()
		k.stopped = true
		k.mu.Unlock()
	}()
}

// wait returns once the informer, heartbeat and every pod worker ended
// (the context passed to start must be cancelled).
func (k *kubelet) wait() { k.wg.Wait() }

// podChanged hands the pod to its worker, starting one for a pod newly
// bound to one of our nodes.
func (k *kubelet) podChanged(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	nn := k.net.nodes[pod.Spec.NodeName]
	if nn == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped || ctx.Err() != nil || k.finished[pod.UID] {
		return
	}
	w := k.workers[pod.UID]
	if w == nil {
		w = newPodWorker(k, nn, pod)
		k.workers[pod.UID] = w
		k.wg.Add(1)
		go func() {
			defer k.wg.Done()
			w.run(ctx)
			k.mu.Lock()
			delete(k.workers, pod.UID)
			k.mu.Unlock()
		}()
		return
	}
	w.update(pod)
}

// podDeleted tells the pod's worker that the API object is gone.
func (k *kubelet) podDeleted(pod *corev1.Pod) {
	k.mu.Lock()
	w := k.workers[pod.UID]
	k.mu.Unlock()
	if w != nil {
		w.objectGone()
	}
}

// markFinished records that the pod's worker ended, so late events about
// the same pod do not start it again.
func (k *kubelet) markFinished(uid types.UID) {
	k.mu.Lock()
	k.finished[uid] = true
	k.mu.Unlock()
}

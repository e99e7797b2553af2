package cluster

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// runDir holds one lock file per slot and each live slot's runtime state
// (pid files, etcd data). It is on tmpfs so etcd does not wait on a disk.
const runDir = "/dev/shm/sluice-cluster"

// maxSlots is how many clusters may run side by side: 10.244.0.0/16 is cut
// into /20s, one per slot, so their bridges' routes never overlap.
const maxSlots = 16

// maxNodes is how many nodes one slot has addresses for (10.244.S.1 is the
// bridge, 10.244.S+i.0/24 belongs to node i).
const maxNodes = 15

// slot is this run's claim on an address block (10.244.16K.0/20) and the
// names built from it (PREFIX+K). Slots are global across prefixes, since
// two bridges with the same block would steal each other's traffic. The
// flock on the slot's lock file lives as long as this process: a slot
// whose lock can be taken belongs to nobody, and whatever it records
// (processes, names) is stale.
type slot struct {
	name  string // e.g. "slc0": prefix of every netns and link of this run
	index int
	lock  *os.File
	dir   string // runDir/slot-K: owner prefix, pid files, etcd data
}

// claimSlot takes the first free slot whose address block no interface
// uses, and removes what crashed runs left in every free slot (processes,
// network namespaces, links, state).
func claimSlot(prefix string, logf func(string, ...any)) (*slot, error) {
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", runDir, err)
	}
	var mine *slot
	for i := range maxSlots {
		f, err := os.OpenFile(filepath.Join(runDir, fmt.Sprintf("slot-%d.lock", i)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening slot lock: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // in use by a live run
			continue
		}
		s := &slot{name: fmt.Sprintf("%s%d", prefix, i), index: i, lock: f, dir: filepath.Join(runDir, fmt.Sprintf("slot-%d", i))}
		if owner, err := os.ReadFile(filepath.Join(s.dir, "prefix")); err == nil {
			if p := strings.TrimSpace(string(owner)); prefixRE.MatchString(p) && p != prefix {
				s.removeNamed(fmt.Sprintf("%s%d-", p, i), logf)
			}
		}
		s.cleanStale(logf)
		if mine == nil && !blockInUse(blockOf(i)) {
			mine = s
			_ = f.Truncate(0)
			_, _ = f.WriteAt(fmt.Appendf(nil, "%d %s\n", os.Getpid(), prefix), 0)
			continue
		}
		f.Close()
	}
	if mine == nil {
		return nil, fmt.Errorf("all %d cluster slots are in use", maxSlots)
	}
	if err := os.MkdirAll(filepath.Join(mine.dir, "pids"), 0o755); err != nil {
		mine.release()
		return nil, fmt.Errorf("creating slot state: %w", err)
	}
	// Record the prefix first, so a crash at any later point is cleaned up.
	if err := os.WriteFile(filepath.Join(mine.dir, "prefix"), []byte(prefix+"\n"), 0o644); err != nil {
		mine.release()
		return nil, fmt.Errorf("recording slot owner: %w", err)
	}
	return mine, nil
}

// blockOf returns slot i's address block.
func blockOf(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i * 16), 0}), 20)
}

// blockInUse reports whether an interface of the root namespace has an
// address in block (a cluster of another version, or anything else).
func blockInUse(block netip.Prefix) bool {
	out, _ := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "inet" {
				continue
			}
			if p, err := netip.ParsePrefix(f[i+1]); err == nil && p.Overlaps(block) {
				return true
			}
		}
	}
	return false
}

// cleanStale kills the slot's recorded processes and removes its network
// namespaces, links and state. The caller holds the slot's lock.
func (s *slot) cleanStale(logf func(string, ...any)) {
	if n := killRecorded(filepath.Join(s.dir, "pids")); n > 0 {
		logf("killed leftover processes", "slot", s.index, "count", n)
	}
	s.removeNamed(s.name+"-", logf)
	_ = os.RemoveAll(s.dir)
}

// removeNamed deletes the network namespaces and links whose name starts
// with p.
func (s *slot) removeNamed(p string, logf func(string, ...any)) {
	for _, ns := range listNetns() {
		if strings.HasPrefix(ns, p) {
			logf("removing stale network namespace", "netns", ns)
			_ = ipCmd("netns", "del", ns)
		}
	}
	for _, l := range listLinks() {
		if strings.HasPrefix(l, p) {
			logf("removing stale link", "link", l)
			_ = ipCmd("link", "del", l)
		}
	}
}

// release gives the slot up; its state dir is removed.
func (s *slot) release() {
	_ = os.RemoveAll(s.dir)
	if s.lock != nil {
		_ = s.lock.Truncate(0)
		s.lock.Close()
		s.lock = nil
	}
}

// network is the bridge in the root namespace and one network namespace
// per node, joined to it by a veth pair.
type network struct {
	slot     *slot
	bridge   string
	subnet   netip.Prefix // the slot's /20
	bridgeIP netip.Addr
	nodes    map[string]*nodeNet
}

// nodeNet is one node's namespace and its address pool.
type nodeNet struct {
	netns string
	veth  string
	ip    netip.Addr // the node's InternalIP: 10.244.B.1

	mu   sync.Mutex
	next byte // last host byte handed out
	used map[netip.Addr]bool
}

// newNetwork creates the bridge and a namespace per node.
func newNetwork(s *slot, nodes []NodeSpec) (*network, error) {
	if len(nodes) > maxNodes {
		return nil, fmt.Errorf("at most %d nodes, got %d", maxNodes, len(nodes))
	}
	base := byte(s.index * 16)
	n := &network{
		slot:     s,
		bridge:   s.name + "-br",
		subnet:   blockOf(s.index),
		bridgeIP: netip.AddrFrom4([4]byte{10, 244, base, 1}),
		nodes:    map[string]*nodeNet{},
	}
	br := n.bridge
	if err := ipBatch(
		[]string{"link", "add", br, "type", "bridge"},
		[]string{"addr", "add", n.bridgeIP.String() + "/20", "dev", br},
		[]string{"link", "set", br, "up"},
	); err != nil {
		return nil, fmt.Errorf("creating bridge: %w", err)
	}
	for i, spec := range nodes {
		nn := &nodeNet{
			netns: fmt.Sprintf("%s-%s", s.name, spec.Name),
			veth:  fmt.Sprintf("%s-v%d", s.name, i+1),
			ip:    netip.AddrFrom4([4]byte{10, 244, base + byte(i+1), 1}),
			next:  1,
			used:  map[netip.Addr]bool{},
		}
		ns := nn.netns
		if err := ipBatch(
			[]string{"netns", "add", ns},
			[]string{"link", "add", nn.veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"link", "set", nn.veth, "master", br, "up"},
			[]string{"-n", ns, "addr", "add", nn.ip.String() + "/20", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"},
			[]string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", ns, "route", "add", "default", "via", n.bridgeIP.String()},
		); err != nil {
			return n, fmt.Errorf("creating namespace of node %s: %w", spec.Name, err)
		}
		// Per-node replicas on the host network share ports with
		// SO_REUSEPORT; a replica that stops hands the connections
		// queued on its listener to another instead of resetting them.
		if err := ipCmd("netns", "exec", ns, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/tcp_migrate_req"); err != nil {
			return n, fmt.Errorf("setting tcp_migrate_req on node %s: %w", spec.Name, err)
		}
		n.nodes[spec.Name] = nn
	}
	return n, nil
}

// remove deletes every namespace and link of the slot.
func (n *network) remove() {
	for _, nn := range n.nodes {
		_ = ipCmd("netns", "del", nn.netns)
	}
	_ = ipCmd("link", "del", n.bridge)
	// Whatever else carries the slot's name (a half-created node).
	n.slot.cleanStale(func(string, ...any) {})
}

// allocate returns a free pod address on the node and adds it to the
// namespace's eth0. Addresses are handed out round-robin so a new pod does
// not reuse the address of a pod that just went away.
func (nn *nodeNet) allocate() (netip.Addr, error) {
	nn.mu.Lock()
	var ip netip.Addr
	b := nn.ip.As4()
	for range 253 {
		nn.next++
		if nn.next < 2 || nn.next > 254 {
			nn.next = 2
		}
		b[3] = nn.next
		if c := netip.AddrFrom4(b); !nn.used[c] {
			ip = c
			nn.used[c] = true
			break
		}
	}
	nn.mu.Unlock()
	if !ip.IsValid() {
		return ip, fmt.Errorf("no free pod address on %s", nn.netns)
	}
	if err := ipCmd("-n", nn.netns, "addr", "add", ip.String()+"/32", "dev", "eth0"); err != nil {
		nn.release(ip)
		return netip.Addr{}, fmt.Errorf("adding pod address: %w", err)
	}
	return ip, nil
}

// release removes a pod address from the namespace and frees it.
func (nn *nodeNet) release(ip netip.Addr) {
	_ = ipCmd("-n", nn.netns, "addr", "del", ip.String()+"/32", "dev", "eth0")
	nn.mu.Lock()
	delete(nn.used, ip)
	nn.mu.Unlock()
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func ipBatch(cmds ...[]string) error {
	for _, c := range cmds {
		if err := ipCmd(c...); err != nil {
			return err
		}
	}
	return nil
}

func listNetns() []string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

func listLinks() []string {
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	var names []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	return names
}

// Package manifests is the file source of the objects sluice routes by: a
// directory of Kubernetes YAML manifests, polled for changes, for running
// the proxy without a cluster (`sluice proxy --manifests DIR`), in tests and
// in the examples.
//
// Data flow: YAML files → decode (this package) → Snapshot →
// translate.Build → route.New → proxy.
//
// What is read: every *.yaml and *.yml file directly in Dir and in its
// immediate subdirectories (one level, so a mounted ConfigMap of routes and
// a mounted Secret of certificates can sit side by side). Names starting
// with "." are ignored, which also skips the ..data directories of
// ConfigMap and Secret volumes; symlinks are followed. Deeper directories
// are not read.
//
// Each file holds YAML documents separated by "---" lines. A document is
// one object or a List (kind List, or a typed list such as ServiceList).
// Kinds read: networking.k8s.io/v1 Ingress and IngressClass, v1 Service and
// Secret, discovery.k8s.io/v1 EndpointSlice; other kinds are skipped. An
// invalid document is skipped with a warning naming the file and the
// document; everything else still loads. Objects get what the API server
// would give them: namespace "default" when unset, Secret stringData
// merged into data, Service and EndpointSlice port defaults, and a UID
// derived from kind, namespace and name. creationTimestamp stays as
// written (zero when absent), so results do not depend on file times.
// When two documents define the same object, the first in path order wins
// and the other is reported.
//
// Files are not read while they change: a new or changed file is read once
// it looked the same on two polls in a row, while a removed file is gone on
// the next poll. On Linux, Dir and its subdirectories are also watched
// (inotify): a change while no file is waiting to be read starts a poll at
// once, and the poll that reads the file follows one interval later, so a
// change shows after about one interval instead of one to two. Polls are
// never closer than an interval while a file waits, so "the same on two
// polls" still means unchanged for an interval. Where watching fails
// (limits, other systems) the source polls, as it does anyway.
//
// So that moving an object from one file to another never leaves a poll
// without it, an object that disappears while some file is still waiting
// to be read stays in the snapshot (as it was last published) until no
// file is waiting, for at most MaxHoldPolls polls.
package manifests

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"sluice.dev/sluice/internal/source"
	"sluice.dev/sluice/internal/translate"
)

// DefaultInterval is how often Dir is polled when Options.Interval is zero.
const DefaultInterval = 250 * time.Millisecond

// MaxHoldPolls bounds how many polls in a row an object that disappeared
// is kept because some file is still waiting to be read (see the package
// doc). It stops a file that never holds still, or is written over many
// polls, from delaying removals elsewhere for good.
const MaxHoldPolls = 8

// minWakeGap is the least time between a poll and one started by a watch
// event (at most a fifth of the interval).
const minWakeGap = 50 * time.Millisecond

// MaxFileSize is the largest manifest file read; larger files are skipped
// with a warning.
const MaxFileSize = 16 << 20

// Options configure New.
type Options struct {
	// Dir is the directory of manifests. Required; it must exist when Run
	// starts.
	Dir string
	// Interval is how often Dir is polled; 0 means DefaultInterval. A
	// changed file is read once it looked the same on two polls in a row
	// (so a file caught halfway through being written is not loaded), so
	// changes show within about two intervals, or about one where the
	// directory can be watched (Linux). Objects that disappear
	// (a removed file, an edit that drops them) stay while another file
	// waits to be read, so removals may take as long as additions; see
	// MaxHoldPolls.
	Interval time.Duration
	// Logger receives warnings about invalid documents; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Source polls a directory of manifests.
type Source struct {
	dir      string
	interval time.Duration
	log      *slog.Logger

	started atomic.Bool
	synced  atomic.Bool
	current atomic.Pointer[translate.Input]

	// Owned by the Run goroutine.
	files     map[string]*fileState
	digest    [sha256.Size]byte
	dirErr    string // last error listing Dir, to warn once
	subdirErr map[string]string
	dupes     string   // last duplicate report, to warn once
	published []object // what the current snapshot was assembled from
	heldPolls int      // polls in a row that kept disappeared objects
	settling  bool     // the last poll left a file waiting to be read
	dirs      []string // Dir and the subdirectories the last scan listed
	watchErr  string   // last error watching, to warn once

	// polled, if set, is called after each poll of Run (tests).
	polled func(settling bool)
}

var _ source.Source = (*Source)(nil)

// fileState is what is known about one file.
type fileState struct {
	loaded  bool
	fp      fingerprint // of the loaded content
	pending fingerprint // seen on the last poll, not loaded yet
	hasPend bool
	readErr string // last read error, to warn once
	objects []object
}

// object is a decoded object and the digest of its canonical JSON, so that
// edits of comments or layout are no change.
type object struct {
	obj    runtime.Object
	digest [sha256.Size]byte
}

// New checks opts. Nothing is read until Run.
func New(opts Options) (*Source, error) {
	if opts.Dir == "" {
		return nil, errors.New("creating manifests source: no directory")
	}
	s := &Source{
		dir:       opts.Dir,
		interval:  opts.Interval,
		log:       opts.Logger,
		files:     map[string]*fileState{},
		subdirErr: map[string]string{},
	}
	if s.interval <= 0 {
		s.interval = DefaultInterval
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("source", "manifests", "dir", opts.Dir)
	s.current.Store(&translate.Input{})
	return s, nil
}

// Run loads Dir, calls notify, then polls until ctx ends and calls notify
// after every poll that changed the decoded objects (edits that change only
// comments or formatting do not notify). It returns an error when Dir cannot
// be read at the start; later read errors are logged and the last loaded
// objects stay. It may be called once.
func (s *Source) Run(ctx context.Context, notify func()) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("running manifests source: already running")
	}
	if fi, err := os.Stat(s.dir); err != nil {
		return fmt.Errorf("reading manifests: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("reading manifests: %s is not a directory", s.dir)
	}
	// Watched before the first poll, so no change falls between them.
	var wake <-chan struct{}
	w, err := newWatcher()
	if err != nil {
		s.log.Info("not watching manifests for changes; polling only", "err", err, "interval", s.interval)
	} else {
		defer w.close()
		wake = w.wake
		s.watch(w, []string{s.dir})
	}
	s.poll(true)
	s.watch(w, s.dirs)
	s.synced.Store(true)
	in := s.current.Load()
	s.log.Info("manifests loaded", "files", len(s.files), "ingresses", len(in.Ingresses),
		"services", len(in.Services), "endpointSlices", len(in.EndpointSlices), "secrets", len(in.Secrets))
	notify()

	t := time.NewTicker(s.interval)
	defer t.Stop()
	last := time.Now()
	var soon <-chan time.Time // a poll deferred by minWakeGap
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-wake:
			if s.settling {
				// A file waits: the next tick reads it or sees it
				// still changing, an interval after the last poll.
				continue
			}
			if wait := min(s.interval/5, minWakeGap) - time.Since(last); wait > 0 {
				// The last poll was just now: a file written without
				// pause (a log beside the manifests) must not make
				// the source poll without pause.
				if soon == nil {
					soon = time.After(wait)
				}
				continue
			}
			t.Reset(s.interval)
		case <-soon:
			if s.settling {
				soon = nil
				continue
			}
			t.Reset(s.interval)
		}
		soon = nil
		last = time.Now()
		changed := s.poll(false)
		s.watch(w, s.dirs)
		if s.polled != nil {
			s.polled(s.settling)
		}
		if changed {
			notify()
		}
	}
}

// watch renews the watches on dirs (nil w: not watching), warning once per
// distinct error; the poll ticker covers for what is not watched.
func (s *Source) watch(w *watcher, dirs []string) {
	if w == nil {
		return
	}
	err := w.watch(dirs)
	if err == nil {
		s.watchErr = ""
		return
	}
	if msg := err.Error(); msg != s.watchErr {
		s.watchErr = msg
		s.log.Warn("watching manifests for changes; changes there are seen by polling", "err", err)
	}
}

// Snapshot returns the objects of the last poll that changed them.
func (s *Source) Snapshot() translate.Input { return *s.current.Load() }

// Synced reports whether the first load is done.
func (s *Source) Synced() bool { return s.synced.Load() }

// poll looks at Dir once and reports whether the published objects
// changed. On the first poll every file is read at once.
func (s *Source) poll(first bool) bool {
	seen, ok := s.scanLogged()
	if !ok {
		return false
	}
	for path := range s.files {
		if _, ok := seen[path]; !ok {
			delete(s.files, path)
		}
	}
	settling := false // some file is to be read once it holds still
	for path, fp := range seen {
		st := s.files[path]
		if st == nil {
			st = &fileState{}
			s.files[path] = st
		}
		switch {
		case st.loaded && st.fp == fp:
			st.hasPend = false
			continue
		case !first && !(st.hasPend && st.pending == fp):
			st.pending, st.hasPend = fp, true // read once it holds still
			settling = true
			continue
		}
		s.load(path, fp, st)
	}
	s.settling = settling
	objs := s.objects()
	held := s.hold(objs, settling)
	objs = append(objs, held...)
	digest := sum(objs)
	if digest == s.digest && !first {
		return false
	}
	s.digest = digest
	s.publish(objs)
	return true
}

// objects returns the objects of every file in path order.
func (s *Source) objects() []object {
	n := 0
	for _, st := range s.files {
		n += len(st.objects)
	}
	objs := make([]object, 0, n)
	for _, path := range slices.Sorted(maps.Keys(s.files)) {
		objs = append(objs, s.files[path].objects...)
	}
	return objs
}

// hold returns the published objects that objs lacks when they are to be
// kept: while a file is settling it may be the one that takes them over
// (a file written then its old copy removed is read two polls after the
// removal is seen), for at most MaxHoldPolls polls in a row.
func (s *Source) hold(objs []object, settling bool) []object {
	if !settling {
		s.heldPolls = 0
		return nil
	}
	if s.heldPolls >= MaxHoldPolls {
		s.log.Warn("files still changing; applying the removals held back for them", "polls", s.heldPolls)
		s.heldPolls = 0
		return nil
	}
	have := make(map[objectKey]bool, len(objs))
	for _, o := range objs {
		have[keyOf(o.obj)] = true
	}
	var held []object
	for _, o := range s.published {
		if id := keyOf(o.obj); !have[id] {
			have[id] = true // the first definition wins, as in assemble
			held = append(held, o)
		}
	}
	if len(held) == 0 {
		s.heldPolls = 0
		return nil
	}
	s.heldPolls++
	return held
}

// load reads and decodes one file into st.
func (s *Source) load(path string, fp fingerprint, st *fileState) {
	log := s.log.With("file", path)
	data, err := readFile(path)
	if err != nil {
		// Retried on the next poll; warned about once per error.
		st.pending, st.hasPend = fp, true
		if msg := err.Error(); msg != st.readErr {
			st.readErr = msg
			log.Warn("reading manifest file; keeping what it held before", "err", err)
		}
		return
	}
	st.readErr = ""
	d := decode(path, data)
	for _, err := range d.invalid {
		log.Warn("skipping invalid document", "err", err)
	}
	for _, err := range d.warnings {
		log.Warn("manifest document has problems; loaded anyway", "err", err)
	}
	for _, k := range d.skipped {
		log.Debug("skipping kind sluice does not read", "kind", k)
	}
	st.loaded, st.fp, st.hasPend = true, fp, false
	st.objects = make([]object, len(d.objects))
	for i, o := range d.objects {
		st.objects[i] = object{obj: o, digest: digestObject(o)}
	}
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("file is %d bytes, more than the limit of %d", fi.Size(), MaxFileSize)
	}
	return os.ReadFile(path)
}

// scan lists the manifest files in Dir and one level below with their
// fingerprints. err says Dir could not be listed; subErrs holds the
// subdirectories that could not be listed.
func (s *Source) scan() (seen map[string]fingerprint, subErrs map[string]error, err error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, err
	}
	seen = map[string]fingerprint{}
	s.dirs = append(s.dirs[:0], s.dir)
	for _, e := range entries {
		if hidden(e.Name()) {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		fi, err := os.Stat(path) // follows symlinks
		if err != nil {
			continue // e.g. a dangling symlink: as if absent
		}
		if fi.IsDir() {
			s.dirs = append(s.dirs, path)
			if err := scanSub(path, seen); err != nil {
				if subErrs == nil {
					subErrs = map[string]error{}
				}
				subErrs[path] = err
			}
			continue
		}
		if isManifest(e.Name()) && fi.Mode().IsRegular() {
			seen[path] = fingerprintOf(fi)
		}
	}
	return seen, subErrs, nil
}

func scanSub(dir string, seen map[string]fingerprint) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if hidden(e.Name()) || !isManifest(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			seen[path] = fingerprintOf(fi)
		}
	}
	return nil
}

// scanLogged is scan for poll: it warns once per distinct error, reports
// false when Dir cannot be listed, and keeps the files last seen in a
// subdirectory that cannot be listed.
func (s *Source) scanLogged() (map[string]fingerprint, bool) {
	seen, subErrs, err := s.scan()
	if err != nil {
		if msg := err.Error(); msg != s.dirErr {
			s.dirErr = msg
			s.log.Warn("listing manifests; keeping the objects loaded before", "err", err)
		}
		return nil, false
	}
	s.dirErr = ""
	for dir := range s.subdirErr {
		if _, ok := subErrs[dir]; !ok {
			delete(s.subdirErr, dir)
		}
	}
	for dir, err := range subErrs {
		if msg := err.Error(); msg != s.subdirErr[dir] {
			s.subdirErr[dir] = msg
			s.log.Warn("listing manifests; keeping the objects loaded before", "err", err)
		}
		for path, st := range s.files {
			if filepath.Dir(path) == dir {
				seen[path] = st.fp
			}
		}
	}
	return seen, true
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") }

func isManifest(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")
}

// sum digests objs in order: equal sums mean equal snapshots.
func sum(objs []object) [sha256.Size]byte {
	h := sha256.New()
	for _, o := range objs {
		h.Write(o.digest[:])
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// publish builds a new Input from objs and stores it for Snapshot.
func (s *Source) publish(objs []object) {
	plain := make([]runtime.Object, len(objs))
	for i, o := range objs {
		plain[i] = o.obj
	}
	in, dupes := assemble(plain)
	s.published = objs
	if msg := strings.Join(dupes, "; "); msg != s.dupes {
		s.dupes = msg
		if msg != "" {
			s.log.Warn("objects defined more than once; the first in path order wins", "objects", msg)
		}
	}
	s.current.Store(&in)
}

// assemble sorts objects into an Input. The first definition of a kind,
// namespace and name wins; later ones are reported.
func assemble(objs []runtime.Object) (translate.Input, []string) {
	var in translate.Input
	var dupes []string
	seen := make(map[objectKey]bool, len(objs))
	for _, obj := range objs {
		id := keyOf(obj)
		if seen[id] {
			dupes = append(dupes, identity(obj))
			continue
		}
		seen[id] = true
		switch o := obj.(type) {
		case *networkingv1.Ingress:
			in.Ingresses = append(in.Ingresses, o)
		case *networkingv1.IngressClass:
			in.IngressClasses = append(in.IngressClasses, o)
		case *corev1.Service:
			in.Services = append(in.Services, o)
		case *discoveryv1.EndpointSlice:
			in.EndpointSlices = append(in.EndpointSlices, o)
		case *corev1.Secret:
			in.Secrets = append(in.Secrets, o)
		}
	}
	// Callers may append to what Snapshot returns; with no spare capacity
	// that never writes into the shared arrays.
	in.Ingresses = slices.Clip(in.Ingresses)
	in.IngressClasses = slices.Clip(in.IngressClasses)
	in.Services = slices.Clip(in.Services)
	in.EndpointSlices = slices.Clip(in.EndpointSlices)
	in.Secrets = slices.Clip(in.Secrets)
	return in, dupes
}

// identity names obj by kind, namespace and name: "Service default/web".
func identity(obj runtime.Object) string {
	k := keyOf(obj)
	if k.ns == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.ns + "/" + k.name
}

// objectKey identifies an object as identity does, without allocating: a
// snapshot of 10,000s of objects is assembled on every change.
type objectKey struct{ kind, ns, name string }

func keyOf(obj runtime.Object) objectKey {
	var kind, name, ns string
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		kind, ns, name = "Ingress", o.Namespace, o.Name
	case *networkingv1.IngressClass:
		kind, name = "IngressClass", o.Name
	case *corev1.Service:
		kind, ns, name = "Service", o.Namespace, o.Name
	case *discoveryv1.EndpointSlice:
		kind, ns, name = "EndpointSlice", o.Namespace, o.Name
	case *corev1.Secret:
		kind, ns, name = "Secret", o.Namespace, o.Name
	}
	return objectKey{kind, ns, name}
}

// digestObject hashes the canonical JSON of o (map keys sorted).
func digestObject(o runtime.Object) [sha256.Size]byte {
	b, err := json.Marshal(o) // deterministic: map keys sorted
	if err != nil {
		// Cannot happen for these types; make the digest unique so a
		// change is never missed.
		b = fmt.Appendf(nil, "%p", o)
	}
	return sha256.Sum256(b)
}

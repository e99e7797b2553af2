//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/sluice/test/load"
)

// churnLoad is the steady load on the stable route app.test during churn
// tests.
func churnLoad(f *fleet, d time.Duration, check func(*http.Response) error) load.Options {
	return load.Options{
		Target:            f.lb.url(),
		Host:              "app.test",
		Paths:             []string{"/", "/x/y", "/bytes/4096"},
		Rate:              300,
		Duration:          d,
		KeepAliveFraction: 0.5,
		Check:             check,
	}
}

// startLoad runs o in the background; the returned function waits for it.
func startLoad(t *testing.T, o load.Options) func() load.Result {
	t.Helper()
	var res load.Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = load.Run(context.Background(), o)
	}()
	return func() load.Result {
		<-done
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		return res
	}
}

// TestRouteChurn makes 200 routing changes at 20/s (Ingresses for other
// hosts added and removed, another Service's endpoints changed, the stable
// Ingress and a sibling Ingress on the same host rewritten with extra paths)
// while load runs on a stable route, which must not lose a request. The
// proxies run with --retries 0 so a retry cannot hide a bad table swap.
func TestRouteChurn(t *testing.T) {
	f := newFleet(t, 2, 3, "--retries", "0")
	e := f.e
	other := e.pool("other", 2)
	other.start(0)
	other.start(1)
	e.write("other.yaml", serviceYAML("other"))
	e.write("other-slice.yaml", other.slice([]int{0}))

	wait := startLoad(t, churnLoad(f, 13*time.Second, fromPool("app")))
	time.Sleep(time.Second)

	const changes = 200
	var live []int // churn Ingresses present, oldest first
	var removed []int
	lastExtra := -1
	tick := time.NewTicker(50 * time.Millisecond)
	for i := range changes {
		<-tick.C
		switch {
		case i%5 == 0 || (i%5 == 1 && len(live) <= 2):
			e.write(fmt.Sprintf("churn-%d.yaml", i), ingressYAML(fmt.Sprintf("churn-%d", i), fmt.Sprintf("churn-%d.test", i), rule{"/", "other"}))
			live = append(live, i)
		case i%5 == 1:
			e.remove(fmt.Sprintf("churn-%d.yaml", live[0]))
			removed = append(removed, live[0])
			live = live[1:]
		case i%5 == 2:
			members := []int{0}
			if i%10 == 2 {
				members = []int{0, 1}
			}
			e.write("other-slice.yaml", other.slice(members))
		case i%5 == 3:
			// A second Ingress on the stable host, for a path the load
			// never requests.
			e.write("sibling.yaml", ingressYAML("sibling", "app.test", rule{fmt.Sprintf("/p-%d", i), "other"}))
		case i%5 == 4:
			// The stable Ingress itself, its "/" rule unchanged.
			e.write("base.yaml", docs(ingressClassYAML, serviceYAML("app"),
				ingressYAML("app", "app.test", rule{"/", "app"}, rule{fmt.Sprintf("/extra-%d", i), "other"})))
			lastExtra = i
		}
	}
	tick.Stop()

	// The churn must have been applied, not ignored: the last state is
	// served by every proxy through HAProxy.
	for _, p := range f.proxies {
		url := fmt.Sprintf("http://127.0.0.1:%d", p.http)
		if err := pollRoute(url+"/", fmt.Sprintf("churn-%d.test", live[len(live)-1]), "other-", 10*time.Second); err != nil {
			t.Errorf("%s: last added Ingress not served: %v", p.name, err)
		}
		if err := pollRoute(url+fmt.Sprintf("/extra-%d/z", lastExtra), "app.test", "other-", 10*time.Second); err != nil {
			t.Errorf("%s: last rewrite of the stable Ingress not served: %v", p.name, err)
		}
		if err := pollStatus(url+"/", fmt.Sprintf("churn-%d.test", removed[len(removed)-1]), 404, 10*time.Second); err != nil {
			t.Errorf("%s: removed Ingress still served: %v", p.name, err)
		}
	}

	res := wait()
	report(t, "route-churn: changes=%d requests=%d failed=%d | %s", changes, res.Sent, res.Failed, res)
	if res.Failed != 0 {
		t.Errorf("%d of %d requests on the stable route failed during route churn: %v; first errors:\n%s",
			res.Failed, res.Sent, res.ByKind, strings.Join(res.Errors, "\n"))
	}
}

// pollStatus polls url with Host host until it answers status want.
func pollStatus(url, host string, want int, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Host = host
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("waiting for %s (Host %s) to answer %d: last %s", url, host, want, last)
}

// servedBy counts responses per echo backend while checking they come from
// the pool.
type servedBy struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *servedBy) check(service string) func(*http.Response) error {
	inPool := fromPool(service)
	return func(r *http.Response) error {
		if err := inPool(r); err != nil {
			return err
		}
		s.mu.Lock()
		s.n[r.Header.Get("X-Echo-Name")]++
		s.mu.Unlock()
		return nil
	}
}

// TestEndpointChurn replaces every backend of the stable route under load,
// one at a time, the way a rolling update does: a new backend starts and is
// added to the EndpointSlice, the oldest is removed from it and gets SIGTERM
// 2 s later (it then finishes its in-flight requests and exits). No request
// may fail. The proxies run with --retries 0 so retries cannot hide a
// request sent to a removed endpoint.
func TestEndpointChurn(t *testing.T) {
	const rounds = 6
	f := newFleet(t, 2, 3+rounds, "--retries", "0")
	e := f.e
	served := &servedBy{n: map[string]int{}}
	wait := startLoad(t, churnLoad(f, 14*time.Second, served.check("app")))
	time.Sleep(time.Second)

	members := []int{0, 1, 2}
	var stops sync.WaitGroup
	stopErrs := make(chan error, rounds)
	for next := 3; next < 3+rounds; next++ {
		f.app.start(next)
		members = append(members, next)
		e.write("app-slice.yaml", f.app.slice(members))
		time.Sleep(500 * time.Millisecond)

		old := members[0]
		members = members[1:]
		e.write("app-slice.yaml", f.app.slice(members))
		stops.Add(1)
		go func() {
			defer stops.Done()
			time.Sleep(2 * time.Second)
			if err := f.app.stop(old); err != nil {
				stopErrs <- err
			}
		}()
		time.Sleep(time.Second)
	}
	stops.Wait()
	close(stopErrs)
	for err := range stopErrs {
		t.Error(err)
	}

	res := wait()
	served.mu.Lock()
	counts := fmt.Sprint(served.n)
	var never []string
	for i := 3; i < 3+rounds; i++ {
		if served.n[f.app.name(i)] == 0 {
			never = append(never, f.app.name(i))
		}
	}
	served.mu.Unlock()
	report(t, "endpoint-churn: added=%d removed=%d requests=%d failed=%d | %s", rounds, rounds, res.Sent, res.Failed, res)
	t.Logf("responses per backend: %s", counts)
	if len(never) > 0 {
		// Every added backend stays in the slice for a second or more
		// under load: one that served nothing was never routed to.
		t.Errorf("added backends %v never served a request: %s", never, counts)
	}
	if res.Failed != 0 {
		t.Errorf("%d of %d requests failed during endpoint churn: %v; first errors:\n%s",
			res.Failed, res.Sent, res.ByKind, strings.Join(res.Errors, "\n"))
	}
}

// Command ctlplane measures sluice's control plane end to end with the real
// binary: it writes N generated Ingresses (default 10,000 ≈ 20,000 routes)
// as manifest files, starts the sluice command given after "--" on that
// directory, times process start → the last Ingress answering, then changes
// one Ingress's host in its file several times and times each write → the
// new host answering. It prints one result.Record per change.
//
// Data flow: corpus → YAML files → sluice proxy --manifests (watch →
// translate → table swap) → HTTP probe (here) → JSON lines → raw.jsonl →
// report.
//
// With --tls every Ingress has its own certificate in its own Secret
// (ECDSA P-256, one CA), the probes go over HTTPS to --https with the host as
// SNI and verify the certificate, and the records' Variant is "tls".
//
//	ctlplane --dir /tmp/m --http 127.0.0.1:24081 --admin 127.0.0.1:24091 \
//	    --backend-port 24080 -- taskset -c 0 sluice proxy --manifests /tmp/m --allow-loopback-endpoints ...
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sluice.dev/sluice/bench/internal/corpus"
	"sluice.dev/sluice/bench/internal/result"
)

// Options configure one run.
type Options struct {
	Dir        string // manifests directory (created, must be empty)
	HTTPAddr   string // sluice's --http-address
	HTTPSAddr  string // sluice's --https-address (with TLS)
	TLS        bool   // every Ingress with its own certificate
	AdminAddr  string // sluice's --admin-address
	Corpus     corpus.Options
	Changes    int           // changes timed
	Timeout    time.Duration // longest wait for a route to answer
	Poll       time.Duration // probe interval
	Command    []string      // how to start sluice
	StderrPath string        // sluice's log
}

func main() {
	var o Options
	var backendPort int
	flag.StringVar(&o.Dir, "dir", "", "manifests directory to create (must not exist or be empty)")
	flag.StringVar(&o.HTTPAddr, "http", "127.0.0.1:24081", "sluice's HTTP address (loopback)")
	flag.StringVar(&o.HTTPSAddr, "https", "127.0.0.1:24082", "sluice's HTTPS address (loopback; with --tls)")
	flag.BoolVar(&o.TLS, "tls", false, "give every Ingress its own certificate and Secret, probe over HTTPS")
	flag.StringVar(&o.AdminAddr, "admin", "127.0.0.1:24091", "sluice's admin address (loopback)")
	flag.IntVar(&o.Corpus.Ingresses, "ingresses", 10000, "generated Ingresses (two routes each)")
	flag.IntVar(&backendPort, "backend-port", 24080, "port of the bench backend on 127.0.0.1")
	flag.IntVar(&o.Changes, "changes", 3, "Ingress changes to time")
	flag.DurationVar(&o.Timeout, "timeout", 120*time.Second, "longest wait for a route to answer")
	flag.DurationVar(&o.Poll, "poll", time.Millisecond, "probe interval (at least 5 ms with --tls)")
	flag.StringVar(&o.StderrPath, "log", "", "file for sluice's output (default: discarded)")
	flag.Parse()
	o.Corpus.BackendPort = int32(backendPort)
	o.Command = flag.Args()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	recs, err := run(ctx, o)
	if err != nil {
		recs = append(recs, result.Record{Phase: result.PhaseControl, Proxy: "sluice", Error: err.Error(), Failed: -1})
	}
	if o.TLS {
		for i := range recs {
			recs[i].Variant = "tls"
		}
	}
	for _, r := range recs {
		result.Print(r)
	}
}

func run(ctx context.Context, o Options) ([]result.Record, error) {
	if len(o.Command) == 0 {
		return nil, errors.New("no sluice command after --")
	}
	for _, a := range []string{o.HTTPAddr, o.HTTPSAddr, o.AdminAddr} {
		if err := checkLoopback(a); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", o.Dir, err)
	}
	if o.TLS {
		ca, err := corpus.NewCA()
		if err != nil {
			return nil, err
		}
		o.Corpus.TLS = ca
	}
	if err := corpus.WriteDir(o.Dir, o.Corpus); err != nil {
		return nil, err
	}

	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	if o.StderrPath != "" {
		f, err := os.Create(o.StderrPath)
		if err != nil {
			return nil, fmt.Errorf("creating log: %w", err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting sluice: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()

	client := &http.Client{
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4},
		Timeout:   2 * time.Second,
	}
	status := func(host string) int { return get(client, "http://"+o.HTTPAddr+"/", host) }
	if o.TLS {
		tc := &tlsClients{addr: o.HTTPSAddr, roots: o.Corpus.TLS.Pool()}
		defer tc.close()
		status = tc.get
	}
	// Over HTTPS a probe that fails is a full handshake on the proxy's
	// core (the host has no certificate yet), so a 1 ms probe would take
	// much of the core the table build needs: probe at most every 5 ms.
	pause := o.Poll
	if o.TLS {
		pause = max(pause, 5*time.Millisecond)
	}
	probe := func(host string) (time.Duration, error) {
		t0 := time.Now()
		deadline := t0.Add(o.Timeout)
		for time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case err := <-exited:
				exited <- err
				return 0, fmt.Errorf("sluice exited: %v", err)
			default:
			}
			if status(host) == http.StatusOK {
				return time.Since(t0), nil
			}
			time.Sleep(pause)
		}
		return 0, fmt.Errorf("host %s did not answer 200 within %s", host, o.Timeout)
	}

	last := corpus.IngressHost(o.Corpus.Ingresses - 1)
	if _, err := probe(last); err != nil {
		return nil, fmt.Errorf("waiting for the first table: %w", err)
	}
	base := result.Record{Phase: result.PhaseControl, Proxy: "sluice", Ingresses: o.Corpus.Ingresses}
	base.StartupMs = float64(time.Since(start)) / float64(time.Millisecond)
	// The admin server shares one core with table builds: wait longer.
	admin := &http.Client{Transport: client.Transport, Timeout: 30 * time.Second}
	m, err := metrics(admin, o.AdminAddr)
	if err != nil {
		return nil, err
	}
	base.Routes = int(m["sluice_table_routes"])
	if c := m["sluice_table_build_duration_seconds_count"]; c > 0 {
		base.BuildMs = m["sluice_table_build_duration_seconds_sum"] / c * 1000
	}
	if base.ProcessRSSKiB, err = result.RSSKiB(cmd.Process.Pid); err != nil {
		return nil, err
	}

	var out []result.Record
	for i := 1; i <= o.Changes; i++ {
		// Every change, the first included, comes half a second after
		// the last scrape: the first used to follow the start-up
		// scrapes at once, so it measured them (and the collection
		// they and the start-up leave) too.
		time.Sleep(500 * time.Millisecond)
		host := fmt.Sprintf("changed-%d-%d.bench.local", i, time.Now().UnixNano())
		if status(host) == http.StatusOK {
			return out, fmt.Errorf("host %s answers before the change", host)
		}
		before, err := liveHistogram(admin, o.AdminAddr, -1)
		if err != nil {
			return out, err
		}
		t0 := time.Now()
		if err := corpus.WriteIngressFile(o.Dir, o.Corpus, 0, map[int]string{0: host}); err != nil {
			return out, err
		}
		if _, err := probe(host); err != nil {
			return out, fmt.Errorf("change %d: %w", i, err)
		}
		r := base
		r.Round = i
		r.ChangeToLiveMs = float64(time.Since(t0)) / float64(time.Millisecond)
		// The loop observes the histogram just after the swap: wait for it.
		after, err := liveHistogram(admin, o.AdminAddr, before.count)
		if err != nil {
			return out, err
		}
		r.SourceToLiveMs = (after.sum - before.sum) / (after.count - before.count) * 1000
		out = append(out, r)
		// The old host must be gone in the same table.
		if code := status(corpus.IngressHost(0)); code == http.StatusOK && i == 1 {
			out[len(out)-1].Samples = append(out[len(out)-1].Samples, "old host still answers after the change")
		}
	}
	return out, nil
}

// get returns the status of GET url with the given Host header, 0 on error.
func get(c *http.Client, url, host string) int {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// tlsClients probes over HTTPS with the host as SNI, verifying the
// certificate against the corpus CA: one keep-alive client per host.
type tlsClients struct {
	addr    string
	roots   *x509.CertPool
	clients map[string]*http.Client
}

func (t *tlsClients) get(host string) int {
	c, ok := t.clients[host]
	if !ok {
		if t.clients == nil {
			t.clients = map[string]*http.Client{}
		}
		c = &http.Client{
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1,
				TLSClientConfig: &tls.Config{RootCAs: t.roots, ServerName: host}},
			Timeout: 2 * time.Second,
		}
		t.clients[host] = c
	}
	return get(c, "https://"+t.addr+"/", host)
}

func (t *tlsClients) close() {
	for _, c := range t.clients {
		c.CloseIdleConnections()
	}
}

// metrics scrapes the admin /metrics page into name → value for unlabelled
// samples.
func metrics(c *http.Client, admin string) (map[string]float64, error) {
	resp, err := c.Get("http://" + admin + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping metrics: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
			out[name] = f
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// histogram is the sum and count of a Prometheus histogram.
type histogram struct{ sum, count float64 }

// liveHistogram scrapes sluice_table_change_to_live_seconds, retrying for up
// to 5 s until its count is above after (-1: take the first scrape).
func liveHistogram(c *http.Client, admin string, after float64) (histogram, error) {
	const name = "sluice_table_change_to_live_seconds"
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := metrics(c, admin)
		if err != nil {
			return histogram{}, err
		}
		h := histogram{sum: m[name+"_sum"], count: m[name+"_count"]}
		if h.count > after {
			return h, nil
		}
		if time.Now().After(deadline) {
			return h, fmt.Errorf("%s: count still %v after the change", name, h.count)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("parsing address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: only loopback addresses are allowed", addr)
	}
	return nil
}

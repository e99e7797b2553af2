// Package bindtest runs a real BIND 9 (Debian's named) for integration and
// e2e tests: primary zones that take TSIG-signed dynamic updates and
// transfers, on 127.0.0.1 (or another local address) and a free port,
// stopped by PID when the test ends. It is test support for the RFC2136
// provider; nothing in the controller imports it.
package bindtest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"sluice.dev/sluice/test/testenv"
)

// KeyName is the TSIG key the server grants updates and transfers to.
const KeyName = "sluice-test"

// TXTOnlyKeyName is a second TSIG key that may write only TXT records
// anywhere in the zones (`grant ... zonesub TXT`), as an ACME DNS-01
// solver's key often may: the attacker of the forged-ownership tests.
const TXTOnlyKeyName = "txt-only"

// Server is a running named.
type Server struct {
	// Addr is IP:port (127.0.0.1 unless StartOn named another address).
	Addr string
	// Secret is the base64 TSIG secret of KeyName (hmac-sha256).
	Secret string
	// TXTOnlySecret is the base64 TSIG secret of TXTOnlyKeyName.
	TXTOnlySecret string
	// Dir holds named.conf, the zone files and the journals.
	Dir string

	t     testing.TB
	conf  string
	zones []string
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
}

// Start writes a configuration serving zones (names such as
// "example.com") and starts named in the foreground; it is stopped when
// the test ends. It skips the test when named is not installed.
func Start(t testing.TB, zones ...string) *Server {
	t.Helper()
	return StartOn(t, "127.0.0.1", zones...)
}

// StartOn is Start listening on ip (an IPv4 address of this host), e.g.
// the local cluster's bridge, which pods reach and 127.0.0.1 is not.
func StartOn(t testing.TB, ip string, zones ...string) *Server {
	t.Helper()
	if _, err := exec.LookPath("named"); err != nil {
		t.Skip("named (Debian bind9) is not installed")
	}
	secret, txtOnly := make([]byte, 32), make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(txtOnly); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, Dir: t.TempDir(), Secret: base64.StdEncoding.EncodeToString(secret),
		TXTOnlySecret: base64.StdEncoding.EncodeToString(txtOnly), zones: zones}
	s.Addr = net.JoinHostPort(ip, strconv.Itoa(testenv.FreePort(t, ip)))
	_, port, _ := net.SplitHostPort(s.Addr)
	var conf strings.Builder
	fmt.Fprintf(&conf, "key %q { algorithm hmac-sha256; secret %q; };\n", KeyName, s.Secret)
	fmt.Fprintf(&conf, "key %q { algorithm hmac-sha256; secret %q; };\n", TXTOnlyKeyName, s.TXTOnlySecret)
	fmt.Fprintf(&conf, "options {\n\tdirectory %q;\n\tpid-file %q;\n\tlisten-on port %s { %s; };\n\tlisten-on-v6 { none; };\n"+
		"\trecursion no;\n\tnotify no;\n\tallow-transfer { key %q; };\n};\ncontrols { };\n",
		s.Dir, filepath.Join(s.Dir, "named.pid"), port, ip, KeyName)
	for _, z := range zones {
		file := filepath.Join(s.Dir, z+".zone")
		zone := fmt.Sprintf("$TTL 60\n@ IN SOA ns.%[1]s. hostmaster.%[1]s. 1 60 60 600 60\n@ IN NS ns.%[1]s.\nns IN A 127.0.0.1\n", z)
		if err := os.WriteFile(file, []byte(zone), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&conf, "zone %q { type primary; file %q; update-policy { grant %s zonesub ANY; grant %s zonesub TXT; }; };\n", z, file, KeyName, TXTOnlyKeyName)
	}
	s.conf = filepath.Join(s.Dir, "named.conf")
	if err := os.WriteFile(s.conf, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Restart starts named again after Stop (a no-op while it runs) and
// waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	log, err := os.OpenFile(filepath.Join(s.Dir, "named.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command("named", "-f", "-u", "root", "-c", s.conf)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatalf("starting named: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.loaded() {
			return
		}
		select {
		case <-done:
			out, _ := os.ReadFile(filepath.Join(s.Dir, "named.log"))
			s.cmd = nil
			s.t.Fatalf("named exited at start:\n%s", out)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("named did not answer on %s within 30s", s.Addr)
		}
	}
}

// loaded: every zone answers its SOA (named answers SERVFAIL for a zone
// it is still loading).
func (s *Server) loaded() bool {
	for _, z := range s.zones {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(z), dns.TypeSOA)
		c := &dns.Client{Net: "tcp", Timeout: time.Second}
		r, _, err := c.Exchange(m, s.Addr)
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			return false
		}
	}
	return true
}

// Stop kills named by its PID and waits for it to exit: the server is
// down until Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Query asks the server for name's records of type typ (dns.TypeA, ...)
// over TCP, unsigned: what a resolver would be told.
func (s *Server) Query(name string, typ uint16) ([]dns.RR, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), typ)
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, s.Addr)
	if err != nil {
		return nil, fmt.Errorf("querying %s: %w", name, err)
	}
	// SERVFAIL (a zone still loading after a restart), REFUSED and the
	// like say nothing about the record: only NOERROR and NXDOMAIN answer.
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return nil, fmt.Errorf("querying %s: %s", name, dns.RcodeToString[r.Rcode])
	}
	return r.Answer, nil
}

// Update adds the resource record rr (zone file syntax, e.g.
// "mail.example.com. 300 IN MX 10 mx.example.net.") to zone with a
// signed UPDATE under KeyName: records of types the provider never
// writes, put in by the zone's admin.
func (s *Server) Update(zone, rr string) error {
	r, err := dns.NewRR(rr)
	if err != nil {
		return fmt.Errorf("parsing %q: %w", rr, err)
	}
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone))
	m.Insert([]dns.RR{r})
	m.SetTsig(dns.Fqdn(KeyName), dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second, TsigSecret: map[string]string{dns.Fqdn(KeyName): s.Secret}}
	resp, _, err := c.Exchange(m, s.Addr)
	if err != nil {
		return fmt.Errorf("updating %s: %w", zone, err)
	}
	if resp.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("updating %s: %s", zone, dns.RcodeToString[resp.Rcode])
	}
	return nil
}

package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"sluice.dev/sluice/internal/version"
)

// commandFlags builds each command's flag set, for the tests that hold
// every flag to the conventions.
var commandFlags = map[string]func(io.Writer) *flagSet{
	"proxy":           func(w io.Writer) *flagSet { return (&proxyConfig{}).flags(w) },
	"controller":      func(w io.Writer) *flagSet { return (&controllerConfig{}).flags(w) },
	"node-health":     func(w io.Writer) *flagSet { return (&nodeHealthConfig{}).flags(w) },
	"remove-bindings": func(w io.Writer) *flagSet { return (&removeBindingsConfig{}).flags(w) },
	"explain":         func(w io.Writer) *flagSet { return (&explainConfig{}).flags(w) },
	"migrate":         func(w io.Writer) *flagSet { return (&migrateConfig{}).flags(w) },
	"version":         func(w io.Writer) *flagSet { return versionFlags(new(string), w) },
}

// TestEveryFlagHasEnvAndHelp: every flag of every command has help text
// and is read from its SLUICE_ variable, which -h shows; deprecated
// aliases have neither an environment variable nor a place in the
// conventions' count.
func TestEveryFlagHasEnvAndHelp(t *testing.T) {
	for _, c := range commands() {
		build := commandFlags[c.name]
		if build == nil {
			t.Errorf("command %s: no entry in commandFlags", c.name)
			continue
		}
		var help bytes.Buffer
		fs := build(&help)
		looked := map[string]bool{}
		fs.lookupEnv = func(name string) (string, bool) { looked[name] = true; return "", false }
		if err := fs.parse(nil); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fs.Usage()
		n := 0
		fs.VisitAll(func(f *flag.Flag) {
			if strings.TrimSpace(f.Usage) == "" {
				t.Errorf("%s --%s: no help text", c.name, f.Name)
			}
			if fs.aliases[f.Name] != "" {
				if !strings.Contains(f.Usage, "deprecated") {
					t.Errorf("%s --%s: an alias whose help does not say it is deprecated", c.name, f.Name)
				}
				return
			}
			n++
			env := envName(f.Name)
			if !looked[env] {
				t.Errorf("%s --%s: %s not read", c.name, f.Name, env)
			}
			if !strings.Contains(help.String(), "[$"+env+"]") {
				t.Errorf("%s --%s: -h does not name %s", c.name, f.Name, env)
			}
		})
		if n == 0 {
			t.Errorf("%s: no flags", c.name)
		}
	}
}

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"drain-max-wait":               "SLUICE_DRAIN_MAX_WAIT",
		"http2-max-concurrent-streams": "SLUICE_HTTP2_MAX_CONCURRENT_STREAMS",
		"kubeconfig":                   "SLUICE_KUBECONFIG",
	} {
		if got := envName(flagName); got != want {
			t.Errorf("envName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

// TestEnvBinding: the environment fills in what the command line left
// alone; the command line wins; a bad value names its variable.
func TestEnvBinding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		check   func(*proxyConfig) bool
		wantErr string
	}{
		{"duration from env", map[string]string{"SLUICE_DRAIN_MAX_WAIT": "5s"}, nil,
			func(c *proxyConfig) bool { return c.drainMaxWait == 5*time.Second }, ""},
		{"command line wins", map[string]string{"SLUICE_DRAIN_MAX_WAIT": "5s"}, []string{"--drain-max-wait=7s"},
			func(c *proxyConfig) bool { return c.drainMaxWait == 7*time.Second }, ""},
		{"bool from env", map[string]string{"SLUICE_ACCESS_LOG": "true", "SLUICE_HTTP1_FAST_PATH": "false"}, nil,
			func(c *proxyConfig) bool { return c.accessLog && !c.fastHTTP1 }, ""},
		{"empty value turns a listener off", map[string]string{"SLUICE_HTTP_ADDRESS": ""}, nil,
			func(c *proxyConfig) bool { return c.httpAddress == "" && c.httpsAddress == ":8443" }, ""},
		{"list from env", map[string]string{"SLUICE_INGRESS_CLASS": "a,b", "SLUICE_WATCH_NAMESPACE": "x, y"}, nil,
			func(c *proxyConfig) bool {
				return c.ingressClasses.String() == "a,b" && strings.Join(c.namespaces, ",") == "x,y"
			}, ""},
		{"list: command line wins, env not appended", map[string]string{"SLUICE_INGRESS_CLASS": "a,b"}, []string{"--ingress-class=c"},
			func(c *proxyConfig) bool { return c.ingressClasses.String() == "c" }, ""},
		{"invalid duration", map[string]string{"SLUICE_DRAIN_MAX_WAIT": "soon"}, nil, nil, "SLUICE_DRAIN_MAX_WAIT"},
		{"invalid bool", map[string]string{"SLUICE_ACCESS_LOG": "yes please"}, nil, nil, "SLUICE_ACCESS_LOG"},
		{"invalid list entry", map[string]string{"SLUICE_INGRESS_CLASS": "Not_A_Name"}, nil, nil, "SLUICE_INGRESS_CLASS"},
		{"invalid env ignored when the flag is given", map[string]string{"SLUICE_DRAIN_MAX_WAIT": "soon"}, []string{"--drain-max-wait=1s"},
			func(c *proxyConfig) bool { return c.drainMaxWait == time.Second }, ""},
		{"checks apply to env values", map[string]string{"SLUICE_RETRIES": "11"}, nil, nil, "--retries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			c, err := parseProxyFlags(append([]string{"--manifests=dir"}, tc.args...), io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to name %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(c) {
				t.Errorf("parsed %+v", c)
			}
		})
	}
}

// TestDeprecatedSpellings: old names and old "off" values keep working
// for one release, with a warning each.
func TestDeprecatedSpellings(t *testing.T) {
	t.Setenv("NODE_NAME", "n1")
	for _, tc := range []struct {
		name     string
		env      map[string]string
		parse    func() ([]string, error)
		warnings int
	}{
		{"node-health --listen", nil, func() ([]string, error) {
			c, err := parseNodeHealthFlags([]string{"--namespace=x", "--selector=a=b", "--listen=:31000"}, io.Discard)
			if err == nil && c.healthAddress != ":31000" {
				t.Errorf("--listen did not set --health-address: %q", c.healthAddress)
			}
			return warnings(c), err
		}, 1},
		{"node-health --health-address", nil, func() ([]string, error) {
			c, err := parseNodeHealthFlags([]string{"--namespace=x", "--selector=a=b", "--health-address=:31000"}, io.Discard)
			return warnings(c), err
		}, 0},
		{"node-health: --listen wins over SLUICE_HEALTH_ADDRESS", map[string]string{"SLUICE_HEALTH_ADDRESS": ":1"}, func() ([]string, error) {
			c, err := parseNodeHealthFlags([]string{"--namespace=x", "--selector=a=b", "--listen=:31000"}, io.Discard)
			if err == nil && c.healthAddress != ":31000" {
				t.Errorf("health address %q", c.healthAddress)
			}
			return warnings(c), err
		}, 1},
		{`controller --metrics-address=0 --health-address=0`, nil, func() ([]string, error) {
			c, err := parseControllerFlags([]string{"--leader-election-namespace=ns", "--metrics-address=0", "--health-address=0"}, io.Discard)
			if err == nil && (c.metricsAddress != "" || c.healthAddress != "" || offAddress(c.metricsAddress) != "0") {
				t.Errorf("metrics %q health %q", c.metricsAddress, c.healthAddress)
			}
			return warnings(c), err
		}, 2},
		{`controller --metrics-address=""`, nil, func() ([]string, error) {
			c, err := parseControllerFlags([]string{"--leader-election-namespace=ns", "--metrics-address="}, io.Discard)
			if err == nil && (c.metricsAddress != "" || c.healthAddress != ":9092") {
				t.Errorf("metrics %q health %q", c.metricsAddress, c.healthAddress)
			}
			return warnings(c), err
		}, 0},
		{"controller --haproxy-watch-interval=-1s", nil, func() ([]string, error) {
			c, err := parseControllerFlags([]string{"--leader-election-namespace=ns", "--haproxy-watch-interval=-1s"}, io.Discard)
			if err == nil && watchInterval(c.haproxyWatchInterval) >= 0 {
				t.Errorf("watch interval %v: restoring not off", c.haproxyWatchInterval)
			}
			return warnings(c), err
		}, 1},
		{"controller --haproxy-watch-interval=0", nil, func() ([]string, error) {
			c, err := parseControllerFlags([]string{"--leader-election-namespace=ns", "--haproxy-watch-interval=0"}, io.Discard)
			if err == nil && watchInterval(c.haproxyWatchInterval) >= 0 {
				t.Errorf("watch interval %v: restoring not off", c.haproxyWatchInterval)
			}
			return warnings(c), err
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			w, err := tc.parse()
			if err != nil {
				t.Fatal(err)
			}
			if len(w) != tc.warnings {
				t.Errorf("warnings %q, want %d", w, tc.warnings)
			}
			for _, m := range w {
				if !strings.Contains(m, "deprecated") {
					t.Errorf("warning %q does not say deprecated", m)
				}
			}
		})
	}
}

func warnings(c interface{ deprecations() []string }) []string { return c.deprecations() }

// TestListFlags: list flags take a comma-separated list, repeated or not.
func TestListFlags(t *testing.T) {
	c, err := parseControllerFlags([]string{"--leader-election-namespace=ns", "--dns-zone=a.example, b.example", "--dns-zone=c.example",
		"--dns-namespace-domains=team-a=a.example,*.a.example,team-b=b.example", "--dns-namespace-domains=team-c=c.example"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.dns.zones, " "); got != "a.example b.example c.example" {
		t.Errorf("zones %q", got)
	}
	if got := c.dns.namespaces.String(); got != "team-a=a.example,*.a.example team-b=b.example team-c=c.example" {
		t.Errorf("namespace domains %q", got)
	}
	t.Setenv("SLUICE_DNS_ZONE", "x.example,y.example")
	if c, err = parseControllerFlags([]string{"--leader-election-namespace=ns"}, io.Discard); err != nil || strings.Join(c.dns.zones, " ") != "x.example y.example" {
		t.Errorf("zones from SLUICE_DNS_ZONE: %v, %v", c.dns.zones, err)
	}
	if _, err := parseControllerFlags([]string{"--leader-election-namespace=ns", "--dns-namespace-domains=a.example,team=b.example"}, io.Discard); err == nil {
		t.Error("--dns-namespace-domains starting without NAMESPACE=: no error")
	}
}

func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out.Reset()
		if code := dispatch(args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
		i := version.Get()
		want := "sluice " + i.Version + "\ncommit " + i.Commit + "\ngo " + i.GoVersion + "\n"
		if out.String() != want {
			t.Errorf("%v printed %q, want %q", args, out.String(), want)
		}
	}
	out.Reset()
	if code := dispatch([]string{"version", "--output", "json"}, &out, &errb); code != 0 {
		t.Fatalf("--output json: exit %d", code)
	}
	var i version.Info
	if err := json.Unmarshal(out.Bytes(), &i); err != nil || i != version.Get() {
		t.Errorf("--output json printed %q (%v)", out.String(), err)
	}
	if code := dispatch([]string{"version", "--output", "yaml"}, &out, &errb); code != 2 {
		t.Errorf("--output yaml: exit %d, want 2", code)
	}
}

// TestMain clears the SLUICE_ variables of the environment the tests run
// in (SLUICE_KUBECONFIG of the e2e suites is also --kubeconfig's), so that
// the flag tests see only what they set.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "SLUICE_") {
			os.Unsetenv(name)
		}
	}
	os.Exit(m.Run())
}

package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestResolve(t *testing.T) {
	bi := func(kv ...string) *debug.BuildInfo {
		b := &debug.BuildInfo{}
		for i := 0; i+1 < len(kv); i += 2 {
			b.Settings = append(b.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return b
	}
	for _, tc := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            Info
	}{
		{"stamped", "0.2.0", "abc", bi("vcs.revision", "def"), Info{"0.2.0", "abc", runtime.Version()}},
		{"unstamped, no vcs", "", "", nil, Info{"dev", "unknown", runtime.Version()}},
		{"vcs revision", "", "", bi("vcs.revision", "def", "vcs.modified", "false"), Info{"dev", "def", runtime.Version()}},
		{"vcs dirty", "v0.1.0-3-gdef", "", bi("vcs.revision", "def", "vcs.modified", "true"), Info{"v0.1.0-3-gdef", "def-dirty", runtime.Version()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.version, tc.commit, tc.bi); got != tc.want {
				t.Errorf("resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	i := Get()
	want := `# HELP sluice_build_info The sluice build: always 1, labelled with version, commit and goversion.
# TYPE sluice_build_info gauge
sluice_build_info{commit="` + i.Commit + `",goversion="` + i.GoVersion + `",version="` + i.Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_build_info"); err != nil {
		t.Error(err)
	}
}

// Package version is the identity of a sluice build: the release version
// and commit stamped in at link time, and the Go version. `sluice version`
// prints it, the components log it at start, and sluice_build_info exports
// it on the proxy's and the controller's metrics endpoints.
//
// Every build path stamps it (Makefile, scripts/image.sh, scripts/release.sh,
// the Dockerfile):
//
//	go build -ldflags "-X sluice.dev/sluice/internal/version.Version=0.2.0 \
//	    -X sluice.dev/sluice/internal/version.Commit=$(git rev-parse HEAD)" ./cmd/sluice
//
// An unstamped build (go build, go test) reports Version "dev" and the
// commit Go recorded from the git checkout, if any.
package version

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version and Commit are set by the linker (-X); they are variables only
// for that reason and are never written at run time. Read them through Get.
var (
	// Version is the release version: a semantic version from the git tag
	// (`git describe --tags --always --dirty`) or an explicit VERSION.
	// Empty: "dev".
	Version string
	// Commit is the full git commit. Empty: the vcs.revision Go recorded
	// in the build info (with "-dirty" for a modified tree), else "unknown".
	Commit string
)

// Info is what a build says about itself.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

// Get returns this binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, Commit, bi)
}

// resolve fills in the defaults of the stamped values from the build info
// (nil: none).
func resolve(v, commit string, bi *debug.BuildInfo) Info {
	i := Info{Version: v, Commit: commit, GoVersion: runtime.Version()}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" && bi != nil {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" && modified == "true" {
			rev += "-dirty"
		}
		i.Commit = rev
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// Collector is sluice_build_info: a gauge, always 1, labelled with the
// version, the commit and the Go version (Prometheus's build_info
// convention: join on it to see what runs where).
func Collector() prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "sluice_build_info",
		Help:        "The sluice build: always 1, labelled with version, commit and goversion.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}

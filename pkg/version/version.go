package version

import (
	"runtime"
	"sync"

	"k8s.io/component-base/metrics"
)

// Version is implicit-apiserver's version. `make build` sets it with
//
//	-ldflags "-X github.com/implicit-dev/implicit-apiserver/pkg/version.Version=$(git describe --tags --always --dirty)"
//
// and a plain `go build` leaves it "dev".
var Version = "dev"

// String is what `implicit-apiserver --version` prints.
func String() string {
	return "implicit-apiserver " + Version
}

var buildInfo = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Namespace:      "implicit",
	Name:           "build_info",
	Help:           "A metric with a constant value of 1, labeled by the version implicit-apiserver was built from and the Go version that built it.",
	StabilityLevel: metrics.ALPHA,
}, []string{"version", "go_version"})

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process,
// later calls do nothing.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(buildInfo)
		buildInfo.WithLabelValues(Version, runtime.Version()).Set(1)
	})
}

var registerOnce sync.Once

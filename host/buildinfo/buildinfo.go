// Package buildinfo names the release and commit the running binary was
// built from, for --version, the admin listener's /readyz and the
// plantgate_build_info metric: one answer everywhere.
//
// `make build` stamps both with -ldflags -X (from git describe and git
// rev-parse), which holds where the environment sets GOFLAGS=-buildvcs=false
// and Go records no VCS data; an unstamped build falls back to what Go
// recorded (debug.ReadBuildInfo), then to "dev" and "unknown".
package buildinfo

import (
	"runtime/debug"
	"sync"
)

// Set by the linker: go build -ldflags "-X github.com/plantgate/plantgate/host/buildinfo.version=v1.2.3 -X ...revision=<sha>".
var (
	version  string
	revision string
)

// Info is the build of the running binary.
type Info struct {
	Version   string `json:"version"`   // release, e.g. v0.3.0-4-gabc1234-dirty; "dev" when unknown
	Revision  string `json:"revision"`  // full commit hash; "unknown" when unknown
	GoVersion string `json:"goVersion"` // toolchain that built it
}

var get = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, revision, bi)
})

// Get returns the build of the running binary.
func Get() Info { return get() }

// resolve prefers the stamped values, then Go's build info, then
// placeholders; apart from Get so the fall-backs can be tested.
func resolve(stampedVersion, stampedRevision string, bi *debug.BuildInfo) Info {
	in := Info{Version: stampedVersion, Revision: stampedRevision, GoVersion: "unknown"}
	if bi != nil {
		in.GoVersion = bi.GoVersion
		// "(devel)" is what Go records for a build from a work tree: no
		// release, so not worth showing as one.
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		if in.Revision == "" {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					in.Revision = s.Value
				}
			}
		}
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	if in.Revision == "" {
		in.Revision = "unknown"
	}
	return in
}

// String is the one-line form `plantgate --version` prints.
func (i Info) String() string {
	return i.Version + " (commit " + i.Revision + ", " + i.GoVersion + ")"
}

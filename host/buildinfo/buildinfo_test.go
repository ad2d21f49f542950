package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.9.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}
	devel := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}
	for _, tc := range []struct {
		name     string
		ver, rev string
		bi       *debug.BuildInfo
		want     Info
	}{
		{"stamped wins", "v1.0.0-2-gdeadbee", "deadbeef", vcs, Info{"v1.0.0-2-gdeadbee", "deadbeef", "go1.26.0"}},
		{"go's build info", "", "", vcs, Info{"v0.9.0", "abc123", "go1.26.0"}},
		{"no vcs data (-buildvcs=false)", "", "", devel, Info{"dev", "unknown", "go1.26.0"}},
		{"no build info", "", "", nil, Info{"dev", "unknown", "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve(tc.ver, tc.rev, tc.bi); got != tc.want {
				t.Fatalf("resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

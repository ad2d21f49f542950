package wasm

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// BenchmarkKits measures one validate call into the plant-rules example of
// each guest kit (Rust, C) and the Rego one (sdk/rego, run through
// opa_eval) beside the bundled Go plant-rules, in the same
// run, as the gateway runs them (deadline enforcement on): an allowed
// plant, and a denied one (the deny path formats a message). It reports
// each language's ns per call and each kit's ratio to Go (<lang>-x-go),
// and logs the modules' sizes (-v). A kit without its toolchain is left
// out (see wasmtest.KitToolchain; opa for Rego). ns/op is all the
// languages' calls.
//
//	go test -run '^$' -bench Kits -benchmem ./host/wasm/
func BenchmarkKits(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{"go": filepath.Join(dir, "go.wasm")}
	if err := wasmtest.Build(files["go"], "./plugins/plant-rules"); err != nil {
		b.Fatal(err)
	}
	langs := []string{"go"}
	for _, lang := range append(wasmtest.Kits, "rego") {
		if err := wasmtest.KitToolchain(lang); err != nil {
			b.Logf("%s kit left out: %v", lang, err)
			continue
		}
		files[lang] = filepath.Join(dir, lang+".wasm")
		if err := wasmtest.BuildKit(lang, "plant-rules", files[lang]); err != nil {
			b.Fatal(err)
		}
		langs = append(langs, lang)
	}
	plugins := benchPlugins(b, files, langs)
	for _, in := range []struct {
		name  string
		plant host.Plant
		deny  bool
	}{
		{"allow", host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "tropical", HasTag: true}, false},
		{"deny", host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "a\tb", HasTag: true}, true},
	} {
		b.Run(in.name, func(b *testing.B) { benchInTurn(b, langs, plugins, in.plant, in.deny) })
	}
	for _, lang := range langs {
		if fi, err := os.Stat(files[lang]); err == nil {
			b.Logf("%s plant-rules module: %d bytes", lang, fi.Size())
		}
	}
}

// benchPlugins loads the modules files names, one instance each, with
// the widest limits (no recycling, no timeout within a benchmark), closed
// when b ends.
func benchPlugins(b *testing.B, files map[string]string, names []string) map[string]*Plugin {
	ctx := context.Background()
	plugins := map[string]*Plugin{}
	for _, name := range names {
		p, err := LoadPlugin(ctx, files[name], nil, Options{CacheDir: cacheDir, Logger: slog.New(slog.DiscardHandler),
			Limits: Limits{Instances: 1, MaxCalls: maxMaxCalls, Timeout: maxTimeout}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close(ctx) })
		plugins[name] = p
	}
	return plugins
}

// benchInTurn validates plant with each of names' plugins once per
// iteration, in turn, so that a shared machine's load falls on all of them
// alike: the ratios hold where the absolute figures drift. It reports each
// one's ns per call and its ratio to the first, "go" (<name>-x-go).
func benchInTurn(b *testing.B, names []string, plugins map[string]*Plugin, plant host.Plant, deny bool) {
	ctx := context.Background()
	spent := make([]time.Duration, len(names))
	b.ReportAllocs()
	for b.Loop() {
		for i, name := range names {
			start := time.Now()
			err := plugins[name].Validate(ctx, plant, "ci")
			spent[i] += time.Since(start)
			if (err != nil) != deny {
				b.Fatalf("%s: %v", name, err)
			}
		}
	}
	for i, name := range names {
		b.ReportMetric(float64(spent[i].Nanoseconds())/float64(b.N), name+"-ns/call")
		if i > 0 {
			b.ReportMetric(float64(spent[i])/float64(spent[0]), name+"-x-go")
		}
	}
}

// BenchmarkOPAStart measures what a Rego policy's instance costs: compiling
// the module (no compilation cache, as on a first start) and making one
// instance, with the guest memory each instance holds once ready
// (KiB/instance), beside the same for the bundled Go plant-rules.
//
//	go test -run '^$' -bench OPAStart ./host/wasm/
func BenchmarkOPAStart(b *testing.B) {
	wasmtest.NeedOPA(b)
	dir := b.TempDir()
	files := map[string]string{"go": filepath.Join(dir, "go.wasm"), "rego": filepath.Join(dir, "rego.wasm")}
	if err := wasmtest.Build(files["go"], "./plugins/plant-rules"); err != nil {
		b.Fatal(err)
	}
	if err := wasmtest.BuildKit("rego", "plant-rules", files["rego"]); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, lang := range []string{"go", "rego"} {
		b.Run(lang, func(b *testing.B) {
			var memory int64
			for b.Loop() {
				p, err := LoadPlugin(ctx, files[lang], nil, Options{Logger: slog.New(slog.DiscardHandler), Limits: Limits{Instances: 1}})
				if err != nil {
					b.Fatal(err)
				}
				memory = p.Memory()
				_ = p.Close(ctx)
			}
			b.ReportMetric(float64(memory)/1024, "KiB/instance")
		})
	}
}

package wasm

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/wasm/wasmtest"
)

// BenchmarkKits measures one validate call into the plant-rules example of
// each guest kit (Rust, C) beside the bundled Go plant-rules, in the same
// run, as the gateway runs them (deadline enforcement on): an allowed
// plant, and a denied one (the deny path formats a message). Each kit's
// sub-benchmark reports x-go, its ns/op over Go's for the same input, and
// the module's size in bytes. A kit without its toolchain is left out
// (see wasmtest.KitToolchain).
//
//	go test -run '^$' -bench Kits -benchmem ./host/wasm/
func BenchmarkKits(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{"go": filepath.Join(dir, "go.wasm")}
	if err := wasmtest.Build(files["go"], "./plugins/plant-rules"); err != nil {
		b.Fatal(err)
	}
	langs := []string{"go"}
	for _, lang := range wasmtest.Kits {
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
	ctx := context.Background()
	plugins := map[string]*Plugin{}
	for _, lang := range langs {
		p, err := LoadPlugin(ctx, files[lang], nil, Options{CacheDir: cacheDir, Logger: slog.New(slog.DiscardHandler),
			Limits: Limits{Instances: 1, MaxCalls: maxMaxCalls, Timeout: maxTimeout}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close(ctx) })
		plugins[lang] = p
	}
	for _, in := range []struct {
		name  string
		plant host.Plant
		deny  bool
	}{
		{"allow", host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "tropical", HasTag: true}, false},
		{"deny", host.Plant{ID: 42, Name: "Monstera deliciosa", Tag: "a\tb", HasTag: true}, true},
	} {
		var goNs float64
		for _, lang := range langs {
			p := plugins[lang]
			b.Run(in.name+"/"+lang, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := p.Validate(ctx, in.plant, "ci"); (err != nil) != in.deny {
						b.Fatalf("%s: %v", lang, err)
					}
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				if lang == "go" {
					goNs = ns
				} else if goNs > 0 {
					b.ReportMetric(ns/goNs, "x-go")
				}
				if fi, err := os.Stat(files[lang]); err == nil {
					b.ReportMetric(float64(fi.Size()), "module-bytes")
				}
			})
		}
	}
}

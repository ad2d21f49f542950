package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// startProfile, with -profile DIR, saves the gateway's profiles of the first
// round's create load into DIR: cpu.pb.gz over the load, and allocs-before
// and allocs-after.pb.gz around it (go tool pprof -sample_index=alloc_objects
// -base allocs-before.pb.gz allocs-after.pb.gz: what the load allocated).
// The returned stop waits for the CPU profile and takes the second allocs.
func startProfile(ctx context.Context, cfg config, gw *proc) (stop func() error) {
	if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
		return func() error { return err }
	}
	if err := saveProfile(ctx, gw, "allocs", filepath.Join(cfg.profile, "allocs-before.pb.gz")); err != nil {
		return func() error { return err }
	}
	secs := max(1, int(cfg.duration.Seconds())-2)
	done := make(chan error, 1)
	go func() {
		done <- saveProfile(ctx, gw, fmt.Sprintf("profile?seconds=%d", secs), filepath.Join(cfg.profile, "cpu.pb.gz"))
	}()
	return func() error {
		if err := <-done; err != nil {
			return err
		}
		return saveProfile(ctx, gw, "allocs", filepath.Join(cfg.profile, "allocs-after.pb.gz"))
	}
}

func saveProfile(ctx context.Context, gw *proc, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+gw.admin+"/debug/pprof/"+path, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", path, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

package wasm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the plugins directory whenever a plugin file or sidecar in
// it is created, written, renamed or removed, until ctx is done.
//
// The safe way to drop a plugin in is to copy it under a name that is not
// NN-name.wasm (a dotfile or a .tmp suffix, which Watch ignores) and rename
// it into place: a rename is atomic. A file copied in place is coped with:
// Watch waits until the directory has been quiet for ReloadOptions.Debounce
// and file sizes and modification times have stayed the same for as long
// again; a module still cut short fails its checks, is refused, and is
// loaded on the next change.
//
// Watch looks at the directory once when it starts, then on every change.
// It returns an error only when the directory cannot be watched.
func (r *Reloader) Watch(ctx context.Context) error {
	dir, ok := r.src.(Dir)
	if !ok {
		return fmt.Errorf("watch: %s is not a directory", r.src)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch plugins directory: %w", err)
	}
	defer w.Close()
	if err := w.Add(string(dir)); err != nil {
		return fmt.Errorf("watch plugins directory: %w", err)
	}
	debounce := r.ropts.Debounce
	// One look once watching: a file dropped between the last load and
	// now made no event that this watcher saw.
	timer := time.NewTimer(debounce)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if watched(ev.Name) {
				timer.Reset(debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			r.log.WarnContext(ctx, "watching the plugins directory", "dir", string(dir), "err", err)
			timer.Reset(debounce) // events may have been lost: look again
		case <-timer.C:
			if !settled(ctx, string(dir), debounce/2) {
				timer.Reset(debounce)
				continue
			}
			_, _ = r.Reload(ctx) // Reload logs a refusal
		}
	}
}

// watched reports whether a change to the file at path can change the
// chain: a plugin, a sidecar or a signature file, not a dotfile or a
// temporary name.
func watched(path string) bool {
	name := filepath.Base(path)
	if strings.HasPrefix(name, ".") {
		return false
	}
	ext := filepath.Ext(name)
	return ext == ".wasm" || ext == ".json" || ext == ".sig"
}

// settled reports whether the plugin files of the directory keep their
// sizes and modification times for d.
func settled(ctx context.Context, dir string, d time.Duration) bool {
	before := snapshot(dir)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
	}
	after := snapshot(dir)
	if len(before) != len(after) {
		return false
	}
	for name, st := range before {
		if after[name] != st {
			return false
		}
	}
	return true
}

type fileState struct {
	size  int64
	mtime time.Time
}

func snapshot(dir string) map[string]fileState {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	m := make(map[string]fileState, len(entries))
	for _, e := range entries {
		if !watched(e.Name()) {
			continue
		}
		if info, err := e.Info(); err == nil {
			m[e.Name()] = fileState{info.Size(), info.ModTime()}
		}
	}
	return m
}

package tlscert

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// settle is how long the directories must be quiet after an event before
// the files are read: certbot swaps four symlinks one after another, and a
// read between two swaps would only be refused and logged.
const settle = 250 * time.Millisecond

// Watch reloads the files when they change, until ctx is done: on an
// event in one of their directories (once the directory has been quiet for
// a moment), and every Poll whatever the events say.
//
// Directories are watched rather than files: renewals replace files and
// symlinks (certbot's live/ links, cert-manager's ..data link) rather than
// write into them, and a watch on a replaced file sees nothing after the
// first swap. When the directories cannot be watched (inotify limits), the
// poll alone notices changes, and the log says so.
func (r *Reloader) Watch(ctx context.Context) {
	poll := time.NewTicker(r.opts.Poll)
	defer poll.Stop()
	settled := time.NewTimer(settle)
	settled.Stop()
	var events <-chan fsnotify.Event
	var errs <-chan error
	if w, err := fsnotify.NewWatcher(); err != nil {
		r.opts.Logger.Warn("cannot watch the TLS files' directories; checking them every poll only", "poll", r.opts.Poll, "err", err)
	} else {
		defer w.Close()
		for _, dir := range r.dirs() {
			if err := w.Add(dir); err != nil {
				r.opts.Logger.Warn("cannot watch a TLS file's directory; checking it every poll only", "dir", dir, "poll", r.opts.Poll, "err", err)
			}
		}
		events, errs = w.Events, w.Errors
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			settled.Reset(settle)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			r.opts.Logger.Warn("watching the TLS files", "err", err)
			settled.Reset(settle) // events may have been lost: look again
		case <-settled.C:
			_ = r.Reload() // Reload logs a refusal
		case <-poll.C:
			_ = r.Reload()
		}
	}
}

// dirs is the directories holding the configured files, each once.
func (r *Reloader) dirs() []string {
	var dirs []string
	for _, f := range []string{r.opts.CertFile, r.opts.KeyFile, r.opts.ClientCAFile} {
		if f == "" {
			continue
		}
		if d := filepath.Dir(f); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

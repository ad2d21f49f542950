package wasm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plantgate/plantgate/host"
)

// Reloader is a host.Policy whose chain can be replaced while it serves:
// Reload reads its Source again and swaps the new chain in atomically;
// Watch does so whenever a directory changes, and the gateway's store
// follower whenever the store publishes a new chain version.
//
//	r, err := wasm.NewReloader(ctx, wasm.Dir("/etc/plantgate/plugins.d"), opts, wasm.ReloadOptions{RequireAuthorize: true})
//	if err != nil {
//		return err // the first load failed: names the file and the reason
//	}
//	defer r.Close(ctx)
//	go r.Watch(ctx)
//
// # Notes
//
//   - A new chain is compiled, checked and pre-warmed beside the old one
//     and swapped in only when every plugin loaded: a file that fails its
//     checks is refused with a log line naming it and the reason, and the
//     previous chain stays in force.
//   - Only files whose content changed are compiled again: a plugin whose
//     .wasm and sidecar hash as before is carried over to the new chain with
//     its warm instances.
//   - Each phase call holds a reference on the chain it runs in; an old
//     chain's plugins are closed once its last call has returned. A request
//     whose authorize call ran in the old chain may run validate in the new
//     one: every call completes, none fails because of a reload.
type Reloader struct {
	src   Source
	opts  Options
	ropts ReloadOptions
	log   *slog.Logger
	cache *compileCache

	cur atomic.Pointer[generation]

	mu     sync.Mutex // one reload at a time; guards the fields below
	loaded map[string]loadedPlugin
	owners map[*Plugin]int      // live generations holding each plugin
	live   map[*generation]bool // generations not yet retired
	closed bool
	seq    uint64 // the last generation's number
	failed bool   // the last Reload was refused: the next applied one is a recovery

	statusMu sync.Mutex // guards status, apart from mu: Snapshot must not wait for a reload
	status   ReloadStatus
}

// ReloadOptions configure a Reloader beyond the Options of its plugins.
type ReloadOptions struct {
	// RequireAuthorize refuses a chain without an authorize plugin, at the
	// first load and at every reload (the gateway's default, unless it runs
	// with --insecure-no-auth).
	//
	// Optional. Default: false.
	RequireAuthorize bool

	// ForbidAuthorize refuses a chain with an authorize plugin, at the
	// first load and at every reload (a gateway running with
	// --insecure-no-auth, which hands that phase no credential).
	//
	// Optional. Default: false.
	ForbidAuthorize bool

	// Debounce is how long Watch waits after the last change in the
	// directory before it reloads, and then how long file sizes and
	// modification times must stay the same: a file still being copied in
	// is not loaded half-written.
	//
	// Optional. Default: 200ms.
	Debounce time.Duration
}

// DefaultDebounce is ReloadOptions.Debounce's default.
const DefaultDebounce = 200 * time.Millisecond

// generation is one chain and the references to it: one for being the
// current chain, one per call in flight. At zero it is retired for good.
type generation struct {
	chain *Chain // nil: the Reloader is closed
	refs  atomic.Int64
	r     *Reloader
	done  chan struct{} // closed once retired and its unused plugins closed
	seq   uint64        // ReloadStatus.Generation; set before it is stored
	since time.Time     // when it became current
	ver   atomic.Uint64 // the newest Snapshot.Version it stands for
	dig   string        // ChainDigest of its files
}

func (r *Reloader) newGeneration(chain *Chain) *generation {
	g := &generation{chain: chain, r: r, done: make(chan struct{}), since: time.Now()}
	g.refs.Store(1)
	if chain != nil {
		r.live[g] = true
	}
	return g
}

var _ host.Policy = (*Reloader)(nil)

// ErrNoAuthorize is wrapped by the error of a load or reload refused
// because no plugin would serve the authorize phase
// (ReloadOptions.RequireAuthorize).
var ErrNoAuthorize = errors.New("no authorize plugin would be left")

// errReloaderClosed is what calls get after Close.
var errReloaderClosed = &host.Error{Code: host.ErrNotReady, Message: msgClosed}

// NewReloader loads src as Load does and returns a Reloader serving it. An
// error names the file and what is wrong with it.
func NewReloader(ctx context.Context, src Source, opts Options, ropts ReloadOptions) (*Reloader, error) {
	opts = opts.withDefaults()
	if ropts.Debounce <= 0 {
		ropts.Debounce = DefaultDebounce
	}
	cache, err := newCompileCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	r := &Reloader{
		src: src, opts: opts, ropts: ropts, log: opts.Logger, cache: cache,
		loaded: map[string]loadedPlugin{}, owners: map[*Plugin]int{}, live: map[*generation]bool{},
	}
	empty := r.newGeneration(Empty())
	empty.dig = ChainDigest(nil)
	r.cur.Store(empty)
	if _, err := r.reload(ctx); err != nil {
		cache.release(ctx)
		return nil, err
	}
	if g := r.cur.Load(); g.seq == 0 { // an empty directory: the placeholder is the first chain
		r.seq, g.seq = 1, 1
	}
	return r, nil
}

// Reload reads the Source again and swaps the new chain in. It reports
// whether the chain changed. On an error the previous chain stays in
// force; the error names the file and the reason. A refusal is logged at
// warn (the gateway serves on), the next good reload at info as a
// recovery.
func (r *Reloader) Reload(ctx context.Context) (changed bool, err error) {
	start := time.Now()
	changed, err = r.reload(ctx)
	outcome := ReloadUnchanged
	r.statusMu.Lock()
	recovered := r.failed && err == nil
	r.failed = err != nil
	r.statusMu.Unlock()
	switch {
	case err != nil:
		outcome = ReloadRefused
		r.log.WarnContext(ctx, "plugin chain reload refused; the previous chain stays in force", "source", r.src.String(), "err", err)
	case changed:
		outcome = ReloadApplied
		msg := "plugin chain reloaded"
		if recovered {
			msg = "plugin chain recovered: the new chain loaded after a refused reload"
		}
		attrs := []any{"source", r.src.String(), "plugins", pluginFilesOf(r.Plugins())}
		// The store's chain version (plugin publish); a directory has
		// none, and a "version=0" there read as a chain generation.
		if v := r.cur.Load().ver.Load(); v > 0 {
			attrs = append(attrs, "version", v)
		}
		r.log.InfoContext(ctx, msg, append(attrs, "took", time.Since(start).Round(time.Millisecond))...)
	case recovered:
		r.log.InfoContext(ctx, "plugin chain recovered: the source loads again, unchanged from the chain in force", "source", r.src.String())
	default:
		r.log.DebugContext(ctx, "plugin chain unchanged", "source", r.src.String())
	}
	r.recordReload(start, outcome, err)
	if r.opts.Observer != nil {
		r.opts.Observer.Reload(outcome)
	}
	return changed, err
}

func pluginFilesOf(infos []PluginInfo) []string {
	files := make([]string, len(infos))
	for i, p := range infos {
		files[i] = p.File
	}
	return files
}

func (r *Reloader) reload(ctx context.Context) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, errors.New("plugin chain is closed")
	}
	snap, err := r.src.Snapshot(ctx)
	if err != nil {
		return false, err
	}
	if err := checkChain(r.opts.Trust, snap); err != nil {
		return false, err
	}
	if cur := r.cur.Load().ver.Load(); r.opts.Trust != nil && r.opts.Trust.Len() > 0 && snap.Version < cur {
		// A signed but older chain put back by someone who can write the
		// store: never go back.
		return false, fmt.Errorf("chain version %d refused: older than version %d in force", snap.Version, cur)
	}
	next, chain, _, err := accept(ctx, snap.Files, r.opts, r.ropts, r.cache, r.loaded, r.src.String())
	if err != nil {
		return false, err
	}
	plugins := chain.plugins
	old := r.cur.Load()
	if slices.Equal(plugins, old.chain.plugins) {
		old.ver.Store(max(old.ver.Load(), snap.Version)) // a new version of the same chain
		return false, nil
	}
	for _, p := range plugins {
		r.owners[p]++
	}
	g := r.newGeneration(chain)
	r.seq++
	g.seq, g.dig = r.seq, ChainDigest(snap.Files)
	g.ver.Store(snap.Version)
	r.cur.Store(g)
	r.loaded = next
	old.release()
	return true, nil
}

// acquire takes a reference on the current generation for one call.
func (r *Reloader) acquire() *generation {
	for {
		g := r.cur.Load()
		// A generation at zero is retired and never revived: load the
		// current one again, which a reload has already stored.
		if n := g.refs.Load(); n > 0 && g.refs.CompareAndSwap(n, n+1) {
			return g
		}
	}
}

// release drops a reference; the last one retires the generation.
func (g *generation) release() {
	if g.refs.Add(-1) != 0 || g.chain == nil {
		return
	}
	// Not on the caller's goroutine: that is a request's.
	go g.r.retire(g)
}

// retire closes the plugins of g that no live generation holds.
func (r *Reloader) retire(g *generation) {
	defer close(g.done)
	r.mu.Lock()
	delete(r.live, g)
	var unused []*Plugin
	for _, p := range g.chain.plugins {
		if r.owners[p]--; r.owners[p] <= 0 {
			delete(r.owners, p)
			unused = append(unused, p)
		}
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range unused {
		if err := p.Close(ctx); err != nil {
			r.log.Warn("closing a replaced plugin", "plugin", p.info.Name, "err", err)
		}
	}
}

// Authorize implements host.Policy with the current chain.
func (r *Reloader) Authorize(ctx context.Context, req host.AuthorizeRequest) (string, error) {
	g := r.acquire()
	defer g.release()
	if g.chain == nil {
		return "", errReloaderClosed
	}
	return g.chain.Authorize(ctx, req)
}

// Validate implements host.Policy with the current chain.
func (r *Reloader) Validate(ctx context.Context, p host.Plant, principal string) error {
	g := r.acquire()
	defer g.release()
	if g.chain == nil {
		return errReloaderClosed
	}
	return g.chain.Validate(ctx, p, principal)
}

// Authorizes implements host.Policy: whether the current chain has an
// authorize plugin.
func (r *Reloader) Authorizes() bool {
	g := r.acquire()
	defer g.release()
	return g.chain != nil && g.chain.Authorizes()
}

// Plugins describes the current chain's plugins in order.
func (r *Reloader) Plugins() []PluginInfo {
	g := r.acquire()
	defer g.release()
	if g.chain == nil {
		return nil
	}
	return g.chain.Plugins()
}

// Stats returns the current chain's plugins' counters, in chain order.
func (r *Reloader) Stats() []Stats {
	g := r.acquire()
	defer g.release()
	if g.chain == nil {
		return nil
	}
	return g.chain.Stats()
}

// Each calls fn for every plugin of the current chain, in order, with its
// description, counters and guest linear memory in bytes, all read from the
// same chain so a reload in between cannot mix two chains.
func (r *Reloader) Each(fn func(PluginInfo, Stats, int64)) {
	g := r.acquire()
	defer g.release()
	if g.chain == nil {
		return
	}
	infos, stats, mem := g.chain.Plugins(), g.chain.Stats(), g.chain.Memory()
	for i := range infos {
		fn(infos[i], stats[i], mem[i])
	}
}

// Close stops the Reloader: later calls fail with host.ErrNotReady. It
// waits, until ctx is done, for the calls in flight, then closes every
// plugin.
func (r *Reloader) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	old := r.cur.Swap(r.newGeneration(nil))
	live := make([]*generation, 0, len(r.live))
	for g := range r.live {
		live = append(live, g)
	}
	r.mu.Unlock()
	old.release()
	for _, g := range live {
		select {
		case <-g.done:
		case <-ctx.Done():
			return fmt.Errorf("close plugins: calls still running: %w", ctx.Err())
		}
	}
	r.cache.release(ctx)
	return nil
}

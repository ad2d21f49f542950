// Package redis is Plantgate's store on Redis, through go-redis v9: plants
// are created and deleted by one Lua script each, which also appends the
// event to an outbox stream; token records are hashes found by a selector
// taken from the token's digest.
//
// # Keys
//
// Every key starts with Options.KeyPrefix (default "plantgate:"):
//
//	plantgate:{pNN}:plant:<id>          string: the plant's canonical JSON
//	plantgate:{pNN}:index               sorted set: score 0, member = order-preserving hex id
//	plantgate:{pNN}:events              stream: the outbox of the shard's creates and deletes
//	plantgate:{tokens}:token:<selector> hash: digest name scopes created expires revoked
//	plantgate:{tokens}:index            set of selectors
//	plantgate:{meta}:cursor-key         string: the key that signs list cursors
//	plantgate:{webhooks}:…              webhook endpoints and deliveries (webhooks.go)
//	plantgate:{plugins}:…               the fleet's plugin chain: modules and manifest (plugins.go)
//	plantgate:{fleet}:…                 gateways' heartbeats (fleet.go)
//
// The braces are Redis Cluster hash tags. A script or transaction may touch
// only keys in one slot, and each write here touches a record, its index
// and its outbox together. Plants are spread over Shards shards (pNN is the
// shard's tag, see shards.go): a plant, its index entry and its events share
// a shard, and listing merges the shards' indexes. The outbox contract is
// in events.go.
//
// # Servers
//
// Dial and Open take one URL for a single server, a Redis Cluster or a
// Sentinel-managed primary (the forms are in dial.go); go-redis's Client,
// ClusterClient and failover Client do the routing, and the Store works on
// the goredis.UniversalClient they share. Options.WaitReplicas adds WAIT
// after each create and delete and fences reads (fence.go).
//
// # Retries and timeouts
//
// Open and Embedded build clients with explicit timeouts (see DefaultOptions)
// whose deadlines also follow the caller's context, and with no automatic
// retries: a failed call becomes ErrStoreUnavailable (503 + Retry-After), and
// the HTTP client retries. Every write here is idempotent (create by content,
// delete by id, PutToken by digest, RevokeToken by name), so that retry, or
// one enabled with Options.MaxRetries, is safe, and records its event once.
// Its only visible effects: a create whose first attempt landed but whose
// answer was lost reports created=false, and such a delete ErrPlantNotFound.
package redis

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

var (
	_ host.Store      = (*Store)(nil)
	_ host.TokenAdmin = (*Store)(nil)
)

// Options configure a Store. The zero value is valid: every zero field takes
// its value from DefaultOptions. A Store copies its Options, so changing them
// afterwards has no effect.
type Options struct {
	// KeyPrefix starts every key, so that several gateways (or tests) can
	// share one server. It must not contain '{' or '}', which would move the
	// Cluster hash tag.
	//
	// Optional. Default: "plantgate:"
	KeyPrefix string

	// DialTimeout bounds opening one connection. Used by Open and Embedded.
	//
	// Optional. Default: 2s
	DialTimeout time.Duration

	// ReadTimeout bounds waiting for one reply; the caller's context deadline
	// applies too, whichever comes first. Used by Open and Embedded.
	//
	// Optional. Default: 1s
	ReadTimeout time.Duration

	// WriteTimeout bounds sending one command. Used by Open and Embedded.
	//
	// Optional. Default: 1s
	WriteTimeout time.Duration

	// PoolTimeout bounds waiting for a free connection when all are busy.
	// Used by Open and Embedded.
	//
	// Optional. Default: 1s
	PoolTimeout time.Duration

	// PoolSize is the most connections open at once. Used by Open and
	// Embedded.
	//
	// Optional. Default: go-redis's, 10 per GOMAXPROCS
	PoolSize int

	// MaxRetries is how many times go-redis may resend a command after a
	// network error. Zero means never: a failure surfaces at once as
	// ErrStoreUnavailable. Raising it is safe, since every write is
	// idempotent, but each retry can cost another ReadTimeout. Used by Open
	// and Embedded.
	//
	// Optional. Default: 0 (no retries)
	MaxRetries int

	// WaitReplicas is how many replicas must have a create or delete before
	// it is acknowledged: the store sends WAIT after it on the same
	// connection, to the primary that ran it, and a write fewer replicas
	// confirmed within the deadline fails with ErrReplicasBehind. Reads
	// (plants and list pages, not tokens) are then fenced: confirmed by a write
	// to the replicas and the same WAIT, so that a primary failed over
	// while frozen cannot answer them (fence.go). Batches then go to one
	// primary's connection each, ended by one fence and WAIT; token
	// lookups skip them. See fence.go.
	//
	// Optional. Default: 0 (acknowledged once the primary has it)
	WaitReplicas int

	// Batch is the most commands of concurrent requests (creates, deletes,
	// plant and token reads; not lists) sent to Redis in one pipeline; see
	// batch.go. A negative value
	// sends each command on its own.
	//
	// Optional. Default: 64
	Batch int
}

// DefaultOptions returns the value every zero Options field takes. It is
// a function, not a variable, so that no other package can change the
// defaults of every Store in the process.
func DefaultOptions() Options {
	return Options{
		KeyPrefix:    "plantgate:",
		DialTimeout:  2 * time.Second,
		ReadTimeout:  time.Second,
		WriteTimeout: time.Second,
		PoolTimeout:  time.Second,
		Batch:        64,
	}
}

// optionsDefault returns o with its zero fields taken from DefaultOptions.
func optionsDefault(o Options) Options {
	o = o.or(DefaultOptions())
	if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	return o
}

// or returns o with each zero field taken from base.
func (o Options) or(base Options) Options {
	if o.KeyPrefix == "" {
		o.KeyPrefix = base.KeyPrefix
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = base.DialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = base.ReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = base.WriteTimeout
	}
	if o.PoolTimeout == 0 {
		o.PoolTimeout = base.PoolTimeout
	}
	if o.PoolSize == 0 {
		o.PoolSize = base.PoolSize
	}
	if o.Batch == 0 {
		o.Batch = base.Batch
	}
	return o
}

// apply copies the client settings of o (already defaulted) onto c.
func (o Options) apply(c *goredis.Options) {
	c.DialTimeout = o.DialTimeout
	c.ReadTimeout = o.ReadTimeout
	c.WriteTimeout = o.WriteTimeout
	c.PoolTimeout = o.PoolTimeout
	c.PoolSize = o.PoolSize
	// Deadlines follow the caller's context as well as the timeouts above,
	// so a request's budget bounds its store call.
	c.ContextTimeoutEnabled = true
	// One dial attempt per call: a refused or silent server answers 503 now
	// rather than after go-redis's five attempts.
	c.MaxRetries, c.DialerRetries = o.goRetries(), 1
}

// goRetries is MaxRetries in go-redis's spelling, where "never" is -1 and
// 0 means 3.
func (o Options) goRetries() int {
	if o.MaxRetries > 0 {
		return o.MaxRetries
	}
	return -1
}

// Store keeps plants and tokens in Redis. It is safe for concurrent use.
type Store struct {
	client   goredis.UniversalClient
	batch    *batcher // nil: every command on its own
	opts     Options
	embedded bool
	addr     string // host:port, for messages
	mode     string // how the store reaches Redis, for the start-up log

	// newReader makes the client of blocking outbox reads, poolSize
	// connections (per node); nil: the client itself.
	newReader func(poolSize int) goredis.UniversalClient

	// Precomputed keys: the hot path concatenates only the id or selector.
	shards         [Shards]shardKeys
	tokenKeyPrefix string
	tokenIndexKey  string
	cursorKeyKey   string // where the fleet's cursor signing key lives

	now func() time.Time // the clock of event times; tests replace it

	// reader serves blocking outbox reads (outbox.go); nil until first used.
	readerOnce sync.Once
	reader     goredis.UniversalClient

	closeOnce sync.Once
	closeErr  error
	onClose   func() // stops an embedded server after the client is closed
}

// New returns a Store on client, which it owns from now on: Store.Close
// closes it. Only opts.KeyPrefix matters here; the client is used as it was
// configured.
//
// # Notes
//
//   - New panics when opts.KeyPrefix contains '{' or '}' (a programming
//     error: it would change the keys' Cluster hash slot).
func New(client goredis.UniversalClient, opts Options) *Store {
	if client == nil {
		panic("redis: New with a nil client")
	}
	opts = optionsDefault(opts)
	if strings.ContainsAny(opts.KeyPrefix, "{}") {
		panic(fmt.Sprintf("redis: key prefix %q contains a hash tag brace", opts.KeyPrefix))
	}
	p := opts.KeyPrefix
	var batch *batcher
	if opts.Batch > 1 {
		batch = newBatcher(client, opts.Batch, opts.fencer())
	}
	return &Store{
		client:         client,
		batch:          batch,
		opts:           opts,
		shards:         newShardKeys(p),
		tokenKeyPrefix: p + "{tokens}:token:",
		tokenIndexKey:  p + "{tokens}:index",
		cursorKeyKey:   p + "{meta}:cursor-key",
		now:            time.Now,
	}
}

// Embedded starts an in-process miniredis on a loopback port and returns a
// Store on it, and a function that closes the store and stops the server
// (Store.Close does the same; calling both is fine).
//
// The data lives in this process's memory only: it is for demos and tests,
// and the caller should say so loudly.
//
// The server requires a random password that only this Store knows: the
// loopback port is open to every local user and process, and without it
// any of them could forge a token.
func Embedded(ctx context.Context, opts Options) (*Store, func(), error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return nil, nil, fmt.Errorf("start embedded redis: %w", err)
	}
	password := hex.EncodeToString(secret[:])
	mr := miniredis.NewMiniRedis()
	mr.RequireAuth(password) // before Start: no window without it
	if err := mr.Start(); err != nil {
		return nil, nil, fmt.Errorf("start embedded redis: %w", err)
	}
	opts = optionsDefault(opts)
	co := &goredis.Options{Addr: mr.Addr(), Password: password}
	opts.apply(co)

	s := New(goredis.NewClient(co), opts)
	s.embedded = true
	s.addr = mr.Addr()
	s.mode = modeSingle
	s.newReader = singleReader(co)
	s.onClose = mr.Close
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, nil, fmt.Errorf("start embedded redis: %w", err)
	}
	return s, func() { _ = s.Close() }, nil
}

// Close closes the client (and stops an embedded server). Calls after the
// first return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		// Closing the client first ends pipelines in flight at once.
		s.closeErr = s.client.Close()
		if s.reader != nil && s.reader != s.client {
			_ = s.reader.Close()
		}
		if s.batch != nil {
			s.batch.close()
		}
		if s.onClose != nil {
			s.onClose()
		}
	})
	return s.closeErr
}

// Ping reports whether the server answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return storeError("ping redis", err)
	}
	return nil
}

// Persistence describes, in one line for the start-up log, how durable the
// server's data is: whether AOF is on and how often it syncs, the RDB save
// schedule and when it last saved. A server that cannot say (miniredis, or
// CONFIG disabled) gets a description saying so rather than an error; only
// an unreachable server is an error. In a cluster each primary is asked:
// one setting for all reads "… (all N primaries)", and primaries that
// differ are each named with their own, so that one primary without AOF
// among others does not go unnoticed.
func (s *Store) Persistence(ctx context.Context) (string, error) {
	if s.embedded {
		return "none (embedded miniredis: in memory, lost on exit)", nil
	}
	cc, ok := s.client.(*goredis.ClusterClient)
	if !ok {
		return nodePersistence(ctx, s.client, true)
	}
	var mu sync.Mutex
	byNode := map[string]string{}
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
		// Without the time of the last save, which differs from node
		// to node, so that equal settings read as equal.
		p, err := nodePersistence(ctx, c, false)
		if err != nil {
			return err
		}
		mu.Lock()
		byNode[c.Options().Addr] = p
		mu.Unlock()
		return nil
	})
	if err != nil {
		return "", err
	}
	return clusterPersistence(byNode), nil
}

// clusterPersistence sums up the primaries' persistence (Persistence).
func clusterPersistence(byNode map[string]string) string {
	addrs := slices.Sorted(maps.Keys(byNode))
	same := true
	for _, a := range addrs {
		same = same && byNode[a] == byNode[addrs[0]]
	}
	if same && len(addrs) > 0 {
		return fmt.Sprintf("%s (all %d primaries)", byNode[addrs[0]], len(addrs))
	}
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = a + ": " + byNode[a]
	}
	return "primaries differ: " + strings.Join(parts, "; ")
}

// nodePersistence is Persistence for one server, with or without when it
// last saved.
func nodePersistence(ctx context.Context, c goredis.Cmdable, lastSave bool) (string, error) {
	info, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		var rerr goredis.Error
		if errors.As(err, &rerr) {
			return "unknown (server does not report INFO persistence)", nil
		}
		return "", storeError("read redis persistence", err)
	}
	fields := parseInfo(info)
	if _, ok := fields["aof_enabled"]; !ok {
		return "unknown (server does not report INFO persistence)", nil
	}

	var b strings.Builder
	aof := fields["aof_enabled"] == "1"
	b.WriteString("aof=")
	b.WriteString(onOff(aof))
	// CONFIG may be renamed away on managed servers: leave out what it hides.
	if aof {
		if cfg, err := c.ConfigGet(ctx, "appendfsync").Result(); err == nil && cfg["appendfsync"] != "" {
			b.WriteString(" appendfsync=" + cfg["appendfsync"])
		}
	}
	if save, err := c.ConfigGet(ctx, "save").Result(); err == nil {
		fmt.Fprintf(&b, " rdb_save=%q", save["save"])
	}
	if ts := fields["rdb_last_save_time"]; ts != "" && lastSave {
		var unix int64
		if _, err := fmt.Sscan(ts, &unix); err == nil {
			b.WriteString(" rdb_last_save=" + time.Unix(unix, 0).UTC().Format(time.RFC3339))
		}
	}
	if st := fields["rdb_last_bgsave_status"]; st != "" {
		b.WriteString(" rdb_last_bgsave=" + st)
	}
	if st := fields["aof_last_write_status"]; aof && st != "" {
		b.WriteString(" aof_last_write=" + st)
	}
	return b.String(), nil
}

// parseInfo reads INFO's "key:value" lines, skipping "# Section" headers.
func parseInfo(info string) map[string]string {
	fields := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

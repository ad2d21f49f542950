package redis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The store reaches Redis in one of three ways, chosen by the URL; go-redis
// does all of the routing (its Client, ClusterClient and failover Client):
//
//	redis://[user:pass@]host:port[/db]                  one server; a cluster node is detected
//	redis://[user:pass@]h1:p1?addr=h2:p2&addr=h3:p3     a cluster, seeded by these nodes
//	redis+sentinel://[user:pass@]s1:p1?addr=s2:p2&master_name=NAME[/db]
//	                                                    the primary Sentinel names NAME
//
// rediss:// and rediss+sentinel:// are the TLS forms. For Sentinel the
// user and password are the primary's (the sentinels themselves are asked
// without AUTH); the query is go-redis's ParseFailoverURL's, so master_name
// is required.
const (
	modeSingle         = "single node"
	modeCluster        = "cluster"
	modeDetected       = "cluster (detected: the single address given is a cluster node)"
	modeSentinel       = "sentinel"
	modeSingleUnprobed = "single node (not probed: the server did not answer at start; a cluster node given as one address needs a restart once it answers, or the cluster URL form)"
)

// clusterReloadEvery is how often a cluster client reloads the slot map
// while it is used. go-redis follows a MOVED reply at once, but learns that
// a slot's primary died and its replica took over only from a reload (every
// minute by default): until then every call for those slots goes to the dead
// node and fails. One CLUSTER SLOTS a second per gateway is cheap.
const clusterReloadEvery = time.Second

// clusterRedirects is how many MOVED/ASK redirects or retries on another
// node a cluster call may take. A slot that moved needs one; more only
// lengthens the wait for a primary that is down.
const clusterRedirects = 2

// Open connects to Redis at rawURL (see the URL forms above) and pings it
// once, so that a wrong URL fails at start-up rather than on the first
// request.
//
// Timeouts: a non-zero field of opts wins; else the URL's dial_timeout,
// read_timeout, write_timeout or pool_timeout query parameter; else
// DefaultOptions. Retries come from opts only (see the package doc).
//
// Errors never contain the URL, which may hold a password.
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	s, err := Dial(rawURL, opts)
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("open redis store at %s: %w", s.Addr(), err)
	}
	return s, nil
}

// Dial is Open without the ping: it fails only on a bad URL, and the store
// connects on first use. A gateway that must start while Redis is still down
// (and answer 503 until it is up) uses it; see Store.Ping.
//
// A plain redis:// URL with one address is probed once (INFO cluster,
// bounded by the dial and read timeouts): a cluster node gets a cluster
// client. A server that does not answer gets a single-node client, and
// Mode says the probe was not made.
func Dial(rawURL string, opts Options) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open redis store: invalid url: %w", redactURLError(err))
	}
	switch {
	case strings.HasSuffix(u.Scheme, "+sentinel"):
		return dialSentinel(u, opts)
	case u.Query().Has("addr"):
		return dialCluster(rawURL, opts, modeCluster)
	}
	co, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open redis store: invalid url: %w", redactURLError(err))
	}
	opts = urlOptions(opts, co.DialTimeout, co.ReadTimeout, co.WriteTimeout, co.PoolTimeout, co.PoolSize)
	opts.apply(co)
	client := goredis.NewClient(co)
	mode := modeSingle
	switch isCluster, err := probeCluster(client, opts); {
	case err != nil:
		mode = modeSingleUnprobed
	case isCluster:
		_ = client.Close()
		if co.DB != 0 {
			return nil, errors.New("open redis store: the server is a cluster node, and a cluster has only database 0: drop the /db from the url")
		}
		// ParseClusterURL knows no database path.
		u.Path = ""
		return dialCluster(u.String(), opts, modeDetected)
	}
	s := New(client, opts)
	s.addr, s.mode = co.Addr, mode
	s.newReader = singleReader(co)
	return s, nil
}

// probeCluster asks the server whether it runs in cluster mode. A server
// that refuses INFO (renamed, ACL) is taken as a single node; one that
// refuses the URL's SELECT because it is a cluster node is a cluster.
func probeCluster(c *goredis.Client, opts Options) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), opts.DialTimeout+opts.ReadTimeout)
	defer cancel()
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		var rerr goredis.Error
		if errors.As(err, &rerr) {
			return strings.Contains(rerr.Error(), "not allowed in cluster mode"), nil
		}
		return false, err
	}
	return parseInfo(info)["cluster_enabled"] == "1", nil
}

func dialCluster(rawURL string, opts Options, mode string) (*Store, error) {
	co, err := goredis.ParseClusterURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open redis store: invalid cluster url: %w", redactURLError(err))
	}
	opts = urlOptions(opts, co.DialTimeout, co.ReadTimeout, co.WriteTimeout, co.PoolTimeout, co.PoolSize)
	co.DialTimeout, co.ReadTimeout, co.WriteTimeout = opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout
	co.PoolTimeout, co.PoolSize = opts.PoolTimeout, opts.PoolSize
	co.ContextTimeoutEnabled = true
	co.MaxRetries, co.DialerRetries = opts.goRetries(), 1
	co.MaxRedirects = clusterRedirects
	co.ClusterStateReloadInterval = clusterReloadEvery
	s := New(goredis.NewClusterClient(co), opts)
	s.addr, s.mode = co.Addrs[0], mode
	s.newReader = func(poolSize int) goredis.UniversalClient {
		ro := *co
		ro.PoolSize, ro.MinIdleConns = poolSize, 0
		return goredis.NewClusterClient(&ro)
	}
	return s, nil
}

func dialSentinel(u *url.URL, opts Options) (*Store, error) {
	plain := *u
	plain.Scheme = strings.TrimSuffix(u.Scheme, "+sentinel")
	fo, err := goredis.ParseFailoverURL(plain.String())
	if err != nil {
		return nil, fmt.Errorf("open redis store: invalid sentinel url: %w", redactURLError(err))
	}
	if fo.MasterName == "" {
		return nil, errors.New("open redis store: a sentinel url needs master_name=NAME")
	}
	// The URL's credentials are the primary's.
	fo.Username, fo.Password = fo.SentinelUsername, fo.SentinelPassword
	fo.SentinelUsername, fo.SentinelPassword = "", ""
	opts = urlOptions(opts, fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout, fo.PoolTimeout, fo.PoolSize)
	fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout = opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout
	fo.PoolTimeout, fo.PoolSize = opts.PoolTimeout, opts.PoolSize
	fo.ContextTimeoutEnabled = true
	fo.MaxRetries, fo.DialerRetries = opts.goRetries(), 1
	s := New(goredis.NewFailoverClient(fo), opts)
	s.addr, s.mode = fo.SentinelAddrs[0], modeSentinel+" (primary "+fo.MasterName+")"
	s.newReader = func(poolSize int) goredis.UniversalClient {
		ro := *fo
		ro.PoolSize, ro.MinIdleConns = poolSize, 0
		return goredis.NewFailoverClient(&ro)
	}
	return s, nil
}

// urlOptions fills opts's zero timeouts from the URL's query, then from
// DefaultOptions: a field set in opts wins.
func urlOptions(opts Options, dial, read, write, pool time.Duration, poolSize int) Options {
	return optionsDefault(opts.or(Options{
		DialTimeout: dial, ReadTimeout: read, WriteTimeout: write, PoolTimeout: pool, PoolSize: poolSize,
	}))
}

// singleReader copies a single-node client's options for the outbox reader.
func singleReader(co *goredis.Options) func(int) goredis.UniversalClient {
	return func(poolSize int) goredis.UniversalClient {
		ro := *co
		ro.PoolSize, ro.MinIdleConns = poolSize, 0
		return goredis.NewClient(&ro)
	}
}

// Addr is the server's host:port (never the URL, which may hold a
// password): for a cluster or Sentinel the first address given. "" for a
// store made by New.
func (s *Store) Addr() string { return s.addr }

// Mode says, for the start-up log, how the store reaches Redis: "single
// node", "cluster", a cluster detected behind a single address, or
// "sentinel (primary NAME)". "" for a store made by New.
func (s *Store) Mode() string { return s.mode }

// redactURLError drops the URL from a url.Parse error: it may hold a password.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

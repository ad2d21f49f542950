package wasm

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/plantgate/plantgate/host"
)

// A plugin whose authorize decision is a function of the request's
// credential (through a token_lookup of its digest) and a few declared
// request fields can let the host keep that decision for a short time:
//
//	{"decision_cache": {"on": ["credential", "operation"], "ttl_ms": 1000}}
//
// The next request with the same credential and fields is then answered
// from the cache, without a call into the plugin. What keeps it safe:
//
//   - The key is the credential's digest, the operation (the method and
//     route), the principal an earlier plugin established (all three
//     always), and the declared fields. "credential" must be declared; a
//     plugin shown request headers cannot declare a cache. The operation is
//     in the key whether "operation" is declared or not: an authorize
//     decision tells reads from writes, so a kept allow of a GET must never
//     answer the same credential's DELETE (a sidecar that left "operation"
//     out did exactly that).
//   - A decision is kept only from a call that looked up the credential's
//     own token, answered by serve's token cache (a stamped answer,
//     tokencache.Cache.TokenStamped), and did nothing else outside the
//     guest: no KV call, no lookup of another token, no store failure, no
//     response headers. Faults and invalid decisions are never kept.
//   - A kept decision is used only while the token cache still gives the
//     same answer (the same stamp) for the credential: a revoke is seen as
//     soon as the token cache sees it (its TTL, the documented revocation
//     bound), and never later. It also ends at ttl_ms and at the token's
//     own expiry.
//   - The cache belongs to one chain (Chain): a reload that changes the
//     chain starts with an empty one.
//
// A kept decision skips the call, and with it the plugin's log lines and
// clock reads: a plugin that declares a cache promises its decision does
// not depend on them within ttl_ms (bearer-auth's reads the clock only for
// an expiring token, and the entry ends at the token's expiry).

// DecisionCache is a sidecar's "decision_cache"; TTL 0 is none.
type DecisionCache struct {
	TTL time.Duration
	// The request fields the key holds besides the credential and the
	// operation (the method and route, or the method and path when the
	// request matched no route), which it always holds: "path" and "client"
	// (the client address). Operation records that "operation" was
	// declared; it changes nothing.
	Operation, Path, Client bool
}

// maxDecisionTTL bounds ttl_ms: the cache is for bursts, and the token
// cache's TTL bounds a decision's life anyway.
const maxDecisionTTL = time.Minute

// maxDecisions bounds one plugin's kept decisions; a new one past it
// evicts the oldest kept, in constant time (a client sending a fresh
// credential on every request only churns the cache).
const maxDecisions = 10_000

// cacheObject is the "decision_cache" object.
type cacheObject struct {
	On    placed `json:"on"`
	TTLMS placed `json:"ttl_ms"`
}

func parseDecisionCache(data []byte, o *cacheObject) (DecisionCache, error) {
	var dc DecisionCache
	if o.On.v == nil && o.TTLMS.v == nil {
		return dc, nil
	}
	ms, err := strconv.ParseInt(string(o.TTLMS.v), 10, 64)
	if o.TTLMS.v == nil || err != nil || ms < 1 || ms > maxDecisionTTL.Milliseconds() {
		return dc, at(data, o.TTLMS.off, fmt.Sprintf(`"decision_cache.ttl_ms" must be an integer from 1 to %d, got %s`, maxDecisionTTL.Milliseconds(), orMissing(o.TTLMS.v)))
	}
	dc.TTL = time.Duration(ms) * time.Millisecond
	var on []string
	if o.On.v == nil || json.Unmarshal(o.On.v, &on) != nil {
		return dc, at(data, o.On.off, fmt.Sprintf(`"decision_cache.on" must be an array of request fields (credential, operation, path, client), got %s`, orMissing(o.On.v)))
	}
	credential := false
	for _, f := range on {
		switch f {
		case "credential":
			credential = true
		case "operation":
			dc.Operation = true
		case "path":
			dc.Path = true
		case "client":
			dc.Client = true
		default:
			return dc, at(data, o.On.off, fmt.Sprintf(`"decision_cache.on": unknown request field %q, want credential, operation, path or client`, f))
		}
	}
	if !credential {
		return dc, at(data, o.On.off, `"decision_cache.on" must hold "credential": decisions are kept only for a credential whose token the plugin looked up`)
	}
	return dc, nil
}

func orMissing(v []byte) string {
	if v == nil {
		return "nothing"
	}
	return string(v)
}

// decisionKey is what a kept decision is found by; the digest, method,
// route and principal always, the other fields when the plugin declared
// them (zero when not).
type decisionKey struct {
	digest    [32]byte
	method    string
	route     string // or the path, when the request matched no route
	path      string
	client    netip.Addr
	principal string // established by an earlier plugin of the chain
}

// keptDecision is one kept authorize outcome.
type keptDecision struct {
	principal string // allowed as ("" for a plain allow)
	deny      *host.Error
	stamp     time.Time // the token answer's stamp it was made from
	expires   time.Time
}

// decisions is one chain's cache for one plugin, oldest first: get peeks
// (a read lock, no reordering), so eviction is by age.
type decisions struct {
	cfg DecisionCache
	mu  sync.RWMutex
	m   *simplelru.LRU[decisionKey, keptDecision]
}

func newDecisions(cfg DecisionCache) *decisions {
	if cfg.TTL <= 0 {
		return nil
	}
	m, _ := simplelru.NewLRU[decisionKey, keptDecision](maxDecisions, nil) // errs only for a size < 1
	return &decisions{cfg: cfg, m: m}
}

// len is how many decisions are kept, live or not.
func (d *decisions) len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.m.Len()
}

// key builds the lookup key of a request; its strings may alias the
// request's buffers (put copies them).
func (d *decisions) key(r host.AuthorizeRequest, digest [32]byte, x *host.Exchange) decisionKey {
	k := decisionKey{digest: digest, method: r.Method, route: r.Route}
	if r.Route == "" {
		k.route = r.Path
	}
	if d.cfg.Path {
		k.path = r.Path
	}
	if x != nil {
		if d.cfg.Client {
			k.client = x.Client
		}
		k.principal = x.Principal().Name
	}
	return k
}

// get returns the decision kept for k when it was made from the token
// answer stamped stamp and is still live at now.
func (d *decisions) get(k decisionKey, stamp, now time.Time) (keptDecision, bool) {
	d.mu.RLock()
	e, ok := d.m.Peek(k)
	d.mu.RUnlock()
	if !ok || !e.stamp.Equal(stamp) || !now.Before(e.expires) {
		return keptDecision{}, false
	}
	return e, true
}

// put keeps e under k, with k's strings copied off the request, evicting
// the oldest decision when maxDecisions are kept.
func (d *decisions) put(k decisionKey, e keptDecision) {
	k.method, k.route, k.path, k.principal = strings.Clone(k.method), strings.Clone(k.route), strings.Clone(k.path), strings.Clone(k.principal)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m.Add(k, e)
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// The inputs of `plugin conformance`: every field of each phase's message
// present and absent, empty, maximal and non-ASCII, ordered so that the
// request grows (the buffer is asked for more as it goes).

// Sizes of the maximal fields: what the gateway lets through.
const (
	defaultBodyLimit = 1 << 20 // serve's --body-limit default: a NewPlant body
	maxCredential    = 7000    // the whole header block is read in 8 KiB
	maxRequestID     = 128     // an X-Request-ID the gateway keeps
)

// The largest request of each phase, which plantgate_buffer must be able to
// hold (docs/abi.md#the-request-buffer), from the gateway's own limits:
//
//   - authorize: method, path, credential and the sidecar's headers all come
//     from the request head, which host/http reads in one 8 KiB buffer
//     (ReadBufferSize); the rest is the digest (32), the route and id (under
//     40), the request id (maxRequestID), the client address (at most 45),
//     the caller's name (a token's name or an earlier plugin's allowed-as,
//     at most abi.MaxText) and scopes (under 64), and the u32 lengths. That
//     is under 10 KiB; 16 KiB leaves room.
//   - validate: the name and tag come from a JSON body of at most
//     --body-limit bytes (decoding only shrinks it: the body must be UTF-8);
//     the rest is the id and flags, the allowed-as and caller's name (each at
//     most abi.MaxText), scopes and lengths: under validateOverhead.
const (
	maxAuthorizeMessage = 16 << 10
	validateOverhead    = 4 << 10
)

// maxMessage is the largest request a module serving phases gets, and that
// size said with where it comes from.
func maxMessage(phases []string, bodyLimit int) (n uint32, says string) {
	if slices.Contains(phases, "validate") {
		return uint32(bodyLimit + validateOverhead), sizeText(bodyLimit) + " + 4 KiB, the largest validate message (--body-limit " + sizeText(bodyLimit) + ")"
	}
	return maxAuthorizeMessage, "16 KiB, the largest authorize message (an 8 KiB request head and its context)"
}

// sizeText writes n bytes as "1 MiB", "64 KiB" or "1000 bytes".
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// conformanceToken is the one token conformanceTokens knows: a credential
// of it is found, any other is not.
const conformanceToken = "conformance-token-0123456789"

// conformanceTokens answers token lookups: conformanceToken is valid, with
// every scope; any other credential is not found.
func conformanceTokens() fakeTokens {
	d := sha256.Sum256([]byte(conformanceToken))
	return fakeTokens{d: {Digest: d, Name: "conformance", Scopes: []string{"plants:read", "plants:write", "plants:delete"}, Created: time.Now()}}
}

// usualInput is a typical request of each phase, for the reuse check.
var usualInput = map[string]string{
	"authorize": `{"method":"POST","path":"/plants","credential":"` + conformanceToken + `","request_id":"req-1","client":"192.0.2.7"}`,
	"validate":  `{"id":1,"name":"Monstera","tag":"tropical","allowed_as":"conformance","caller":{"name":"conformance","scopes":["plants:write"]}}`,
}

// inputJSON encodes an input; the cases are built from Go values so that
// every string is escaped as JSON wants.
func inputJSON(v map[string]any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the kit's own values
	}
	return string(b)
}

func authorizeCases(headers []string) []confCase {
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"method": "POST", "path": "/plants"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	caller := map[string]any{"name": "conformance", "scopes": []string{"plants:read", "plants:write"}}
	var cs []confCase
	add := func(name string, v map[string]any) { cs = append(cs, confCase{name, inputJSON(v)}) }
	add("no credential, no context", base(nil))
	for _, op := range [][2]string{{"GET", "/plants"}, {"HEAD", "/plants"}, {"GET", "/plants/7"}, {"DELETE", "/plants/7"},
		{"GET", "/plants/9223372036854775807"}, {"DELETE", "/plants/-9223372036854775808"}, {"GET", "/plants/9223372036854775808"}} {
		add(op[0]+" "+op[1], map[string]any{"method": op[0], "path": op[1]})
	}
	add("a credential found", base(map[string]any{"credential": conformanceToken}))
	add("a credential not found", base(map[string]any{"credential": "no-such-token"}))
	add("a one-byte credential", base(map[string]any{"credential": "x"}))
	add("a caller already established", base(map[string]any{"credential": conformanceToken, "caller": caller}))
	add("a caller with no scopes", base(map[string]any{"caller": map[string]any{"name": "c"}}))
	add("a request id", base(map[string]any{"request_id": "req-1"}))
	add("a request id of 128 bytes", base(map[string]any{"request_id": strings.Repeat("r", maxRequestID)}))
	add("an IPv4 client", base(map[string]any{"client": "192.0.2.7"}))
	add("an IPv6 client", base(map[string]any{"client": "2001:db8::7"}))
	for _, h := range headers {
		add(h+" empty", base(map[string]any{"headers": map[string]string{h: ""}}))
		add(h+" of 1 byte", base(map[string]any{"headers": map[string]string{h: "v"}}))
		add(h+" non-ASCII", base(map[string]any{"headers": map[string]string{h: "élégant 🌿"}}))
		add(h+" over 1024 bytes (cut)", base(map[string]any{"headers": map[string]string{h: strings.Repeat("v", 2*abi.MaxHeaderValue)}}))
	}
	if len(headers) > 0 {
		all := map[string]string{}
		for _, h := range headers {
			all[h] = strings.Repeat("v", abi.MaxHeaderValue)
		}
		add("every header at 1024 bytes", base(map[string]any{"headers": all}))
	}
	add("everything at once", base(map[string]any{"credential": conformanceToken, "request_id": "req-1", "client": "2001:db8::7", "caller": caller}))
	add("a credential of 7000 bytes", base(map[string]any{"credential": strings.Repeat("t", maxCredential)}))
	return cs
}

// validateCases are the validate inputs for a gateway whose body limit is
// bodyLimit: the largest name fills it, and no case is larger.
func validateCases(bodyLimit int) []confCase {
	var cs []confCase
	add := func(name string, v map[string]any) {
		nm, _ := v["name"].(string)
		tag, _ := v["tag"].(string)
		if len(nm)+len(tag) > bodyLimit-1024 {
			return // no body under the limit carries it
		}
		cs = append(cs, confCase{name, inputJSON(v)})
	}
	caller := map[string]any{"name": "conformance", "scopes": []string{"plants:read", "plants:write"}}
	add("a usual plant", map[string]any{"id": 1, "name": "Monstera", "tag": "tropical"})
	add("no tag", map[string]any{"id": 1, "name": "Fern"})
	add("an empty tag", map[string]any{"id": 1, "name": "Fern", "tag": ""})
	add("an empty name", map[string]any{"id": 1, "name": ""})
	add("a one-byte name", map[string]any{"id": 1, "name": "a"})
	add("id 0", map[string]any{"id": 0, "name": "Fern"})
	add("id -1", map[string]any{"id": -1, "name": "Fern"})
	add("the largest id", map[string]any{"id": int64(1<<63 - 1), "name": "Fern"})
	add("the smallest id", map[string]any{"id": int64(-1 << 63), "name": "Fern"})
	add("a non-ASCII name and tag", map[string]any{"id": 2, "name": "Ficus élégant 🌿", "tag": "日本"})
	add("a principal", map[string]any{"id": 1, "name": "Fern", "allowed_as": "conformance"})
	add("a non-ASCII principal", map[string]any{"id": 1, "name": "Fern", "allowed_as": "jardinière 🌱"})
	add("a principal of 1024 bytes", map[string]any{"id": 1, "name": "Fern", "allowed_as": strings.Repeat("p", abi.MaxText)})
	add("a caller", map[string]any{"id": 1, "name": "Fern", "caller": caller})
	add("a caller with no scopes", map[string]any{"id": 1, "name": "Fern", "caller": map[string]any{"name": "c"}})
	add("a principal and a caller", map[string]any{"id": 1, "name": "Fern", "tag": "t", "allowed_as": "conformance", "caller": caller})
	add("a tag of 64 KiB", map[string]any{"id": 1, "name": "Fern", "tag": strings.Repeat("t", 64<<10)})
	add("a non-ASCII name of 64 KiB", map[string]any{"id": 1, "name": strings.Repeat("é", 32<<10)})
	add("a name of "+sizeText(bodyLimit), map[string]any{"id": 1, "name": strings.Repeat("n", bodyLimit-1024)})
	return cs
}

// countingKV is the kit's store: it counts the calls that reach it and
// those that found nothing.
type countingKV struct {
	host.KV
	mu              sync.Mutex
	calls, notFound int
}

func (c *countingKV) count(found bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if !found {
		c.notFound++
	}
}

func (c *countingKV) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func (c *countingKV) KVGet(ctx context.Context, ns, key string) ([]byte, bool, error) {
	v, found, err := c.KV.KVGet(ctx, ns, key)
	c.count(found || err != nil)
	return v, found, err
}

func (c *countingKV) KVSet(ctx context.Context, ns, key string, value []byte, ttl time.Duration) error {
	c.count(true)
	return c.KV.KVSet(ctx, ns, key, value, ttl)
}

func (c *countingKV) KVDelete(ctx context.Context, ns, key string) (bool, error) {
	had, err := c.KV.KVDelete(ctx, ns, key)
	c.count(had || err != nil)
	return had, err
}

func (c *countingKV) KVIncr(ctx context.Context, ns, key string, delta, window int64, size time.Duration) (int64, error) {
	c.count(true)
	return c.KV.KVIncr(ctx, ns, key, delta, window, size)
}

func (c *countingKV) KVLease(ctx context.Context, ns, key string, limit, share, window int64, size time.Duration) (int64, int64, error) {
	c.count(true)
	return c.KV.KVLease(ctx, ns, key, limit, share, window, size)
}

func (c *countingKV) KVLeaseSliding(ctx context.Context, ns, key string, limit, share, slot, slots int64, slotSize time.Duration) (int64, int64, int64, error) {
	c.count(true)
	return c.KV.KVLeaseSliding(ctx, ns, key, limit, share, slot, slots, slotSize)
}

var _ host.KV = (*countingKV)(nil)

func baseName(file string) string { return filepath.Base(file) }

var errNoCaller = errors.New(`"caller" needs a "name": the gateway establishes a caller only from a valid token, which has one`)

package redis

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

var (
	//go:embed put_token.lua
	putTokenLua    string
	putTokenScript = goredis.NewScript(putTokenLua)

	//go:embed revoke_token.lua
	revokeTokenLua    string
	revokeTokenScript = goredis.NewScript(revokeTokenLua)
)

// tokenFields are a token record's hash fields, in the order Token and
// Tokens read them.
var tokenFields = []string{"digest", "name", "scopes", "created", "expires", "revoked", "last_used"}

// selector is the first 16 hex digits of a token's SHA-256 digest: enough
// to find the record in one lookup, while the full digest stays for the
// constant-time comparison. The record is keyed by it, never by the digest.
func selector(digest [32]byte) string {
	return hex.EncodeToString(digest[:8])
}

func (s *Store) tokenKey(sel string) string { return s.tokenKeyPrefix + sel }

// Token returns the token whose SHA-256 digest is digest, revoked or expired
// ones included: judging them is the caller's business. The stored digest is
// compared in constant time, so a record that shares only the selector is
// not found.
func (s *Store) Token(ctx context.Context, digest [32]byte) (host.Token, error) {
	sel := selector(digest)
	var vals []any
	var err error
	// Token lookups are not fenced under WaitReplicas (fence.go), so they
	// skip the batcher, which fences all it sends then. A token's answer may
	// be stale by design, for up to --token-cache-ttl (a revoke takes that
	// long to reach every gateway); a frozen primary's moment before it
	// learns of its failover is shorter. Fenced, every request whose token
	// is not cached would fail while the {tokens} primary has no replica.
	if s.batch != nil && s.opts.WaitReplicas == 0 {
		args := make([]any, 0, 2+len(tokenFields))
		args = append(args, "hmget", s.tokenKey(sel))
		for _, f := range tokenFields {
			args = append(args, f)
		}
		o := &op{cmd: goredis.NewSliceCmd(ctx, args...), key: s.tokenKey(sel)}
		if err = s.batch.do(ctx, o); err == nil {
			vals, err = o.cmd.(*goredis.SliceCmd).Result()
		}
	} else {
		vals, err = s.client.HMGet(ctx, s.tokenKey(sel), tokenFields...).Result()
	}
	if err != nil {
		return host.Token{}, storeError("read token", err) // no selector: errors reach logs and traces
	}
	t, ok, err := parseToken(vals)
	if err != nil {
		return host.Token{}, fmt.Errorf("read token: %w", err)
	}
	if !ok || subtle.ConstantTimeCompare(t.Digest[:], digest[:]) != 1 {
		return host.Token{}, host.Errorf(host.ErrTokenNotFound, "token not found")
	}
	return t, nil
}

// PutToken stores t, replacing the token with the same digest, in one
// script call that touches the token record and the token index. Scopes
// must be non-empty and free of white space (they are stored space-separated).
// A record holding another digest under the same selector (a 64-bit prefix
// collision) is never overwritten: PutToken returns ErrConflict, and the
// caller should mint another token.
func (s *Store) PutToken(ctx context.Context, t host.Token) error {
	if t.Name == "" {
		return errors.New("put token: empty name")
	}
	for _, sc := range t.Scopes {
		if sc == "" || strings.ContainsFunc(sc, unicode.IsSpace) {
			return fmt.Errorf("put token %q: invalid scope %q", t.Name, sc)
		}
	}
	sel := selector(t.Digest)
	revoked := "0"
	if t.Revoked {
		revoked = "1"
	}
	keys := []string{s.tokenKey(sel), s.tokenIndexKey}
	res, err := putTokenScript.Run(ctx, s.client, keys,
		sel, hex.EncodeToString(t.Digest[:]), t.Name, strings.Join(t.Scopes, " "),
		unixMilli(t.Created), unixMilli(t.Expires), revoked).Int64()
	if err != nil {
		return storeError(fmt.Sprintf("put token %q", t.Name), err)
	}
	if res != 1 {
		return host.Errorf(host.ErrConflict, "token selector %s is taken by another token", sel)
	}
	return nil
}

// Tokens lists every token ordered by name, then creation time, then digest.
// It costs two round trips: the index, then all records in one pipeline.
func (s *Store) Tokens(ctx context.Context) ([]host.Token, error) {
	sels, err := s.client.SMembers(ctx, s.tokenIndexKey).Result()
	if err != nil {
		return nil, storeError("list tokens", err)
	}
	if len(sels) == 0 {
		return nil, nil
	}
	cmds := make([]*goredis.SliceCmd, len(sels))
	_, err = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, sel := range sels {
			cmds[i] = p.HMGet(ctx, s.tokenKey(sel), tokenFields...)
		}
		return nil
	})
	if err != nil {
		return nil, storeError("list tokens", err)
	}
	tokens := make([]host.Token, 0, len(sels))
	for i, cmd := range cmds {
		t, ok, err := parseToken(cmd.Val())
		if err != nil {
			return nil, fmt.Errorf("list tokens: record %s: %w", sels[i], err)
		}
		if ok { // an index entry without a record is skipped, not an error
			tokens = append(tokens, t)
		}
	}
	slices.SortFunc(tokens, func(a, b host.Token) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return slices.Compare(a.Digest[:], b.Digest[:])
	})
	return tokens, nil
}

// RevokeToken marks every token named name revoked and reports how many
// carry the name, already revoked ones included, so that repeating it (or a
// retry) gives the same answer; 0 means no token has the name. The records
// are found by listing, then rechecked and changed in one script call.
func (s *Store) RevokeToken(ctx context.Context, name string) (int, error) {
	all, err := s.Tokens(ctx)
	if err != nil {
		return 0, err
	}
	var keys []string
	for _, t := range all {
		if t.Name == name {
			keys = append(keys, s.tokenKey(selector(t.Digest)))
		}
	}
	if len(keys) == 0 {
		return 0, nil
	}
	n, err := revokeTokenScript.Run(ctx, s.client, keys, name).Int()
	if err != nil {
		return 0, storeError(fmt.Sprintf("revoke token %q", name), err)
	}
	return n, nil
}

// parseToken reads an HMGET reply in tokenFields order. ok is false when the
// record does not exist.
func parseToken(vals []any) (t host.Token, ok bool, err error) {
	if len(vals) != len(tokenFields) || vals[0] == nil {
		return host.Token{}, false, nil
	}
	str := func(i int) string {
		s, _ := vals[i].(string)
		return s
	}
	corrupt := func(field string) error {
		return host.Errorf(host.ErrInternal, "token record has a corrupt %s field", field)
	}
	d, err := hex.DecodeString(str(0))
	if err != nil || len(d) != len(t.Digest) {
		return host.Token{}, false, corrupt("digest")
	}
	copy(t.Digest[:], d)
	t.Name = str(1)
	t.Scopes = strings.Fields(str(2))
	created, err := strconv.ParseInt(str(3), 10, 64)
	if err != nil {
		return host.Token{}, false, corrupt("created")
	}
	expires, err := strconv.ParseInt(str(4), 10, 64)
	if err != nil {
		return host.Token{}, false, corrupt("expires")
	}
	t.Created, t.Expires = fromUnixMilli(created), fromUnixMilli(expires)
	t.Revoked = str(5) == "1"
	if v := str(6); v != "" { // absent until the token is first used
		lastUsed, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return host.Token{}, false, corrupt("last_used")
		}
		t.LastUsed = fromUnixMilli(lastUsed)
	}
	return t, true, nil
}

// unixMilli stores a time as unix milliseconds, the zero time as 0 ("never"
// for expires). The instant 1970-01-01T00:00:00Z itself thus reads back as
// the zero time, which no real token has.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromUnixMilli(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

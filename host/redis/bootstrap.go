package redis

import (
	"context"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

var (
	//go:embed bootstrap_token.lua
	bootstrapTokenLua    string
	bootstrapTokenScript = goredis.NewScript(bootstrapTokenLua)
)

// BootstrapResult says what BootstrapToken did.
type BootstrapResult struct {
	// Created is true when the token was not stored before.
	Created bool
	// Revoked is true when the token is stored revoked: it was left so,
	// and nothing else changed.
	Revoked bool
	// Superseded counts the other active tokens of the same name that were
	// revoked, so that exactly one active token carries it.
	Superseded int
}

// BootstrapToken ensures t, a token that a gateway is told at start-up,
// never expiring, in one script call:
//
//   - a token never stored is created;
//   - a stored, active one keeps its creation time and gets t's scopes;
//   - a stored, revoked one stays revoked: a restart never undoes a
//     revocation (Revoked reports it);
//   - every other active token named t.Name is revoked, so repeated starts
//     with a new token each time leave one active token of that name, not
//     a pile of valid ones. Revoked records are kept, never deleted: they are
//     what keeps an old token from coming back.
//
// As with PutToken, a selector held by another digest is ErrConflict.
func (s *Store) BootstrapToken(ctx context.Context, t host.Token) (BootstrapResult, error) {
	if t.Name == "" || len(t.Scopes) == 0 {
		return BootstrapResult{}, fmt.Errorf("bootstrap token: want a name and scopes")
	}
	sel := selector(t.Digest)
	res, err := s.bootstrapOnce(ctx, t, sel)
	// The script declares every key it touches, so it gets the index as
	// read just before; a token added or removed in between makes it answer
	// -2 without changing anything, and it runs again on a fresh read.
	for attempt := 1; err == nil && len(res) == 2 && res[0] == -2 && attempt < bootstrapAttempts; attempt++ {
		res, err = s.bootstrapOnce(ctx, t, sel)
	}
	if err != nil {
		return BootstrapResult{}, storeError(fmt.Sprintf("bootstrap token %q", t.Name), err)
	}
	if len(res) != 2 {
		return BootstrapResult{}, host.Errorf(host.ErrInternal, "bootstrap token: unexpected script reply %v", res)
	}
	r := BootstrapResult{Superseded: int(res[1])}
	switch res[0] {
	case -2:
		return BootstrapResult{}, host.Errorf(host.ErrStoreUnavailable, "bootstrap token: the token index kept changing; try again")
	case -1:
		return BootstrapResult{}, host.Errorf(host.ErrConflict, "token selector %s is taken by another token", sel)
	case 1:
		r.Created = true
	case 2:
		r.Revoked = true
	}
	return r, nil
}

// bootstrapAttempts bounds the reruns of a bootstrap whose index changed
// between the read and the script: tokens are minted by operators, not in
// a loop, so a few are plenty.
const bootstrapAttempts = 5

// bootstrapOnce reads the token index and runs the script on it.
func (s *Store) bootstrapOnce(ctx context.Context, t host.Token, sel string) ([]int64, error) {
	sels, err := s.client.SMembers(ctx, s.tokenIndexKey).Result()
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, 2+len(sels))
	keys = append(keys, s.tokenKey(sel), s.tokenIndexKey)
	args := make([]any, 0, 5+len(sels))
	args = append(args, sel, hex.EncodeToString(t.Digest[:]), t.Name, strings.Join(t.Scopes, " "), unixMilli(t.Created))
	for _, o := range sels {
		keys = append(keys, s.tokenKey(o))
		args = append(args, o)
	}
	return bootstrapTokenScript.Run(ctx, s.client, keys, args...).Int64Slice()
}

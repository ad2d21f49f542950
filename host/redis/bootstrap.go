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
	keys := []string{s.tokenKey(sel), s.tokenIndexKey}
	res, err := bootstrapTokenScript.Run(ctx, s.client, keys,
		sel, hex.EncodeToString(t.Digest[:]), t.Name, strings.Join(t.Scopes, " "),
		unixMilli(t.Created), s.tokenKeyPrefix).Int64Slice()
	if err != nil {
		return BootstrapResult{}, storeError(fmt.Sprintf("bootstrap token %q", t.Name), err)
	}
	if len(res) != 2 {
		return BootstrapResult{}, host.Errorf(host.ErrInternal, "bootstrap token: unexpected script reply %v", res)
	}
	r := BootstrapResult{Superseded: int(res[1])}
	switch res[0] {
	case -1:
		return BootstrapResult{}, host.Errorf(host.ErrConflict, "token selector %s is taken by another token", sel)
	case 1:
		r.Created = true
	case 2:
		r.Revoked = true
	}
	return r, nil
}

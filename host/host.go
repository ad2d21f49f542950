// Package host holds Plantgate's domain: plants, tokens, the store and policy
// interfaces, and the one error type with its table of codes. It uses the
// standard library only; each technology (Redis, wazero, Fiber) lives in a
// subpackage that knows this package and not its siblings.
package host

import (
	"context"
	"time"
)

// Plant is the canonical plant: the host's strict decoding of a NewPlant
// body. Plugins see exactly these values, never the raw body.
type Plant struct {
	ID     int64
	Name   string
	Tag    string
	HasTag bool // tag is optional and "" is a valid tag, so presence is explicit
}

// Store keeps plants and access tokens.
type Store interface {
	// CreatePlant stores p if its id is free. It returns created=false and a
	// nil error when an identical plant is already stored (a safe retry), and
	// an *Error with code ErrConflict when the id holds other content.
	CreatePlant(ctx context.Context, p Plant) (created bool, err error)

	// Plant returns the plant with this id, or an *Error with code
	// ErrPlantNotFound.
	Plant(ctx context.Context, id int64) (Plant, error)

	// Plants returns up to limit plants in ascending order of id, those
	// after the id *after, or from the first when after is nil.
	Plants(ctx context.Context, after *int64, limit int) (Page, error)

	// DeletePlant deletes the plant with this id, or returns an *Error with
	// code ErrPlantNotFound when there is none.
	DeletePlant(ctx context.Context, id int64) error

	// Token returns the token whose SHA-256 digest is digest, or an *Error
	// with code ErrTokenNotFound.
	Token(ctx context.Context, digest [32]byte) (Token, error)

	// Ping reports whether the store can be reached.
	Ping(ctx context.Context) error
}

// Page is one page of a walk through the plants in ascending order of id.
type Page struct {
	Plants []Plant
	// More reports whether plants with an id above Last may remain: the
	// walk goes on with Plants(ctx, &Last, limit).
	More bool
	// Last is the highest id this page looked at. It can be above the last
	// plant of Plants when that plant was deleted while the page was read.
	Last int64
}

// TokenAdmin manages access tokens; the CLI and start-up use it.
type TokenAdmin interface {
	// PutToken stores t, replacing any token with the same digest.
	PutToken(ctx context.Context, t Token) error
	// Tokens lists every token, ordered by name.
	Tokens(ctx context.Context) ([]Token, error)
	// RevokeToken marks the tokens with this name revoked and reports how many.
	RevokeToken(ctx context.Context, name string) (int, error)
}

// Token is an access token's record. Only the digest of the token is ever
// stored; the token itself is shown once, when it is created.
type Token struct {
	Digest  [32]byte
	Name    string
	Scopes  []string
	Created time.Time
	Expires time.Time // zero: never
	Revoked bool
	// LastUsed is when the token last authorized a request, to the minute
	// or so (the gateway records it at most once a minute per token);
	// zero: never.
	LastUsed time.Time
}

// Scopes a token can hold.
const (
	ScopePlantsWrite  = "plants:write"
	ScopePlantsRead   = "plants:read"
	ScopePlantsDelete = "plants:delete"
)

// AllScopes lists every scope, sorted; a bootstrap token gets them all. It
// is the one list of scopes (a new scope is added here only), and each call
// returns a fresh slice, so no caller can change what another one sees.
func AllScopes() []string { return []string{ScopePlantsDelete, ScopePlantsRead, ScopePlantsWrite} }

// AuthorizeRequest is what the authorize phase sees: the request line, the
// operation it asks for and the bearer credential, before any body byte is
// decoded.
type AuthorizeRequest struct {
	Method     string
	Path       string
	Credential string // the token as sent; never logged
	// Route is the operation: method and path template, as in the OpenAPI
	// document ("GET /plants/{id}").
	Route string
	// PathID is the plant id the path names, when HasPathID: a path whose
	// {id} is not an int64 has none (and is refused after authorization).
	PathID    int64
	HasPathID bool
}

// Policy is the plugin chain. Both methods return nil to allow, or an *Error
// that says why not: a plugin's deny, or a fault that fails closed.
type Policy interface {
	// Authorize runs the authorize chain and returns the principal the
	// deciding plugin named (for logs), or "".
	Authorize(ctx context.Context, r AuthorizeRequest) (principal string, err error)
	// Validate runs the validate chain on the canonical plant.
	Validate(ctx context.Context, p Plant, principal string) error
	// Authorizes reports whether any plugin serves the authorize phase.
	Authorizes() bool
}

package http

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/plantgate/plantgate/host"
)

// A cursor is where a walk through GET /plants goes on: the highest id the
// previous page looked at. Clients get it opaque and tamper-evident, so a
// cursor is either one a gateway of this store issued or refused, and the
// encoding can change without a client noticing. Layout, before base64url
// without padding (34 characters):
//
//	byte 0      cursorVersion
//	bytes 1–8   the id, big-endian two's complement
//	bytes 9–24  the first 16 bytes of HMAC-SHA256(key, bytes 0–8)
//
// The key is the store's (see redis.Store.CursorKey), so every gateway of a
// fleet accepts every other's cursors.
const (
	cursorVersion = 1
	cursorMACSize = 16
	cursorSize    = 1 + 8 + cursorMACSize
)

var errBadCursor = &host.Error{Code: host.ErrBadCursor, Message: "cursor is not valid: pass the cursor of a Link header unchanged"}

// cursors signs and checks cursors with a key it loads on first use: a
// gateway may start while its store is down, and the store holds the key.
type cursors struct {
	load func(context.Context) ([]byte, error)
	key  atomic.Pointer[[]byte]
	mu   sync.Mutex // one load at a time
}

// newCursors loads its key with load, or makes a random one when load is
// nil: then only this process accepts its cursors.
func newCursors(load func(context.Context) ([]byte, error)) *cursors {
	if load == nil {
		key := make([]byte, 32)
		_, _ = rand.Read(key) // never fails on the supported platforms
		load = func(context.Context) ([]byte, error) { return key, nil }
	}
	return &cursors{load: load}
}

func (c *cursors) mac(ctx context.Context, msg []byte) ([]byte, error) {
	key := c.key.Load()
	if key == nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if key = c.key.Load(); key == nil {
			k, err := c.load(ctx)
			if err != nil {
				return nil, err
			}
			key = &k
			c.key.Store(key)
		}
	}
	m := hmac.New(sha256.New, *key)
	m.Write(msg)
	return m.Sum(nil)[:cursorMACSize], nil
}

// encode returns the cursor that goes on after id.
func (c *cursors) encode(ctx context.Context, id int64) (string, error) {
	var b [cursorSize]byte
	b[0] = cursorVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(id))
	mac, err := c.mac(ctx, b[:9])
	if err != nil {
		return "", err
	}
	copy(b[9:], mac)
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// decode returns the id a cursor goes on after, or ErrBadCursor.
func (c *cursors) decode(ctx context.Context, s string) (int64, error) {
	if base64.RawURLEncoding.DecodedLen(len(s)) != cursorSize {
		return 0, errBadCursor
	}
	var b [cursorSize]byte
	if n, err := base64.RawURLEncoding.Strict().Decode(b[:], []byte(s)); err != nil || n != cursorSize || b[0] != cursorVersion {
		return 0, errBadCursor
	}
	mac, err := c.mac(ctx, b[:9])
	if err != nil {
		return 0, err
	}
	if !hmac.Equal(b[9:], mac) {
		return 0, errBadCursor
	}
	return int64(binary.BigEndian.Uint64(b[1:9])), nil
}

// Package webhook delivers the outbox's events to the endpoints registered
// in the store, signed as Standard Webhooks (https://www.standardwebhooks.com):
// at least once, by one gateway of a fleet, with retries, and never to a
// private address unless told so.
//
// The path of an event:
//
//	outbox shard stream ─(consumer group, one reader per shard)─▶ fan-out:
//	one delivery per subscribed endpoint, recorded durably, then XACK
//	─▶ the endpoint's due queue ─(lease, one worker pool per endpoint)─▶ POST
//	─▶ delivered | retry with backoff | failed (kept for replay) | 410: endpoint disabled
//
// A gateway that dies leaves outbox entries pending in the group (taken
// over by XAUTOCLAIM after Options.ClaimIdle) and leased deliveries (due
// again when the lease ends): nothing is lost, and only a crash duplicates.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// SecretPrefix starts every endpoint secret, as the Standard Webhooks
// libraries expect.
const SecretPrefix = "whsec_"

// NewSecret returns a new endpoint secret: whsec_ and 32 random bytes in
// standard base64.
func NewSecret() (string, error) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key[:]), nil
}

// DecodeSecret returns the HMAC key of a whsec_ secret.
func DecodeSecret(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, errors.New("webhook secret is not whsec_ followed by base64")
	}
	return key, nil
}

// Sign returns the webhook-signature header value of one attempt:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

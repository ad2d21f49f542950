package host

import (
	"errors"
	"fmt"
)

// Error is Plantgate's one error type: a code from the table below and a
// message safe to show to the client. The HTTP status is the code's
// hundreds (40001 → 400), so the mapping to HTTP lives in the code itself
// and in exactly one handler.
type Error struct {
	Code    int32
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// Status is the HTTP status for the error.
func (e *Error) Status() int { return int(e.Code / 100) }

// Errorf returns an *Error with a formatted message.
func Errorf(code int32, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// The error table. One number per failure kind; numbers are stable and
// documented in docs/errors.md and the OpenAPI document. Codes ending in 50–99
// belong to plugins (see sdk/abi.ValidDenyCode). A code whose comment
// starts "internal:" never reaches a client and is in neither document
// (TestErrorTableAgrees holds the three to this).
const (
	ErrMalformedJSON     int32 = 40001 // body is not well-formed JSON
	ErrSchema            int32 = 40002 // JSON is well-formed but not a NewPlant
	ErrConflict          int32 = 40003 // id exists with other content
	ErrContentType       int32 = 40004 // Content-Type missing or not application/json
	ErrBodyTooLarge      int32 = 40005 // body over the configured limit
	ErrEmptyBody         int32 = 40006 // no body
	ErrDuplicateKey      int32 = 40007 // a JSON object names a key twice
	ErrInvalidUTF8       int32 = 40008 // body is not valid UTF-8
	ErrContentEncoding   int32 = 40009 // Content-Encoding other than identity
	ErrMalformedAuth     int32 = 40010 // Authorization header is not one RFC 6750 bearer credential
	ErrBadRequest        int32 = 40011 // request is malformed at the HTTP level (request line, header syntax, method, version)
	ErrHeadersTooLarge   int32 = 40012 // request line and headers over the read buffer
	ErrRequestTimeout    int32 = 40013 // request not received within the read timeout
	ErrFraming           int32 = 40014 // body framing is ambiguous or malformed (Content-Length, Transfer-Encoding, chunks)
	ErrBadLimit          int32 = 40015 // limit is not an integer from 1 to 100
	ErrBadCursor         int32 = 40016 // cursor was not made by this store's gateways, or was altered
	ErrBadPlantID        int32 = 40017 // the {id} of a plant path is not an int64
	ErrMissingCredential int32 = 40101 // no bearer credential
	ErrTokenNotFound     int32 = 40102 // internal: the store has no token with this digest; the token lookup tells the plugin "not found" and the plugin answers its own code
	ErrTokenExpired      int32 = 40103 // an identity provider's access token is past its exp (and the leeway)
	ErrTokenNotYetValid  int32 = 40104 // an access token's nbf or iat is in the future (beyond the leeway)
	ErrTokenIssuer       int32 = 40105 // an access token's iss is not the configured issuer
	ErrTokenAudience     int32 = 40106 // an access token's aud does not contain the configured audience, or (with --oidc-introspection-require-aud) its introspection answer names none
	ErrTokenUnknownKey   int32 = 40107 // an access token names a key the issuer's key set does not have
	ErrTokenSignature    int32 = 40108 // an access token's signature does not verify, or its algorithm is not accepted or does not fit its key
	ErrTokenMalformed    int32 = 40109 // a credential shaped like a JWT that is not an acceptable one (syntax, header, required claims)
	ErrOriginNotAllowed  int32 = 40301 // a CORS preflight from an origin not configured (--cors-origin)
	ErrNotFound          int32 = 40401 // no such route
	ErrPlantNotFound     int32 = 40402 // no plant with this id
	ErrMethodNotAllowed  int32 = 40501 // route exists, method does not
	ErrPluginFault       int32 = 50001 // a plugin trapped, panicked, ran out of time or memory
	ErrPluginBadDecision int32 = 50002 // a plugin returned a decision that breaks the ABI or its phase (sdk/abi.PhaseDenies)
	ErrInternal          int32 = 50003 // a bug in the gateway
	ErrStoreUnavailable  int32 = 50301 // the store did not answer in time
	ErrPluginBusy        int32 = 50302 // no plugin instance free before the deadline
	ErrNotReady          int32 = 50303 // the gateway is starting or stopping
	ErrReplicasBehind    int32 = 50304 // a create or delete reached fewer replicas than --redis-wait-replicas asks; it may be stored
	ErrKeysUnavailable   int32 = 50305 // the identity provider's signing keys have not been fetched yet, so an access token cannot be checked
	ErrIntrospectBusy    int32 = 50306 // more credentials to introspect than --oidc-introspection-rate allows: the excess is refused without asking the identity provider
	ErrIntrospectFailed  int32 = 50307 // the identity provider's introspection endpoint gave no usable answer (unreachable, timeout, not 200, not JSON, none in its discovery document)
)

// Code returns err's code when err is or wraps an *Error, else ErrInternal.
func Code(err error) int32 {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrInternal
}

package redis

import (
	"errors"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host"
)

// opError is a failed store call. It carries two errors on purpose: Public,
// the *host.Error the client may see (found by errors.As, so host.Code
// works), and Cause, what Redis or the network said, for the logs (found by
// errors.Is, for example context.DeadlineExceeded). Neither ever holds a
// token, a digest or a password.
type opError struct {
	op     string
	public *host.Error
	cause  error
}

func (e *opError) Error() string {
	return e.op + ": " + e.public.Error() + ": " + e.cause.Error()
}

func (e *opError) Unwrap() []error { return []error{e.public, e.cause} }

// storeError classifies err, returned by go-redis during op:
//
//   - anything that means "cannot be served now": network, timeout, context,
//     pool and closed-client errors, and the server's own refusals (loading,
//     read-only replica, busy script, out of memory, auth) → ErrStoreUnavailable;
//   - any other reply error (wrong type, script error) is a bug or corrupt
//     data, not the client's fault nor retryable → ErrInternal.
//
// An err that is already classified (an *opError, such as a write fewer
// replicas confirmed) is returned as it is.
func storeError(op string, err error) error {
	if oe := (*opError)(nil); errors.As(err, &oe) {
		return err
	}
	public := host.Errorf(host.ErrStoreUnavailable, "plant store unavailable")
	var rerr goredis.Error
	if errors.As(err, &rerr) && !unavailableReply(rerr.Error()) {
		public = host.Errorf(host.ErrInternal, "plant store error")
	}
	return &opError{op: op, public: public, cause: err}
}

// unavailableReplies are reply-error prefixes that mean the server is not
// able or not willing to serve now; retrying later (or fixing the operator's
// configuration) helps, fixing the request does not.
var unavailableReplies = []string{
	"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY",
	"NOREPLICAS", "OOM", "NOAUTH", "WRONGPASS", "NOPERM",
	// A write sent straight to a slot's primary (see fence.go) that has
	// just moved: go-redis reloads the slot map within a second.
	"MOVED", "ASK",
	// A blocked command (WAIT, XREADGROUP) ended because its server turned
	// into a replica: a failover is under way.
	"UNBLOCKED",
	"ERR max number of clients",
}

func unavailableReply(msg string) bool {
	for _, p := range unavailableReplies {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

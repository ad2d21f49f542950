package http_test

import (
	"context"
	"log/slog"
	"sync"

	"github.com/plantgate/plantgate/host"
)

// panickyStore is a Store double that panics on a plant named "panic",
// as a bug in a store would, and stores every other plant nowhere.
type panickyStore struct{}

var _ host.Store = panickyStore{}

func (panickyStore) CreatePlant(_ context.Context, p host.Plant) (bool, error) {
	if p.Name == "panic" {
		var m map[string]int
		m[p.Name]++ // a nil-map write: a runtime panic, not a deliberate value
	}
	return true, nil
}

// Plant, Plants and DeletePlant answer as a store that holds nothing.
func (panickyStore) Plant(_ context.Context, id int64) (host.Plant, error) {
	return host.Plant{}, host.Errorf(host.ErrPlantNotFound, "no plant with id %d", id)
}

func (panickyStore) Plants(context.Context, *int64, int) (host.Page, error) { return host.Page{}, nil }

func (panickyStore) DeletePlant(_ context.Context, id int64) error {
	return host.Errorf(host.ErrPlantNotFound, "no plant with id %d", id)
}

func (panickyStore) Token(context.Context, [32]byte) (host.Token, error) {
	return host.Token{}, &host.Error{Code: host.ErrTokenNotFound, Message: "no such token"}
}

func (panickyStore) Ping(context.Context) error { return nil }

// allowAll is a Policy double without plugins: it allows everything.
type allowAll struct{}

var _ host.Policy = allowAll{}

func (allowAll) Authorize(context.Context, host.AuthorizeRequest) (string, error) { return "", nil }
func (allowAll) Validate(context.Context, host.Plant, string) error               { return nil }
func (allowAll) Authorizes() bool                                                 { return false }

// retainer is a slog.Handler that keeps every record as it came, to be read
// after later requests (as a batching or in-memory handler would). A
// string attribute that aliases a request buffer shows another request's
// bytes by then.
type retainer struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newRetainer() retainer { return retainer{mu: new(sync.Mutex), recs: new([]slog.Record)} }

func (r retainer) Enabled(context.Context, slog.Level) bool { return true }
func (r retainer) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r retainer) WithGroup(string) slog.Handler            { return r }

func (r retainer) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.recs = append(*r.recs, rec.Clone())
	return nil
}

// records returns the kept records as message and string attributes.
func (r retainer) records() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range *r.recs {
		m := map[string]string{"msg": rec.Message, "level": rec.Level.String()}
		rec.Attrs(func(a slog.Attr) bool {
			m[a.Key] = a.Value.String()
			return true
		})
		out = append(out, m)
	}
	return out
}

package fleet

import (
	"context"
	"fmt"
	"sync"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// Status is the fleet against the store's chain.
type Status struct {
	Version   uint64    `json:"version"` // the store's chain version
	Digest    string    `json:"digest"`  // its wasm.ChainDigest
	Converged bool      `json:"converged"`
	Gateways  []Gateway `json:"gateways"`
}

// Gateway is one live gateway and how it stands.
type Gateway struct {
	redis.Heartbeat
	Converged bool   `json:"converged"`
	Lag       string `json:"lag,omitempty"` // why it has not converged
}

// Read reads the store's chain and the live gateways. The fleet converged
// when there is at least one gateway and every one serves the store's
// version with its digest.
func Read(ctx context.Context, store *redis.Store) (Status, error) {
	return (&Reader{Store: store}).Read(ctx)
}

// Reader reads the fleet's Status again and again (a console refreshing):
// it reads the modules to digest a chain version only once.
type Reader struct {
	Store *redis.Store

	mu      sync.Mutex
	version uint64
	digest  string
}

// Read is the package's Read, remembering the last version's digest.
func (r *Reader) Read(ctx context.Context) (Status, error) {
	m, err := r.Store.PluginManifest(ctx)
	if err != nil {
		return Status{}, err
	}
	r.mu.Lock()
	version, digest := r.version, r.digest
	r.mu.Unlock()
	if digest == "" || version != m.Version {
		snap, err := StoreSource{r.Store}.Snapshot(ctx)
		if err != nil {
			return Status{}, err
		}
		version, digest = snap.Version, wasm.ChainDigest(snap.Files)
		r.mu.Lock()
		r.version, r.digest = version, digest
		r.mu.Unlock()
	}
	hbs, err := r.Store.Gateways(ctx)
	if err != nil {
		return Status{}, err
	}
	st := Status{Version: version, Digest: digest, Gateways: make([]Gateway, len(hbs))}
	st.Converged = len(hbs) > 0
	for i, hb := range hbs {
		g := Gateway{Heartbeat: hb}
		switch {
		case hb.State == StateRefused:
			g.Lag = fmt.Sprintf("refused version %d, serves version %d: %s", hb.Refused, hb.Version, hb.Error)
		case hb.Version != st.Version:
			g.Lag = fmt.Sprintf("serves version %d, not yet version %d", hb.Version, st.Version)
		case hb.Digest != st.Digest:
			g.Lag = "serves version " + fmt.Sprint(hb.Version) + " with another digest"
		default:
			g.Converged = true
		}
		st.Converged = st.Converged && g.Converged
		st.Gateways[i] = g
	}
	return st, nil
}

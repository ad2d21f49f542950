package console

import (
	"context"
	"strconv"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/redis"
)

// Shadow is one shadow plugin's decisions compared with the live chain's,
// since the gateway started (plantgate_shadow_decisions_total).
type Shadow struct {
	Plugin     string  `json:"plugin"`
	Agree      float64 `json:"agree"`
	WouldDeny  float64 `json:"would_deny"`
	WouldAllow float64 `json:"would_allow"`
	Fault      float64 `json:"fault"`
	Dropped    float64 `json:"dropped"` // sampled calls dropped (cost bound)
}

// Agreement is the share of decisions that agreed, 0 to 1; 0 with none.
func (s Shadow) Agreement() float64 {
	total := s.Agree + s.WouldDeny + s.WouldAllow + s.Fault
	if total == 0 {
		return 0
	}
	return s.Agree / total
}

// Diff is one logged disagreement as the page shows it.
type Diff struct {
	At        string `json:"at"`
	Gateway   string `json:"gateway"`
	RequestID string `json:"request_id"`
	Plugin    string `json:"plugin"`
	Phase     string `json:"phase"`
	Outcome   string `json:"outcome"`
	Live      string `json:"live"`
	Shadow    string `json:"shadow"`
	Principal string `json:"principal"`
	Input     string `json:"input"`
}

// diffsShown is how many of the fleet's latest disagreements the page lists.
const diffsShown = 10

func readShadows(fams map[string]family) []Shadow {
	dec, drop := fams["plantgate_shadow_decisions_total"], fams["plantgate_shadow_dropped_total"]
	var out []Shadow
	for _, p := range dec.values("plugin") {
		out = append(out, Shadow{
			Plugin:     p,
			Agree:      dec.sum(map[string]string{"plugin": p, "outcome": "agree"}),
			WouldDeny:  dec.sum(map[string]string{"plugin": p, "outcome": "would_deny"}),
			WouldAllow: dec.sum(map[string]string{"plugin": p, "outcome": "would_allow"}),
			Fault:      dec.sum(map[string]string{"plugin": p, "outcome": "fault"}),
			Dropped:    drop.sum(map[string]string{"plugin": p}),
		})
	}
	return out
}

// readDiffs reads the fleet's latest disagreements.
func (c *Console) readDiffs(ctx context.Context) ([]Diff, error) {
	ds, err := c.cfg.Diffs(ctx, diffsShown)
	if err != nil {
		return nil, err
	}
	out := make([]Diff, len(ds))
	for i, d := range ds {
		out[i] = Diff{
			At: when(d.At), Gateway: d.Gateway, RequestID: d.RequestID, Plugin: d.Plugin, Phase: d.Phase, Outcome: d.Outcome,
			Live: d.Live.String(), Shadow: d.Shadow.String(), Principal: d.Principal, Input: input(d),
		}
	}
	return out, nil
}

// input is the diff's input on one line: its non-secret fields, each
// bounded (host.Shown), so the page stays small.
func input(d redis.ShadowDiff) string {
	if p := d.Plant; p != nil {
		s := "plant " + strconv.FormatInt(p.ID, 10) + " " + host.Shown(p.Name, p.NameBytes, host.RecordNameBytes, true)
		if p.Tag != nil {
			s += " tag " + host.Shown(*p.Tag, p.TagBytes, host.RecordNameBytes, true)
		}
		return s
	}
	return host.ClipString(d.Method, host.RecordTextBytes) + " " + host.Shown(d.Path, d.PathBytes, host.RecordPathBytes, false)
}

package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

var revokedProbes atomic.Int64

var errorCode = regexp.MustCompile(`"error":([0-9]+)`)

// The model of one plant id (porcupine partitions the history by id): the
// state is the stored name, "" when absent.
//
//   - create(name): absent → stored, answers created (200); the same name
//     stored → created (200: the spec's identical re-create); another name →
//     conflict (400 40003), unchanged.
//   - read: present with the stored name, or absent.
//   - delete: present → deleted (204), now absent; absent → absent (404).
//
// An unknown outcome may have taken effect or not: it returns at infinity,
// so porcupine may place it anywhere after its call, including after every
// other operation, where it changes nothing observed.
type input struct {
	kind, name string
}

type output struct {
	result, name string // result "" when unknown
}

var plantModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[int64][]porcupine.Operation{}
		var ids []int64
		for _, o := range history {
			id := o.Metadata.(*op).id
			if by[id] == nil {
				ids = append(ids, id)
			}
			by[id] = append(by[id], o)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		out := make([][]porcupine.Operation, len(ids))
		for i, id := range ids {
			out[i] = by[id]
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		st, i, o := state.(string), in.(input), out.(output)
		switch i.kind {
		case opCreate:
			next, want := st, "conflict"
			if st == "" || st == i.name {
				next, want = i.name, "created"
			}
			return o.result == "" || o.result == want, next
		case opRead:
			if o.result == "absent" {
				return st == "", st
			}
			return st != "" && st == o.name, st
		case opDelete:
			want := "absent"
			if st != "" {
				want = "deleted"
			}
			return o.result == "" || o.result == want, ""
		}
		return false, st
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		res := o.result
		if res == "" {
			res = "unknown"
		}
		switch i.kind {
		case opCreate:
			return fmt.Sprintf("create %q → %s", i.name, res)
		case opRead:
			if o.result == "present" {
				return fmt.Sprintf("read → %q", o.name)
			}
			return "read → " + res
		}
		return "delete → " + res
	},
	DescribeState: func(state any) string {
		if state.(string) == "" {
			return "absent"
		}
		return fmt.Sprintf("%q", state)
	},
}

// report is what the run found.
type report struct {
	cfg       config
	counts    map[string]map[string]int // kind → outcome → ops
	faults    []fault
	avail     []string
	anomalies []anomaly
	webhook   string
	lists     int
	opsTotal  int
	visual    string
	porcupine porcupine.CheckResult
}

func check(c config, rec *recorder, e *env, n *nemesis) *report {
	rec.mu.Lock()
	ops := append([]*op(nil), rec.ops...)
	r := &report{cfg: c, counts: map[string]map[string]int{}, faults: n.faults, anomalies: append([]anomaly(nil), rec.anomalies...), opsTotal: len(ops)}
	rec.mu.Unlock()
	for _, o := range ops {
		if r.counts[o.kind] == nil {
			r.counts[o.kind] = map[string]int{}
		}
		label := o.outcome
		if o.outcome == outOK && o.result != "" {
			label += " " + o.result
		} else if o.outcome != outOK && o.status != 0 {
			label += fmt.Sprintf(" %d", o.status)
			if m := errorCode.FindStringSubmatch(o.detail); m != nil {
				label += " " + m[1]
			}
		} else if o.outcome == outUnknown {
			label += " no answer"
		}
		r.counts[o.kind][label]++
	}

	var found []anomaly
	r.porcupine, found, r.visual = linearizable(ops, checkTimeout, c.out)
	r.anomalies = append(r.anomalies, found...)

	r.anomalies = append(r.anomalies, checkLists(ops)...)
	r.webhook, r.anomalies = checkWebhooks(e.recv, rec, ops, r.anomalies)
	r.avail = availability(ops, n.faults)
	return r
}

// linearizable checks the history of ops with porcupine, one plant id at a
// time, within timeout. A history it refuses gets an anomaly per plant and
// a visualization in dir; one it cannot decide in time gets an anomaly too:
// not proven is not passed.
func linearizable(ops []*op, timeout time.Duration, dir string) (porcupine.CheckResult, []anomaly, string) {
	var hist []porcupine.Operation
	for _, o := range ops {
		if o.kind == opList || (o.kind == opRead && o.outcome == outUnknown) || o.outcome == outFail {
			continue // an unknown read constrains nothing; a failed operation did not happen
		}
		ret := o.ret
		var out output
		if o.outcome == outUnknown {
			ret = math.MaxInt64
		} else {
			out = output{result: o.result, name: o.content}
		}
		in := input{kind: o.kind, name: o.content}
		if o.kind == opRead {
			in.name = ""
		}
		hist = append(hist, porcupine.Operation{ClientId: o.client, Input: in, Output: out, Call: o.call, Return: ret, Metadata: o})
	}
	res, info := porcupine.CheckOperationsVerbose(plantModel, hist, timeout)
	var found []anomaly
	visual := ""
	switch res {
	case porcupine.Unknown:
		found = append(found, anomaly{kind: "check-undecided", id: -1,
			what: fmt.Sprintf("porcupine could not decide within %v whether the history (%d operations) is linearizable: nothing is proven; replay the seed on a quieter machine, or shorten the run", timeout, len(hist))})
	case porcupine.Illegal:
		visual = filepath.Join(dir, "linearizability.html")
		if err := porcupine.VisualizePath(plantModel, info, visual); err != nil {
			visual = "(visualization failed: " + err.Error() + ")"
		}
		found = append(found, nonLinearizable(hist)...)
	}
	return res, found, visual
}

// checkTimeout bounds porcupine's search. Each unknown operation may be
// placed anywhere after its call, so a plant with many of them can make the
// search explode; with few, a 10-minute run's history (~400,000
// operations) is decided well within it.
const checkTimeout = 2 * time.Minute

// nonLinearizable names the plant ids whose own history porcupine refuses,
// each with the operations around the first refusal: the shortest prefix
// (in call order) that is already refused, found by bisection, and its
// last operations.
func nonLinearizable(hist []porcupine.Operation) []anomaly {
	var out []anomaly
	for _, part := range plantModel.Partition(hist) {
		if porcupine.CheckOperations(plantModel, part) {
			continue
		}
		sort.SliceStable(part, func(i, j int) bool { return part[i].Call < part[j].Call })
		lo, hi := 1, len(part) // part[:hi] is refused; part[:lo-1] is not
		for lo < hi {
			mid := (lo + hi) / 2
			if porcupine.CheckOperations(plantModel, part[:mid]) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		from := max(0, hi-aroundOps)
		id := part[0].Metadata.(*op).id
		var b strings.Builder
		for _, p := range part[from:hi] {
			o := p.Metadata.(*op)
			ret := "∞"
			if o.ret >= 0 {
				ret = fmt.Sprintf("%.3fs", float64(o.ret)/1e9)
			}
			fmt.Fprintf(&b, "\n      client %d gw %d %.3fs–%s %s", o.client, o.gateway, float64(o.call)/1e9, ret, plantModel.DescribeOperation(p.Input, p.Output))
		}
		out = append(out, anomaly{kind: "not-linearizable", id: id, at: part[hi-1].Call,
			what: fmt.Sprintf("plant %d: no order of its operations fits the store's contract; the last %d operations up to the first that cannot fit:%s", id, hi-from, b.String())})
	}
	return out
}

// aroundOps is how many operations an anomaly shows.
const aroundOps = 12

// checkLists checks the list's documented guarantee on every completed
// walk: no id twice, and every id present for the whole walk listed. An id
// is present for the whole walk when an acknowledged create of it returned
// before the walk began and no delete of it (acknowledged or not) could
// have run before the walk ended.
func checkLists(ops []*op) []anomaly {
	created := map[int64][]*op{}
	deletes := map[int64][]*op{}
	for _, o := range ops {
		switch {
		case o.kind == opCreate && o.outcome == outOK && o.result == "created":
			created[o.id] = append(created[o.id], o)
		case o.kind == opDelete && o.outcome != outFail:
			deletes[o.id] = append(deletes[o.id], o)
		}
	}
	var out []anomaly
	skips, first := map[int64]int{}, map[int64]string{}
	for _, w := range ops {
		if w.kind != opList || w.outcome != outOK {
			continue
		}
		seen := map[int64]bool{}
		for _, id := range w.walk {
			if seen[id] {
				out = append(out, anomaly{kind: "list-duplicate", id: id, at: w.call,
					what: fmt.Sprintf("walk by client %d at %.3fs listed plant %d twice", w.client, float64(w.call)/1e9, id)})
			}
			seen[id] = true
		}
		for id, cs := range created {
			if seen[id] {
				continue
			}
			for _, c := range cs {
				if c.ret >= w.call {
					continue
				}
				gone := false
				for _, d := range deletes[id] {
					if d.call < w.ret && (d.ret < 0 || d.ret > c.call) {
						gone = true
					}
				}
				if !gone {
					skips[id]++
					if skips[id] == 1 {
						first[id] = fmt.Sprintf("walk by client %d at %.3fs–%.3fs skipped plant %d, created (acknowledged at %.3fs) and never deleted before the walk ended",
							w.client, float64(w.call)/1e9, float64(w.ret)/1e9, id, float64(c.ret)/1e9)
					}
					break
				}
			}
		}
	}
	ids := make([]int64, 0, len(skips))
	for id := range skips {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		out = append(out, anomaly{kind: "list-skip", id: id, what: fmt.Sprintf("%s (and %d more walks)", first[id], skips[id]-1)})
	}
	return out
}

// checkWebhooks: every plant an acknowledged create made has a
// plant.created event, and no plant has more distinct created events than
// creates that could have made one; deliveries verified with the secret.
func checkWebhooks(r *receiver, rec *recorder, ops []*op, out []anomaly) (string, []anomaly) {
	for _, id := range r.missing(rec) {
		out = append(out, anomaly{kind: "webhook-missing", id: id, what: fmt.Sprintf("plant %d: acknowledged create, no plant.created event delivered", id)})
	}
	could := map[int64]int{}
	for _, o := range ops {
		if o.kind == opCreate && (o.outcome == outUnknown || o.result == "created") {
			could[o.id]++
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	events := 0
	for id, evs := range r.created {
		events += len(evs)
		if len(evs) > could[id] {
			out = append(out, anomaly{kind: "webhook-extra", id: id, what: fmt.Sprintf("plant %d: %d distinct plant.created events for %d creates that could have made one", id, len(evs), could[id])})
		}
	}
	for _, b := range r.bad {
		out = append(out, anomaly{kind: "webhook-bad", id: -1, what: b})
	}
	return fmt.Sprintf("%d deliveries, %d plant.created events (distinct webhook-ids), %d repeated deliveries of an id (allowed: at least once)",
		r.deliveries, events, r.duplicates), out
}

// availability is, per fault, the share of operations invoked while it was
// on that got a definite answer.
func availability(ops []*op, faults []fault) []string {
	var out []string
	for i, f := range faults {
		total, ok := 0, 0
		for _, o := range ops {
			if o.call >= f.from && o.call <= f.to {
				total++
				if o.outcome == outOK {
					ok++
				}
			}
		}
		pct := 100.0
		if total > 0 {
			pct = 100 * float64(ok) / float64(total)
		}
		out = append(out, fmt.Sprintf("fault %2d: %5.1f%% of %d operations answered definitely", i+1, pct, total))
	}
	return out
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\n== report (seed %d; replay with -seed %d -duration %v)\n", r.cfg.seed, r.cfg.seed, r.cfg.duration)
	fmt.Fprintf(w, "operations: %d\n", r.opsTotal)
	kinds := make([]string, 0, len(r.counts))
	for k := range r.counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		labels := make([]string, 0, len(r.counts[k]))
		for l := range r.counts[k] {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		fmt.Fprintf(w, "  %-7s", k)
		for _, l := range labels {
			fmt.Fprintf(w, "  %s: %d", l, r.counts[k][l])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "revoked-token probes: %d\n", revokedProbes.Load())
	fmt.Fprintf(w, "faults: %d\n", len(r.faults))
	for i, f := range r.faults {
		fmt.Fprintf(w, "  %2d %7.1fs %s [%s] recovered in %v %s\n", i+1, float64(f.from)/1e9, f.kind, f.target, f.recovery.Round(time.Millisecond), f.note)
	}
	fmt.Fprintln(w, "availability during faults:")
	for _, a := range r.avail {
		fmt.Fprintln(w, "  "+a)
	}
	fmt.Fprintln(w, "webhooks:", r.webhook)
	fmt.Fprintf(w, "porcupine (per plant id): %s\n", r.porcupine)
	if r.visual != "" {
		fmt.Fprintln(w, "porcupine visualization:", r.visual)
	}
	fmt.Fprintf(w, "anomalies: %d\n", len(r.anomalies))
	for i, a := range r.anomalies {
		if i == 50 {
			fmt.Fprintf(w, "  … %d more\n", len(r.anomalies)-50)
			break
		}
		fmt.Fprintf(w, "  [%s] %s\n", a.kind, a.what)
	}
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kinds of operation and their outcomes.
const (
	opCreate = "create"
	opRead   = "read"
	opDelete = "delete"
	opList   = "list"

	outOK      = "ok"      // definite: the answer says what happened
	outFail    = "fail"    // definite: nothing happened (a plugin refused before the store was asked)
	outUnknown = "unknown" // a timeout, a reset, a 503: it may or may not have happened
)

// op is one recorded operation: invoked at call, answered at ret (ns since
// the recorder's start; ret is -1 for unknown outcomes).
type op struct {
	client  int
	gateway int
	kind    string
	id      int64
	content string // create: the name sent; read: the name read
	result  string // create: created|conflict; read: present|absent; delete: deleted|absent
	outcome string
	status  int
	detail  string // the error or body of an unknown or odd answer
	call    int64
	ret     int64
	walk    []int64 // list: the ids walked, in order
}

type recorder struct {
	start     time.Time
	mu        sync.Mutex
	ops       []*op
	anomalies []anomaly
}

// anomaly is one thing the checker or the workload found wrong.
type anomaly struct {
	kind, what string
	at         int64 // ns since start
	id         int64 // the plant, or -1
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(o *op) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

func (r *recorder) anomaly(kind string, id int64, format string, args ...any) {
	r.mu.Lock()
	r.anomalies = append(r.anomalies, anomaly{kind: kind, what: fmt.Sprintf(format, args...), at: r.now(), id: id})
	r.mu.Unlock()
}

// ackedCreateIDs are the plants some create was acknowledged for.
func (r *recorder) ackedCreateIDs() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[int64]bool{}
	var ids []int64
	for _, o := range r.ops {
		if o.kind == opCreate && o.outcome == outOK && o.result == "created" && !seen[o.id] {
			seen[o.id] = true
			ids = append(ids, o.id)
		}
	}
	return ids
}

// startWorkload runs the clients and the revoked-token prober until ctx
// ends; the returned func waits for them.
func startWorkload(ctx context.Context, c config, e *env, rec *recorder) (wait func()) {
	var wg sync.WaitGroup
	httpc := &http.Client{Timeout: requestTimeout + answerSlack, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &client{i: i, e: e, rec: rec, http: httpc, rng: rand.New(rand.NewPCG(c.seed, uint64(i)+1)), ids: c.ids}
			for ctx.Err() == nil {
				cl.step()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		probeRevoked(ctx, e, rec, httpc)
	}()
	return wg.Wait
}

type client struct {
	i    int
	e    *env
	rec  *recorder
	http *http.Client
	rng  *rand.Rand
	ids  int

	// refused: the last answer was a 503 or none, so the client backs off
	// before its next operation (see unavailableBackoff).
	refused bool
}

// unavailableBackoff is how long a client waits after a 503 or no answer,
// as a client that honours Retry-After does, only shorter, to keep
// operations flowing through every fault. Without it, the fast 503s while a
// primary is down (connection refused) made thousands of unknown writes a
// minute on its shard's ids, a history porcupine could not decide within
// its two minutes (seed 42).
const unavailableBackoff = 100 * time.Millisecond

// step runs one operation drawn from the client's seeded source: creates
// half the time (mostly the one content an id gets, sometimes another, to
// exercise the 40003 conflict), reads, deletes and, rarely, a list walk.
func (c *client) step() {
	if c.refused {
		c.refused = false
		time.Sleep(unavailableBackoff) // a client's back-off, not a wait for a state
	}
	g := c.e.gws[c.rng.IntN(len(c.e.gws))]
	id := int64(c.rng.IntN(c.ids)) + 1
	switch n := c.rng.IntN(100); {
	case n < 50:
		name := fmt.Sprintf("plant %d", id)
		if c.rng.IntN(10) == 0 {
			name = fmt.Sprintf("other %d", id)
		}
		c.create(g, id, name)
	case n < 80:
		c.read(g, id)
	case n < 97:
		c.del(g, id)
	default:
		c.list(g)
	}
}

// answer is one HTTP exchange: status, body, headers, or err for none.
type answer struct {
	status int
	body   string
	header http.Header
	err    error
}

func (c *client) do(g *gateway, method, url, body, token string) answer {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err}
	}
	return answer{status: resp.StatusCode, body: string(b), header: resp.Header}
}

// unknown records an answer that says nothing definite (or, for a 503 a
// plugin gave, that nothing happened), and checks that it is one docs/errors.md
// documents: a 503 with Retry-After and an Error body, or
// no answer because the gateway was killed; never a 500, another status or
// a hang past the deadline.
func (c *client) unknown(o *op, g *gateway, a answer, killsBefore int64) {
	o.outcome, o.ret, o.status = outUnknown, -1, a.status
	c.refused = true
	switch {
	case a.err != nil:
		o.detail = a.err.Error()
		killed := g.kills.Load() != killsBefore || g.down.Load()
		var te interface{ Timeout() bool }
		if !killed && errors.As(a.err, &te) && te.Timeout() {
			c.rec.anomaly("hang", o.id, "%s %d through gateway %d: no answer within %v (its deadline is %v)", o.kind, o.id, g.i, requestTimeout+answerSlack, requestTimeout)
		} else if !killed {
			c.rec.anomaly("no-answer", o.id, "%s %d through gateway %d, which was not killed: %v", o.kind, o.id, g.i, a.err)
		}
	case a.status == 503:
		o.detail = a.body
		if err := documentedError(a); err != nil {
			c.rec.anomaly("undocumented-answer", o.id, "%s %d through gateway %d: 503 %v", o.kind, o.id, g.i, err)
		} else if refusedByPlugin(a) {
			o.outcome, o.ret = outFail, c.rec.now()
		}
	default:
		o.detail = a.body
		c.rec.anomaly("undocumented-answer", o.id, "%s %d through gateway %d: %d %s", o.kind, o.id, g.i, a.status, a.body)
	}
	c.rec.add(o)
}

var errorBody = regexp.MustCompile(`^\{"error":[0-9]+,"message":"[^"]+"\}$`)

// refusedByPlugin tells a 503 that a plugin answered, before the gateway
// asked the store anything (docs/errors.md: 50302, no plugin instance
// free; 50350–50399, a plugin could not decide, e.g. the token store is
// down): the operation did not happen. Counted as unknown, such answers
// (tens of thousands while the {tokens} primary is down) only slowed the
// linearizability check past its time limit.
func refusedByPlugin(a answer) bool {
	m := errorCode.FindStringSubmatch(a.body)
	if m == nil {
		return false
	}
	code, err := strconv.Atoi(m[1])
	return err == nil && (code == 50302 || code >= 50350 && code <= 50399)
}

// documentedError checks a 503 against docs/errors.md: Retry-After and an
// Error body.
func documentedError(a answer) error {
	if a.header.Get("Retry-After") == "" {
		return fmt.Errorf("without Retry-After: %s", a.body)
	}
	if !errorBody.MatchString(a.body) {
		return fmt.Errorf("body is not an Error: %s", a.body)
	}
	return nil
}

func (c *client) create(g *gateway, id int64, name string) {
	o := &op{client: c.i, gateway: g.i, kind: opCreate, id: id, content: name}
	body := fmt.Sprintf(`{"id":%d,"name":%q}`, id, name)
	k := g.kills.Load()
	o.call = c.rec.now()
	a := c.do(g, "POST", g.base+"/plants", body, bootstrapToken)
	switch {
	case a.err == nil && a.status == 200:
		o.result = "created"
	case a.err == nil && a.status == 400 && strings.Contains(a.body, `"error":40003`):
		o.result = "conflict"
	default:
		c.unknown(o, g, a, k)
		return
	}
	o.ret, o.outcome, o.status = c.rec.now(), outOK, a.status
	c.rec.add(o)
}

func (c *client) read(g *gateway, id int64) {
	o := &op{client: c.i, gateway: g.i, kind: opRead, id: id}
	k := g.kills.Load()
	o.call = c.rec.now()
	a := c.do(g, "GET", fmt.Sprintf("%s/plants/%d", g.base, id), "", bootstrapToken)
	switch {
	case a.err == nil && a.status == 200:
		var p struct{ Name string }
		if err := json.Unmarshal([]byte(a.body), &p); err != nil {
			c.rec.anomaly("undocumented-answer", id, "read %d: 200 with %s", id, a.body)
		}
		o.result, o.content = "present", p.Name
	case a.err == nil && a.status == 404:
		o.result = "absent"
	default:
		c.unknown(o, g, a, k)
		return
	}
	o.ret, o.outcome, o.status = c.rec.now(), outOK, a.status
	c.rec.add(o)
}

func (c *client) del(g *gateway, id int64) {
	o := &op{client: c.i, gateway: g.i, kind: opDelete, id: id}
	k := g.kills.Load()
	o.call = c.rec.now()
	a := c.do(g, "DELETE", fmt.Sprintf("%s/plants/%d", g.base, id), "", bootstrapToken)
	switch {
	case a.err == nil && a.status == 204:
		o.result = "deleted"
	case a.err == nil && a.status == 404:
		o.result = "absent"
	default:
		c.unknown(o, g, a, k)
		return
	}
	o.ret, o.outcome, o.status = c.rec.now(), outOK, a.status
	c.rec.add(o)
}

var nextLink = regexp.MustCompile(`<([^>]+)>; rel="next"`)

// list walks GET /plants page by page; a walk cut by a fault is unknown.
func (c *client) list(g *gateway) {
	o := &op{client: c.i, gateway: g.i, kind: opList, id: -1}
	k := g.kills.Load()
	o.call = c.rec.now()
	url := g.base + "/plants?limit=" + strconv.Itoa(25+c.rng.IntN(50))
	for url != "" {
		a := c.do(g, "GET", url, "", bootstrapToken)
		if a.err != nil || a.status != 200 {
			c.unknown(o, g, a, k)
			return
		}
		var page []struct{ ID int64 }
		if err := json.Unmarshal([]byte(a.body), &page); err != nil {
			c.rec.anomaly("undocumented-answer", -1, "list page: %v: %.200s", err, a.body)
		}
		for _, p := range page {
			o.walk = append(o.walk, p.ID)
		}
		url = ""
		if m := nextLink.FindStringSubmatch(a.header.Get("Link")); m != nil {
			url = g.base + m[1]
		}
	}
	o.ret, o.outcome, o.status = c.rec.now(), outOK, 200
	c.rec.add(o)
}

// probeRevoked asks every 100 ms, through a random gateway, with a token
// revoked before the run: it must be refused (401), or the store must be
// said unavailable (a documented 503), through every fault.
func probeRevoked(ctx context.Context, e *env, rec *recorder, httpc *http.Client) {
	c := &client{e: e, rec: rec, http: httpc}
	n := 0
	for ctx.Err() == nil {
		g := e.gws[n%len(e.gws)]
		n++
		a := c.do(g, "GET", g.base+"/plants/1", "", e.revoked)
		switch {
		case a.err != nil: // a killed gateway
		case a.status == 401:
		case a.status == 503:
			if err := documentedError(a); err != nil {
				rec.anomaly("undocumented-answer", -1, "revoked token through gateway %d: 503 %v", g.i, err)
			}
		default:
			rec.anomaly("revoked-token-served", -1, "revoked token through gateway %d: %d %s", g.i, a.status, a.body)
		}
		revokedProbes.Add(1)
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

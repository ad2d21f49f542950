package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host"
	plantshttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
)

// decisionJSON is what `plugin run` prints, a line per decision.
type decisionJSON struct {
	Name      string `json:"name,omitempty"`      // the request's, in a --requests sequence
	Decision  string `json:"decision"`            // allow, deny or fault
	Principal string `json:"principal,omitempty"` // authorize: the principal allowed as
	Status    int    `json:"status,omitempty"`
	Error     int32  `json:"error,omitempty"`
	Message   string `json:"message,omitempty"`
	// Headers are the response headers the decision set (ABI 2).
	Headers map[string]string `json:"headers,omitempty"`
}

// runRequest is one decision to make: a phase and its --input. A line of a
// --requests file, or of an expect table (testdata/expect/README.md), whose
// "want" `plugin run` ignores and `plugin conformance --expect` compares.
type runRequest struct {
	Name  string          `json:"name"`
	Phase string          `json:"phase"`
	Input json.RawMessage `json:"input"`
	Want  json.RawMessage `json:"want"`

	line int // of its file, 0 for --phase/--input
}

// where names the request in an error: its line and name, or --input.
func (r runRequest) where(file string) string {
	if r.line == 0 {
		return "--input"
	}
	s := fmt.Sprintf("%s line %d", file, r.line)
	if r.Name != "" {
		s += fmt.Sprintf(" (%q)", r.Name)
	}
	return s
}

// readRequests reads a JSON lines file of requests, {"name","phase","input"}
// a line ("want" allowed); blank lines are skipped.
func readRequests(stdin io.Reader, file string) ([]runRequest, error) {
	data, err := readInput(stdin, "requests", file)
	if err != nil {
		return nil, err
	}
	var reqs []runRequest
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		r := runRequest{line: n}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("%s line %d: want {\"name\",\"phase\",\"input\"} (and optionally \"want\"): %w", file, n, err)
		}
		if err := checkPhase(r.Phase); err != nil {
			return nil, fmt.Errorf("%s: %w", r.where(file), err)
		}
		if len(r.Input) == 0 {
			return nil, fmt.Errorf("%s: no \"input\"", r.where(file))
		}
		reqs = append(reqs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: no requests", file)
	}
	return reqs, nil
}

func checkPhase(phase string) error {
	if phase != "authorize" && phase != "validate" {
		return fmt.Errorf("phase %q: want authorize or validate", phase)
	}
	return nil
}

// runRequestsOf returns the requests of `plugin run`: --requests, or the one
// of --phase and --input.
func runRequestsOf(cmd *cli.Command) ([]runRequest, error) {
	file, phase, input := cmd.String("requests"), cmd.String("phase"), cmd.String("input")
	if file != "" {
		if phase != "" || input != "" {
			return nil, errors.New("--requests: give it alone, or --phase and --input, not both")
		}
		return readRequests(cmd.Root().Reader, file)
	}
	if phase == "" || input == "" {
		return nil, errors.New("want --phase and --input (one request), or --requests FILE.jsonl (a sequence)")
	}
	if err := checkPhase(phase); err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	in, err := readInput(cmd.Root().Reader, "input", input)
	if err != nil {
		return nil, err
	}
	return []runRequest{{Phase: phase, Input: in}}, nil
}

// runPlugin makes every request's decision with ONE instance of the plugin
// and ONE in-memory KV store, in order, so KV state carries from one to the
// next, and prints a line per decision. The exit status is the worst
// decision's: 3 for a fault, 2 for a deny, 0 when all allowed.
func runPlugin(ctx context.Context, cmd *cli.Command, file string) error {
	reqs, err := runRequestsOf(cmd)
	if err != nil {
		return err
	}
	sc, _, err := readSidecar(file, cmd.String("config"))
	if err != nil {
		return err
	}
	url, err := redisURL(cmd)
	if err != nil {
		return err
	}
	tokens, closeTokens, err := runTokens(ctx, cmd.String("tokens"), url)
	if err != nil {
		return err
	}
	defer closeTokens()
	kv, closeKV, err := redis.Embedded(ctx, redis.Options{})
	if err != nil {
		return fmt.Errorf("plugin KV store: %w", err)
	}
	defer closeKV()
	log := pluginLogger(cmd)
	// One instance, so that a sequence runs as one guest would serve it;
	// the other limits are the plugin's own.
	limits := sc.Limits.Or(wasm.DefaultLimits())
	limits.Instances = 1
	p, err := wasm.LoadPlugin(ctx, file, sc.Config,
		wasm.Options{Logger: log, Limits: limits, Tokens: tokens, KV: kv, CacheDir: cmd.String("cache-dir")}.WithRequestHeaders(sc.Headers))
	if err != nil {
		return err
	}
	out := cmd.Root().Writer
	worst := 0
	for _, r := range reqs {
		call, err := runCall(ctx, p, r, cmd.String("requests"), log)
		if err != nil {
			p.Close(ctx)
			return err
		}
		log.Info("calling the plugin", "plugin", p.Info().Name, "phase", r.Phase,
			"timeout", limits.Timeout, "interrupt", limits.Interrupt == wasm.InterruptOn)
		d, err := awaitDecision(ctx, p.Info().Name, r.Phase, limits, call)
		d.Name = r.Name
		if d.Decision != "" {
			b, _ := json.Marshal(d)
			fmt.Fprintln(out, string(b))
		}
		if err != nil {
			// The call may still run and hold its instance: no Close, which
			// could wait for it; the process ends now.
			return err
		}
		worst = max(worst, exitOf(d))
	}
	p.Close(ctx)
	if worst != 0 {
		return &exitError{code: worst}
	}
	return nil
}

// exitOf is `plugin run`'s exit status for one decision.
func exitOf(d decisionJSON) int {
	switch d.Decision {
	case "deny":
		return exitDeny
	case "fault":
		return exitFault
	}
	return 0
}

// runCall checks that p serves r's phase and r's input, and returns the
// call that makes r's decision; an error names the request (file is its
// --requests file).
func runCall(ctx context.Context, p *wasm.Plugin, r runRequest, file string, log *slog.Logger) (func() decisionJSON, error) {
	if !slices.Contains(p.Info().Phases, r.Phase) {
		err := fmt.Errorf("plugin %s does not serve the %s phase (it serves: %s)", p.Info().File, r.Phase, strings.Join(p.Info().Phases, " "))
		if r.line != 0 {
			err = fmt.Errorf("%s: %w", r.where(file), err)
		}
		return nil, err
	}
	call, err := decisionCall(ctx, p, r.Phase, r.Input, log)
	if err != nil && r.line != 0 {
		err = fmt.Errorf("%s: input: %s", r.where(file), strings.TrimPrefix(err.Error(), "--input: "))
	}
	return call, err
}

// decisionCall checks the input for phase and returns the call that makes
// the decision. The call warns on log of the input's context the plugin was
// not shown.
func decisionCall(ctx context.Context, p *wasm.Plugin, phase string, input []byte, log *slog.Logger) (func() decisionJSON, error) {
	if phase == "authorize" {
		return authorizeCall(ctx, p, input, log)
	}
	in, err := parseValidateInput(input)
	if err != nil {
		return nil, err
	}
	return func() decisionJSON {
		ctx, x := host.NewExchange(ctx)
		if in.Caller != nil {
			x.SetPrincipal(host.Token{Name: in.Caller.Name, Scopes: in.Caller.Scopes})
		}
		d := decisionOf("", p.Validate(ctx, in.plant, in.Principal))
		d.Headers = responseHeaders(x)
		return d
	}, nil
}

// authorizeCall checks an authorize input and returns the call that
// makes the decision, shown the operation (plantshttp.Operation) and the
// request context as the gateway shows them.
func authorizeCall(ctx context.Context, p *wasm.Plugin, input []byte, log *slog.Logger) (func() decisionJSON, error) {
	in, err := parseAuthorizeInput(input)
	if err != nil {
		return nil, err
	}
	route, id, hasID, ok := plantshttp.Operation(in.Method, in.Path)
	if !ok {
		return nil, fmt.Errorf("--input: the gateway would answer 404 or 405 before any plugin runs: %s %s is not an operation (GET or POST /plants, GET or DELETE /plants/{id})", in.Method, in.Path)
	}
	if _, _, err := in.runExchange(ctx); err != nil {
		return nil, err
	}
	return func() decisionJSON {
		// A fresh exchange a call: response headers are one request's.
		ctx, headers, _ := in.runExchange(ctx) // checked above
		d := decisionOf(p.Authorize(ctx, host.AuthorizeRequest{Method: in.Method, Path: in.Path, Credential: in.Credential,
			Route: route, PathID: id, HasPathID: hasID}))
		d.Headers = responseHeaders(host.ExchangeFrom(ctx))
		warnUnseenContext(log, p.Info(), in, headers)
		return d
	}, nil
}

// responseHeaders are the headers a decision set, nil for none.
func responseHeaders(x *host.Exchange) map[string]string {
	var h map[string]string
	for _, rh := range x.ResponseHeaders() {
		if h == nil {
			h = map[string]string{}
		}
		h[rh.Name] = rh.Value
	}
	return h
}

// overrunGrace is how long past its deadline `plugin run` waits for a call
// that the plugin's own deadline should have ended.
const overrunGrace = 100 * time.Millisecond

// awaitDecision runs call and waits for its decision, but never for ever: a
// call that overruns its deadline (a guest that never returns, with
// limits.interrupt off, cannot be stopped) gets the fault the gateway
// answers, with exit 3, and a signal (ctx) ends the wait with exit 1.
//
// A call that cannot be interrupted runs with garbage collection off: Go
// cannot preempt a guest spinning in compiled code, so a collection started
// during (or before) the spin waits for it with every other goroutine
// stopped, and neither the deadline nor the signal could end the process
// (TestPluginRunNoCollectionDuringSpin). Collection is back on once the call
// returns; a call abandoned at its deadline or a signal ends the process.
func awaitDecision(ctx context.Context, name, phase string, limits wasm.Limits, call func() decisionJSON) (decisionJSON, error) {
	done := make(chan decisionJSON, 1)
	if limits.Interrupt != wasm.InterruptOn {
		// SetGCPercent(-1) waits for a cycle under way to finish.
		gcPercent := debug.SetGCPercent(-1)
		inner := call
		call = func() decisionJSON {
			d := inner()
			debug.SetGCPercent(gcPercent)
			return d
		}
	}
	go func() { done <- call() }()
	overrun := time.NewTimer(limits.Timeout + overrunGrace)
	defer overrun.Stop()
	unstoppable := ""
	if limits.Interrupt != wasm.InterruptOn {
		unstoppable = ", which cannot be stopped (limits.interrupt is off)"
	}
	select {
	case d := <-done:
		return d, nil
	case <-overrun.C:
		// What the gateway answers for a call past its deadline.
		d := decisionOf("", host.Errorf(host.ErrPluginFault, "policy plugin failed; request denied"))
		return d, &exitError{code: exitFault, err: fmt.Errorf("plugin %s's %s call ran past its deadline (%s)%s; giving up", name, phase, limits.Timeout, unstoppable)}
	case <-ctx.Done():
		return decisionJSON{}, fmt.Errorf("interrupted during plugin %s's %s call%s", name, phase, unstoppable)
	}
}

func decisionOf(principal string, err error) decisionJSON {
	if err == nil {
		return decisionJSON{Decision: "allow", Principal: principal}
	}
	var e *host.Error
	if !errors.As(err, &e) {
		e = &host.Error{Code: host.ErrInternal, Message: err.Error()}
	}
	d := decisionJSON{Decision: "deny", Status: e.Status(), Error: e.Code, Message: e.Message}
	switch e.Code {
	case host.ErrPluginFault, host.ErrPluginBadDecision, host.ErrInternal, host.ErrPluginBusy, host.ErrNotReady:
		d.Decision = "fault" // failed closed; the reason is in the log on standard error
	}
	return d
}

// readInput reads the file of flag ("-": standard input).
func readInput(stdin io.Reader, flag, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return b, nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/plantgate/plantgate/host/redis"
	"github.com/plantgate/plantgate/host/wasm"
	"github.com/plantgate/plantgate/sdk/abi"
)

// `plantgate plugin conformance` runs a module through every call the host
// makes, with edge cases, and judges every answer with the host's own code:
// each decision is made by host/wasm's Plugin.Authorize and Validate, as in
// the gateway, so a record outside memory, an unknown verdict, a code the
// phase may not use, text that is not UTF-8 or too long, a trap or an
// out-of-memory is the fault the gateway would answer, and the reason it
// would log is the failure's. The inputs are what `plugin run` takes
// (decisionCall), so any failing one can be replayed with it.
//
// Failures name the section of docs/abi.md the module breaks by its anchor
// (abiDoc + "#the-request-buffer").

// abiDoc is the document failures point into.
const abiDoc = "docs/abi.md"

// kitTimeout is the shortest deadline per call of the conformance kit and
// plugin bench.
const kitTimeout = time.Second

// reuseCalls is how many calls one instance answers in the reuse check.
const reuseCalls = 10_000

func pluginConformanceCommand(configFlag, cacheFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "conformance",
		Usage: "check a plugin module against the ABI with every call the host makes and their edge cases; exit 1 on any failure, each naming its input and the section of docs/abi.md it breaks",
		Description: `Loads FILE.wasm as serve would (its sidecar, or --config) with one instance and an in-memory KV
store, then checks, each as a line "ok" or "FAIL":
  load       exports, imports, ABI version, phases, start-up (docs/abi.md#exports, #start-up)
  buffer     plantgate_buffer for growing sizes on one instance, up to the largest request of the
             phases served: 16 KiB for authorize only, --body-limit + 4 KiB with validate
             (#the-request-buffer)
  authorize  every operation; credential, request id, client, each sidecar header and the caller
             present, absent, empty, maximal and non-ASCII (#the-authorize-message)
  validate   id, name, tag, principal and caller present, absent, empty, maximal (a name as large
             as --body-limit allows) and non-ASCII (#the-validate-message)
  kv         the calls made against the in-memory store, none with a bad argument (#kv)
  reuse      one instance answers 10000 calls without its memory growing (#limits-and-failures)
  expect     with --expect FILE: the policy's own decisions, a table of
             {"name","phase","input","want"} lines (testdata/expect/README.md)
Every decision is judged by the host's own code: a fault (trap, out of memory, deadline, a decision
record outside memory or malformed, a deny code the phase may not use, text not UTF-8 or over 1024
bytes, a response header not allowed) is a failure, with the reason the gateway would log. A failing
input can be replayed with: plantgate plugin run FILE.wasm --phase PHASE --input -`,
		ArgsUsage: "FILE.wasm",
		Flags: []cli.Flag{configFlag, cacheFlag,
			&cli.StringFlag{Name: "expect", Usage: `JSON lines of {"name","phase","input","want"}: check the policy's own decisions too (each "want" field present must match)`},
			&cli.IntFlag{Name: "body-limit", Value: defaultBodyLimit, Usage: "serve's --body-limit the plugin will run under: the largest validate message follows from it", Sources: env("BODY_LIMIT")},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			file, err := oneFile(cmd)
			if err != nil {
				return err
			}
			k := &conformance{out: cmd.Root().Writer, file: file, config: cmd.String("config"), cacheDir: cmd.String("cache-dir"), bodyLimit: int(cmd.Int("body-limit"))}
			if k.bodyLimit < 64<<10 || k.bodyLimit > 1<<30 {
				return fmt.Errorf("--body-limit %d: want 65536 to 1073741824 bytes", k.bodyLimit)
			}
			if f := cmd.String("expect"); f != "" {
				if k.expect, err = readRequests(cmd.Root().Reader, f); err != nil {
					return fmt.Errorf("--expect %w", err)
				}
				k.expectFile = f
			}
			return k.run(ctx)
		},
	}
}

// conformance is one run of the kit.
type conformance struct {
	out                    io.Writer
	file, config, cacheDir string
	expect                 []runRequest
	expectFile             string
	bodyLimit              int // serve's --body-limit

	sc       wasm.Sidecar
	limits   wasm.Limits
	p        *wasm.Plugin
	kv       *countingKV
	closeKV  func()
	faults   *faultLog
	failures int
	// denies counts the phase checks' inputs the policy denied: none means
	// the checks never reached its rules.
	denies int
}

// failure is one thing wrong: the input that showed it and why.
type failure struct {
	input  string // the case's name and input, "" for none
	name   string // the case's name alone, quoted
	reason string
	anchor string // "#the-request-buffer"
}

func (k *conformance) report(check, summary string, fails []failure) {
	if len(fails) == 0 {
		fmt.Fprintf(k.out, "ok    %-10s %s\n", check, summary)
		return
	}
	k.failures += len(fails)
	// One line per reason: the first input that showed it, then the names
	// of the others, so a module broken for every input takes one line.
	var order []string
	same := map[string][]failure{}
	for _, f := range fails {
		if _, ok := same[f.reason]; !ok {
			order = append(order, f.reason)
		}
		same[f.reason] = append(same[f.reason], f)
	}
	for _, reason := range order {
		f := same[reason][0]
		in := ""
		if f.input != "" {
			in = f.input + ": "
		}
		more := ""
		if others := same[reason][1:]; len(others) > 0 {
			names := make([]string, len(others))
			for i, o := range others {
				names[i] = o.name
			}
			more = fmt.Sprintf("; the same for %d more: %s", len(others), strings.Join(names, ", "))
		}
		ref := fmt.Sprintf(" (%s%s)", abiDoc, f.anchor)
		if strings.Contains(f.reason, abiDoc+"#") { // the host's reason names its section already
			ref = ""
		}
		fmt.Fprintf(k.out, "FAIL  %-10s %s%s%s%s\n", check, in, f.reason, ref, more)
	}
}

func (k *conformance) run(ctx context.Context) error {
	if err := k.load(ctx); err != nil {
		k.report("load", "", []failure{{reason: err.Error(), anchor: loadAnchor(err.Error())}})
		return &exitError{code: 1, err: errors.New("conformance: the module does not load")}
	}
	defer k.closeKV()
	info := k.p.Info()
	abiName := fmt.Sprintf("ABI %d", info.ABIVersion)
	if info.Kind == wasm.KindRego {
		abiName = "Rego, OPA Wasm ABI " + info.OPAABI
	}
	k.report("load", fmt.Sprintf("%s: %s, phases %s", info.File, abiName, strings.Join(info.Phases, " ")), nil)
	stopped := k.checkBuffer(ctx) ||
		k.checkPhase(ctx, "authorize", authorizeCases(k.sc.Headers)) ||
		k.checkPhase(ctx, "validate", validateCases(k.bodyLimit))
	if !stopped {
		k.checkKV()
		stopped = k.checkReuse(ctx)
	}
	if stopped {
		// A call that never returned holds the instance: no Close.
		return &exitError{code: 1, err: fmt.Errorf("conformance: %d failure(s); stopped at a call that did not return", k.failures)}
	}
	k.p.Close(ctx)
	if len(k.expect) > 0 {
		k.checkExpect(ctx)
	}
	if k.failures > 0 {
		return &exitError{code: 1, err: fmt.Errorf("conformance: %d failure(s)", k.failures)}
	}
	if len(k.expect) == 0 && k.denies == 0 {
		fmt.Fprint(k.out, noDenyHint(slices.Contains(k.p.Info().Phases, "validate")))
		return nil
	}
	fmt.Fprintln(k.out, "conformance: every check passed")
	return nil
}

// noDenyHint ends the report of a policy none of whose inputs was denied:
// the checks then say nothing about its rules, and a "passed" alone would
// read as if they did. It shows one line of an expect table to start from.
func noDenyHint(validate bool) string {
	example := `{"name": "no credential", "phase": "authorize", "input": {"method": "GET", "path": "/plants/1"}, "want": {"decision": "deny", "status": 401}}`
	if validate {
		example = `{"name": "a weed", "phase": "validate", "input": {"id": 1, "name": "Dandelion", "tag": "weed"}, "want": {"decision": "deny", "error": 40070}}`
	}
	return "conformance: every check passed, but no input was denied: these inputs exercise the ABI, not this policy's rules.\n" +
		"Check its own decisions with --expect TABLE.jsonl, one case a line:\n  " + example + "\n" +
		"(the format: docs/writing-plugins.md#expect-tables)\n"
}

// load loads the module as `plugin run` does: its sidecar, one instance,
// enough calls per instance for the reuse check, an in-memory KV store.
func (k *conformance) load(ctx context.Context) (err error) {
	if err := wasm.CheckFileName(baseName(k.file)); err != nil {
		return err
	}
	if k.sc, _, err = readSidecar(k.file, k.config); err != nil {
		return err
	}
	k.limits = k.sc.Limits.Or(wasm.DefaultLimits())
	k.limits.Instances = 1
	k.limits.MaxCalls = max(k.limits.MaxCalls, reuseCalls*2)
	// The kit checks the ABI, not speed (plugin bench measures it): a
	// loaded machine must not fail it at the plugin's own deadline.
	k.limits.Timeout = max(k.limits.Timeout, kitTimeout)
	k.p, k.kv, k.closeKV, err = k.open(ctx)
	return err
}

// open loads a fresh plugin on a fresh store.
func (k *conformance) open(ctx context.Context) (*wasm.Plugin, *countingKV, func(), error) {
	st, closeKV, err := redis.Embedded(ctx, redis.Options{})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("plugin KV store: %w", err)
	}
	kv := &countingKV{KV: st}
	k.faults = &faultLog{}
	p, err := wasm.LoadPlugin(ctx, k.file, k.sc.Config,
		wasm.Options{Logger: slog.New(k.faults), Limits: k.limits, KV: kv, Tokens: conformanceTokens(), CacheDir: k.cacheDir}.WithRequestHeaders(k.sc.Headers))
	if err != nil {
		closeKV()
		return nil, nil, nil, err
	}
	if err := p.ProbeBuffer(ctx, probeBufferSize); err != nil {
		p.Close(ctx)
		closeKV()
		return nil, nil, nil, err
	}
	return p, kv, closeKV, nil
}

// checkBuffer asks the one instance for buffers of growing sizes up to the
// largest request of the phases it serves: a module may return 0 for a
// size no request reaches (docs/abi.md#the-request-buffer), so an
// authorize-only module with a static buffer of one page passes.
func (k *conformance) checkBuffer(ctx context.Context) (stopped bool) {
	var fails []failure
	bound, says := maxMessage(k.p.Info().Phases, k.bodyLimit)
	var sizes []uint32
	for _, n := range []uint32{1, 16, 256, 4 << 10, 64 << 10} {
		if n < bound {
			sizes = append(sizes, n)
		}
	}
	sizes = append(sizes, bound)
	for _, n := range sizes {
		if err := k.p.ProbeBuffer(ctx, n); err != nil {
			reason := strings.TrimPrefix(err.Error(), "plugin "+baseName(k.file)+": ")
			fails = append(fails, failure{reason: reason + "; the phases served need up to " + says, anchor: "#the-request-buffer"})
			break
		}
	}
	k.report("buffer", fmt.Sprintf("%d sizes from 1 byte to %s, on one instance", len(sizes), says), fails)
	return false
}

// confCase is one input of a phase check.
type confCase struct {
	name  string
	input string // as `plugin run --input` takes it
}

func (c confCase) String() string { return fmt.Sprintf("%q %s", c.name, shorten(c.input)) }

// shorten cuts a long input for a failure line: the name says what it is.
func shorten(s string) string {
	if len(s) <= 160 {
		return s
	}
	return s[:120] + fmt.Sprintf("…(%d bytes)…", len(s)-150) + s[len(s)-30:]
}

// checkPhase makes every case's decision when the plugin serves phase.
func (k *conformance) checkPhase(ctx context.Context, phase string, cases []confCase) (stopped bool) {
	if !slices.Contains(k.p.Info().Phases, phase) {
		k.report(phase, "not served", nil)
		return false
	}
	var fails []failure
	decisions := map[string]int{}
	for _, c := range cases {
		d, reason, err := k.decide(ctx, phase, c.input)
		if err != nil {
			k.report(phase, "", append(fails, failure{input: c.String(), reason: err.Error(), anchor: "#limits-and-failures"}))
			return true
		}
		decisions[d.Decision]++
		if d.Decision == "fault" {
			fails = append(fails, failure{input: c.String(), name: fmt.Sprintf("%q", c.name), reason: reason, anchor: faultAnchor(reason, "#the-"+phase+"-message")})
		}
	}
	k.denies += decisions["deny"]
	k.report(phase, fmt.Sprintf("%d inputs: %d allow, %d deny", len(cases), decisions["allow"], decisions["deny"]), fails)
	return false
}

// decide makes one decision as `plugin run` does and returns it with the
// reason the host logged for a fault; err when the call did not return.
func (k *conformance) decide(ctx context.Context, phase, input string) (decisionJSON, string, error) {
	call, err := decisionCall(ctx, k.p, phase, []byte(input), slog.New(slog.DiscardHandler))
	if err != nil {
		return decisionJSON{}, "", fmt.Errorf("the kit's own input is refused (a bug in plantgate): %w", err)
	}
	k.faults.take()
	d, err := awaitDecision(ctx, k.p.Info().Name, phase, k.limits, call)
	if err != nil {
		return d, "", err
	}
	reason := k.faults.take()
	if d.Decision == "fault" && reason == "" {
		reason = d.Message
	}
	return d, reason, nil
}

// checkKV reports the KV calls the cases made and any the host refused as
// a bad argument (which never reach the store).
func (k *conformance) checkKV() {
	st := k.p.Stats()
	calls := k.kv.total()
	var fails []failure
	if st.KVBadArguments > 0 {
		fails = append(fails, failure{reason: fmt.Sprintf("%d KV call(s) had a bad argument (a key empty or over %d bytes, a value over %d bytes, a TTL or window outside 0–%d ms, or memory out of range): each answered %d",
			st.KVBadArguments, abi.MaxKVKey, abi.MaxKVValue, abi.MaxKVTTL, abi.KVBadArgument), anchor: "#kv"})
	}
	if n := st.KVOverBudget; n > 0 {
		fails = append(fails, failure{reason: fmt.Sprintf("%d KV call(s) past the budget of %d KV calls per phase call: each answered %d", n, abi.KVBudget, abi.KVOverBudget), anchor: "#kv"})
	}
	k.report("kv", fmt.Sprintf("%d calls to the store (%d found nothing)", calls, k.kv.notFound), fails)
}

// checkReuse calls one instance reuseCalls times with a usual input and
// checks that it is never replaced and its memory does not grow after the
// first calls (a guest heap settles; one that grows per call is recycled,
// or runs out, under load).
func (k *conformance) checkReuse(ctx context.Context) (stopped bool) {
	phase := k.p.Info().Phases[0]
	input := usualInput[phase]
	warm := reuseCalls / 10
	var created uint64
	var before int64
	var fails []failure
	for i := range reuseCalls {
		switch i {
		case 1:
			// After the first call: an earlier fault replaced the instance.
			created = k.p.Stats().Created
		case warm:
			before = k.p.Memory()
		}
		d, reason, err := k.decide(ctx, phase, input)
		if err != nil {
			k.report("reuse", "", []failure{{input: fmt.Sprintf("call %d of %s", i+1, input), reason: err.Error(), anchor: "#limits-and-failures"}})
			return true
		}
		if d.Decision == "fault" {
			fails = append(fails, failure{input: fmt.Sprintf("call %d of %s", i+1, input), reason: reason, anchor: faultAnchor(reason, "#the-"+phase+"-message")})
			break
		}
		if n := k.p.Stats().Created; i > 0 && n != created {
			fails = append(fails, failure{input: fmt.Sprintf("call %d of %s", i+1, input),
				reason: fmt.Sprintf("the instance was replaced: its memory grew past 3/4 of memory_mib %d", k.limits.MemoryMiB), anchor: "#limits-and-failures"})
			break
		}
	}
	after := k.p.Memory()
	if len(fails) == 0 && after > before {
		fails = append(fails, failure{input: input, reason: fmt.Sprintf("memory grew from %d KiB after %d calls to %d KiB after %d: a guest that grows per call is recycled or runs out under load", before>>10, warm, after>>10, reuseCalls), anchor: "#limits-and-failures"})
	}
	k.report("reuse", fmt.Sprintf("%d %s calls on one instance, memory steady at %d KiB", reuseCalls, phase, after>>10), fails)
	return false
}

// checkExpect makes the table's decisions in order on a fresh instance and
// store, and compares each "want" field present.
func (k *conformance) checkExpect(ctx context.Context) {
	p, kv, closeKV, err := k.open(ctx)
	if err != nil {
		k.report("expect", "", []failure{{reason: err.Error(), anchor: loadAnchor(err.Error())}})
		return
	}
	defer closeKV()
	k.p, k.kv = p, kv
	var fails []failure
	for _, r := range k.expect {
		where := r.where(k.expectFile)
		if !slices.Contains(p.Info().Phases, r.Phase) {
			fails = append(fails, failure{input: where, reason: "the plugin does not serve the " + r.Phase + " phase", anchor: "#exports"})
			continue
		}
		d, reason, err := k.decide(ctx, r.Phase, string(r.Input))
		if err != nil {
			k.report("expect", "", append(fails, failure{input: where, reason: err.Error(), anchor: "#limits-and-failures"}))
			return
		}
		if diff := wantDiff(r.Want, d); diff != "" {
			if reason != "" {
				diff += " (the host logged: " + reason + ")"
			}
			fails = append(fails, failure{input: where, reason: diff, anchor: "#results-and-decision-records"})
		}
	}
	p.Close(ctx)
	k.report("expect", fmt.Sprintf("%d decisions as %s wants", len(k.expect), k.expectFile), fails)
}

// wantDiff compares the fields of want present with the decision's, as
// `plugin run` prints it; "" when they match.
func wantDiff(want json.RawMessage, d decisionJSON) string {
	if len(want) == 0 {
		return ""
	}
	var w map[string]any
	if err := json.Unmarshal(want, &w); err != nil {
		return fmt.Sprintf("\"want\" is not an object: %v", err)
	}
	b, _ := json.Marshal(d)
	var got map[string]any
	_ = json.Unmarshal(b, &got)
	var diffs []string
	keys := make([]string, 0, len(w))
	for key := range w {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if !reflect.DeepEqual(w[key], got[key]) {
			wb, _ := json.Marshal(w[key])
			gb, _ := json.Marshal(got[key])
			diffs = append(diffs, fmt.Sprintf("%s %s, want %s", key, orNone(gb), wb))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return "got " + string(b) + ": " + strings.Join(diffs, "; ")
}

func orNone(b []byte) string {
	if string(b) == "null" {
		return "absent"
	}
	return string(b)
}

// faultLog keeps the reason of the last fault the host logged.
type faultLog struct {
	mu     sync.Mutex
	reason string
	attrs  []slog.Attr
}

func (f *faultLog) Enabled(context.Context, slog.Level) bool { return true }

func (f *faultLog) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelError {
		return nil
	}
	var reason, detail string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "reason":
			reason = a.Value.String()
		case "err":
			detail = a.Value.String()
		}
		return true
	})
	if detail != "" {
		if reason != "" {
			reason += ": "
		}
		reason += detail
	}
	f.mu.Lock()
	f.reason = reason
	f.mu.Unlock()
	return nil
}

func (f *faultLog) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f *faultLog) WithGroup(string) slog.Handler      { return f }

// take returns the last reason and forgets it.
func (f *faultLog) take() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reason
	f.reason = ""
	return r
}

// faultAnchor names the section of docs/abi.md a fault's reason breaks;
// input is the section of the message the call was given, for a guest that
// failed on it (a trap, a fault it reported).
func faultAnchor(reason, input string) string {
	switch {
	case strings.Contains(reason, abi.ExportBuffer):
		return "#the-request-buffer"
	case strings.Contains(reason, "out of memory"), strings.Contains(reason, "deadline"):
		return "#limits-and-failures"
	case strings.Contains(reason, "a code the"):
		return "#phases-and-deny-codes"
	case strings.Contains(reason, "decision"), strings.Contains(reason, "response header"):
		return "#results-and-decision-records"
	}
	return input
}

// loadAnchor names the section a load error breaks.
func loadAnchor(msg string) string {
	switch {
	case strings.Contains(msg, "file name"):
		return "#the-module"
	case strings.Contains(msg, "plantgate_buffer"):
		return "#the-request-buffer"
	case strings.Contains(msg, "import"):
		return "#imports"
	case strings.Contains(msg, "exported memory"), strings.Contains(msg, "export"), strings.Contains(msg, "signature"), strings.Contains(msg, "phase"):
		return "#exports"
	case strings.Contains(msg, "config"):
		return "#config"
	case strings.Contains(msg, "ABI version"):
		return "#versions-and-compatibility"
	case strings.Contains(msg, "memory_mib"), strings.Contains(msg, "memory"):
		return "#limits-and-failures"
	}
	return "#start-up"
}

package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Sidecar is a plugin's optional NN-name.json file:
//
//	{"config": <any JSON>, "limits": {"memory_mib": 16, "timeout_ms": 50, "instances": 4, "max_calls": 1000, "interrupt": true}}
//
// and "headers": ["X-Tenant"], the request headers its authorize phase is
// shown; a shadow's "sample_percent" and a canary's "canary_percent"
// (shadow.go). Every key is optional; any other key, a duplicate key or a limit out of
// range refuses the file, with a message that gives the line and column.
type Sidecar struct {
	// Config is the "config" value exactly as written, passed verbatim to
	// the plugin's plantgate_configure; nil when the key is absent.
	Config json.RawMessage
	// Limits holds the "limits" given; zero fields were not given.
	Limits Limits
	// Headers are the request headers the plugin's authorize phase is
	// shown ("headers": ["X-Tenant"]), canonical; at most
	// abi.MaxRequestHeaders, never Authorization or Cookie.
	Headers []string
	// DecisionCache is the "decision_cache" the plugin declares; the zero
	// value (TTL 0) keeps nothing (decisioncache.go).
	DecisionCache DecisionCache
	// SamplePercent is a shadow's sampling rate ("sample_percent": 1 to
	// 100, default 100): the share of requests it sees.
	SamplePercent int
	// CanaryPercent is a canary's share of principals ("canary_percent":
	// 1 to 100): those it is enforced for, in place of the live version.
	CanaryPercent int
}

// SidecarPath returns the sidecar file name that belongs to wasmPath.
func SidecarPath(wasmPath string) string {
	return strings.TrimSuffix(wasmPath, ".wasm") + ".json"
}

// ReadSidecar reads the sidecar beside wasmPath. A missing file is the zero
// Sidecar.
func ReadSidecar(wasmPath string) (Sidecar, error) {
	path := SidecarPath(wasmPath)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Sidecar{}, nil
	}
	if err != nil {
		return Sidecar{}, fmt.Errorf("plugin %s: %w", filepath.Base(path), err)
	}
	sc, err := ParseSidecar(data)
	if err != nil {
		return Sidecar{}, fmt.Errorf("plugin %s: %w", filepath.Base(path), err)
	}
	return sc, nil
}

// sidecarFile is the file's shape. A key is a field here: its json name is
// the key, its type decides what the key accepts, and the unknown-key
// message lists the names from these tags. To add a key, add a field and
// carry it into Sidecar in ParseSidecar.
type sidecarFile struct {
	Config  jsontext.Value       `json:"config"`
	Limits  object[limitsObject] `json:"limits"`
	Headers placed               `json:"headers"`
	Cache   object[cacheObject]  `json:"decision_cache"`
	// Rollout (shadow.go): only a shadow or a canary takes one.
	SamplePercent placed `json:"sample_percent"`
	CanaryPercent placed `json:"canary_percent"`
}

// limitsObject is the "limits" object. Each limit keeps where its value
// starts, so a range error points at it.
type limitsObject struct {
	MemoryMiB placed `json:"memory_mib"`
	TimeoutMS placed `json:"timeout_ms"`
	Instances placed `json:"instances"`
	MaxCalls  placed `json:"max_calls"`
	Interrupt placed `json:"interrupt"`
}

// ParseSidecar parses a sidecar file's content. Errors read
// "line L, column C: what is wrong", naming the key.
func ParseSidecar(data []byte) (Sidecar, error) {
	var f object[sidecarFile]
	// Duplicate names are refused by default; unknown ones on request.
	if err := jsonv2.Unmarshal(data, &f, jsonv2.RejectUnknownMembers(true)); err != nil {
		return Sidecar{}, positioned(data, err)
	}
	sc := Sidecar{Config: json.RawMessage(f.v.Config)}
	l := &f.v.Limits.v
	var err error
	if sc.Limits.MemoryMiB, err = intLimit[uint32](data, "memory_mib", l.MemoryMiB, 1, maxMemoryMiB); err != nil {
		return Sidecar{}, err
	}
	ms, err := intLimit[int64](data, "timeout_ms", l.TimeoutMS, 1, maxTimeout.Milliseconds())
	if err != nil {
		return Sidecar{}, err
	}
	sc.Limits.Timeout = time.Duration(ms) * time.Millisecond
	if sc.Limits.Instances, err = intLimit[int](data, "instances", l.Instances, 1, maxInstances); err != nil {
		return Sidecar{}, err
	}
	if sc.Limits.MaxCalls, err = intLimit[int](data, "max_calls", l.MaxCalls, 1, maxMaxCalls); err != nil {
		return Sidecar{}, err
	}
	switch string(l.Interrupt.v) {
	case "":
	case "true":
		sc.Limits.Interrupt = InterruptOn
	case "false":
		sc.Limits.Interrupt = InterruptOff
	default:
		return Sidecar{}, at(data, l.Interrupt.off, fmt.Sprintf(`"limits.interrupt" must be true or false, got %s`, l.Interrupt.v))
	}
	if sc.SamplePercent, err = topPercent(data, "sample_percent", f.v.SamplePercent); err != nil {
		return Sidecar{}, err
	}
	if sc.CanaryPercent, err = topPercent(data, "canary_percent", f.v.CanaryPercent); err != nil {
		return Sidecar{}, err
	}
	if h := f.v.Headers; h.v != nil {
		var names []string
		if err := json.Unmarshal(h.v, &names); err != nil {
			return Sidecar{}, at(data, h.off, fmt.Sprintf(`"headers" must be an array of header names, got %s`, h.v))
		}
		if sc.Headers, err = canonicalHeaders(names); err != nil {
			return Sidecar{}, at(data, h.off, err.Error())
		}
	}
	if sc.DecisionCache, err = parseDecisionCache(data, &f.v.Cache.v); err != nil {
		return Sidecar{}, err
	}
	if sc.DecisionCache.TTL > 0 && len(sc.Headers) > 0 {
		return Sidecar{}, at(data, f.v.Cache.v.On.off, `"decision_cache" cannot be used with "headers": a decision that reads request headers would be answered for other headers`)
	}
	return sc, nil
}

// intLimit converts a given limit, refusing a value that is not an integer
// from lo to hi; an absent limit is zero.
func intLimit[T uint32 | int | int64](data []byte, key string, p placed, lo, hi int64) (T, error) {
	if p.v == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(p.v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, at(data, p.off, fmt.Sprintf("%q must be an integer from %d to %d, got %s", "limits."+key, lo, hi, p.v))
	}
	return T(n), nil
}

// topPercent converts a top-level percent key: an integer from 1 to 100;
// absent is 0.
func topPercent(data []byte, key string, p placed) (int, error) {
	if p.v == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(p.v), 10, 64)
	if err != nil || n < 1 || n > 100 {
		return 0, at(data, p.off, fmt.Sprintf("%q must be an integer from 1 to 100, got %s", key, p.v))
	}
	return int(n), nil
}

func rangeError(key string, got, lo, hi int64) error {
	return fmt.Errorf("%q must be an integer from %d to %d, got %d", "limits."+key, lo, hi, got)
}

// placed is a JSON value as written and the byte offset where it starts.
type placed struct {
	v   jsontext.Value
	off int64
}

func (p *placed) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	p.v, p.off = v.Clone(), dec.InputOffset()-int64(len(v))
	return nil
}

// object[T] decodes a JSON object into T and refuses any other kind
// (a struct alone would take null as "nothing given").
type object[T any] struct{ v T }

func (o *object[T]) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if k := dec.PeekKind(); k != '{' && k != 0 {
		return &jsonv2.SemanticError{Err: errNotObject}
	}
	return jsonv2.UnmarshalDecode(dec, &o.v)
}

var errNotObject = errors.New("not an object")

// positioned turns the library's error into "line L, column C: message".
func positioned(data []byte, err error) error {
	var serr *jsonv2.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &syn):
		off, ptr := syn.ByteOffset, syn.JSONPointer
		switch {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			return at(data, off, fmt.Sprintf("duplicate key %q", key(ptr)))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return at(data, off, "invalid JSON: unexpected end of file")
		case ptr == "" && off > 0 && strings.Contains(syn.Err.Error(), "after top-level value"):
			return at(data, off, "invalid JSON: data after the top-level object")
		}
		return at(data, off, "invalid JSON: "+syn.Err.Error())
	case errors.As(err, &serr):
		off, ptr := serr.ByteOffset, serr.JSONPointer
		switch {
		case errors.Is(serr.Err, jsonv2.ErrUnknownName):
			return at(data, off, fmt.Sprintf("unknown key %q, want one of %s", key(ptr), strings.Join(keysAt(ptr.Parent()), ", ")))
		case errors.Is(serr.Err, errNotObject):
			if ptr == "" {
				return at(data, off, "the sidecar must be a JSON object")
			}
			return at(data, off, fmt.Sprintf("%q must be a JSON object", key(ptr)))
		case serr.JSONKind != 0:
			// A value the field's Go type cannot take.
			return at(data, off, fmt.Sprintf("%q cannot be a JSON %s", key(ptr), kindName(serr.JSONKind)))
		}
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	}
	return "value"
}

// key names the value at ptr the way messages do: "limits.instances".
func key(ptr jsontext.Pointer) string {
	var names []string
	for tok := range ptr.Tokens() {
		names = append(names, tok)
	}
	return strings.Join(names, ".")
}

// keysAt lists the keys the object at ptr accepts, from the json tags.
func keysAt(ptr jsontext.Pointer) []string {
	t := reflect.TypeFor[sidecarFile]()
	for tok := range ptr.Tokens() {
		f, ok := fieldByKey(t, tok)
		if !ok {
			return nil
		}
		t = f.Type
		if m, ok := t.FieldByName("v"); ok { // object[T]
			t = m.Type
		}
	}
	var keys []string
	for f := range t.Fields() {
		keys = append(keys, strings.Split(f.Tag.Get("json"), ",")[0])
	}
	return keys
}

func fieldByKey(t reflect.Type, key string) (reflect.StructField, bool) {
	for f := range t.Fields() {
		if strings.Split(f.Tag.Get("json"), ",")[0] == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// at prefixes msg with the line and column (1-based, in characters) of
// byte offset off in data.
func at(data []byte, off int64, msg string) error {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:]) + 1
	return fmt.Errorf("line %d, column %d: %s", line, col, msg)
}

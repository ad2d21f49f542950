package wasm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Sidecar is a plugin's optional NN-name.json file:
//
//	{"config": <any JSON>, "limits": {"memory_mib": 16, "timeout_ms": 50, "instances": 4, "max_calls": 1000, "interrupt": true}}
//
// Both keys are optional; any other key, a duplicate key or a limit out of
// range refuses the file.
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

// limitKeys are the keys of "limits", in the order error messages list them.
var limitKeys = []string{"memory_mib", "timeout_ms", "instances", "max_calls", "interrupt"}

// ParseSidecar parses a sidecar file's content.
func ParseSidecar(data []byte) (Sidecar, error) {
	var sc Sidecar
	dec := json.NewDecoder(bytes.NewReader(data))
	err := object(dec, "", func(key string) error {
		switch key {
		case "config":
			return dec.Decode(&sc.Config)
		case "limits":
			return object(dec, "limits.", func(key string) error {
				return decodeLimit(dec, key, &sc.Limits)
			})
		case "headers":
			var names []string
			if err := dec.Decode(&names); err != nil {
				return fmt.Errorf(`"headers" must be an array of header names: %w`, err)
			}
			var err error
			sc.Headers, err = canonicalHeaders(names)
			return err
		}
		return fmt.Errorf("unknown key %q, want \"config\", \"limits\" or \"headers\"", key)
	})
	if err != nil {
		return Sidecar{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Sidecar{}, errors.New("invalid JSON: data after the top-level object")
	}
	return sc, nil
}

// object reads one JSON object from dec, calling field for each key with dec
// positioned at its value. prefix names the object in messages.
func object(dec *json.Decoder, prefix string, field func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	if tok != json.Delim('{') {
		if prefix == "" {
			return errors.New("must be a JSON object")
		}
		return fmt.Errorf("%q must be a JSON object", strings.TrimSuffix(prefix, "."))
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jsonError(err)
		}
		key := prefix + tok.(string)
		if seen[key] {
			return fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		if err := field(tok.(string)); err != nil {
			var syn *json.SyntaxError
			if errors.As(err, &syn) || errors.Is(err, io.ErrUnexpectedEOF) {
				return jsonError(err)
			}
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return jsonError(err)
	}
	return nil
}

func decodeLimit(dec *json.Decoder, key string, l *Limits) error {
	var lo, hi int64
	switch key {
	case "interrupt":
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		switch string(raw) {
		case "true":
			l.Interrupt = InterruptOn
		case "false":
			l.Interrupt = InterruptOff
		default:
			return fmt.Errorf(`"limits.interrupt" must be true or false, got %s`, raw)
		}
		return nil
	case "memory_mib":
		lo, hi = 1, maxMemoryMiB
	case "timeout_ms":
		lo, hi = 1, maxTimeout.Milliseconds()
	case "instances":
		lo, hi = 1, maxInstances
	case "max_calls":
		lo, hi = 1, maxMaxCalls
	default:
		return fmt.Errorf("unknown key %q, want one of %s", "limits."+key, strings.Join(limitKeys, ", "))
	}
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < lo || n > hi {
		return fmt.Errorf("%q must be an integer from %d to %d, got %s", "limits."+key, lo, hi, raw)
	}
	switch key {
	case "memory_mib":
		l.MemoryMiB = uint32(n)
	case "timeout_ms":
		l.Timeout = time.Duration(n) * time.Millisecond
	case "instances":
		l.Instances = int(n)
	case "max_calls":
		l.MaxCalls = int(n)
	}
	return nil
}

func rangeError(key string, got, lo, hi int64) error {
	return fmt.Errorf("%q must be an integer from %d to %d, got %d", "limits."+key, lo, hi, got)
}

func jsonError(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

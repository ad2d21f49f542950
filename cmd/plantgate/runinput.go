package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"

	"github.com/plantgate/plantgate/host"
	plantshttp "github.com/plantgate/plantgate/host/http"
	"github.com/plantgate/plantgate/host/wasm"
)

// authorizeInput is `plugin run --phase authorize`'s --input: the request
// line and credential, and the ABI 2 request context the gateway would know
// of the request. Every context field is optional; left out, the plugin is
// shown none of it.
type authorizeInput struct {
	Method     string            `json:"method"`
	Path       string            `json:"path"`
	Credential string            `json:"credential"`
	RequestID  string            `json:"request_id"`
	Client     string            `json:"client"`
	Headers    map[string]string `json:"headers"`
	// Caller is who an earlier plugin's token lookup found the request is
	// from (sdk.Request.Caller).
	Caller *callerInput `json:"caller"`
}

// authorizeInputKeys is the shape the input errors name.
const authorizeInputKeys = `{"method","path","credential","request_id","client","headers","caller"}`

// parseAuthorizeInput decodes the input strictly: an unknown key is refused,
// not ignored, as a misspelt "headers" would otherwise leave a dry run
// without the headers its author meant to send.
func parseAuthorizeInput(input []byte) (authorizeInput, error) {
	var in authorizeInput
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, fmt.Errorf("--input: want %s: %w", authorizeInputKeys, err)
	}
	if in.Caller != nil && in.Caller.Name == "" {
		return in, fmt.Errorf("--input: %w", errNoCaller)
	}
	return in, nil
}

// runExchange is the request context of a dry run, as the gateway's HTTP
// layer fills it in (host/http's plantContext): the plugin is shown it by
// the host's own code (host/wasm), so the headers pass exactly the
// gateway's filter: only those the sidecar lists, canonical names, values
// cut at 1024 bytes.
func (in authorizeInput) runExchange(ctx context.Context) (context.Context, *shownHeaders, error) {
	ctx, x := host.NewExchange(ctx)
	if in.RequestID != "" && !plantshttp.SaneRequestID(in.RequestID) {
		return nil, nil, fmt.Errorf(`--input: "request_id" %q: the gateway replaces an X-Request-ID that is not 1–128 letters, digits and ._:- with its own, so no plugin is shown it`, in.RequestID)
	}
	x.RequestID = in.RequestID
	if in.Caller != nil {
		x.SetPrincipal(host.Token{Name: in.Caller.Name, Scopes: in.Caller.Scopes})
	}
	if in.Client != "" {
		ip, err := clientAddr(in.Client)
		if err != nil {
			return nil, nil, err
		}
		x.Client = ip
	}
	if len(in.Headers) > 0 {
		h, err := requestHeaders(in.Headers)
		if err != nil {
			return nil, nil, err
		}
		x.Header = h
		return ctx, h, nil
	}
	return ctx, nil, nil
}

// validateInput is `plugin run --phase validate`'s --input: a NewPlant body
// and what the authorize chain established, under the SDK's names
// (sdk.Plant's AllowedAs, formerly Principal, and Caller).
type validateInput struct {
	// Principal is what the authorize chain allowed as: "allowed_as", or
	// "principal", the SDK's former name for it.
	Principal string       `json:"principal"`
	Caller    *callerInput `json:"caller"`

	plant host.Plant
}

// callerInput is sdk.Principal: a valid token's name and scopes.
type callerInput struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

// validateInputKeys is the shape the input errors name.
const validateInputKeys = `{"id","name","tag","allowed_as","caller":{"name","scopes"}} ("principal": allowed_as's former name)`

// parseValidateInput decodes a validate input: the plant with the gateway's
// own strict decoder, the rest strictly. A key of neither is refused: the
// gateway ignores a body's extra properties, so a plugin never sees one,
// and a misspelt "caller" would otherwise run without the caller meant.
func parseValidateInput(input []byte) (validateInput, error) {
	var in validateInput
	plant, err := plantshttp.DecodePlant(input)
	if err != nil {
		return in, fmt.Errorf("--input: the gateway would answer %d before any plugin runs: %w", host.Code(err)/100, err)
	}
	in.plant = plant
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(input, &keys); err != nil {
		return in, fmt.Errorf("--input: want %s: %w", validateInputKeys, err)
	}
	for k := range keys {
		switch k {
		case "id", "name", "tag", "allowed_as", "principal", "caller":
		default:
			return in, fmt.Errorf("--input: unknown key %q: want %s (a plugin never sees a body's other properties)", k, validateInputKeys)
		}
	}
	var extra struct {
		AllowedAs *string         `json:"allowed_as"`
		Principal *string         `json:"principal"`
		Caller    json.RawMessage `json:"caller"`
	}
	if err := json.Unmarshal(input, &extra); err != nil {
		return in, fmt.Errorf("--input: \"allowed_as\" and \"principal\" must be strings: %w", err)
	}
	switch {
	case extra.AllowedAs != nil && extra.Principal != nil && *extra.AllowedAs != *extra.Principal:
		return in, errors.New(`--input: "allowed_as" and "principal" are one field (principal is its former name): give one`)
	case extra.AllowedAs != nil:
		in.Principal = *extra.AllowedAs
	case extra.Principal != nil:
		in.Principal = *extra.Principal
	}
	if len(extra.Caller) > 0 && string(extra.Caller) != "null" {
		dec := json.NewDecoder(bytes.NewReader(extra.Caller))
		dec.DisallowUnknownFields()
		in.Caller = &callerInput{}
		if err := dec.Decode(in.Caller); err != nil {
			return in, fmt.Errorf("--input: \"caller\": want {\"name\",\"scopes\"}: %w", err)
		}
		if in.Caller.Name == "" {
			return in, fmt.Errorf("--input: %w", errNoCaller)
		}
	}
	return in, nil
}

// clientAddr reads the "client" of the input: an IP address as the gateway
// takes it from the connection, so with no zone; an IPv4-mapped IPv6
// address is shown as IPv4, as the gateway shows it.
func clientAddr(s string) (netip.Addr, error) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf(`--input: "client" %q is not an IP address: want one such as "192.0.2.7" or "2001:db8::7"`, s)
	}
	if ip.Zone() != "" {
		return netip.Addr{}, fmt.Errorf(`--input: "client" %q: an IP address with a zone is never a client's address; leave out %q`, s, "%"+ip.Zone())
	}
	return ip, nil
}

// requestHeaders parses the input's headers with fasthttp's request parser,
// the gateway's own, so that a value reads as the gateway reads it
// (surrounding spaces dropped) and a header it would refuse is refused. A
// name or value that could not be one header line is refused first, by
// name: written into the header block, it would forge others.
func requestHeaders(headers map[string]string) (*shownHeaders, error) {
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	slices.Sort(names)
	var block strings.Builder
	block.WriteString("GET / HTTP/1.0\r\n") // 1.0: no Host unless the input gives one
	for i, name := range names {
		value := headers[name]
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf(`--input: "headers": %q is not a header name`, name)
		}
		if i > 0 && strings.EqualFold(names[i-1], name) {
			return nil, fmt.Errorf(`--input: "headers": %q and %q are one header (names are case-insensitive): give it once`, names[i-1], name)
		}
		if !httpguts.ValidHeaderFieldValue(value) {
			return nil, fmt.Errorf(`--input: "headers": %s's value %q holds a control character (CR, LF, NUL…), which no request header can`, name, value)
		}
		block.WriteString(name + ": " + value + "\r\n")
	}
	block.WriteString("\r\n")
	s := &shownHeaders{names: names}
	if err := s.h.Read(bufio.NewReader(strings.NewReader(block.String()))); err != nil {
		// fasthttp's text quotes the whole block after "buffer size=".
		msg, _, _ := strings.Cut(err.Error(), ": buffer size=")
		return nil, fmt.Errorf(`--input: "headers": the gateway would refuse the request (400): %s`, msg)
	}
	return s, nil
}

// shownHeaders holds the input's headers as the gateway holds a request's
// and records which of them the plugin was shown: it is what the host's
// filter peeks at.
type shownHeaders struct {
	h     fasthttp.RequestHeader
	names []string // the input's, sorted
	shown []string // canonical names the filter peeked at and found
}

var _ host.RequestHeader = (*shownHeaders)(nil)

func (s *shownHeaders) Peek(key string) []byte {
	v := s.h.Peek(key)
	if v != nil {
		s.shown = append(s.shown, key)
	}
	return v
}

// unshown returns the input's header names the plugin was not shown,
// because its sidecar does not list them.
func (s *shownHeaders) unshown() []string {
	var out []string
	for _, name := range s.names {
		if !slices.ContainsFunc(s.shown, func(k string) bool { return strings.EqualFold(k, name) }) {
			out = append(out, name)
		}
	}
	return out
}

// warnUnseenContext says on standard error what of the input's context the
// plugin was not shown, the usual reason a dry run decides otherwise than
// its author expected. Call it after the decision: the filter runs in it.
func warnUnseenContext(log *slog.Logger, info wasm.PluginInfo, in authorizeInput, h *shownHeaders) {
	if info.ABIVersion < 2 {
		if in.RequestID != "" || in.Client != "" || len(in.Headers) > 0 {
			log.Warn("the plugin speaks ABI 1: it is shown no request context (request_id, client, headers)", "plugin", info.Name)
		}
		return
	}
	if h == nil {
		return
	}
	if names := h.unshown(); len(names) > 0 {
		log.Warn(`the plugin is not shown these headers: its sidecar's "headers" does not list them`, "plugin", info.Name, "headers", strings.Join(names, " "))
	}
}

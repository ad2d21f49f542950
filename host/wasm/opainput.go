package wasm

import (
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/sdk/abi"
)

// An OPA policy's input is JSON, built here straight from the request, in
// the instance's reused buffer (docs/abi.md#rego-input):
//
//	authorize: {"method", "path", "route", "id" (when the path names one),
//	            "request_id", "client", "headers": {name: value},
//	            "caller": {"name", "scopes": [..]} (once a token lookup found the credential)}
//	validate:  {"plant": {"id", "name", "tag" (when it has one)}, "allowed_as", "caller"}
//
// Never the credential or its digest: a policy decides on who the caller
// is, which the token lookup established, not on the secret.

// appendAuthorizeInput appends the authorize input for r to dst.
func (p *Plugin) appendAuthorizeInput(dst []byte, r host.AuthorizeRequest, x *host.Exchange) []byte {
	dst = append(dst, `{"method":`...)
	dst = appendJSONString(dst, r.Method)
	dst = append(dst, `,"path":`...)
	dst = appendJSONString(dst, r.Path)
	dst = append(dst, `,"route":`...)
	dst = appendJSONString(dst, r.Route)
	if r.HasPathID {
		dst = append(dst, `,"id":`...)
		dst = strconv.AppendInt(dst, r.PathID, 10)
	}
	var requestID string
	var client []byte
	var buf [64]byte
	if x != nil {
		requestID = x.RequestID
		if x.Client.IsValid() {
			client = x.Client.Unmap().AppendTo(buf[:0])
		}
	}
	dst = append(dst, `,"request_id":`...)
	dst = appendJSONString(dst, requestID)
	dst = append(dst, `,"client":`...)
	dst = appendJSONString(dst, string(client))
	dst = append(dst, `,"headers":{`...)
	if x != nil && x.Header != nil {
		first := true
		for _, name := range p.headers {
			v := x.Header.Peek(name)
			if v == nil {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendJSONString(dst, name)
			dst = append(dst, ':')
			dst = appendJSONString(dst, string(v[:min(len(v), abi.MaxHeaderValue)]))
		}
	}
	dst = append(dst, '}')
	if x != nil {
		dst = appendCaller(dst, x.Principal())
	}
	return append(dst, '}')
}

// appendValidateInput appends the validate input to dst.
func appendValidateInput(dst []byte, plant host.Plant, allowedAs string, caller host.Principal) []byte {
	dst = append(dst, `{"plant":{"id":`...)
	dst = strconv.AppendInt(dst, plant.ID, 10)
	dst = append(dst, `,"name":`...)
	dst = appendJSONString(dst, plant.Name)
	if plant.HasTag {
		dst = append(dst, `,"tag":`...)
		dst = appendJSONString(dst, plant.Tag)
	}
	dst = append(dst, `},"allowed_as":`...)
	dst = appendJSONString(dst, allowedAs)
	dst = appendCaller(dst, caller)
	return append(dst, '}')
}

// appendCaller appends `,"caller":{…}` when a token lookup found the
// credential, nothing before that.
func appendCaller(dst []byte, c host.Principal) []byte {
	if c.Name == "" {
		return dst
	}
	dst = append(dst, `,"caller":{"name":`...)
	dst = appendJSONString(dst, c.Name)
	dst = append(dst, `,"scopes":[`...)
	for i, s := range c.Scopes {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, "]}"...)
}

// appendJSONString appends s as a JSON string; invalid UTF-8 (a header
// value, a path as sent) becomes U+FFFD, as OPA would read it.
func appendJSONString(dst []byte, s string) []byte {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		out, _ = jsontext.AppendQuote(dst, strings.ToValidUTF8(s, "\uFFFD"))
	}
	return out
}

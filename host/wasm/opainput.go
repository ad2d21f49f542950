package wasm

import (
	"strconv"

	"github.com/plantgate/plantgate/host"
	"github.com/plantgate/plantgate/host/jsonenc"
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
	dst = jsonenc.AppendClientString(dst, r.Method)
	dst = append(dst, `,"path":`...)
	dst = jsonenc.AppendClientString(dst, r.Path)
	dst = append(dst, `,"route":`...)
	dst = jsonenc.AppendClientString(dst, r.Route)
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
	dst = jsonenc.AppendClientString(dst, requestID)
	dst = append(dst, `,"client":`...)
	dst = jsonenc.AppendClientString(dst, string(client))
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
			dst = jsonenc.AppendClientString(dst, name)
			dst = append(dst, ':')
			dst = jsonenc.AppendClientString(dst, string(v[:min(len(v), abi.MaxHeaderValue)]))
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
	// The plant as the store keeps it and a client reads it back.
	dst = jsonenc.AppendStoredPlant(append(dst, `{"plant":`...), plant)
	dst = append(dst, `,"allowed_as":`...)
	dst = jsonenc.AppendClientString(dst, allowedAs)
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
	dst = jsonenc.AppendClientString(dst, c.Name)
	dst = append(dst, `,"scopes":[`...)
	for i, s := range c.Scopes {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendClientString(dst, s)
	}
	return append(dst, "]}"...)
}

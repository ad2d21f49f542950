package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
)

// ErrForbiddenAddress is why a delivery or a registration was refused: the
// address is loopback, private, link-local (the cloud metadata services
// among them), unspecified or otherwise not a public unicast address.
// Its text names no flag: registering and delivering are allowed by
// different flags, which errRegister and errDeliver name.
var ErrForbiddenAddress = errors.New("address not allowed for webhooks (loopback, private, link-local or metadata)")

var (
	errRegister = fmt.Errorf("%w; register it with --allow-private (gateways deliver there only with serve --webhook-allow-private)", ErrForbiddenAddress)
	errDeliver  = fmt.Errorf("%w; allow with serve --webhook-allow-private", ErrForbiddenAddress)
)

// Ranges refused besides what netip classifies as non-global or private.
var forbiddenPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT, shared address space
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, broadcast
	netip.MustParsePrefix("fd00:ec2::/32"),  // AWS metadata over IPv6 (also inside fc00::/7)
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("100::/64"),       // discard
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
}

// nat64 is the well-known NAT64 prefix: an address in it reaches the IPv4
// address in its last 32 bits, which is what must be judged.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Forbidden reports whether deliveries to ip are refused by default.
func Forbidden(ip netip.Addr) bool {
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	if !ip.IsGlobalUnicast() || ip.IsPrivate() {
		return true // loopback, link-local (169.254.169.254), multicast, unspecified, RFC 1918, fc00::/7
	}
	for _, p := range forbiddenPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// dialControl refuses, at connect time, a resolved address that Forbidden
// names: checking after resolution, on the address actually dialled, is
// what stops a hostname that resolves (or rebinds) to a private address.
func dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, errDeliver)
	}
	if Forbidden(ap.Addr()) {
		return fmt.Errorf("dial %s: %w", ap.Addr(), errDeliver)
	}
	return nil
}

// CheckURL vets an endpoint URL at registration: http or https, a host,
// no user info, and unless allowPrivate, no forbidden address among the
// literal IP or what the host resolves to now. The gateway checks again on
// every connection, so a later change of DNS does not get past it.
func CheckURL(ctx context.Context, raw string, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("webhook url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("webhook url %q: scheme must be http or https", raw)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("webhook url %q: no host", raw)
	}
	if u.User != nil {
		return fmt.Errorf("webhook url: user info is not allowed; the signature authenticates the sender")
	}
	if allowPrivate {
		return nil
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		if Forbidden(ip) {
			return fmt.Errorf("webhook url %q: %w", raw, errRegister)
		}
		return nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
	if err != nil {
		return fmt.Errorf("webhook url %q: resolve host: %w", raw, err)
	}
	for _, ip := range ips {
		if Forbidden(ip) {
			return fmt.Errorf("webhook url %q: %s resolves to %s: %w", raw, u.Hostname(), ip, errRegister)
		}
	}
	return nil
}

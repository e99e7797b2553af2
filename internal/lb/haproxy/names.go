package haproxy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"sluice.dev/sluice/internal/lb"
)

// maxName bounds backend names and prefixes; HAProxy has no tight limit but
// nothing legitimate comes close.
const maxName = 128

// validBackend accepts the characters HAProxy allows in proxy names.
func validBackend(name string) error {
	if name == "" || len(name) > maxName {
		return fmt.Errorf("backend name %q: length must be 1..%d: %w", truncate(name, 40), maxName, lb.ErrInvalid)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("backend name %q: character %q not allowed (want [A-Za-z0-9_.:-]): %w",
				truncate(name, 40), name[i], lb.ErrInvalid)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '_' || c == '.' || c == ':' || c == '-'
}

// validPrefix accepts server-name prefixes: name characters without ':'.
func validPrefix(p string) error {
	if p == "" || len(p) > maxName {
		return fmt.Errorf("server prefix %q: length must be 1..%d: %w", truncate(p, 40), maxName, lb.ErrInvalid)
	}
	for i := 0; i < len(p); i++ {
		if !nameByte(p[i]) || p[i] == ':' {
			return fmt.Errorf("server prefix %q: character %q not allowed (want [A-Za-z0-9_.-]): %w", p, p[i], lb.ErrInvalid)
		}
	}
	return nil
}

// checkAddr accepts an address HAProxy can send traffic to: a specified
// unicast IP without IPv6 zone and a non-zero port. IPv4-mapped IPv6
// addresses are unmapped, as HAProxy would report them.
func checkAddr(ap netip.AddrPort) (netip.AddrPort, error) {
	a := ap.Addr().Unmap()
	switch {
	case !a.IsValid():
		return ap, fmt.Errorf("target address %v: %w", ap, lb.ErrInvalid)
	case a.Zone() != "":
		return ap, fmt.Errorf("target address %v: IPv6 zones are not supported: %w", ap, lb.ErrInvalid)
	case a.IsUnspecified() || a.IsMulticast():
		return ap, fmt.Errorf("target address %v: not a unicast address: %w", ap, lb.ErrInvalid)
	case ap.Port() == 0:
		return ap, fmt.Errorf("target address %v: port 0: %w", ap, lb.ErrInvalid)
	}
	return netip.AddrPortFrom(a, ap.Port()), nil
}

// serverName derives the HAProxy server name from a (checked) address:
// prefix + IPv4 with dots as dashes, or the fully expanded IPv6 with colons
// as dashes, + "-" + port. For example "sluice-10-244-1-5-8080". The name
// encodes the address so that ownership survives a controller restart:
// a server is sluice's only if its name is the name of its own address.
func serverName(prefix string, ap netip.AddrPort) string {
	var host string
	if a := ap.Addr(); a.Is4() {
		host = strings.ReplaceAll(a.String(), ".", "-")
	} else {
		host = strings.ReplaceAll(a.StringExpanded(), ":", "-")
	}
	return prefix + host + "-" + strconv.Itoa(int(ap.Port()))
}

// formatAddr writes an address the way "add server" parses it.
func formatAddr(ap netip.AddrPort) string {
	return ap.String() // "10.0.0.1:80", "[fd00::1]:80"; HAProxy accepts both
}

// checkArg accepts one extra "add server" keyword or value: printable,
// without spaces, quotes, '#', ';' or '\'.
func checkArg(s string) error {
	if s == "" || len(s) > 256 {
		return fmt.Errorf("server argument %q: length must be 1..256: %w", truncate(s, 40), lb.ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(nameByte(c) || c == '/' || c == '@' || c == '=' || c == ',' || c == '+' || c == '%') {
			return fmt.Errorf("server argument %q: character %q not allowed: %w", truncate(s, 40), c, lb.ErrInvalid)
		}
	}
	return nil
}

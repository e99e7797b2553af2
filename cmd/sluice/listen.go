package main

import (
	"net"
	"net/netip"
	"strings"
)

// listenAddress brackets an IPv6 host in a listen address: the chart
// renders "$(POD_IP):9090", which the kubelet expands to "fd00::5:9090"
// on an IPv6 pod network, and net.Listen wants "[fd00::5]:9090". The port
// is what follows the last colon. Any other address is returned as given.
func listenAddress(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return addr
	}
	ip, err := netip.ParseAddr(addr[:i])
	if err != nil || !ip.Is6() {
		return addr
	}
	return net.JoinHostPort(ip.String(), addr[i+1:])
}

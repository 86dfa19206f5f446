package dataplane

import (
	"bufio"
	"context"
	"crypto/ecdh"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// socketDir is where wireguard-go puts the configuration socket of each of
// its interfaces. It is one folder for every network namespace.
const socketDir = "/var/run/wireguard"

// A Device is a WireGuard interface's configuration as it reports it.
type Device struct {
	PrivateKey Key
	ListenPort int
	Peers      []DevicePeer
}

// PublicKey is the public key of the device's private key.
func (d *Device) PublicKey() Key { return publicKey(d.PrivateKey) }

// A DevicePeer is one peer of a Device.
type DevicePeer struct {
	PublicKey     Key
	PresharedKey  Key
	Endpoint      netip.AddrPort
	AllowedIPs    []netip.Prefix
	Keepalive     int
	LastHandshake time.Time
}

const (
	errDial     = "cannot reach the configuration socket of %s"
	errProtocol = "cannot read the answer of %s"
	errAnswer   = "%s refused the configuration: errno=%s"
)

// uapi sends one request to the configuration socket of a wireguard-go
// interface (WireGuard's cross-platform configuration protocol) and returns
// the answer's lines, without the errno line.
func uapi(ctx context.Context, iface, request string) ([]string, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "unix", filepath.Join(socketDir, iface+".sock"))
	if err != nil {
		return nil, fmt.Errorf(errDial+": %w", iface, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		return nil, fmt.Errorf(errDial+": %w", iface, err)
	}
	var lines []string
	s := bufio.NewScanner(c)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		l := s.Text()
		if l == "" {
			break
		}
		if v, ok := strings.CutPrefix(l, "errno="); ok {
			if v != "0" {
				return nil, fmt.Errorf(errAnswer, iface, v)
			}
			return lines, nil
		}
		lines = append(lines, l)
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf(errProtocol+": %w", iface, err)
	}
	return nil, fmt.Errorf(errProtocol+": no errno", iface)
}

// getDevice reads the configuration of an interface.
func getDevice(ctx context.Context, iface string) (*Device, error) {
	lines, err := uapi(ctx, iface, "get=1\n\n")
	if err != nil {
		return nil, err
	}
	d := &Device{}
	var p *DevicePeer
	var sec, nsec int64
	done := func() {
		if p != nil {
			if sec != 0 || nsec != 0 {
				p.LastHandshake = time.Unix(sec, nsec)
			}
			d.Peers = append(d.Peers, *p)
		}
	}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case "private_key":
			d.PrivateKey = hexKey(v)
		case "listen_port":
			d.ListenPort, _ = strconv.Atoi(v)
		case "public_key":
			done()
			p, sec, nsec = &DevicePeer{PublicKey: hexKey(v)}, 0, 0
		case "preshared_key":
			p.PresharedKey = hexKey(v)
		case "endpoint":
			p.Endpoint, _ = netip.ParseAddrPort(v)
		case "allowed_ip":
			if a, err := netip.ParsePrefix(v); err == nil {
				p.AllowedIPs = append(p.AllowedIPs, a)
			}
		case "persistent_keepalive_interval":
			p.Keepalive, _ = strconv.Atoi(v)
		case "last_handshake_time_sec":
			sec, _ = strconv.ParseInt(v, 10, 64)
		case "last_handshake_time_nsec":
			nsec, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	done()
	return d, nil
}

// publicKey is the public key of a WireGuard private key.
func publicKey(priv Key) Key {
	k, err := ecdh.X25519().NewPrivateKey(priv[:])
	if err != nil {
		return Key{}
	}
	var out Key
	copy(out[:], k.PublicKey().Bytes())
	return out
}

func hexKey(s string) Key {
	var k Key
	if b, err := hex.DecodeString(s); err == nil && len(b) == len(k) {
		copy(k[:], b)
	}
	return k
}

// setDevice writes a whole configuration, replacing every peer, as Kilo's
// agent does with ReplacePeers and ReplaceAllowedIPs.
func setDevice(ctx context.Context, iface string, c Conf) error {
	var b strings.Builder
	fmt.Fprintf(&b, "set=1\nprivate_key=%s\nlisten_port=%d\nreplace_peers=true\n", c.PrivateKey.hex(), c.ListenPort)
	for _, p := range c.Peers {
		fmt.Fprintf(&b, "public_key=%s\nreplace_allowed_ips=true\n", p.PublicKey.hex())
		if p.PresharedKey != nil {
			fmt.Fprintf(&b, "preshared_key=%s\n", p.PresharedKey.hex())
		}
		if p.Endpoint.IsValid() {
			fmt.Fprintf(&b, "endpoint=%s\n", p.Endpoint)
		}
		fmt.Fprintf(&b, "persistent_keepalive_interval=%d\n", p.Keepalive)
		for _, a := range p.AllowedIPs {
			fmt.Fprintf(&b, "allowed_ip=%s\n", a)
		}
	}
	b.WriteString("\n")
	_, err := uapi(ctx, iface, b.String())
	return err
}

package v1alpha1

import (
	"encoding/base64"
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// KeyLen is the length in bytes of a WireGuard key.
const KeyLen = 32

// ParseKey decodes a WireGuard key written as standard base64 of exactly
// KeyLen bytes, the form Kilo reads from Peers and Node annotations.
func ParseKey(s string) ([KeyLen]byte, bool) {
	var k [KeyLen]byte
	if len(s) != base64.StdEncoding.EncodedLen(KeyLen) {
		return k, false
	}
	var buf [KeyLen + 2]byte // DecodedLen of 44 characters
	n, err := base64.StdEncoding.Decode(buf[:], []byte(s))
	if err != nil || n != KeyLen {
		return k, false
	}
	copy(k[:], buf[:KeyLen])
	return k, true
}

// EncodeKey writes a WireGuard key in the canonical form Kilo reads.
func EncodeKey(k [KeyLen]byte) string {
	var b [(KeyLen + 2) / 3 * 4]byte // its base64, padded: encoded here, copied once
	base64.StdEncoding.Encode(b[:], k[:])
	return string(b[:])
}

// Validate returns every way the Peer breaks the rules Kilo's agent applies
// before it programs a peer. Kilo ignores a Peer that breaks any of them.
func (p *Peer) Validate() field.ErrorList {
	var errs field.ErrorList
	// The paths are made only for an error: a large mesh checks thousands
	// of Peers, nearly all valid.
	spec := func() *field.Path { return field.NewPath("spec") }
	if len(p.Spec.AllowedIPs) == 0 {
		errs = append(errs, field.Required(spec().Child("allowedIPs"), "a Peer routes at least one CIDR"))
	}
	for i, c := range p.Spec.AllowedIPs {
		if _, err := netip.ParsePrefix(c); err != nil {
			errs = append(errs, field.Invalid(spec().Child("allowedIPs").Index(i), c, "must be a CIDR"))
		}
	}
	if e := p.Spec.Endpoint; e != nil {
		errs = append(errs, e.validate(func() *field.Path { return spec().Child("endpoint") })...)
	}
	if p.Spec.PersistentKeepalive < 0 {
		errs = append(errs, field.Invalid(spec().Child("persistentKeepalive"), p.Spec.PersistentKeepalive, "must not be negative"))
	}
	if _, ok := ParseKey(p.Spec.PublicKey); !ok {
		errs = append(errs, field.Invalid(spec().Child("publicKey"), p.Spec.PublicKey, "must be standard base64 of exactly 32 bytes"))
	}
	return errs
}

func (e *PeerEndpoint) validate(ep func() *field.Path) field.ErrorList {
	var errs field.ErrorList
	if e.DNSOrIP.IP == "" && e.DNSOrIP.DNS == "" {
		errs = append(errs, field.Required(ep().Child("dnsOrIP"), "an endpoint needs ip or dns"))
	}
	if e.DNSOrIP.IP != "" {
		if _, err := netip.ParseAddr(e.DNSOrIP.IP); err != nil {
			errs = append(errs, field.Invalid(ep().Child("dnsOrIP", "ip"), e.DNSOrIP.IP, "must be an IP address"))
		}
	}
	if e.DNSOrIP.DNS != "" {
		for _, msg := range validation.IsDNS1123Subdomain(e.DNSOrIP.DNS) {
			errs = append(errs, field.Invalid(ep().Child("dnsOrIP", "dns"), e.DNSOrIP.DNS, msg))
		}
	}
	if e.Port == 0 || e.Port > 65535 {
		errs = append(errs, field.Invalid(ep().Child("port"), e.Port, "must be a UDP port, 1-65535"))
	}
	return errs
}

package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashLen is the length of IdentityHash: the hex of IdentitySum.
const HashLen = 8

// IdentityHash is a short hash of the parts of an identity, separated so
// that ("a-b", "c") and ("a", "b-c") differ. The names and label values
// kilomesh writes end in it, so it never changes.
func IdentityHash(parts ...string) string {
	sum := IdentitySum(parts...)
	return hex.EncodeToString(sum[:])
}

// IdentitySum is IdentityHash before its hex encoding: the first bytes of
// the SHA-256 of the parts, each followed by a NUL byte.
func IdentitySum(parts ...string) [HashLen / 2]byte {
	var buf [256]byte // most identities fit: no allocation
	b := buf[:0]
	for _, p := range parts {
		b = append(b, p...)
		b = append(b, 0)
	}
	sum := sha256.Sum256(b)
	return [HashLen / 2]byte(sum[:HashLen/2])
}

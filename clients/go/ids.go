package leaseclient

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newID returns prefix + 26 random lower-case base32 characters, the shape
// of leasectl's generated ids (docs/executor.md).
func newID(prefix string) string {
	var b [17]byte // 136 bits: 27 base32 characters, cut to 26
	if _, err := rand.Read(b[:]); err != nil {
		panic("leaseclient: no randomness: " + err.Error())
	}
	return prefix + strings.ToLower(idEncoding.EncodeToString(b[:]))[:26]
}

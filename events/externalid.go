package events

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxExternalIDLen is the longest external thread id accepted, in bytes of
// UTF-8.
const MaxExternalIDLen = 1024

// ExternalIDPrefix starts every thread id that [ThreadIDFor] maps an
// external id to. It is reserved: a thread created under a native id with
// this prefix is refused by the HTTP API ([IsMappedThreadID]), so a mapped id
// names one external id only.
const ExternalIDPrefix = "ext-"

// extEncoding is lower-case base32 without padding: subject-, key- and
// URL-safe.
var extEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ThreadIDFor returns the thread id of an id as a framework gives it
// (AgentKit and LangGraph accept any string): an id that is already a valid
// thread id ([ValidateThreadID]: 1..128 bytes of [A-Za-z0-9_-]) is its own
// thread id and mapped is false; any other valid UTF-8 string of
// 1..[MaxExternalIDLen] bytes maps to [ExternalIDPrefix] followed by the
// lower-case base32 of the first 20 bytes of its SHA-256 (36 bytes in all),
// and mapped is true. The mapping is deterministic and needs no lookup: the
// same external id gives the same thread id on every node and in every
// language (the TypeScript client computes it the same way). Errors:
// *IDError for an empty id, one longer than [MaxExternalIDLen], or one that
// is not valid UTF-8.
func ThreadIDFor(external string) (id string, mapped bool, err error) {
	if ValidateThreadID(external) == nil {
		return external, false, nil
	}
	if err := ValidateExternalID(external); err != nil {
		return "", false, err
	}
	sum := sha256.Sum256([]byte(external))
	return ExternalIDPrefix + extEncoding.EncodeToString(sum[:20]), true, nil
}

// ValidateExternalID checks an external thread id: 1..[MaxExternalIDLen]
// bytes of valid UTF-8 (any characters, also '/', '.', spaces and
// emoji). Errors: *IDError naming what is wrong.
func ValidateExternalID(external string) error {
	switch {
	case external == "":
		return &IDError{Kind: "external thread id", ID: external, Reason: "must not be empty"}
	case len(external) > MaxExternalIDLen:
		return &IDError{Kind: "external thread id", ID: truncateUTF8(external, 32) + "...", Reason: fmt.Sprintf("is %d bytes, the limit is %d", len(external), MaxExternalIDLen)}
	case !utf8.ValidString(external):
		i := 0
		for i < len(external) {
			r, n := utf8.DecodeRuneInString(external[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return &IDError{Kind: "external thread id", ID: truncateUTF8(external, 32), Reason: fmt.Sprintf("is not valid UTF-8 at byte %d", i)}
	}
	return nil
}

// IsMappedThreadID reports whether id has the form [ThreadIDFor] gives an
// external id, so that it is reserved for one.
func IsMappedThreadID(id string) bool {
	rest, ok := strings.CutPrefix(id, ExternalIDPrefix)
	if !ok || len(rest) != 32 {
		return false
	}
	_, err := extEncoding.DecodeString(rest)
	return err == nil
}

// truncateUTF8 returns at most n bytes of s, cut at a character boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

package events

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultPrefix is the subject prefix used when [Subjects.Prefix] is empty.
const DefaultPrefix = "conv"

// DefaultTenant is the tenant of threads created without one (docs/design.md
// invariant 9).
const DefaultTenant = "default"

// MaxIDLen is the longest tenant or thread id accepted, in bytes.
const MaxIDLen = 128

// Subjects names the NATS subjects of threads. The zero value uses
// [DefaultPrefix]. Layout:
//
//	<prefix>.<tenant>.<thread>          durable events (captured by the stream)
//	<prefix>.<tenant>.<thread>.delta    live token deltas (not captured)
//
// Prefix may have several tokens ("acme.conv"); each must be a valid
// NATS token without wildcards.
type Subjects struct {
	Prefix string
	// Only, when set, is the one tenant Thread, Delta and Tenant accept
	// (a tenant-scoped client, client.Config.Tenant): another tenant gets
	// an error wrapping [ErrOtherTenant].
	Only string
}

// ErrOtherTenant: a tenant-scoped client was asked about another tenant's
// threads (its NATS permissions would deny it).
var ErrOtherTenant = errors.New("events: tenant-scoped to another tenant")

// checkOnly returns an error when tenant is not s.Only (if set).
func (s Subjects) checkOnly(tenant string) error {
	if s.Only != "" && tenant != s.Only {
		return fmt.Errorf("%w: this client acts for tenant %q only, not %q", ErrOtherTenant, s.Only, tenant)
	}
	return nil
}

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// Validate checks the prefix.
func (s Subjects) Validate() error {
	for _, tok := range strings.Split(s.prefix(), ".") {
		if err := validateToken("subject prefix token", tok, 64); err != nil {
			return err
		}
	}
	return nil
}

// Thread returns the durable subject of tenant/thread, or an *IDError,
// or an error wrapping [ErrOtherTenant] (see Only).
func (s Subjects) Thread(tenant, thread string) (string, error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", err
	}
	if err := s.checkOnly(tenant); err != nil {
		return "", err
	}
	if err := ValidateThreadID(thread); err != nil {
		return "", err
	}
	return s.prefix() + "." + tenant + "." + thread, nil
}

// Delta returns the live token-delta subject of tenant/thread.
func (s Subjects) Delta(tenant, thread string) (string, error) {
	subj, err := s.Thread(tenant, thread)
	if err != nil {
		return "", err
	}
	return subj + ".delta", nil
}

// StreamSubjects is the stream's subject filter: "<prefix>.*.*".
func (s Subjects) StreamSubjects() string { return s.prefix() + ".*.*" }

// Tenant returns the filter matching every thread of tenant:
// "<prefix>.<tenant>.*".
func (s Subjects) Tenant(tenant string) (string, error) {
	if err := ValidateTenant(tenant); err != nil {
		return "", err
	}
	if err := s.checkOnly(tenant); err != nil {
		return "", err
	}
	return s.prefix() + "." + tenant + ".*", nil
}

// Parse splits a durable thread subject into tenant and thread. It returns
// an error naming the subject when it is not "<prefix>.<tenant>.<thread>"
// with valid ids.
func (s Subjects) Parse(subject string) (tenant, thread string, err error) {
	p := s.prefix() + "."
	if !strings.HasPrefix(subject, p) {
		return "", "", fmt.Errorf("%w: subject %q does not start with %q", ErrInvalidID, subject, p)
	}
	rest := subject[len(p):]
	tenant, thread, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(thread, ".") {
		return "", "", fmt.Errorf("%w: subject %q is not %s<tenant>.<thread>", ErrInvalidID, subject, p)
	}
	if err := ValidateTenant(tenant); err != nil {
		return "", "", err
	}
	if err := ValidateThreadID(thread); err != nil {
		return "", "", err
	}
	return tenant, thread, nil
}

// ValidateTenant checks a tenant id: 1..128 bytes of [A-Za-z0-9_-].
// The set is the intersection of what NATS subject tokens, KV keys and URL
// path segments accept unescaped.
func ValidateTenant(id string) error { return validateToken("tenant", id, MaxIDLen) }

// ValidateThreadID checks a thread id: 1..128 bytes of [A-Za-z0-9_-].
func ValidateThreadID(id string) error { return validateToken("thread id", id, MaxIDLen) }

func validateToken(kind, id string, max int) error {
	if id == "" {
		return &IDError{Kind: kind, ID: id, Reason: "must not be empty"}
	}
	if len(id) > max {
		return &IDError{Kind: kind, ID: id[:32] + "...", Reason: fmt.Sprintf("is %d bytes, the limit is %d", len(id), max)}
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			continue
		}
		// Name the whole character, not its first byte: "é", not "Ã".
		what := fmt.Sprintf("byte 0x%02x (not UTF-8)", c)
		if r, n := utf8.DecodeRuneInString(id[i:]); r != utf8.RuneError || n > 1 {
			what = fmt.Sprintf("character %q (%U)", r, r)
		}
		return &IDError{Kind: kind, ID: id, Reason: fmt.Sprintf("%s at byte %d is not allowed (use A-Z, a-z, 0-9, '-' and '_')", what, i)}
	}
	return nil
}

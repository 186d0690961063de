package client

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Conversation keys: the Agenticore seed's 4-tier resolver
// (shared/seeds/001_*.txt). An OpenAI-compatible front end (agentd's
// /v1/chat/completions) gets stateless requests that carry the whole
// history; the resolver infers which logical conversation a request belongs
// to, so that every turn of it lands in the same thread ("sticky sessions").
//
//	tier 1  header        X-Conversation-Id, X-LibreChat-Conversation-Id, X-OpenWebUI-Chat-Id
//	tier 2  body          metadata.conversation_id, or `user` when it is UUID-shaped
//	tier 3  content hash  sha256(system prompt + first user message)[:16] (can be switched off)
//	tier 4  ephemeral     a random UUID: stateless, one-shot
//
// The key is scoped by agent (the request's model) and user (X-User-Id or
// the body's user), as conv:{agent}:{user}:{key}, so two users or two agents
// never share a thread, and the scoped key maps deterministically to a
// thread id ([ConvKey.ThreadID]).

// ConvTier says which tier of the resolver produced a conversation key.
type ConvTier int

// The tiers, highest priority first.
const (
	// ConvTierHeader: an explicit conversation header (tier 1).
	ConvTierHeader ConvTier = 1
	// ConvTierBody: body.metadata.conversation_id or a UUID-shaped body.user (tier 2).
	ConvTierBody ConvTier = 2
	// ConvTierContentHash: sha256(system prompt + first user message)[:16] (tier 3).
	ConvTierContentHash ConvTier = 3
	// ConvTierEphemeral: a random key; the conversation is stateless (tier 4).
	ConvTierEphemeral ConvTier = 4
)

// String returns the tier's name: "header", "body", "content_hash" or
// "ephemeral".
func (t ConvTier) String() string {
	switch t {
	case ConvTierHeader:
		return "header"
	case ConvTierBody:
		return "body"
	case ConvTierContentHash:
		return "content_hash"
	case ConvTierEphemeral:
		return "ephemeral"
	}
	return fmt.Sprintf("tier%d", int(t))
}

// ConvHeaders are the tier-1 request headers, in priority order.
var ConvHeaders = []string{"X-Conversation-Id", "X-LibreChat-Conversation-Id", "X-OpenWebUI-Chat-Id"}

// ConvUserHeader names the user a request is made for (LibreChat sends it
// with `X-User-Id: "{{user}}"`). It takes precedence over the body's user.
const ConvUserHeader = "X-User-Id"

// MaxConvKeyLen is the longest conversation key, agent or user accepted, in
// bytes.
const MaxConvKeyLen = 256

// ConvKeyError names the source of an unusable conversation key, agent or
// user (a header, "metadata.conversation_id", "user", "model") and why. It
// wraps [ErrBadConvKey].
type ConvKeyError struct {
	Source string
	Reason string
}

// Error implements error.
func (e *ConvKeyError) Error() string {
	return fmt.Sprintf("client: conversation key from %s: %s", e.Source, e.Reason)
}

// Unwrap returns [ErrBadConvKey].
func (e *ConvKeyError) Unwrap() error { return ErrBadConvKey }

// ConvRequest is what the resolver looks at in one chat request.
type ConvRequest struct {
	// Agent is the agent the request is for (the OpenAI "model" field).
	// Required.
	Agent string
	// Header holds the request headers (tier 1 and X-User-Id); may be nil.
	Header http.Header
	// ConversationID is body.metadata.conversation_id ("" if absent).
	ConversationID string
	// User is the body's "user" field ("" if absent).
	User string
	// SystemPrompt and FirstUserMessage are the texts tier 3 hashes: the
	// request's system prompt ("" if none) and its first user message's text.
	SystemPrompt     string
	FirstUserMessage string
	// HasUserMessage says whether the request has a user message at all;
	// without one tier 3 does not apply.
	HasUserMessage bool
}

// ConvKeyOptions configure [ResolveConvKey]. The zero value is Agenticore's
// default: tier 3 on, tier-4 keys are random UUIDv4s.
type ConvKeyOptions struct {
	// DisableHashFallback turns tier 3 off (Agenticore's
	// AGENTICORE_CONV_HASH_FALLBACK=false): requests with neither a header
	// nor a body key become ephemeral. Tier 3 merges two conversations that
	// start with the same system prompt and first user message.
	DisableHashFallback bool
	// NewEphemeralKey returns tier-4 keys. Default: a random UUIDv4.
	NewEphemeralKey func() string
}

// ConvKey is a resolved conversation key.
type ConvKey struct {
	// Key is the conversation key itself (a header value, a body value, a
	// 16-hex-digit content hash or a random UUID).
	Key string
	// Tier is the tier that produced Key.
	Tier ConvTier
	// Source names where Key came from: the header name,
	// "metadata.conversation_id", "user", "content_hash" or "ephemeral".
	Source string
	// Agent and User are the scope. User is "" for anonymous requests.
	Agent string
	User  string
}

// Stateless reports whether the conversation is one-shot (tier 4): nothing
// else will ever resolve to its key unless the client sends it back.
func (k ConvKey) Stateless() bool { return k.Tier == ConvTierEphemeral }

// Scoped returns the composed key conv:{agent}:{user}:{key} of the seed,
// for logs and metadata.
func (k ConvKey) Scoped() string { return "conv:" + k.Agent + ":" + k.User + ":" + k.Key }

// convNamespace is the UUIDv5 namespace of conversation thread ids.
var convNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/convlog/convlog/conversation-key"))

// ThreadID returns the thread id the scoped key maps to: the UUIDv5 of
// agent, user and key (joined with NUL bytes, which none of them may
// contain, so distinct scopes never collide). The same scoped key always
// gives the same id, whatever tier produced it: a client that sends back a
// tier-3 or tier-4 key as X-Conversation-Id continues the same thread. The
// id matches ^[A-Za-z0-9_-]{1,128}$.
func (k ConvKey) ThreadID() string {
	return uuid.NewSHA1(convNamespace, []byte(k.Agent+"\x00"+k.User+"\x00"+k.Key)).String()
}

// ContentHashKey is the tier-3 key: the first 16 hex digits of
// sha256(systemPrompt + firstUserMessage), as Agenticore computes it.
func ContentHashKey(systemPrompt, firstUserMessage string) string {
	sum := sha256.Sum256([]byte(systemPrompt + firstUserMessage))
	return hex.EncodeToString(sum[:])[:16]
}

// IsUUID reports whether s is UUID-shaped: 8-4-4-4-12 hex digits (any
// version, either case), the form tier 2 accepts for the body's user.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// ResolveConvKey resolves the conversation key of r, trying the tiers in
// order: the first tier-1 header with a non-blank value, then
// body.metadata.conversation_id, then a UUID-shaped body user, then (unless
// disabled) the content hash when r has a user message, else an ephemeral
// key. Values are trimmed of surrounding white space.
//
// The user scope is the X-User-Id header, else the body's user.
//
// Errors: *ConvKeyError (wraps [ErrBadConvKey]) when the agent is empty, or
// when the key, agent or user chosen is longer than [MaxConvKeyLen] bytes,
// is not UTF-8 or contains control characters.
func ResolveConvKey(r ConvRequest, opts ConvKeyOptions) (ConvKey, error) {
	k := ConvKey{Agent: r.Agent}
	if strings.TrimSpace(r.Agent) == "" {
		return ConvKey{}, &ConvKeyError{Source: "model", Reason: "the agent (model) is required"}
	}
	if err := checkConvPart("model", r.Agent); err != nil {
		return ConvKey{}, err
	}
	k.User = strings.TrimSpace(r.Header.Get(ConvUserHeader))
	userSource := ConvUserHeader
	if k.User == "" {
		k.User, userSource = strings.TrimSpace(r.User), "user"
	}
	if err := checkConvPart(userSource, k.User); err != nil {
		return ConvKey{}, err
	}
	set := func(key string, tier ConvTier, source string) (ConvKey, error) {
		if err := checkConvPart(source, key); err != nil {
			return ConvKey{}, err
		}
		k.Key, k.Tier, k.Source = key, tier, source
		return k, nil
	}
	for _, h := range ConvHeaders {
		if v := strings.TrimSpace(r.Header.Get(h)); v != "" {
			return set(v, ConvTierHeader, h)
		}
	}
	if v := strings.TrimSpace(r.ConversationID); v != "" {
		return set(v, ConvTierBody, "metadata.conversation_id")
	}
	if u := strings.TrimSpace(r.User); IsUUID(u) {
		return set(strings.ToLower(u), ConvTierBody, "user")
	}
	if !opts.DisableHashFallback && r.HasUserMessage {
		return set(ContentHashKey(r.SystemPrompt, r.FirstUserMessage), ConvTierContentHash, "content_hash")
	}
	newKey := opts.NewEphemeralKey
	if newKey == nil {
		newKey = func() string { return uuid.NewString() }
	}
	return set(newKey(), ConvTierEphemeral, "ephemeral")
}

// checkConvPart checks a key, agent or user: at most MaxConvKeyLen bytes of
// UTF-8 without control characters (the thread id derivation joins them with
// NUL bytes).
func checkConvPart(source, v string) error {
	if len(v) > MaxConvKeyLen {
		return &ConvKeyError{Source: source, Reason: fmt.Sprintf("is %d bytes, the limit is %d", len(v), MaxConvKeyLen)}
	}
	if !utf8.ValidString(v) {
		return &ConvKeyError{Source: source, Reason: "is not valid UTF-8"}
	}
	for i, r := range v {
		if r < 0x20 || r == 0x7f {
			return &ConvKeyError{Source: source, Reason: fmt.Sprintf("has control character %U at byte %d", r, i)}
		}
	}
	return nil
}

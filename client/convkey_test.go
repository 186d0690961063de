package client_test

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/client"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestConvKeyTiers(t *testing.T) {
	const u = "0b9b4a5e-2f39-4c8e-9a57-0cdb7a8e4f10"
	base := client.ConvRequest{Agent: "demo", SystemPrompt: "be brief", FirstUserMessage: "hi", HasUserMessage: true}
	with := func(f func(*client.ConvRequest)) client.ConvRequest { r := base; f(&r); return r }
	cases := []struct {
		name   string
		req    client.ConvRequest
		opts   client.ConvKeyOptions
		key    string
		tier   client.ConvTier
		source string
		user   string
	}{
		{"X-Conversation-Id wins over everything", with(func(r *client.ConvRequest) {
			r.Header = hdr("X-Conversation-Id", "c1", "X-LibreChat-Conversation-Id", "c2", "X-OpenWebUI-Chat-Id", "c3")
			r.ConversationID, r.User = "m1", u
		}), client.ConvKeyOptions{}, "c1", client.ConvTierHeader, "X-Conversation-Id", u},
		{"the LibreChat header comes second", with(func(r *client.ConvRequest) {
			r.Header = hdr("X-LibreChat-Conversation-Id", "c2", "X-OpenWebUI-Chat-Id", "c3")
		}), client.ConvKeyOptions{}, "c2", client.ConvTierHeader, "X-LibreChat-Conversation-Id", ""},
		{"the Open WebUI header comes third", with(func(r *client.ConvRequest) {
			r.Header = hdr("X-OpenWebUI-Chat-Id", " c3 ")
		}), client.ConvKeyOptions{}, "c3", client.ConvTierHeader, "X-OpenWebUI-Chat-Id", ""},
		{"a blank header is skipped", with(func(r *client.ConvRequest) {
			r.Header = hdr("X-Conversation-Id", "  ")
			r.ConversationID = "m1"
		}), client.ConvKeyOptions{}, "m1", client.ConvTierBody, "metadata.conversation_id", ""},
		{"metadata.conversation_id beats a UUID user", with(func(r *client.ConvRequest) {
			r.ConversationID, r.User = "m1", u
		}), client.ConvKeyOptions{}, "m1", client.ConvTierBody, "metadata.conversation_id", u},
		{"a UUID-shaped user is a body key (lower-cased)", with(func(r *client.ConvRequest) {
			r.User = strings.ToUpper(u)
		}), client.ConvKeyOptions{}, u, client.ConvTierBody, "user", strings.ToUpper(u)},
		{"a user that is not UUID-shaped only scopes", with(func(r *client.ConvRequest) {
			r.User = "alice"
		}), client.ConvKeyOptions{}, client.ContentHashKey("be brief", "hi"), client.ConvTierContentHash, "content_hash", "alice"},
		{"the content hash is the fallback", base, client.ConvKeyOptions{},
			client.ContentHashKey("be brief", "hi"), client.ConvTierContentHash, "content_hash", ""},
		{"without the hash fallback the request is ephemeral", base,
			client.ConvKeyOptions{DisableHashFallback: true, NewEphemeralKey: func() string { return "eph" }},
			"eph", client.ConvTierEphemeral, "ephemeral", ""},
		{"without a user message the request is ephemeral", with(func(r *client.ConvRequest) {
			r.HasUserMessage, r.FirstUserMessage = false, ""
		}), client.ConvKeyOptions{NewEphemeralKey: func() string { return "eph" }}, "eph", client.ConvTierEphemeral, "ephemeral", ""},
		{"X-User-Id scopes before the body user", with(func(r *client.ConvRequest) {
			r.Header = hdr("X-Conversation-Id", "c1", "X-User-Id", "bob")
			r.User = "alice"
		}), client.ConvKeyOptions{}, "c1", client.ConvTierHeader, "X-Conversation-Id", "bob"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, err := client.ResolveConvKey(tc.req, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, tc.key, k.Key)
			assert.Equal(t, tc.tier, k.Tier)
			assert.Equal(t, tc.source, k.Source)
			assert.Equal(t, tc.user, k.User)
			assert.Equal(t, "demo", k.Agent)
			assert.Equal(t, tc.tier == client.ConvTierEphemeral, k.Stateless())
			assert.Regexp(t, regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`), k.ThreadID())
		})
	}
}

func TestConvKeyEphemeralKeysDiffer(t *testing.T) {
	r := client.ConvRequest{Agent: "demo"}
	a, err := client.ResolveConvKey(r, client.ConvKeyOptions{})
	require.NoError(t, err)
	b, err := client.ResolveConvKey(r, client.ConvKeyOptions{})
	require.NoError(t, err)
	require.True(t, a.Stateless())
	require.True(t, client.IsUUID(a.Key))
	require.NotEqual(t, a.Key, b.Key)
	require.NotEqual(t, a.ThreadID(), b.ThreadID())
}

func TestConvKeyScopesThreadsByAgentAndUser(t *testing.T) {
	id := func(agent, user, key string) string {
		k, err := client.ResolveConvKey(client.ConvRequest{Agent: agent, User: user, Header: hdr("X-Conversation-Id", key)}, client.ConvKeyOptions{})
		require.NoError(t, err)
		return k.ThreadID()
	}
	base := id("demo", "alice", "c1")
	require.Equal(t, base, id("demo", "alice", "c1"), "deterministic")
	require.NotEqual(t, base, id("demo", "bob", "c1"), "two users never share a thread")
	require.NotEqual(t, base, id("other", "alice", "c1"), "two agents never share a thread")
	require.NotEqual(t, base, id("demo", "alice", "c2"))
	// Separators cannot be smuggled in: "a:b"+"c" differs from "a"+"b:c".
	require.NotEqual(t, id("demo", "a:b", "c"), id("demo", "a", "b:c"))

	k, err := client.ResolveConvKey(client.ConvRequest{Agent: "demo", User: "alice", Header: hdr("X-Conversation-Id", "c1")}, client.ConvKeyOptions{})
	require.NoError(t, err)
	require.Equal(t, "conv:demo:alice:c1", k.Scoped())
}

func TestConvKeyContentHashMatchesAgenticore(t *testing.T) {
	// python3 -c 'import hashlib; print(hashlib.sha256(b"You are helpful.my name is colt").hexdigest()[:16])'
	require.Equal(t, "651e4bf5fd909572", client.ContentHashKey("You are helpful.", "my name is colt"))
	require.Len(t, client.ContentHashKey("", ""), 16)
}

func TestConvKeyRejectsUnusableValues(t *testing.T) {
	cases := []struct {
		name   string
		req    client.ConvRequest
		source string
	}{
		{"an empty agent", client.ConvRequest{Agent: " "}, "model"},
		{"a key with a control character", client.ConvRequest{Agent: "demo", Header: hdr("X-Conversation-Id", "a\x01b")}, "X-Conversation-Id"},
		{"an overlong key", client.ConvRequest{Agent: "demo", ConversationID: strings.Repeat("k", client.MaxConvKeyLen+1)}, "metadata.conversation_id"},
		{"an overlong user", client.ConvRequest{Agent: "demo", User: strings.Repeat("u", client.MaxConvKeyLen+1)}, "user"},
		{"a user header that is not UTF-8", client.ConvRequest{Agent: "demo", Header: hdr("X-User-Id", "\xff")}, "X-User-Id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.ResolveConvKey(tc.req, client.ConvKeyOptions{})
			require.ErrorIs(t, err, client.ErrBadConvKey)
			var ke *client.ConvKeyError
			require.True(t, errors.As(err, &ke))
			require.Equal(t, tc.source, ke.Source)
		})
	}
}

func TestConvKeyIsUUID(t *testing.T) {
	assert.True(t, client.IsUUID("0b9b4a5e-2f39-4c8e-9a57-0cdb7a8e4f10"))
	assert.True(t, client.IsUUID("0B9B4A5E-2F39-4C8E-9A57-0CDB7A8E4F10"))
	assert.False(t, client.IsUUID("0b9b4a5e2f394c8e9a570cdb7a8e4f10"))
	assert.False(t, client.IsUUID("0b9b4a5e-2f39-4c8e-9a57-0cdb7a8e4f1g"))
	assert.False(t, client.IsUUID("alice"))
}

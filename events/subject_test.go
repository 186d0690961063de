package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
)

func TestSubjectsOfTheDefaultPrefix(t *testing.T) {
	var s events.Subjects
	require.NoError(t, s.Validate())

	subj, err := s.Thread("acme", "t-1_x")
	require.NoError(t, err)
	assert.Equal(t, "conv.acme.t-1_x", subj)

	delta, err := s.Delta("acme", "t-1_x")
	require.NoError(t, err)
	assert.Equal(t, "conv.acme.t-1_x.delta", delta)

	tenant, err := s.Tenant("acme")
	require.NoError(t, err)
	assert.Equal(t, "conv.acme.*", tenant)
	assert.Equal(t, "conv.*.*", s.StreamSubjects())

	te, th, err := s.Parse(subj)
	require.NoError(t, err)
	assert.Equal(t, "acme", te)
	assert.Equal(t, "t-1_x", th)

	def, err := s.Thread(events.DefaultTenant, "t")
	require.NoError(t, err)
	assert.Equal(t, "conv.default.t", def)
}

func TestSubjectsWithAPrefixOfSeveralTokens(t *testing.T) {
	s := events.Subjects{Prefix: "eu-1.acme_corp.conv"}
	require.NoError(t, s.Validate())

	subj, err := s.Thread("tenant-a", "0195")
	require.NoError(t, err)
	assert.Equal(t, "eu-1.acme_corp.conv.tenant-a.0195", subj)
	delta, err := s.Delta("tenant-a", "0195")
	require.NoError(t, err)
	assert.Equal(t, "eu-1.acme_corp.conv.tenant-a.0195.delta", delta)
	assert.Equal(t, "eu-1.acme_corp.conv.*.*", s.StreamSubjects())
	filter, err := s.Tenant("tenant-a")
	require.NoError(t, err)
	assert.Equal(t, "eu-1.acme_corp.conv.tenant-a.*", filter)

	te, th, err := s.Parse(subj)
	require.NoError(t, err)
	assert.Equal(t, []string{"tenant-a", "0195"}, []string{te, th})

	_, _, err = events.Subjects{}.Parse(subj)
	require.ErrorIs(t, err, events.ErrInvalidID, "a subject of another prefix is not parsed as ours")
	_, _, err = events.Subjects{Prefix: "eu-1.acme_corp"}.Parse(subj)
	require.ErrorIs(t, err, events.ErrInvalidID, "a shorter prefix leaves too many tokens")
}

// The stream filter "<prefix>.*.*" must match every thread subject and no
// delta subject: deltas are live only.
func TestTheStreamCapturesThreadsButNotDeltas(t *testing.T) {
	for _, s := range []events.Subjects{{}, {Prefix: "a.b"}} {
		subj, err := s.Thread("acme", "t1")
		require.NoError(t, err)
		delta, err := s.Delta("acme", "t1")
		require.NoError(t, err)
		tenant, err := s.Tenant("acme")
		require.NoError(t, err)
		assert.True(t, subjectMatches(s.StreamSubjects(), subj))
		assert.False(t, subjectMatches(s.StreamSubjects(), delta))
		assert.True(t, subjectMatches(tenant, subj))
		assert.True(t, subjectMatches(strings.TrimSuffix(tenant, "*")+">", delta), "a tenant permission <prefix>.<tenant>.> covers deltas")
		_, _, err = s.Parse(delta)
		require.ErrorIs(t, err, events.ErrInvalidID, "a delta subject is not a thread subject")
	}
}

// subjectMatches is NATS subject matching with '*' and '>' wildcards.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

func TestBadIDsAreRejectedNamingTheCharacter(t *testing.T) {
	var s events.Subjects
	cases := []struct {
		name, tenant, thread string
		kind                 string
		reason               string
	}{
		{"an empty tenant", "", "t", "tenant", "must not be empty"},
		{"an empty thread", "acme", "", "thread id", "must not be empty"},
		{"a dot in the tenant would add a token", "a.b", "t", "tenant", `character '.' (U+002E) at byte 1`},
		{"a star in the thread is a wildcard", "acme", "t*", "thread id", `character '*' (U+002A) at byte 1`},
		{"a greater-than sign is a wildcard", "acme", ">", "thread id", `character '>' (U+003E) at byte 0`},
		{"whitespace ends a subject", "acme", "a\tb", "thread id", `character '\t' (U+0009) at byte 1`},
		{"a slash is not URL-path safe", "acme", "a/b", "thread id", `character '/' (U+002F) at byte 1`},
		{"non-ASCII is named as a whole character", "zürich", "t", "tenant", `character 'ü' (U+00FC) at byte 1`},
		{"an emoji is named as a whole character", "acme", "chat🙂", "thread id", `character '🙂' (U+1F642) at byte 4`},
		{"a byte that is not UTF-8 is named as a byte", "acme", "t\xfe", "thread id", `byte 0xfe (not UTF-8) at byte 1`},
		{"a tenant over 128 bytes", strings.Repeat("a", 129), "t", "tenant", "is 129 bytes, the limit is 128"},
		{"a thread over 128 bytes", "acme", strings.Repeat("b", 200), "thread id", "is 200 bytes, the limit is 128"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range []func() (string, error){
				func() (string, error) { return s.Thread(c.tenant, c.thread) },
				func() (string, error) { return s.Delta(c.tenant, c.thread) },
			} {
				subj, err := f()
				assert.Empty(t, subj)
				var ie *events.IDError
				require.ErrorAs(t, err, &ie)
				require.ErrorIs(t, err, events.ErrInvalidID)
				assert.Equal(t, c.kind, ie.Kind)
				assert.Contains(t, err.Error(), c.reason)
			}
			if c.kind == "tenant" {
				_, err := s.Tenant(c.tenant)
				require.ErrorIs(t, err, events.ErrInvalidID)
				assert.Contains(t, err.Error(), c.reason)
			}
		})
	}
	assert.NoError(t, events.ValidateTenant(strings.Repeat("a", events.MaxIDLen)))
	assert.NoError(t, events.ValidateThreadID("AZaz09-_"))
}

func TestBadPrefixesAreRejected(t *testing.T) {
	for _, p := range []string{"conv.", ".conv", "a..b", "conv.*", "conv.>", "my conv", strings.Repeat("p", 65)} {
		err := events.Subjects{Prefix: p}.Validate()
		require.ErrorIs(t, err, events.ErrInvalidID, "prefix %q", p)
		var ie *events.IDError
		require.ErrorAs(t, err, &ie)
		assert.Equal(t, "subject prefix token", ie.Kind)
	}
	require.NoError(t, events.Subjects{Prefix: strings.Repeat("p", 64)}.Validate())
}

func TestParseRejectsWhatIsNotAThreadSubject(t *testing.T) {
	var s events.Subjects
	for _, subj := range []string{"", "conv", "conv.", "conv.acme", "conv.acme.", "conv..t", "conv.acme.t.delta",
		"conv.acme.t.x.y", "other.acme.t", "convx.acme.t", "conv.a*.t", "conv.acme.>", "CONV.acme.t"} {
		te, th, err := s.Parse(subj)
		require.Error(t, err, "%q", subj)
		assert.ErrorIs(t, err, events.ErrInvalidID, "%q", subj)
		assert.Empty(t, te+th)
	}
}

func FuzzSubjectsParse(f *testing.F) {
	for _, seed := range []struct{ prefix, subject string }{
		{"", "conv.acme.t1"},
		{"", "conv.default.0195a3c4-5e2b-7cc1-9a40-3b1d2e4f5a6b"},
		{"", "conv.acme.t1.delta"},
		{"a.b", "a.b.c.d"},
		{"", "conv..x"},
		{"", "conv.a.b.c"},
		{"", "conv.é.t"},
		{"x", "x.\xff.t"},
		{"", ""},
	} {
		f.Add(seed.prefix, seed.subject)
	}
	f.Fuzz(func(t *testing.T, prefix, subject string) {
		s := events.Subjects{Prefix: prefix}
		tenant, thread, err := s.Parse(subject)
		if err != nil {
			require.True(t, errors.Is(err, events.ErrInvalidID), "%v", err)
			require.Empty(t, tenant)
			require.Empty(t, thread)
			return
		}
		// A parsed subject is exactly the one Thread builds back.
		require.NoError(t, events.ValidateTenant(tenant))
		require.NoError(t, events.ValidateThreadID(thread))
		again, err := s.Thread(tenant, thread)
		require.NoError(t, err)
		require.Equal(t, subject, again)
		if s.Validate() == nil {
			require.True(t, subjectMatches(s.StreamSubjects(), subject))
			filter, err := s.Tenant(tenant)
			require.NoError(t, err)
			require.True(t, subjectMatches(filter, subject))
		}
	})
}

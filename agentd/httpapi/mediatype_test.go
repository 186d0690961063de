package httpapi_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// doRaw sends body with exactly the headers hdr (and the API key): unlike
// env.do it sets no Content-Type of its own.
func (e *env) doRaw(method, path, body string, hdr ...string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+keyAcme)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return e.send(req, path)
}

// A request body is read as JSON only when it says it is: Content-Type
// application/json, with no parameter but charset=utf-8 (names and values
// in any case), and no content coding but identity. Anything else is a 415
// naming the header, and nothing is stored. Before, a missing
// Content-Type, any +json type, any charset and any Content-Encoding were
// read as plain JSON and stored (201).
func TestHTTPAppendBodyMediaType(t *testing.T) {
	e := newEnv(t)
	id := e.createThread(map[string]any{"replies": "off"})
	path := "/v1/threads/" + id + "/events"
	body := `{"events":[{"type":"message.user","payload":{"content":"hello"}}]}`
	refused := []struct {
		name   string
		hdr    []string
		header string // the header the problem names
	}{
		{"no Content-Type", nil, "Content-Type"},
		{"an empty Content-Type", []string{"Content-Type", ""}, "Content-Type"},
		{"a JSON Patch document", []string{"Content-Type", "application/json-patch+json"}, "Content-Type"},
		{"a merge patch document", []string{"Content-Type", "application/merge-patch+json"}, "Content-Type"},
		{"plain text", []string{"Content-Type", "text/plain"}, "Content-Type"},
		{"a Latin-1 body", []string{"Content-Type", "application/json; charset=latin1"}, "Content-Type"},
		{"a UTF-16 body", []string{"Content-Type", "application/json; charset=utf-16"}, "Content-Type"},
		{"an empty charset", []string{"Content-Type", `application/json; charset=""`}, "Content-Type"},
		{"a parameter other than charset", []string{"Content-Type", "application/json; charset=utf-8; profile=x"}, "Content-Type"},
		{"a Content-Type that does not parse", []string{"Content-Type", "application/json; charset"}, "Content-Type"},
		{"a gzip coding over a plain body", []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, "Content-Encoding"},
		{"a br coding", []string{"Content-Type", "application/json", "Content-Encoding", "br"}, "Content-Encoding"},
		{"identity then gzip", []string{"Content-Type", "application/json", "Content-Encoding", "identity, gzip"}, "Content-Encoding"},
	}
	for _, tc := range refused {
		t.Run(tc.name+" is unsupported", func(t *testing.T) {
			before := e.streamMsgs()
			r := e.doRaw("POST", path, body, tc.hdr...)
			require.Equal(t, http.StatusUnsupportedMediaType, r.status, "%s", r.body)
			p := r.problem(t)
			require.Equal(t, "unsupported-media-type", p["code"])
			require.Equal(t, tc.header, p["field"])
			require.Contains(t, p["detail"], tc.header)
			if tc.header == "Content-Encoding" {
				require.Equal(t, "identity", r.header.Get("Accept-Encoding"), "RFC 9110, 15.5.16")
			}
			require.Equal(t, before, e.streamMsgs(), "nothing stored")
		})
	}
	accepted := []struct {
		name string
		hdr  []string
	}{
		{"application/json", []string{"Content-Type", "application/json"}},
		{"charset=utf-8", []string{"Content-Type", "application/json; charset=utf-8"}},
		{"upper case names and values", []string{"Content-Type", "APPLICATION/JSON;CHARSET=UTF-8"}},
		{"a quoted charset", []string{"Content-Type", `Application/Json; charset="utf-8"`}},
		{"the identity coding", []string{"Content-Type", "application/json", "Content-Encoding", "identity"}},
	}
	for _, tc := range accepted {
		t.Run(tc.name+" is stored", func(t *testing.T) {
			before := e.streamMsgs()
			r := e.doRaw("POST", path, body, tc.hdr...)
			require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
			require.Equal(t, before+1, e.streamMsgs())
		})
	}
}

// Every route that reads a JSON body applies the same rule, the
// OpenAI-compatible one included; a request without a body needs no
// Content-Type where the route takes none.
func TestHTTPBodyMediaTypeOnEveryJSONRoute(t *testing.T) {
	e := newEnv(t)
	th := "/v1/threads/" + e.createThread(map[string]any{"replies": "off"})
	// The erasure is refused; were it not, the body-less cases would find
	// no thread.
	erased := "/v1/threads/" + e.createThread(map[string]any{"replies": "off"})
	chat := `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`
	latin1 := []string{"Content-Type", "application/json; charset=latin1"}
	gzip := []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}
	cases := []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
	}{
		{"a create without Content-Type is unsupported", "POST", "/v1/threads", `{"title":"t"}`, nil, 415},
		{"a create in Latin-1 is unsupported", "POST", "/v1/threads", `{"title":"t"}`, latin1, 415},
		{"a PUT create with a gzip coding is unsupported", "PUT", "/v1/threads/put-gz", `{"title":"t"}`, gzip, 415},
		{"a fork without Content-Type is unsupported", "POST", th + "/fork", `{}`, nil, 415},
		{"a redaction as a merge patch is unsupported", "POST", th + "/redact", `{"seq":1}`, []string{"Content-Type", "application/merge-patch+json"}, 415},
		{"an erasure without Content-Type is unsupported", "POST", erased + "/erase", `{"confirm":true}`, nil, 415},
		{"a state value without Content-Type is unsupported", "PUT", th + "/state/k", `{"value":1}`, nil, 415},
		{"a chat completion without Content-Type is unsupported", "POST", "/v1/chat/completions", chat, nil, 415},
		{"a chat completion in UTF-16 is unsupported", "POST", "/v1/chat/completions", chat, []string{"Content-Type", "application/json; charset=utf-16"}, 415},
		{"a chat completion with a gzip coding is unsupported", "POST", "/v1/chat/completions", chat, gzip, 415},
		{"a create without a body needs no Content-Type", "POST", "/v1/threads", "", nil, 201},
		{"a PUT create without a body needs no Content-Type", "PUT", "/v1/threads/put-empty", "", nil, 201},
		{"an undelete without a body needs no Content-Type", "POST", th + "/undelete", "", nil, 200},
		{"a delete without a body needs no Content-Type", "DELETE", th, "", nil, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.streamMsgs()
			r := e.doRaw(tc.method, tc.path, tc.body, tc.hdr...)
			require.Equal(t, tc.status, r.status, "%s", r.body)
			if tc.status != http.StatusUnsupportedMediaType {
				return
			}
			p := r.problem(t)
			require.Equal(t, "unsupported-media-type", p["code"])
			require.Contains(t, []any{"Content-Type", "Content-Encoding"}, p["field"])
			require.Equal(t, before, e.streamMsgs(), "nothing stored")
			if strings.HasPrefix(tc.path, "/v1/chat/") {
				require.Contains(t, string(r.body), `"error"`, "OpenAI's error object")
			}
		})
	}
}

package webui_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/agentd/webui"
)

func serve(t *testing.T, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	webui.Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

func TestHandlerServesThePageAndAssets(t *testing.T) {
	cases := []struct {
		name, path, contentType, contains string
	}{
		{"the root is the page", "/", "text/html; charset=utf-8", `<main id="main"`},
		{"index.html is the same page", "/index.html", "text/html; charset=utf-8", `<main id="main"`},
		{"the style sheet is CSS", "/app.css", "text/css; charset=utf-8", "--accent"},
		{"the entry module is JavaScript", "/js/main.js", "text/javascript; charset=utf-8", "import"},
		{"the SSE reader is JavaScript", "/js/sse.js", "text/javascript; charset=utf-8", "Last-Event-ID"},
		{"the icon is SVG", "/favicon.svg", "image/svg+xml", "<svg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := serve(t, http.MethodGet, c.path, nil)
			require.Equal(t, http.StatusOK, res.StatusCode)
			h := res.Header
			assert.Equal(t, c.contentType, h.Get("Content-Type"))
			assert.Equal(t, "no-cache", h.Get("Cache-Control"), "browsers revalidate, so an upgraded agentd is seen at once")
			assert.Regexp(t, `^"[0-9a-f]{24}"$`, h.Get("ETag"))
			assert.Equal(t, webui.ContentSecurityPolicy, h.Get("Content-Security-Policy"))
			assert.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
			assert.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
			assert.Contains(t, body(t, res), c.contains)
		})
	}
}

func TestHandlerCaching(t *testing.T) {
	first := serve(t, http.MethodGet, "/js/thread.js", nil)
	tag := first.Header.Get("ETag")
	require.NotEmpty(t, tag)

	t.Run("a matching If-None-Match answers 304 without a body", func(t *testing.T) {
		res := serve(t, http.MethodGet, "/js/thread.js", http.Header{"If-None-Match": {tag}})
		require.Equal(t, http.StatusNotModified, res.StatusCode)
		require.Empty(t, body(t, res))
		require.Equal(t, tag, res.Header.Get("ETag"))
	})
	t.Run("a weak or listed tag matches too", func(t *testing.T) {
		res := serve(t, http.MethodGet, "/js/thread.js", http.Header{"If-None-Match": {`"nope", W/` + tag}})
		require.Equal(t, http.StatusNotModified, res.StatusCode)
	})
	t.Run("another tag gets the file", func(t *testing.T) {
		res := serve(t, http.MethodGet, "/js/thread.js", http.Header{"If-None-Match": {`"0123"`}})
		require.Equal(t, http.StatusOK, res.StatusCode)
	})
	t.Run("each file has its own tag", func(t *testing.T) {
		require.NotEqual(t, tag, serve(t, http.MethodGet, "/js/list.js", nil).Header.Get("ETag"))
	})
}

func TestHandlerCompresses(t *testing.T) {
	plain := body(t, serve(t, http.MethodGet, "/js/thread.js", nil))
	res := serve(t, http.MethodGet, "/js/thread.js", http.Header{"Accept-Encoding": {"br, gzip;q=0.8"}})
	require.Equal(t, "gzip", res.Header.Get("Content-Encoding"))
	require.Equal(t, "Accept-Encoding", res.Header.Get("Vary"))
	zr, err := gzip.NewReader(res.Body)
	require.NoError(t, err)
	unzipped, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, plain, string(unzipped))

	refused := serve(t, http.MethodGet, "/js/thread.js", http.Header{"Accept-Encoding": {"gzip;q=0"}})
	require.Empty(t, refused.Header.Get("Content-Encoding"), "q=0 refuses gzip")
}

func TestHandlerRefusesOtherRequests(t *testing.T) {
	cases := []struct {
		name, method, path string
		status             int
	}{
		{"an unknown path is not found", http.MethodGet, "/nope", http.StatusNotFound},
		{"a file outside static/ is not found", http.MethodGet, "/js/../webui.go", http.StatusNotFound},
		{"a directory is not found", http.MethodGet, "/js/", http.StatusNotFound},
		{"POST is not allowed", http.MethodPost, "/", http.StatusMethodNotAllowed},
		{"DELETE is not allowed", http.MethodDelete, "/app.css", http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := serve(t, c.method, c.path, nil)
			require.Equal(t, c.status, res.StatusCode)
			require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain"))
			if c.status == http.StatusMethodNotAllowed {
				require.Equal(t, "GET, HEAD", res.Header.Get("Allow"))
			}
		})
	}
	t.Run("HEAD has the headers and no body", func(t *testing.T) {
		get := serve(t, http.MethodGet, "/", nil)
		head := serve(t, http.MethodHead, "/", nil)
		require.Equal(t, http.StatusOK, head.StatusCode)
		require.Equal(t, get.Header.Get("Content-Length"), head.Header.Get("Content-Length"))
		require.Empty(t, body(t, head))
	})
}

// Every file under static/ is served byte for byte, every reference in the
// page and every module import resolves to one of them, and nothing points
// at the network (the page works offline and under its CSP).
func TestAssetsAreSelfContained(t *testing.T) {
	files := map[string][]byte{}
	require.NoError(t, fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path.Join("static", p))
		files["/"+p] = b
		return err
	}))
	for p, want := range files {
		res := serve(t, http.MethodGet, p, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, p)
		require.Equal(t, string(want), body(t, res), p)
	}

	index := string(files["/index.html"])
	refs := regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(index, -1)
	require.NotEmpty(t, refs)
	for _, m := range refs {
		ref := m[1]
		if ref == "/openapi.json" {
			continue // the API's, mounted beside the page
		}
		_, ok := files["/"+strings.TrimPrefix(ref, "/")]
		assert.True(t, ok, "index.html refers to %s, which is not in static/", ref)
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(index, -1) {
		require.Contains(t, tag, "src=", "no inline scripts: the CSP allows only script files")
	}
	require.NotContains(t, index, "style=", "no inline styles: the CSP allows only style sheets")

	importRe := regexp.MustCompile(`(?m)^import .* from "(\./[^"]+)";$`)
	urlRe := regexp.MustCompile(`https?://[^\s"'<>)]+`)
	for p, b := range files {
		if strings.HasSuffix(p, ".js") {
			for _, m := range importRe.FindAllStringSubmatch(string(b), -1) {
				target := path.Join(path.Dir(p), m[1])
				_, ok := files[target]
				assert.True(t, ok, "%s imports %s, which is not in static/", p, m[1])
			}
		}
		for _, u := range urlRe.FindAllString(string(b), -1) {
			assert.Equal(t, "http://www.w3.org/2000/svg", u, "%s refers to %s: the page must not load anything from the network", p, u)
		}
	}
}

// Mounted as agentd mounts it, the page gets "/" and the API keeps its
// paths, including its problem+json 404 under /v1/.
func TestMountBesideTheAPI(t *testing.T) {
	s := newStack(t, stackConfig{})
	get := func(p string) (*http.Response, string) {
		res, err := http.Get(s.srv.URL + p)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res, string(b)
	}
	res, b := get("/")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"))
	require.Contains(t, b, `<script type="module" src="js/main.js">`)

	res, b = get("/v1/nope")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	var p map[string]any
	require.NoError(t, json.Unmarshal([]byte(b), &p))
	require.Equal(t, "no-route", p["code"])

	res, b = get("/openapi.json")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.True(t, json.Valid([]byte(b)))

	res, _ = get("/healthz")
	require.Equal(t, http.StatusOK, res.StatusCode)

	res, b = get("/v1/threads")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, b, `"threads"`)

	res, _ = get("/nope")
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.True(t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain"))
}

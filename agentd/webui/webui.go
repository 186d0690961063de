package webui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

//go:embed static
var static embed.FS

// ContentSecurityPolicy is sent with every response of [Handler]: the page
// loads scripts, styles and data only from its own origin and cannot be
// framed.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// contentTypes maps the extensions of the embedded files to their media
// types. The table is explicit so that the answer does not depend on the
// host's mime database; a file with another extension is not served.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".json": "application/json",
}

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	gzipped     []byte // nil when compression does not pay
	contentType string
	etag        string
}

var (
	loadOnce sync.Once
	assets   map[string]*asset
	loadErr  error
)

// load reads and prepares every embedded file once.
func load() (map[string]*asset, error) {
	loadOnce.Do(func() {
		assets = map[string]*asset{}
		loadErr = fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			ct, ok := contentTypes[path.Ext(p)]
			if !ok {
				return fmt.Errorf("webui: %s: no content type for extension %q", p, path.Ext(p))
			}
			b, err := static.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			a := &asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
			if ct != "image/png" && len(b) > 512 {
				var buf bytes.Buffer
				zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
				_, _ = zw.Write(b)
				_ = zw.Close()
				if buf.Len() < len(b) {
					a.gzipped = buf.Bytes()
				}
			}
			assets["/"+strings.TrimPrefix(p, "static/")] = a
			return nil
		})
	})
	return assets, loadErr
}

// Handler returns the handler of the page: GET and HEAD of "/" (the page,
// index.html) and of the files under static/, with the content type of the
// file's extension, a strong ETag, Cache-Control: no-cache (browsers
// revalidate and get 304 Not Modified), gzip when accepted, and the
// security headers (see [ContentSecurityPolicy]). Other paths answer 404
// and other methods 405, both as plain text.
//
// Mount it at "/" beside the API (see the package doc). It is safe for
// concurrent use.
func Handler() http.Handler {
	as, err := load()
	if err != nil {
		// The embedded files are fixed at build time; a test loads them.
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/" {
			p = "/index.html"
		}
		a, ok := as[p]
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if !ok {
			http.Error(w, "404 page not found: the thread viewer is at / and the API under /v1/", http.StatusNotFound)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed: use GET", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if a.gzipped != nil {
			h.Add("Vary", "Accept-Encoding")
		}
		if etagMatches(r.Header.Get("If-None-Match"), a.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		body := a.body
		if a.gzipped != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			body = a.gzipped
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
	})
}

// etagMatches reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 asks for If-None-Match).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header accepts gzip.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

package webui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// corsPage is a page of another origin that calls the API as a browser
// app would: a list of threads with its API key (a preflighted request,
// Authorization being a non-safelisted header), then reads an exposed
// response header of a create. It writes the outcome into
// window.result.
const corsPage = `<!doctype html><html><head><title>app</title></head><body><script>
window.result = "pending";
(async () => {
  try {
    const h = {"Authorization": "Bearer %[2]s", "Content-Type": "application/json"};
    const list = await fetch("%[1]s/v1/threads", {headers: h});
    const created = await fetch("%[1]s/v1/threads", {method: "POST", headers: h, body: JSON.stringify({title: "from another origin"})});
    const body = await created.json();
    window.result = "ok " + list.status + " " + created.status + " etag=" + (created.headers.get("ETag") || "") + " id=" + body.thread;
  } catch (e) {
    window.result = "blocked " + e.name;
  }
})();
</script></body></html>`

// A browser page on another origin reaches the API when its origin is in
// --http-cors-origin (preflight answered, the exposed ETag readable), and
// is refused by the browser when it is not (no CORS headers): headless
// Chromium, the real API.
func TestBrowserOnAnotherOriginNeedsCORS(t *testing.T) {
	chromiumPath(t)
	const key = "sk-cors-0123456789"
	pages := func(api string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, corsPage, api, key)
		}))
		t.Cleanup(s.Close)
		return s
	}
	// The allowed page's origin must be known before the API starts: a
	// listener first, then the page server on it.
	allowed := httptest.NewUnstartedServer(nil)
	origin := "http://" + allowed.Listener.Addr().String()
	st := newStack(t, stackConfig{keys: map[string]string{key: "acme"}, corsOrigins: []string{origin}})
	allowed.Config.Handler = pages(st.srv.URL).Config.Handler
	allowed.Start()
	t.Cleanup(allowed.Close)
	other := pages(st.srv.URL)

	b := newBrowser(t, allowed.URL)
	b.navigate("/")
	b.waitFor("the allowed page's requests to finish", `window.result !== "pending"`)
	got := eval[string](b, "window.result")
	require.Regexp(t, `^ok 200 201 etag="\d+" id=\S+$`, got, "an allowed origin calls the API and reads the exposed ETag")

	b2 := newBrowser(t, other.URL)
	b2.navigate("/")
	b2.waitFor("the other page's requests to finish", `window.result !== "pending"`)
	require.Equal(t, "blocked TypeError", eval[string](b2, "window.result"), "an origin not listed is refused by the browser")
}

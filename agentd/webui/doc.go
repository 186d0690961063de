// Package webui is convlog's thread viewer: a single page, served by agentd
// at "/", that shows a tenant's threads, a thread as a live chat transcript
// and, in audit mode, the thread's raw event log with time travel, forking
// and export. It is plain HTML, CSS and JavaScript (ES modules, no
// framework, no build step), embedded in the binary with go:embed; it loads
// nothing from the network but its own origin.
//
// # Mounting
//
// [Handler] serves the page and its assets and answers 404 for any other
// path. It does not serve the API: mount it beside the HTTP API so that
// the API keeps its own paths (and its problem+json 404s under /v1/):
//
//	mux.Handle("/v1/", api.Handler())
//	mux.Handle("/openapi.json", api.Handler())
//	mux.Handle("/healthz", api.Handler())
//	mux.Handle("/", webui.Handler())
//
// # What the page uses
//
// The page is a client of the public HTTP API only (agentd/httpapi):
//
//	GET  /v1/models                         agents for "new thread"
//	GET  /v1/threads?agent&owner&metadata.k  the list, newest first, paged by next_cursor
//	POST /v1/threads                        create
//	GET  /v1/threads/{id}?consistent=true   the transcript (read your writes)
//	GET  /v1/threads/{id}?at_seq=N          the thread as of sequence N (time travel)
//	GET  /v1/threads/{id}/events?after&limit the event log (audit mode), in pages
//	GET  /v1/threads/{id}/events            SSE with deltas=true: live events and tokens
//	POST /v1/threads/{id}/events            the composer (a message.user event)
//	POST /v1/threads/{id}/fork              fork from a sequence
//	GET  /v1/threads/{id}/export            export (events or openai JSON lines)
//
// Server-sent events are read with fetch() and a stream reader, not
// EventSource, so that one code path works with and without an API key
// (EventSource cannot send an Authorization header). The page parses the
// stream itself (static/js/sse.js), remembers the id of the last event, and
// on a disconnect reconnects with Last-Event-ID; it shows "resumed after
// disconnect" with that id. The API guarantees no gap and no duplicate.
//
// With auth on, a 401 opens a dialog asking for an API key, which is kept
// in sessionStorage (this browser tab only) and sent as a bearer token.
//
// # Caching and security headers
//
// Every response carries a strong ETag (a hash of the content) and
// Cache-Control: no-cache, so browsers revalidate and get 304 until agentd
// is upgraded; the assets are small and compressed with gzip when the
// browser accepts it. A Content-Security-Policy allows scripts, styles and
// connections only from the page's own origin, and the page builds its DOM
// with textContent, never with HTML from the API. Message text is markdown:
// static/js/markdown.js renders a small subset (emphasis, code, lists,
// http(s) links) into elements it creates; any HTML in it shows as text.
//
// # Titles
//
// A thread without a title (an imported transcript has none) is named by
// its first user message on its page and by its metadata's source_id (or
// source) in the list, which has no messages; ids are shortened, the full
// id in the tooltip.
//
// # Routes of the page
//
// The page routes on the URL fragment, so the server only serves "/":
//
//	#/                      the thread list (filters in the fragment's query)
//	#/t/{id}                a thread
//	#/t/{id}?audit=1&at=N   audit mode, as of sequence N
package webui

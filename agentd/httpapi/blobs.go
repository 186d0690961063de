package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/convlog/convlog/client"
)

// threadAndBlob returns the thread id and the blob name of the path.
func threadAndBlob(r *http.Request) (string, string, *Problem) {
	id, p := threadID(r)
	if p != nil {
		return "", "", p
	}
	name := r.PathValue("name")
	if err := client.ValidateBlobName(name); err != nil {
		return "", "", badRequest("bad-blob-name", err.Error()).field("name").thread(id)
	}
	return id, name, nil
}

// blobProblem maps the blob errors of client; others go to problemFor.
func blobProblem(err error, id, name string, limit int64) error {
	var tooLarge *client.BlobTooLargeError
	switch {
	case errors.As(err, &tooLarge):
		return tooLargeBody(limit)
	case errors.Is(err, client.ErrBlobNotFound):
		return newProblem(http.StatusNotFound, "blob-not-found", "Blob not found",
			fmt.Sprintf("thread %s has no blob %q in its current lifetime", id, name)).field("name").thread(id)
	}
	return err
}

// putBlob is PUT /v1/threads/{id}/blobs/{name}: the body (any bytes, up
// to Config.MaxBlobBytes; 413 beyond) becomes the blob, replacing one of
// that name; Content-Type is kept. 200 with the BlobInfo. A body sent
// with a content coding is a 415 (codingProblem), as on every route: the
// bytes are stored as sent, and a read could not say they are coded.
func (s *Server) putBlob(w http.ResponseWriter, r *http.Request) error {
	id, name, p := threadAndBlob(r)
	if p != nil {
		return p
	}
	if p := codingProblem(r); p != nil {
		return p
	}
	// The route's MaxBytesReader stops the body at the limit; PutBlob's
	// own limit tells an over-long body from one that ends at the limit.
	info, err := s.c.PutBlob(r.Context(), tenantOf(r.Context()), id, name, r.Header.Get("Content-Type"), r.Body, s.cfg.MaxBlobBytes)
	if err != nil {
		return blobProblem(err, id, name, s.cfg.MaxBlobBytes)
	}
	w.Header().Set("ETag", `"`+info.Digest+`"`)
	return writeJSON(w, http.StatusOK, info)
}

// getBlob is GET /v1/threads/{id}/blobs/{name}: the blob's bytes with its
// Content-Type (application/octet-stream when none was given),
// Content-Length, ETag (the quoted digest, "SHA-256=...") and
// X-Convlog-Blob-Lifetime.
func (s *Server) getBlob(w http.ResponseWriter, r *http.Request) error {
	id, name, p := threadAndBlob(r)
	if p != nil {
		return p
	}
	info, body, err := s.c.GetBlob(r.Context(), tenantOf(r.Context()), id, name)
	if err != nil {
		return blobProblem(err, id, name, s.cfg.MaxBlobBytes)
	}
	defer body.Close()
	tag := `"` + info.Digest + `"`
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	ct := info.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatUint(info.Size, 10))
	h.Set("ETag", tag)
	h.Set("X-Convlog-Blob-Lifetime", strconv.Itoa(info.Lifetime))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, body); err != nil {
		// Headers are out: the short body (Content-Length) tells the
		// client; a digest mismatch is logged.
		s.log.Warn("blob read failed", "thread", id, "blob", name, "err", err)
	}
	return nil
}

// deleteBlob is DELETE /v1/threads/{id}/blobs/{name}: 204, or 404
// blob-not-found.
func (s *Server) deleteBlob(w http.ResponseWriter, r *http.Request) error {
	id, name, p := threadAndBlob(r)
	if p != nil {
		return p
	}
	if err := s.c.DeleteBlob(r.Context(), tenantOf(r.Context()), id, name); err != nil {
		return blobProblem(err, id, name, s.cfg.MaxBlobBytes)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

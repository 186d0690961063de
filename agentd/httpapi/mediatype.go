package httpapi

import (
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// unsupportedMedia is a 415 (RFC 9110, 15.5.16) naming the request header
// at fault.
func unsupportedMedia(header, detail string) *Problem {
	return newProblem(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type", detail).field(header)
}

// codingProblem refuses a request body sent with a content coding: the API
// reads bodies as they are sent, so any Content-Encoding but identity is a
// 415 that lists the coding it takes in Accept-Encoding (RFC 9110, 12.5.3).
func codingProblem(r *http.Request) *Problem {
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return unsupportedMedia("Content-Encoding",
					fmt.Sprintf("Content-Encoding %q: request bodies are read as sent; send them without a content coding", c)).
					header("Accept-Encoding", "identity")
			}
		}
	}
	return nil
}

// mediaTypeProblem checks ct, a request's Content-Type: application/json,
// with no parameter but charset=utf-8 (JSON exchanged between systems is
// UTF-8: RFC 8259, 8.1). Type, parameter names and the charset are matched
// in any case. Another type, a "+json" type included (a JSON Patch or
// merge patch document is not the resource this API takes), any other
// parameter or charset, and a value that does not parse are a 415.
func mediaTypeProblem(ct string) *Problem {
	const want = "the body must be application/json, with no parameter but charset=utf-8"
	if strings.TrimSpace(ct) == "" {
		return unsupportedMedia("Content-Type", "the request has no Content-Type; "+want)
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return unsupportedMedia("Content-Type", fmt.Sprintf("Content-Type %q does not parse as a media type (%v); %s", ct, err, want))
	}
	if mt != "application/json" {
		return unsupportedMedia("Content-Type", fmt.Sprintf("Content-Type %q: %s", mt, want))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return unsupportedMedia("Content-Type", fmt.Sprintf("Content-Type charset %q: %s", cs, want))
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if k != "charset" {
			return unsupportedMedia("Content-Type", fmt.Sprintf("Content-Type parameter %q: %s", k, want))
		}
	}
	return nil
}

// declaresJSON reports whether r declares a body decodeJSON reads: no
// content coding and a Content-Type mediaTypeProblem accepts. Checks that
// read the body before decodeJSON skip other bodies, which decodeJSON
// refuses.
func declaresJSON(r *http.Request) bool {
	ct := r.Header.Values("Content-Type")
	return codingProblem(r) == nil && len(ct) > 0 && mediaTypeProblem(strings.Join(ct, ", ")) == nil
}

package httpapi

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/convlog/convlog/events"
)

// Auth binds bearer API keys to tenants (docs/design.md invariant 9). Keys are
// held only as SHA-256 hashes: a leaked configuration or heap dump does not
// reveal them. A key never reads or writes another tenant's threads; such
// threads answer 404, exactly like missing ones.
//
// With Disabled set, every request is tenant "default" and no key is
// asked for: the embedded demo on loopback. (agentd serve refuses to bind a
// non-loopback address with auth disabled unless forced; see
// [Server.AuthEnabled].)
type Auth struct {
	// Disabled turns authentication off.
	Disabled bool
	// Keys maps the hex SHA-256 of each API key ([HashKey]) to its tenant.
	Keys map[string]string
}

// Enabled reports whether requests need an API key.
func (a Auth) Enabled() bool { return !a.Disabled }

// Validate checks that auth is either disabled or has keys, and that each
// key hash and tenant is well formed.
func (a Auth) Validate() error {
	if a.Disabled {
		return nil
	}
	if len(a.Keys) == 0 {
		return errors.New("httpapi: auth is enabled but no API keys are configured (load keys with LoadKeys or KeysFromEnv, or set Auth.Disabled)")
	}
	var errs []error
	for h, tenant := range a.Keys {
		if !isHexHash(h) {
			errs = append(errs, fmt.Errorf("httpapi: key hash %.12q... is not 64 lower-case hex digits (use HashKey)", h))
		}
		if err := events.ValidateTenant(tenant); err != nil {
			errs = append(errs, fmt.Errorf("httpapi: key for tenant %q: %w", tenant, err))
		}
	}
	return errors.Join(errs...)
}

// HashKey returns the hex SHA-256 of an API key, the form [Auth.Keys] and
// key files hold.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// ParseKeys reads API keys, one per line, as "tenant:key" or, to keep keys
// hashed at rest, "tenant:sha256:<64 hex digits>" (see [HashKey]). Blank
// lines and lines starting with '#' are skipped; entries may also be
// separated by commas (for env vars). It returns the hash-to-tenant map and
// an error naming every bad line (by number, never echoing the key).
func ParseKeys(text string) (map[string]string, error) {
	keys := map[string]string{}
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		for _, entry := range strings.Split(sc.Text(), ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" || strings.HasPrefix(entry, "#") {
				continue
			}
			tenant, key, ok := strings.Cut(entry, ":")
			tenant = strings.TrimSpace(tenant)
			if !ok || key == "" {
				errs = append(errs, fmt.Errorf("httpapi: keys line %d: want tenant:key or tenant:sha256:<hex>", line))
				continue
			}
			if err := events.ValidateTenant(tenant); err != nil {
				errs = append(errs, fmt.Errorf("httpapi: keys line %d: %w", line, err))
				continue
			}
			h := HashKey(key)
			if rest, ok := strings.CutPrefix(key, "sha256:"); ok {
				if !isHexHash(strings.ToLower(rest)) {
					errs = append(errs, fmt.Errorf("httpapi: keys line %d: sha256: must be followed by 64 hex digits", line))
					continue
				}
				h = strings.ToLower(rest)
			}
			if t, dup := keys[h]; dup && t != tenant {
				errs = append(errs, fmt.Errorf("httpapi: keys line %d: the same key is bound to tenants %q and %q", line, t, tenant))
				continue
			}
			keys[h] = tenant
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("httpapi: keys: %w", err))
	}
	if len(errs) == 0 && len(keys) == 0 {
		errs = append(errs, errors.New("httpapi: no API keys found"))
	}
	return keys, errors.Join(errs...)
}

// LoadKeys reads API keys from a file in the [ParseKeys] format. The file
// should be readable by the service only.
func LoadKeys(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("httpapi: keys file: %w", err)
	}
	keys, err := ParseKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// KeysFromEnv reads API keys from the environment variable name, in the
// [ParseKeys] format (entries separated by commas or newlines). ok is false
// when the variable is unset or empty.
func KeysFromEnv(name string) (keys map[string]string, ok bool, err error) {
	v := os.Getenv(name)
	if strings.TrimSpace(v) == "" {
		return nil, false, nil
	}
	keys, err = ParseKeys(v)
	if err != nil {
		return nil, true, fmt.Errorf("$%s: %w", name, err)
	}
	return keys, true, nil
}

type tenantKey struct{}

// tenantOf returns the tenant of an authenticated request.
func tenantOf(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok {
		return t
	}
	return events.DefaultTenant
}

// authenticate returns the request's tenant, or a 401 problem.
func (s *Server) authenticate(r *http.Request) (string, *Problem) {
	if s.cfg.Auth.Disabled {
		return events.DefaultTenant, nil
	}
	h := r.Header.Get("Authorization")
	scheme, key, ok := strings.Cut(h, " ")
	if h == "" {
		p := newProblem(http.StatusUnauthorized, "unauthorized", "Missing API key",
			"send the API key as: Authorization: Bearer <key>")
		p.header("WWW-Authenticate", `Bearer realm="convlog"`)
		return "", p
	}
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || key == "" {
		p := newProblem(http.StatusUnauthorized, "unauthorized", "Malformed Authorization header",
			"the Authorization header must be: Bearer <key>")
		p.header("WWW-Authenticate", `Bearer realm="convlog", error="invalid_request"`)
		return "", p
	}
	tenant, found := s.cfg.Auth.Keys[HashKey(key)]
	if !found {
		p := newProblem(http.StatusUnauthorized, "unauthorized", "Invalid API key", "the API key is not known")
		p.header("WWW-Authenticate", `Bearer realm="convlog", error="invalid_token"`)
		return "", p
	}
	return tenant, nil
}

package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/convlog/convlog/events"
)

// User is one tenant-scoped NATS user: an NKey whose holder may act for
// Tenant with the permissions [For] gives. Its registry entry is this JSON
// at "<tenant>.<public key>" of the tenant bucket
// (provision.Config.TenantBucket); the seed is never stored.
type User struct {
	Tenant    string    `json:"tenant"`
	PublicKey string    `json:"public_key"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Registry keeps the tenant-scoped users in a KV bucket. agentd serve
// watches it and gives its embedded NATS server the tenant accounts
// ([AccountsConf]) of the users it lists; for an external NATS, the
// operator puts the accounts block `agentd tenant accounts` prints in the
// servers' configuration. Safe for concurrent use.
type Registry struct {
	kv jetstream.KeyValue
}

// NewRegistry returns the registry in kv (provision.Resources.Tenants).
func NewRegistry(kv jetstream.KeyValue) *Registry { return &Registry{kv: kv} }

// Create makes a new user of tenant (name is a free label) and returns it
// with its NKey seed, which only the caller gets: store it like a
// password (0600). Errors: *events.IDError for a bad tenant id, KV errors.
func (r *Registry) Create(ctx context.Context, tenant, name string) (User, []byte, error) {
	if err := events.ValidateTenant(tenant); err != nil {
		return User{}, nil, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return User{}, nil, fmt.Errorf("tenancy: new NKey: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return User{}, nil, err
	}
	seed, err := kp.Seed()
	if err != nil {
		return User{}, nil, err
	}
	u := User{Tenant: tenant, PublicKey: pub, Name: name, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	b, err := json.Marshal(u)
	if err != nil {
		return User{}, nil, err
	}
	if _, err := r.kv.Create(ctx, tenant+"."+pub, b); err != nil {
		return User{}, nil, fmt.Errorf("tenancy: register user of %s: %w", tenant, err)
	}
	return u, seed, nil
}

// List returns the users of tenant ("": of every tenant), by tenant and
// creation time.
func (r *Registry) List(ctx context.Context, tenant string) ([]User, error) {
	filter := ">"
	if tenant != "" {
		if err := events.ValidateTenant(tenant); err != nil {
			return nil, err
		}
		filter = tenant + ".*"
	}
	w, err := r.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("tenancy: list users: %w", err)
	}
	defer func() { _ = w.Stop() }()
	users := map[string]User{}
	for e := range w.Updates() {
		if e == nil {
			return sorted(users), nil
		}
		apply(users, e)
	}
	return nil, fmt.Errorf("tenancy: list users: %w", ctx.Err())
}

// Revoke removes tenant's user publicKey ("": every user of tenant) and
// returns the users removed; a server applying the registry closes their
// connections. Removing no user is not an error.
func (r *Registry) Revoke(ctx context.Context, tenant, publicKey string) ([]User, error) {
	users, err := r.List(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var out []User
	for _, u := range users {
		if publicKey != "" && u.PublicKey != publicKey {
			continue
		}
		if err := r.kv.Purge(ctx, u.Tenant+"."+u.PublicKey); err != nil {
			return out, fmt.Errorf("tenancy: revoke %s of %s: %w", u.PublicKey, u.Tenant, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Watch calls apply with every user, at once and after each change of the
// registry, until ctx ends (then it returns ctx's error) or the watch
// fails. apply runs on Watch's goroutine.
func (r *Registry) Watch(ctx context.Context, apply func([]User)) error {
	w, err := r.kv.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("tenancy: watch users: %w", err)
	}
	defer func() { _ = w.Stop() }()
	users := map[string]User{}
	initial := true
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("tenancy: watch of users ended")
			}
			if e == nil {
				initial = false
				apply(sorted(users))
				continue
			}
			applyEntry(users, e)
			if !initial {
				apply(sorted(users))
			}
		}
	}
}

// apply adds a listed entry to users (entries that do not decode are
// skipped: the registry is written by agentd only).
func apply(users map[string]User, e jetstream.KeyValueEntry) {
	var u User
	if json.Unmarshal(e.Value(), &u) == nil && nkeys.IsValidPublicUserKey(u.PublicKey) && e.Key() == u.Tenant+"."+u.PublicKey {
		users[e.Key()] = u
	}
}

// applyEntry applies a watched change to users.
func applyEntry(users map[string]User, e jetstream.KeyValueEntry) {
	if e.Operation() != jetstream.KeyValuePut {
		delete(users, e.Key())
		return
	}
	apply(users, e)
}

func sorted(users map[string]User) []User {
	return slices.SortedFunc(maps.Values(users), func(a, b User) int {
		if c := strings.Compare(a.Tenant, b.Tenant); c != 0 {
			return c
		}
		return a.CreatedAt.Compare(b.CreatedAt)
	})
}

package operator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/convlog/convlog/internal/datadir"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

// A Pusher sends a signed account JWT to the servers' full resolver
// (tenancy.PushAccountJWT on a connection as the system account user,
// whose creds are d.Path(SysCredsFile)).
type Pusher func(ctx context.Context, accountJWT string) error

// TenantCreate pushes tenant's account for res (made on first use, kept
// in d), registers a user of it named name in reg and writes the user's
// creds (user JWT signed by the tenant-user signing key, and its seed) to
// the new file out with mode 0600. A user whose creds could not be
// written is removed from reg again. Errors are d's, push's, reg's and
// the file system's (out exists).
func TenantCreate(ctx context.Context, d Dir, reg *tenancy.Registry, push Pusher, res provision.Config, tenant, name, out string) (tenancy.User, error) {
	ac, err := d.TenantAccount(tenant, res)
	if err != nil {
		return tenancy.User{}, err
	}
	if err := signAndPush(ctx, d, push, tenant, ac); err != nil {
		return tenancy.User{}, err
	}
	signer, err := d.seed(TenantSigningFile)
	if err != nil {
		return tenancy.User{}, err
	}
	u, seed, err := reg.Create(ctx, tenant, name)
	if err != nil {
		return tenancy.User{}, err
	}
	creds, err := tenancy.TenantUserCreds(ac.Subject, signer, seed, name)
	if err == nil {
		err = datadir.WriteNewSecret(out, append(creds, '\n'))
	}
	if err != nil {
		_, _ = reg.Revoke(ctx, u.Tenant, u.PublicKey)
		return tenancy.User{}, err
	}
	return u, nil
}

// TenantRevoke revokes tenant's registered users (only publicKey's when
// set) in its account, pushes the account, then removes the users from
// reg and returns them: a push that fails leaves reg as it was, so the
// call can be made again. A publicKey that is not a user of tenant is an
// error; so is a tenant with no account in d.
func TenantRevoke(ctx context.Context, d Dir, reg *tenancy.Registry, push Pusher, tenant, publicKey string) ([]tenancy.User, error) {
	users, err := reg.List(ctx, tenant)
	if err != nil {
		return nil, err
	}
	users = slices.DeleteFunc(users, func(u tenancy.User) bool { return publicKey != "" && u.PublicKey != publicKey })
	if publicKey != "" && len(users) == 0 {
		return nil, fmt.Errorf("tenant %s has no user %s", tenant, publicKey)
	}
	ac, err := d.Account(tenant)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, u := range users {
		ac.RevokeAt(u.PublicKey, now)
	}
	if err := signAndPush(ctx, d, push, tenant, ac); err != nil {
		return nil, err
	}
	var gone []tenancy.User
	for _, u := range users {
		g, err := reg.Revoke(ctx, tenant, u.PublicKey)
		gone = append(gone, g...)
		if err != nil {
			return gone, err
		}
	}
	return gone, nil
}

// signAndPush signs ac, keeps it in d as tenant's account and pushes it.
func signAndPush(ctx context.Context, d Dir, push Pusher, tenant string, ac *jwt.AccountClaims) error {
	accountJWT, err := d.SignAccount(tenant, ac)
	if err != nil {
		return err
	}
	return push(ctx, accountJWT)
}

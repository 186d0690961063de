package serve

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/convlog/convlog/agentd/internal/natsconn"
	"github.com/convlog/convlog/client"
	"github.com/convlog/convlog/internal/provision"
	"github.com/convlog/convlog/internal/tenancy"
)

// tenants is the tenant service and, with the embedded server, the
// scoped users it gives the server: the registry's users, read-only while
// their tenant is over its storage quota.
type tenants struct {
	svc *tenancy.Service
	// apply gives the server the users again (nil: no embedded server).
	apply func()
	mu    sync.Mutex
	users []tenancy.User
	over  map[string]bool
}

// setOverQuota records whether tenant is over its storage quota and, on a
// change, gives the server the users again.
func (tn *tenants) setOverQuota(tenant string, over bool) {
	tn.mu.Lock()
	changed := tn.over[tenant] != over
	if over {
		tn.over[tenant] = true
	} else {
		delete(tn.over, tenant)
	}
	tn.mu.Unlock()
	if changed && tn.apply != nil {
		tn.apply()
	}
}

// startTenancy starts the tenant service (package tenancy) on cn and, when
// this process runs the embedded NATS server, keeps the server's tenant
// accounts equal to the registry's users: each tenant an account of its
// own holding its users, with the permissions and imports tenancy.For
// gives it (tenancy.ForReadOnly while the tenant is over its storage
// quota; tenancy.AccountsConf), and keeps the users it applied in the data
// directory dataDir for the next start (natsconn.TenantUsersFile). A registry the
// server refuses is logged and the previous users stay.
func startTenancy(ctx context.Context, cl *client.Client, cn *natsconn.Conn, dataDir string, res provision.Config, logger *slog.Logger,
	start func(string, func(context.Context) error)) (*tenants, error) {
	log := logger.With("component", "tenancy")
	svc, err := tenancy.StartService(ctx, cn.NC, cl.JetStream(), tenancy.ServiceConfig{Resources: res, Logger: log})
	if err != nil {
		return nil, err
	}
	tn := &tenants{svc: svc, over: map[string]bool{}}
	if cn.Server == nil {
		return tn, nil
	}
	res = res.WithDefaults()
	kv, err := cl.JetStream().KeyValue(ctx, res.TenantBucket)
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("KV bucket %s: %w", res.TenantBucket, err)
	}
	var applyMu sync.Mutex // one application at a time, in order
	tn.apply = func() {
		applyMu.Lock()
		defer applyMu.Unlock()
		tn.mu.Lock()
		users, over := slices.Clone(tn.users), maps.Clone(tn.over)
		tn.mu.Unlock()
		conf, err := natsconn.TenantAccounts(users, res, over)
		if err == nil {
			err = cn.Server.SetAccounts(conf)
		}
		if err == nil {
			err = natsconn.SaveTenantUsers(dataDir, max(res.Partitions, 1), users)
		}
		if err != nil {
			log.Error("tenant accounts not applied", "err", err)
			return
		}
		log.Info("tenant accounts applied", "users", len(users), "read_only_tenants", len(over))
	}
	start("tenants", func(ctx context.Context) error {
		return tenancy.NewRegistry(kv).Watch(ctx, func(users []tenancy.User) {
			tn.mu.Lock()
			tn.users = users
			tn.mu.Unlock()
			tn.apply()
		})
	})
	return tn, nil
}

package operator

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/stretchr/testify/require"

	"github.com/convlog/convlog/events"
	"github.com/convlog/convlog/internal/provision"
)

func TestOperatorInitKeepsSecretsPrivateAndAnExistingOperator(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ops")
	res := provision.Config{Stream: "CONVLOG", SubjectPrefix: "conv"}
	created, err := Init(Dir(dir), "test", "/var/jwt", res)
	require.NoError(t, err)
	require.True(t, created)
	secret := map[string]bool{SigningFile: true, TenantSigningFile: true, SysCredsFile: true, ConvlogCredsFile: true,
		JWTFile: false, SysJWTFile: false, ConvlogJWTFile: false, ServerConfFile: false}
	before := map[string][]byte{}
	for name, isSecret := range secret {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		want := fs.FileMode(0o644)
		if isSecret {
			want = 0o600
		}
		require.Equal(t, want, st.Mode().Perm(), name)
		before[name], _ = os.ReadFile(filepath.Join(dir, name))
	}
	od := Dir(dir)
	op, err := jwt.DecodeOperatorClaims(strings.TrimSpace(string(before[JWTFile])))
	require.NoError(t, err)
	sys, err := jwt.DecodeAccountClaims(string(before[SysJWTFile]))
	require.NoError(t, err)
	require.Equal(t, sys.Subject, op.SystemAccount)
	require.True(t, op.DidSign(sys), "the operator's signing key signs its accounts")
	conf := string(before[ServerConfFile])
	require.Contains(t, conf, "system_account: "+sys.Subject)
	require.Contains(t, conf, `dir: "/var/jwt"`)
	other, err := od.ServerConf("/elsewhere")
	require.NoError(t, err)
	require.Equal(t, strings.Replace(conf, "/var/jwt", "/elsewhere", 1), other)

	created, err = Init(Dir(dir), "again", "/var/jwt", res)
	require.NoError(t, err)
	require.False(t, created, "an existing operator is kept")
	for name, b := range before {
		after, _ := os.ReadFile(filepath.Join(dir, name))
		require.Equal(t, b, after, "%s unchanged", name)
	}

	_, err = od.Account("acme")
	require.True(t, errors.Is(err, fs.ErrNotExist), "no account before tenant-create: %v", err)
	ac, err := od.TenantAccount("acme", provision.Config{})
	require.NoError(t, err)
	require.Equal(t, "convlog_tenant_acme", ac.Name)
	_, err = od.TenantAccount("bad.tenant", provision.Config{})
	var idErr *events.IDError
	require.ErrorAs(t, err, &idErr, "a tenant id events refuses")
}
